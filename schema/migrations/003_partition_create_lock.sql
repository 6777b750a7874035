-- 003_partition_create_lock.sql: culprit_partition_create locks the DEFAULT partition against
-- writes while it moves that day's rows out and attaches the new partition, so that a
-- concurrent writer cannot put a row of that day into DEFAULT in between (which would make
-- ATTACH fail). The writer waits for this short transaction.
CREATE OR REPLACE FUNCTION culprit_partition_create(parent text, day date) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
	part text := parent || '_p' || to_char(day, 'YYYYMMDD');
	lo timestamptz := day::timestamp AT TIME ZONE 'UTC';
	hi timestamptz := (day + 1)::timestamp AT TIME ZONE 'UTC';
BEGIN
	IF to_regclass(quote_ident(part)) IS NOT NULL THEN
		RETURN false;
	END IF;
	EXECUTE format('LOCK TABLE %I IN SHARE ROW EXCLUSIVE MODE', parent || '_default');
	EXECUTE format('CREATE TABLE %I (LIKE %I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', part, parent);
	EXECUTE format('WITH moved AS (DELETE FROM %I WHERE ts >= %L AND ts < %L RETURNING *) '
	               'INSERT INTO %I SELECT * FROM moved', parent || '_default', lo, hi, part);
	EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)',
	               parent, part, lo, hi);
	RETURN true;
END
$$;
