-- 005_grafana_views.sql: read-only views for Grafana's PostgreSQL data source (L4 of the
-- method; the dashboards are in docs/grafana/). Every view has a timestamptz column "time"
-- and a text column "job" (the job's name), so that a panel filters with
-- `WHERE $__timeFilter(time) AND job = '$job'`.
--
-- Times are the agents' clocks (an iteration's start), not the server's: a replay of old
-- traces or an accelerated `culprit sim` shows its incidents where its data is. Durations
-- are milliseconds (double precision).
--
-- Where a view is a plain join, "time" is the partition key ts itself, so a time filter
-- prunes daily partitions at plan time and is an index condition. Aggregating views cannot
-- push a filter on an aggregate, so they are driven by rows that can (see each view).

-- An iteration's ranks by (job, iteration): the lookups of culprit_iteration_time and of
-- the report and incident views (the data time of an iteration: its ranks' earliest start,
-- latest end). INCLUDE (dur_us) makes them index-only scans. Built while culpritd starts,
-- before it writes: minutes on a database holding hundreds of millions of iterations.
CREATE INDEX iterations_job_iter ON iterations (job_id, iter, ts) INCLUDE (dur_us);

-- Views read their tables with their owner's privileges, so a Grafana role needs SELECT on
-- the views only (docs/grafana/grants.sql); they call no function that reads a table (a
-- function would run with the caller's privileges).

-- Kind and collective group of a phase as text (the numbering of diagnose/record.h).
CREATE FUNCTION culprit_kind_name(k smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT (ARRAY['compute', 'comm', 'host', 'mixed'])[k + 1]
$$;
CREATE FUNCTION culprit_group_name(g smallint) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
	SELECT (ARRAY['', 'tp', 'cp', 'ep', 'dp', 'pp'])[g + 1]
$$;

-- Jobs, for the dashboards' job variable: topology, the lowest rank (what
-- culprit_iteration_time walks), and "time" = the last time culpritd heard of the job.
CREATE VIEW culprit_jobs AS
SELECT j.updated AS time,
       j.name AS job,
       j.created,
       j.world, j.tp, j.cp, j.pp, j.dp, j.ep, j.gpus_per_node, j.rank_order,
       (SELECT min(r.rank) FROM ranks r WHERE r.job_id = j.id) AS lowest_rank
FROM jobs j;

-- Iteration time per job: one row per (job, iteration) with the maximum (the step time the
-- job sees), median and minimum over its ranks.
--
-- "time" is the iteration's start on the job's lowest rank: the view walks that rank's
-- iterations (a time filter on them prunes partitions and is an index condition on the
-- primary key) and aggregates each iteration's ranks through iterations_job_iter, within a
-- day of the driving row (runtime partition pruning). An iteration the lowest rank did not
-- report (it hung, or its agent's batch is still queued) is missing from the view.
CREATE VIEW culprit_iteration_time AS
SELECT d.ts AS time,
       j.name AS job,
       d.iter AS iteration,
       a.ranks,
       a.max_us / 1000.0 AS max_ms,
       a.median_us / 1000.0 AS median_ms,
       a.min_us / 1000.0 AS min_ms
FROM jobs j
CROSS JOIN LATERAL (SELECT COALESCE(min(r.rank), 0) AS rank FROM ranks r WHERE r.job_id = j.id) lo
JOIN iterations d ON d.job_id = j.id AND d.rank = lo.rank
CROSS JOIN LATERAL (
	SELECT count(*) AS ranks,
	       max(i.dur_us) AS max_us,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY i.dur_us) AS median_us,
	       min(i.dur_us) AS min_us
	FROM iterations i
	WHERE i.job_id = d.job_id AND i.iter = d.iter
	  AND i.ts >= d.ts - interval '1 day' AND i.ts < d.ts + interval '1 day'
) a;

-- Every iteration of every rank, with its node: the per-rank view of iteration time.
CREATE VIEW culprit_rank_iterations AS
SELECT i.ts AS time,
       j.name AS job,
       i.rank,
       COALESCE(r.host, 'node-' || (i.rank / NULLIF(j.gpus_per_node, 0))) AS node,
       i.iter AS iteration,
       i.dur_us / 1000.0 AS dur_ms
FROM iterations i
JOIN jobs j ON j.id = i.job_id
LEFT JOIN ranks r ON r.job_id = i.job_id AND r.rank = i.rank;

-- Every phase of every rank and iteration with its node and coordinates: the rows of the
-- phase heat maps. The time bucket is Grafana's ($__timeGroupAlias(time, $__interval)), so
-- the per-node / per-rank maximum per bucket is the panel's GROUP BY over this view, e.g.
--   SELECT $__timeGroupAlias(time, $__interval), node AS metric, max(dur_ms) AS value
--   FROM culprit_phase_durations WHERE $__timeFilter(time) AND job = '$job' AND phase = '$phase'
--   GROUP BY 1, 2
-- (docs/grafana/dashboards/ keeps it readable at 12,960 ranks: the top nodes only).
-- "time" is phases.ts (the iteration's start): the filter prunes partitions.
CREATE VIEW culprit_phase_durations AS
SELECT p.ts AS time,
       j.name AS job,
       p.rank,
       COALESCE(r.host, 'node-' || (p.rank / NULLIF(j.gpus_per_node, 0))) AS node,
       r.tp, r.cp, r.ep, r.dp, r.pp,
       p.iter AS iteration,
       n.name AS phase,
       culprit_kind_name(p.kind) AS kind,
       culprit_group_name(p.grp) AS grp,
       p.dur_us / 1000.0 AS dur_ms
FROM phases p
JOIN jobs j ON j.id = p.job_id
JOIN names n ON n.name_id = p.name_id
LEFT JOIN ranks r ON r.job_id = p.job_id AND r.rank = p.rank;

-- The suspects of every stored report, one row each, in the report's order (culprits
-- first, then by score): rank, node, role, level and score, and the strongest evidence
-- (phase, ratio to the role group's median, robust z-score, the group's CV).
-- "time" is the data time of the end of the report's window (the end of its last
-- iteration), falling back to the report's creation when those iterations are gone;
-- "created" is when culpritd wrote it. Reports are one row per diagnosis, not per rank, so
-- the filter on the computed time is a scan of the job's reports (index reports_job_created).
CREATE VIEW culprit_suspects AS
SELECT w.time,
       j.name AS job,
       r.id AS report_id,
       r.created,
       r.first_iter,
       r.last_iter,
       r.category,
       s.ord::integer AS position,
       (s.v->>'rank')::integer AS rank,
       s.v->>'host' AS node,
       s.v->>'role' AS role,
       s.v->>'level' AS level,
       (s.v->>'score')::double precision AS score,
       s.v->'evidence'->0->>'phase' AS phase,
       (s.v->'evidence'->0->>'ratio')::double precision AS ratio,
       (s.v->'evidence'->0->>'z')::double precision AS z,
       (s.v->'evidence'->0->>'group_cv')::double precision AS group_cv,
       (s.v->'evidence'->0->>'value_ms')::double precision AS value_ms,
       (s.v->'evidence'->0->>'peer_ms')::double precision AS peer_ms,
       s.v->'kernels'->0->>'name' AS kernel,
       (s.v->'kernels'->0->>'ratio')::double precision AS kernel_ratio
