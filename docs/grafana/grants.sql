-- docs/grafana/grants.sql: a group role that may read the Grafana views and nothing else.
-- Run it (as the owner of culprit's tables) after culpritd has migrated the database, then
-- give Grafana a login in it:
--   psql "$DSN" -f docs/grafana/grants.sql
--   psql "$DSN" -c "CREATE ROLE grafana LOGIN PASSWORD '...' IN ROLE culprit_grafana"
-- Views read their tables with their owner's privileges, so SELECT on the views is enough.
-- test_grafana_dashboards runs every dashboard query as this role.
DO $$
BEGIN
	CREATE ROLE culprit_grafana NOLOGIN;
EXCEPTION WHEN duplicate_object THEN
	NULL;
END
$$;
GRANT USAGE ON SCHEMA public TO culprit_grafana;
GRANT SELECT ON culprit_jobs, culprit_iteration_time, culprit_rank_iterations, culprit_phase_durations,
	culprit_suspects, culprit_incident_annotations, culprit_event_annotations TO culprit_grafana;
