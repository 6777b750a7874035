/* test_migrate.c: migrations on an empty database, again without change, concurrently from
 * two processes, a failing migration rolled back, bad directories refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "migrate.h"
#include "pgtest.h"

static int n_files(void)
{
	/* 001_initial.sql, 002_partitions.sql, ... as found by the runner itself */
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "ls '%s' | grep -c '^[0-9]*_.*\\.sql$'", storage_migrations_dir());
	FILE *p = popen(cmd, "r");
	int n = 0;
	CHECK(p && fscanf(p, "%d", &n) == 1);
	pclose(p);
	return n;
}

static void write_file(const char *dir, const char *name, const char *text)
{
	char path[1024];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs(text, f);
	fclose(f);
}

static void test_empty_then_again(const char *base)
{
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_migrate_once", dsn, sizeof dsn);
	int files = n_files();
	CHECK(files >= 3);
	int applied = storage_migrate(dsn, NULL, err, sizeof err);
	CHECK_MSG(applied == files, "applied %d of %d: %s", applied, files, applied < 0 ? err : "");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM schema_migrations") == files);
	/* the tables (or views: iterations, phases) the rest of culprit relies on */
	const char *tables[] = {"jobs",    "ranks",  "names",   "steps",     "iterations",   "phases",
				"kernels", "events", "reports", "incidents", "alert_outbox", "agent_progress"};
	for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
		char sql[256];
		snprintf(sql, sizeof sql,
			 "SELECT count(*) FROM pg_tables WHERE tablename = '%s'"
			 " UNION ALL SELECT count(*) FROM pg_views WHERE viewname = '%s' ORDER BY 1 DESC LIMIT 1",
			 tables[i], tables[i]);
		CHECK_MSG(pgtest_scalar(dsn, sql) == 1, "table %s missing", tables[i]);
	}
	/* high-volume tables are partitioned */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
				 "WHERE c.relname IN ('steps', 'kernels')") == 2);
	long long stamp = pgtest_scalar(dsn, "SELECT extract(epoch FROM max(applied))::bigint * 1000000 + "
					     "extract(microseconds FROM max(applied))::bigint FROM schema_migrations");
	applied = storage_migrate(dsn, NULL, err, sizeof err);
	CHECK_MSG(applied == 0, "second run applied %d: %s", applied, applied < 0 ? err : "");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM schema_migrations") == files);
	CHECK(pgtest_scalar(dsn, "SELECT extract(epoch FROM max(applied))::bigint * 1000000 + "
				 "extract(microseconds FROM max(applied))::bigint FROM schema_migrations") == stamp);
}

static void test_concurrent(const char *base)
{
	char dsn[1024];
	pgtest_db_create(base, "test_migrate_concurrent", dsn, sizeof dsn);
	int files = n_files();
	pid_t kids[4];
	for (int i = 0; i < 4; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0);
		if (kids[i] == 0) {
			char err[512];
			int applied = storage_migrate(dsn, NULL, err, sizeof err);
			if (applied < 0)
				fprintf(stderr, "child %d: %s\n", i, err);
			_exit(applied < 0 ? 100 : applied);
		}
	}
	int total = 0;
	for (int i = 0; i < 4; i++) {
		int st;
		CHECK(waitpid(kids[i], &st, 0) == kids[i]);
		CHECK_MSG(WIFEXITED(st) && WEXITSTATUS(st) != 100, "child %d failed", i);
		total += WEXITSTATUS(st);
	}
	/* every file applied exactly once over all processes */
	CHECK_MSG(total == files, "applied %d in total, want %d", total, files);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM schema_migrations") == files);
}

static void test_failure_rolls_back(const char *base)
{
	char dsn[1024], err[512], dir[256];
	pgtest_db_create(base, "test_migrate_fail", dsn, sizeof dsn);
	pgtest_tmpdir("migrations", dir, sizeof dir);
	write_file(dir, "001_a.sql", "CREATE TABLE a (x int);");
	write_file(dir, "002_b.sql", "CREATE TABLE b (x int); SELECT no_such_function();");
	write_file(dir, "README", "not a migration");
	int applied = storage_migrate(dsn, dir, err, sizeof err);
	CHECK(applied == -1);
	CHECK_MSG(strstr(err, "002_b.sql") && strstr(err, "no_such_function"), "message: %s", err);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM schema_migrations") == 1);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_tables WHERE tablename = 'b'") == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_tables WHERE tablename = 'a'") == 1);
	/* fixed: applies the rest */
	write_file(dir, "002_b.sql", "CREATE TABLE b (x int);");
	applied = storage_migrate(dsn, dir, err, sizeof err);
	CHECK_MSG(applied == 1, "applied %d: %s", applied, err);
	/* two files with one number are refused */
	write_file(dir, "002_c.sql", "SELECT 1;");
	CHECK(storage_migrate(dsn, dir, err, sizeof err) == -1);
	CHECK_MSG(strstr(err, "same number"), "message: %s", err);
	pgtest_rmdir(dir);
	/* a missing directory is refused */
	CHECK(storage_migrate(dsn, "/nonexistent/culprit", err, sizeof err) == -1);
	CHECK_MSG(strstr(err, "/nonexistent/culprit"), "message: %s", err);
}

/* A database named name migrated up to (not including) migration number upto, as an older
 * culpritd left it; dsn receives its DSN. */
