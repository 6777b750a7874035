-- 010_lease_agent_room.sql: how many more agent connections a job's owner takes, written with
-- its lease and every renewal (docs/operations.md, "Many instances", relays). Another instance
-- that gets a Hello for the job redirects the agent to the owner while this is above 0, and
-- relays its batches to the owner when it is 0.
ALTER TABLE job_leases ADD COLUMN agent_room integer NOT NULL DEFAULT 2147483647;
