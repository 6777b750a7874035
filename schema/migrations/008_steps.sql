-- 008_steps.sql: iterations and phases stored as one row per (agent batch, iteration, block of
-- ranks) instead of a row per iteration and a row per phase of each rank. A row per record cost
-- PostgreSQL more CPU than culpritd spends on the record, and about 1 KB per rank-step
-- (docs/storage.md). `iterations` and `phases` stay, as views with their old columns.
--
-- A row of steps holds, for one iteration, the ranks of one batch within [rank0, rank0 + 64)
-- (an agent serves a node's ranks, so usually the node's 8): matrices [rank][1 + phase] whose
-- column 1 is the rank's iteration and columns 2.. the row's phases (names[p - 1]):
--   starts[r][1]      the rank's iteration start - ts (microseconds)
--   starts[r][1 + p]  phase p's start - the rank's iteration start; NULL when unknown
--   durs[r][1]        the iteration's duration; NULL when the batch held only phases of it
--   durs[r][1 + p]    phase p's duration; NULL when the rank has no such phase
-- When a value of the row does not fit an integer (35.8 minutes), the row holds the same
-- matrices in wide_starts/wide_durs (bigint) and NULL in starts/durs.
-- ts, the partition key, is the iteration start of the row's first rank. The rows follow from
-- the batch's content, so a resent batch rebuilds the same rows and hits the same keys (the
-- writer's exactly-once path), as the per-record keys did. A rank-step lies in one row unless
-- its records came in two batches; then the second batch's row has the same key only if it
-- has the same first rank and the same start to the microsecond (culpritd dates phases
-- without their iteration in the batch by its clock), and is taken for a resend.
CREATE TABLE steps (
	ts          timestamptz NOT NULL,
	job_id      integer NOT NULL,
	iter        integer NOT NULL,
	rank0       integer NOT NULL,
	ranks       integer[] NOT NULL,  -- [r], ascending, within [rank0, rank0 + 64)
	names       integer[],           -- [p] phase name ids (names.name_id); NULL: no phases
	kinds       smallint[],          -- [p] kind of phase p (diagnose/record.h)
	grps        smallint[],          -- [p] collective group of phase p
	starts      integer[],           -- [r][1 + p], see above
	durs        integer[],
	wide_starts bigint[],            -- instead of starts and durs when a value does not fit
	wide_durs   bigint[],
	PRIMARY KEY (job_id, rank0, iter, ts)
) PARTITION BY RANGE (ts);
CREATE TABLE steps_default PARTITION OF steps DEFAULT;
-- an iteration's rows (culprit_iteration_time, the report and incident views)
CREATE INDEX steps_job_iter ON steps (job_id, iter, ts);

-- Retention and the daily partitions: steps and kernels.
CREATE OR REPLACE FUNCTION culprit_maintain_partitions(ahead_days integer, retention_days integer)
RETURNS TABLE (action text, target text)
LANGUAGE plpgsql AS $$
DECLARE
	today date := (now() AT TIME ZONE 'UTC')::date;
	cutoff date := today - retention_days;
	t text;
	r record;
	i integer;
	n bigint;
BEGIN
	IF ahead_days < 0 OR retention_days < 1 THEN
		RAISE EXCEPTION 'culprit_maintain_partitions: ahead_days must be >= 0 and retention_days >= 1';
	END IF;
	PERFORM pg_advisory_xact_lock(hashtext('culprit_partitions'));
	FOREACH t IN ARRAY ARRAY['steps', 'kernels'] LOOP
		FOR i IN -1 .. ahead_days LOOP
			IF today + i >= cutoff AND culprit_partition_create(t, today + i) THEN
				action := 'created'; target := t || '_p' || to_char(today + i, 'YYYYMMDD');
				RETURN NEXT;
			END IF;
		END LOOP;
		FOR r IN SELECT c.relname FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
		         WHERE h.inhparent = t::regclass AND c.relname ~ ('^' || t || '_p[0-9]{8}$')
		         ORDER BY c.relname LOOP
			IF to_date(right(r.relname, 8), 'YYYYMMDD') < cutoff THEN
				EXECUTE format('DROP TABLE %I', r.relname);
				action := 'dropped'; target := r.relname;
				RETURN NEXT;
			END IF;
		END LOOP;
		EXECUTE format('DELETE FROM %I WHERE ts < %L', t || '_default',
		               cutoff::timestamp AT TIME ZONE 'UTC');
		GET DIAGNOSTICS n = ROW_COUNT;
		IF n > 0 THEN
			action := 'deleted ' || n || ' rows from'; target := t || '_default';
			RETURN NEXT;
		END IF;
	END LOOP;
END
$$;

-- The upgrade: the days the old tables have partitions for, then their rows, one row of steps
-- per stored rank-step.
DO $$
DECLARE
	d record;
BEGIN
	FOR d IN SELECT DISTINCT to_date(right(c.relname, 8), 'YYYYMMDD') AS day
	         FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
	         WHERE h.inhparent IN ('iterations'::regclass, 'phases'::regclass) AND c.relname ~ '_p[0-9]{8}$' LOOP
		PERFORM culprit_partition_create('steps', d.day);
	END LOOP;
END
$$;

INSERT INTO steps (ts, job_id, iter, rank0, ranks, names, kinds, grps, starts, durs, wide_starts, wide_durs)
SELECT y.ts, y.job_id, y.iter, y.rank, ARRAY[y.rank], y.names, y.kinds, y.grps,
       CASE WHEN y.narrow THEN y.s8::integer[] END, CASE WHEN y.narrow THEN y.d8::integer[] END,
       CASE WHEN NOT y.narrow THEN y.s8 END, CASE WHEN NOT y.narrow THEN y.d8 END
