/* alerttest.c: see alerttest.h. */
#include "alerttest.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "harness.h"

pid_t at_sim_start(const char *scenario, int iters, int recover_at, int port, const char *log)
{
	char it[16], rec[16], server[64];
	const char *argv[] = {CULPRIT_BIN, "sim",      "--scenario", scenario,  "--iters",   it,    "--recover-at",
			      rec,         "--server", server,       "--quiet", "--timeout", "300", NULL};
	pid_t pid;

	snprintf(it, sizeof(it), "%d", iters);
	snprintf(rec, sizeof(rec), "%d", recover_at);
	if (recover_at <= 0) /* the fault lasts to the end */
		argv[6] = argv[7] = "--quiet";
	snprintf(server, sizeof(server), "127.0.0.1:%d", port);
	pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	return pid;
}

int at_sim(const char *scenario, int iters, int recover_at, int port, const char *log)
{
	int status;
	pid_t pid = at_sim_start(scenario, iters, recover_at, port, log);

	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

char *at_sql(const char *dsn, const char *sql)
{
	PGconn *c = PQconnectdb(dsn);
	PGresult *r;
	char *out = NULL;

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "could not connect to %s: %s", dsn, PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	r = PQexec(c, sql);
	if (PQresultStatus(r) == PGRES_TUPLES_OK)
		out = strdup(PQntuples(r) && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "");
	else
		fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	PQfinish(c);
	return out;
}

long at_sql_long(const char *dsn, const char *sql)
{
	char *v = at_sql(dsn, sql);
	long n = v && v[0] ? strtol(v, NULL, 10) : -1;

	free(v);
	return n;
}