static void migrate_before(const char *base, const char *name, int upto, char *dsn, size_t dsn_size)
{
	char err[512], dir[256], src[600], link[600];
	const char *def = storage_migrations_dir();
	static const char *const files[] = {
		"001_initial.sql",          "002_partitions.sql",    "003_partition_create_lock.sql",
		"004_incident_keys.sql",    "005_grafana_views.sql", "006_raw_kernels.sql",
		"007_durable_seq_check.sql"};
	pgtest_db_create(base, name, dsn, dsn_size);
	pgtest_tmpdir(name, dir, sizeof dir);
	for (int i = 0; i + 1 < upto; i++) {
		snprintf(src, sizeof src, "%s/%s", def, files[i]);
		snprintf(link, sizeof link, "%s/%s", dir, files[i]);
		CHECK(symlink(src, link) == 0);
	}
	int applied = storage_migrate(dsn, dir, err, sizeof err);
	CHECK_MSG(applied == upto - 1, "applied %d: %s", applied, applied < 0 ? err : "");
	pgtest_rmdir(dir);
}

/* 007: a poisoned agent (durable_seq -1, a seq of 2^64 - 1 stored by culpritd before it
 * refused such seqs) is forgotten, and the database refuses a negative durable_seq. */
static void test_durable_seq_check(const char *base)
{
	char dsn[1024], err[512];
	migrate_before(base, "test_migrate_seq", 7, dsn, sizeof dsn);
	pgtest_scalar(dsn,
		      "INSERT INTO jobs (name) VALUES ('J');"
		      "INSERT INTO agent_progress (job_id, agent, durable_seq) SELECT id, 'poisoned', -1 FROM jobs;"
		      "INSERT INTO agent_progress (job_id, agent, durable_seq) SELECT id, 'fine', 7 FROM jobs;"
		      "SELECT 0");
	int applied = storage_migrate(dsn, NULL, err, sizeof err);
	CHECK_MSG(applied >= 1, "applied %d: %s", applied, applied < 0 ? err : "");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM agent_progress WHERE durable_seq < 0") == 0);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress WHERE agent = 'fine'") == 7);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_constraint WHERE conname = "
				 "'agent_progress_durable_seq_nonnegative'") == 1);
}

/* 008: the rows of the old iterations and phases tables become rows of steps (one per
 * rank-step), read back unchanged through the views of the same names; the old tables go. */
static void test_steps_upgrade(const char *base)
{
	char dsn[1024], err[512];
	migrate_before(base, "test_migrate_steps", 8, dsn, sizeof dsn);
	pgtest_scalar(dsn, "SELECT count(*) FROM culprit_maintain_partitions(1, 7)"); /* today's partitions */
	pgtest_scalar(dsn, "INSERT INTO jobs (name) VALUES ('J');"
			   "INSERT INTO names (job_id, name) VALUES (1, 'a'), (1, 'b');"
			   "INSERT INTO iterations VALUES (1, 0, 5, date_trunc('hour', now()), 1000),"
			   " (1, 1, 5, date_trunc('hour', now()), 5000000000), (1, 2, 5, '2001-01-01', 7);"
			   "INSERT INTO phases VALUES (1, 0, 5, 1, date_trunc('hour', now()), 0, 1, 10, 20),"
			   " (1, 0, 5, 2, date_trunc('hour', now()), 1, 4, NULL, 30),"
			   " (1, 3, 5, 1, date_trunc('hour', now()) + interval '1 ms', 0, 0, 1, 2);"
			   "SELECT 0");
	int applied = storage_migrate(dsn, NULL, err, sizeof err);
	CHECK_MSG(applied >= 1, "applied %d: %s", applied, applied < 0 ? err : "");
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps") == 4); /* ranks 0, 1, 2 and 3 (phases only) */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations WHERE (rank, dur_us, ts) IN ("
				 "(0, 1000, date_trunc('hour', now())), (1, 5000000000, date_trunc('hour', now())),"
				 " (2, 7, '2001-01-01'))") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE (rank, name_id, kind, grp, coalesce(start_us, -1),"
				 " dur_us, ts) IN ((0, 1, 0, 1, 10, 20, date_trunc('hour', now())),"
				 " (0, 2, 1, 4, -1, 30, date_trunc('hour', now())),"
				 " (3, 1, 0, 0, 1, 2, date_trunc('hour', now()) + interval '1 ms'))") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 3);
	/* 5,000 s does not fit 32 bits of microseconds: that row is wide */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE wide_cells IS NOT NULL AND rank0 = 1") == 1);
	/* today's rows in today's partition of steps, the old one in its DEFAULT partition */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE tableoid::regclass::text = "
				 "'steps_p' || to_char(now() AT TIME ZONE 'UTC', 'YYYYMMDD')") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps_default") == 1);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM pg_class WHERE relname ~ '^(iterations|phases)_'") == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM culprit_rank_iterations") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM culprit_phase_durations") == 3);
}

static void test_dir_lookup(void)
{
	/* the build tree's (source) directory by default, the environment first */
	const char *def = storage_migrations_dir();
	CHECK(strstr(def, "schema/migrations") != NULL);
	setenv("CULPRIT_MIGRATIONS_DIR", "/elsewhere/migrations", 1);
	CHECK(strcmp(storage_migrations_dir(), "/elsewhere/migrations") == 0);
	setenv("CULPRIT_MIGRATIONS_DIR", "", 1);
	CHECK(strcmp(storage_migrations_dir(), def) == 0);
	unsetenv("CULPRIT_MIGRATIONS_DIR");
}

int main(void)
{
	const char *base = pgtest_base_dsn();
	test_dir_lookup();
	test_empty_then_again(base);
	test_concurrent(base);
	test_failure_rolls_back(base);
	test_durable_seq_check(base);
	test_steps_upgrade(base);
	printf("test_migrate: ok\n");
	return 0;
}
