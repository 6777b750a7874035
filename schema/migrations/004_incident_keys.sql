-- Incidents get their stable key ("<job>/<first iteration>/<category>", the alerts' dedup
-- key) so that a state change is an upsert; the Alertmanager alert of the latest firing state
-- is kept to be re-sent while the incident is open. Outbox rows record when they were sent.
ALTER TABLE incidents ADD COLUMN key text;
ALTER TABLE incidents ADD COLUMN updates integer NOT NULL DEFAULT 0;
ALTER TABLE incidents ADD COLUMN alert jsonb;
CREATE UNIQUE INDEX incidents_job_key ON incidents (job_id, key);
ALTER TABLE alert_outbox ADD COLUMN sent timestamptz;