FROM (
	SELECT x.*, m.s8, m.d8,
	       (SELECT coalesce(bool_and(v BETWEEN -2147483648 AND 2147483647), true)
	        FROM unnest(m.s8 || m.d8) v) AS narrow
	FROM (
		SELECT k.job_id, k.rank, k.iter, k.ts, i.dur_us, p.*
		FROM (SELECT job_id, rank, iter, ts FROM iterations UNION SELECT job_id, rank, iter, ts FROM phases) k
		LEFT JOIN iterations i USING (job_id, rank, iter, ts)
		CROSS JOIN LATERAL (
			SELECT array_agg(ph.name_id ORDER BY ph.name_id) AS names, array_agg(ph.kind ORDER BY ph.name_id) AS kinds,
			       array_agg(ph.grp ORDER BY ph.name_id) AS grps, array_agg(ph.start_us ORDER BY ph.name_id) AS p_starts,
			       array_agg(ph.dur_us ORDER BY ph.name_id) AS p_durs
			FROM phases ph
			WHERE ph.job_id = k.job_id AND ph.rank = k.rank AND ph.iter = k.iter AND ph.ts = k.ts
		) p
	) x
	CROSS JOIN LATERAL (SELECT ARRAY[ARRAY[0::bigint] || coalesce(x.p_starts, '{}')] AS s8,
	                           ARRAY[ARRAY[x.dur_us] || coalesce(x.p_durs, '{}')] AS d8) m
) y;

DROP VIEW culprit_iteration_time, culprit_rank_iterations, culprit_phase_durations, culprit_suspects,
	culprit_incident_annotations;
DROP TABLE iterations, phases;

-- The old relations, as views: one row per rank's iteration, one per phase. row_ts is the
-- row's ts (the partition key) and rank0 its first rank: a filter on ts (computed per rank) or
-- rank does not reach the table's key or partitions, so readers add one on row_ts (pruning)
-- or rank0 BETWEEN rank - 63 AND rank (the primary key).
CREATE VIEW iterations AS
SELECT s.job_id,
       s.ranks[r] AS rank,
       s.iter,
       s.ts + coalesce(s.starts[r][1], s.wide_starts[r][1]) * interval '1 microsecond' AS ts,
       coalesce(s.durs[r][1], s.wide_durs[r][1]) AS dur_us,
       s.ts AS row_ts,
       s.rank0
FROM steps s
CROSS JOIN LATERAL generate_subscripts(s.ranks, 1) AS r
WHERE coalesce(s.durs[r][1], s.wide_durs[r][1]) IS NOT NULL;

CREATE VIEW phases AS
SELECT s.job_id,
       s.ranks[r] AS rank,
       s.iter,
       s.names[p] AS name_id,
       s.ts + coalesce(s.starts[r][1], s.wide_starts[r][1]) * interval '1 microsecond' AS ts,
       s.kinds[p] AS kind,
       s.grps[p] AS grp,
       coalesce(s.starts[r][p + 1], s.wide_starts[r][p + 1]) AS start_us,
       coalesce(s.durs[r][p + 1], s.wide_durs[r][p + 1]) AS dur_us,
       s.ts AS row_ts,
       s.rank0
FROM steps s
CROSS JOIN LATERAL generate_subscripts(s.ranks, 1) AS r
CROSS JOIN LATERAL generate_subscripts(s.names, 1) AS p
WHERE coalesce(s.durs[r][p + 1], s.wide_durs[r][p + 1]) IS NOT NULL;

-- The Grafana views of 005 over the new layout. Their "time" is now the row's ts (the
-- iteration start of the row's first rank, within the ranks' start jitter of each rank's own),
-- so that a time filter prunes the daily partitions of steps. Re-run docs/grafana/grants.sql
-- after this migration: the views are new.
CREATE VIEW culprit_iteration_time AS
SELECT d.row_ts AS time,
       j.name AS job,
       d.iter AS iteration,
       a.ranks,
       a.max_us / 1000.0 AS max_ms,
       a.median_us / 1000.0 AS median_ms,
       a.min_us / 1000.0 AS min_ms
FROM jobs j
CROSS JOIN LATERAL (SELECT COALESCE(min(r.rank), 0) AS rank FROM ranks r WHERE r.job_id = j.id) lo
JOIN iterations d ON d.job_id = j.id AND d.rank = lo.rank AND d.rank0 BETWEEN lo.rank - 63 AND lo.rank
CROSS JOIN LATERAL (
	SELECT count(*) AS ranks,
	       max(i.dur_us) AS max_us,
	       percentile_cont(0.5) WITHIN GROUP (ORDER BY i.dur_us) AS median_us,
	       min(i.dur_us) AS min_us
	FROM iterations i
	WHERE i.job_id = d.job_id AND i.iter = d.iter
	  AND i.row_ts >= d.row_ts - interval '1 day' AND i.row_ts < d.row_ts + interval '1 day'
) a;

CREATE VIEW culprit_rank_iterations AS
SELECT i.row_ts AS time,
       j.name AS job,
       i.rank,
       COALESCE(r.host, 'node-' || (i.rank / NULLIF(j.gpus_per_node, 0))) AS node,
       i.iter AS iteration,
       i.dur_us / 1000.0 AS dur_ms
FROM iterations i
JOIN jobs j ON j.id = i.job_id
LEFT JOIN ranks r ON r.job_id = i.job_id AND r.rank = i.rank;

CREATE VIEW culprit_phase_durations AS
SELECT p.row_ts AS time,
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
