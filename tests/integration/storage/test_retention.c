/* test_retention.c: daily partitions created ahead, rows of a day moved out of the DEFAULT
 * partition when its partition is created, whole old partitions dropped, the periodic
 * thread. */
#include <string.h>
#include <unistd.h>

#include "migrate.h"
#include "pgtest.h"
#include "retention.h"

static const char *const count_parts = "SELECT count(*) FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid"
				       " WHERE h.inhparent IN ('steps'::regclass, 'kernels'::regclass)"
				       " AND c.relname ~ '_p[0-9]{8}$'";

int main(void)
{
	const char *base = pgtest_base_dsn();
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_retention", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);

	/* rows before any partition exists land in DEFAULT */
	pgtest_scalar(dsn, "INSERT INTO jobs (name) VALUES ('J');"
			   "INSERT INTO steps (ts, job_id, iter, rank0, cells)"
			   " SELECT t, 1, i, 0, '{{{0,10}}}' FROM (VALUES"
			   " (now(), 1), (now() - interval '3 days', 2), (now() - interval '30 days', 3)) v(t, i)");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps_default") == 3);

	/* yesterday .. today + 2 for two tables (steps, kernels); today's row moves into its partition */
	int changed = storage_retention_run(dsn, 7, 2, err, sizeof err);
	CHECK_MSG(changed == 8, "changed %d: %s", changed, changed < 0 ? err : "");
	CHECK(pgtest_scalar(dsn, count_parts) == 8);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps") == 2); /* the 30-day-old row is past retention */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps_default") == 1);
	CHECK(pgtest_scalar(dsn,
			    "SELECT count(*) FROM steps WHERE iter = 1 AND "
			    "tableoid::regclass::text = 'steps_p' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')") ==
	      1);
	/* again: nothing to do */
	CHECK(storage_retention_run(dsn, 7, 2, err, sizeof err) == 0);

	/* an old day's partition (made by an earlier run) is dropped whole once past retention */
	pgtest_scalar(dsn, "SELECT culprit_partition_create('steps', ((now() AT TIME ZONE 'UTC')::date - 3))");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps_default") == 0); /* moved */
	CHECK(storage_retention_run(dsn, 7, 2, err, sizeof err) == 0);        /* 3 days < 7: kept */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps") == 2);
	CHECK(storage_retention_run(dsn, 2, 2, err, sizeof err) == 1); /* retention 2 days: dropped */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps") == 1);
	CHECK(pgtest_scalar(dsn, count_parts) == 8);

	/* captured raw kernels (not partitioned) are deleted by age */
	pgtest_scalar(dsn, "INSERT INTO raw_kernels VALUES (1, 0, 1, 1, now(), 0, 5, 7),"
			   " (1, 0, 2, 1, now() - interval '3 days', 0, 5, 7)");
	CHECK(storage_retention_run(dsn, 7, 2, err, sizeof err) == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM raw_kernels") == 2);
	CHECK(storage_retention_run(dsn, 2, 2, err, sizeof err) == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM raw_kernels") == 1);

	/* bad arguments */
	CHECK(storage_retention_run(dsn, 0, 2, err, sizeof err) == -1);

	/* the periodic thread runs at once */
	pgtest_db_create(base, "test_retention_thread", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	struct storage_retention_config cfg = {.dsn = dsn, .retention_days = 14, .ahead_days = 1, .interval_s = 3600};
	struct storage_retention *r = storage_retention_start(&cfg);
	CHECK(r != NULL);
	int64_t deadline = pgtest_now_ms() + 30000;
	while (pgtest_scalar(dsn, count_parts) < 6) {
		CHECK_MSG(pgtest_now_ms() < deadline, "the retention thread did not run");
		usleep(50000);
	}
	storage_retention_stop(r);
	CHECK(pgtest_scalar(dsn, count_parts) == 6);
	printf("test_retention: ok\n");
	return 0;
}
