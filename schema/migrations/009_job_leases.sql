-- 009_job_leases.sql: which culpritd owns a job when several share this database
-- (docs/operations.md, "Many instances"). One row per job: the owner, where agents and REST
-- clients are sent to reach it, until when the lease holds (the database's clock, never an
-- instance's), and a fencing epoch raised by every change of hands. The storage writer locks
-- the row FOR SHARE in each transaction that writes a job's records and commits only when
-- the epoch is still the one its instance acquired: a deposed owner cannot write.
CREATE TABLE job_leases (
	job        text PRIMARY KEY,
	owner      text NOT NULL,
	epoch      bigint NOT NULL CHECK (epoch > 0),
	agent_addr text NOT NULL,
	api_url    text NOT NULL,
	expires_at timestamptz NOT NULL
);
CREATE INDEX job_leases_owner ON job_leases (owner);
