/* pgtest.c: see pgtest.h. */
#include "pgtest.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

const char *pgtest_base_dsn(void)
{
	const char *dsn = getenv("CULPRIT_TEST_DSN");
	if (!dsn || !dsn[0]) {
		fprintf(stderr, "CULPRIT_TEST_DSN is not set: run the tests with ./test.sh\n");
		exit(1);
	}
	return dsn;
}

static void exec_or_die(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	CHECK_MSG(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

void pgtest_db_create(const char *base_dsn, const char *name, char *dsn, size_t size)
{
	PGconn *c = PQconnectdb(base_dsn);
	CHECK_MSG(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	char sql[256];
	snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", name);
	PQclear(PQexec(c, "SET client_min_messages = warning"));
	exec_or_die(c, sql);
	snprintf(sql, sizeof sql, "CREATE DATABASE %s", name);
	exec_or_die(c, sql);
	PQfinish(c);
	snprintf(dsn, size, "%s dbname=%s", base_dsn, name);
}

long long pgtest_scalar(const char *dsn, const char *sql)
{
	PGconn *c = PQconnectdb(dsn);
	CHECK_MSG(PQstatus(c) == CONNECTION_OK, "%s", PQerrorMessage(c));
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);
	CHECK_MSG(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", sql, PQerrorMessage(c));
	long long v = 0;
	if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

void pgtest_tmpdir(const char *name, char *out, size_t size)
{
	snprintf(out, size, "/tmp/culprit-%s.XXXXXX", name);
	CHECK_MSG(mkdtemp(out) != NULL, "mkdtemp: %s", strerror(errno));
	CHECK(chmod(out, 0755) == 0);
}

/* Clusters started here, stopped at exit even when a check fails (CHECK exits). */
static char started[4][512];

static void stop_started(void)
{
	for (int i = 0; i < 4; i++) {
		if (started[i][0] && access(started[i], F_OK) == 0) {
			pgtest_cluster_stop(started[i]);
			pgtest_rmdir(started[i]);
		}
	}
}

void pgtest_fail(void)
{
	for (int i = 0; i < 4; i++) {
		if (!started[i][0])
			continue;
		char cmd[4400];
		snprintf(cmd, sizeof cmd, "echo '--- end of %s/server.log:' >&2; tail -n 30 '%s/server.log' >&2",
			 started[i], started[i]);
		if (system(cmd) != 0)
			fprintf(stderr, "(no server log)\n");
	}
	exit(1);
}

void pgtest_cluster_start(const char *dir, char *dsn, size_t size)
{
	static bool registered;
	if (!registered) {
		atexit(stop_started);
		registered = true;
	}
	int slot = -1;
	for (int i = 0; i < 4 && slot < 0; i++)
		if (strcmp(started[i], dir) == 0 || !started[i][0])
			slot = i;
	CHECK(slot >= 0 && strlen(dir) < sizeof started[0]);
	snprintf(started[slot], sizeof started[slot], "%s", dir);
	const char *src = getenv("CULPRIT_SOURCE_DIR");
	CHECK_MSG(src && src[0], "CULPRIT_SOURCE_DIR is not set: run the tests with ./test.sh");
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s/tests/pg.sh' start '%s'", src, dir);
	FILE *p = popen(cmd, "r");
	CHECK(p != NULL);
	dsn[0] = '\0';
	if (!fgets(dsn, (int)size, p))
		dsn[0] = '\0';
	int rc = pclose(p);
	CHECK_MSG(rc == 0 && dsn[0], "%s failed", cmd);
	dsn[strcspn(dsn, "\n")] = '\0';
}

void pgtest_cluster_stop(const char *dir)
{
	const char *src = getenv("CULPRIT_SOURCE_DIR");
	if (!src || !src[0])
		return;
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "'%s/tests/pg.sh' stop '%s'", src, dir);
	if (system(cmd) != 0)
		fprintf(stderr, "%s failed\n", cmd);
}

void pgtest_rmdir(const char *dir)
{
	if (strncmp(dir, "/tmp/culprit-", 13) != 0)
		return;
	char cmd[1024];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
}

int64_t pgtest_now_ms(void) { return clock_mono_ms(); }
