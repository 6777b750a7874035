-- 012_incident_resolution.sql: why an incident was resolved: 'recovered' (the job is back at
-- its baseline, or its hung ranks report again) or 'ended' (the job ended: its agents left);
-- NULL while it is open, and for incidents resolved before this column existed.
ALTER TABLE incidents ADD COLUMN resolution text CHECK (resolution IN ('recovered', 'ended'));
-- the fleet view (GET /api/v1/fleet) reads the incidents of the last days across jobs
CREATE INDEX incidents_opened ON incidents (opened);