FROM reports r
JOIN jobs j ON j.id = r.job_id
CROSS JOIN LATERAL (
	SELECT COALESCE((SELECT max(it.ts + it.dur_us * interval '1 microsecond') FROM iterations it
	                 WHERE it.job_id = r.job_id AND it.iter = r.last_iter), r.created) AS time
	OFFSET 0  -- once per report, not per suspect
) w
CROSS JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof(r.json->'suspects')
                                        WHEN 'array' THEN r.json->'suspects' ELSE '[]' END)
	WITH ORDINALITY AS s(v, ord);

-- Incidents as Grafana annotations (time, timeend, text, tags): a region from the start of
-- the first anomalous iteration to the end of the last iteration its latest report covered
-- (data time; the incident's server times when those iterations are gone). text: state,
-- category and summary; tags: "culprit", the category and the state, comma-separated.
CREATE VIEW culprit_incident_annotations AS
SELECT COALESCE((SELECT min(it.ts) FROM iterations it
                  WHERE it.job_id = i.job_id AND it.iter = w.first_iter), i.opened) AS time,
       COALESCE((SELECT max(it.ts + it.dur_us * interval '1 microsecond') FROM iterations it
                 WHERE it.job_id = i.job_id AND it.iter = w.last_iter), i.resolved, i.updated) AS timeend,
       j.name AS job,
       i.id AS incident_id,
       i.key,
       i.state,
       i.category,
       i.opened,
       i.resolved,
       upper(i.state) || ' ' || i.category || ': ' || i.summary AS text,
       'culprit,' || i.category || ',' || i.state AS tags
FROM incidents i
JOIN jobs j ON j.id = i.job_id
LEFT JOIN reports rep ON rep.id = i.report_id
CROSS JOIN LATERAL (
	SELECT COALESCE(rep.first_iter, substring(i.key FROM '/([0-9]+)/[^/]*$')::integer) AS first_iter,
	       rep.last_iter
) w;

-- Out-of-band events as annotations, once for each job they concern (the job they were
-- posted for, or every job with a rank on their host), with the latest report's verdict on
-- them (consistent, contradicted, unrelated) when one judged them. "time" is events.ts.
CREATE VIEW culprit_event_annotations AS
SELECT e.ts AS time,
       j.name AS job,
       e.id AS event_id,
       e.host AS node,
       e.kind,
       e.source,
       e.detail,
       v.verdict,
       e.kind || ' on ' || e.host || CASE WHEN e.detail <> '' THEN ' (' || e.detail || ')' ELSE '' END ||
	       COALESCE(': ' || v.verdict || COALESCE(' - ' || v.reason, ''), '') AS text,
       'event,' || e.kind || COALESCE(',' || v.verdict, '') AS tags
FROM events e
JOIN jobs j ON j.id = e.job_id
            OR (e.job_id IS NULL AND EXISTS (SELECT 1 FROM ranks r WHERE r.job_id = j.id AND r.host = e.host))
LEFT JOIN LATERAL (
	SELECT ev->>'verdict' AS verdict, ev->>'reason' AS reason
	FROM reports r
	CROSS JOIN LATERAL jsonb_array_elements(CASE jsonb_typeof(r.json->'events')
	                                        WHEN 'array' THEN r.json->'events' ELSE '[]' END) ev
	WHERE r.job_id = j.id AND ev->>'host' = e.host AND ev->>'kind' = e.kind
	ORDER BY r.created DESC, r.id DESC
	LIMIT 1
) v ON true;
