-- 002_partitions.sql: daily partitions of the high-volume tables and their retention.
--
-- Partitions are named <table>_pYYYYMMDD and hold [day 00:00 UTC, next day 00:00 UTC).
-- storage/retention.c calls culprit_maintain_partitions() at start and periodically.

-- Create the partition of one day unless it exists; rows of that day already in the DEFAULT
-- partition move into it (ATTACH would fail otherwise). Returns true when it created it.
CREATE FUNCTION culprit_partition_create(parent text, day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	part text := parent || '_p' || to_char(day, 'YYYYMMDD');
	lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
	hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
	IF to_regclass(quote_ident(part)) IS NOT NULL THEN
		RETURN false;
	END IF;
	EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
	EXECUTE format('WITH moved AS (DELETE FROM %I WHERE ts >= %L AND ts < %L RETURNING *) '
	               'INSERT INTO %I SELECT * FROM moved', parent || '_default', lo, hi, part);
	EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
	               parent, part, lo, hi);
	RETURN true;
END
$$;

-- Create the partitions of yesterday .. today + ahead_days and drop whole partitions of days
-- before today - retention_days (rows that old in the DEFAULT partition are deleted).
-- Returns one row per action. Serialized by an advisory lock.
CREATE FUNCTION culprit_maintain_partitions(ahead_days integer, retention_days integer)
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
	FOREACH t IN ARRAY ARRAY['iterations', 'phases', 'kernels'] LOOP
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
