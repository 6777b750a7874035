/* lease.c: see lease.h. */
#include "lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

/* Bytes of a two-column result as "a\tb\n" lines, with the final NUL. */
static size_t lines_size(const PGresult *res)
{
	size_t len = 1;

	for (int i = 0; i < PQntuples(res); i++)
		len += (size_t)PQgetlength(res, i, 0) + (size_t)PQgetlength(res, i, 1) + 2;
	return len;
}

static void lines_put(const PGresult *res, char *p)
{
	*p = '\0';
	for (int i = 0; i < PQntuples(res); i++)
		p += sprintf(p, "%s\t%s\n", PQgetvalue(res, i, 0), PQgetvalue(res, i, 1));
}

static void oom(struct storage_query_result *r)
{
	snprintf(r->error, sizeof(r->error), "out of memory");
	r->failed = 1;
}

void storage_lease_acquire(PGconn *conn, void *ctx, struct storage_query_result *r)
{
	const struct storage_lease_req *q = ctx;
	char secs[24];
	const char *params[5] = {q->job, q->owner, q->agent_addr, q->api_url, secs};
	struct storage_lease head = {0}, *l;
	PGresult *res, *prog = NULL;

	snprintf(secs, sizeof(secs), "%d", q->lease_s);
	/* every acquisition raises the epoch, even a re-acquisition by the same owner id (a
	 * restarted process must not pass for the one it replaces) */
	res = PQexecParams(conn,
			   "INSERT INTO job_leases AS l (job, owner, epoch, agent_addr, api_url, expires_at)"
			   " VALUES ($1, $2, 1, $3, $4, now() + $5::int * interval '1 second')"
			   " ON CONFLICT (job) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,"
			   " agent_addr = excluded.agent_addr, api_url = excluded.api_url, expires_at = excluded.expires_at"
			   " WHERE l.expires_at < now() OR l.owner = excluded.owner"
			   " RETURNING epoch, owner, agent_addr, api_url",
			   5, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		head.owned = 1;
	} else if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		res = PQexecParams(conn, "SELECT epoch, owner, agent_addr, api_url FROM job_leases WHERE job = $1", 1, NULL,
				   params, NULL, NULL, 0);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		storage_query_fail(r, res, conn);
		if (PQresultStatus(res) == PGRES_TUPLES_OK)
			snprintf(r->error, sizeof(r->error), "the lease row of job \"%s\" went away", q->job);
		PQclear(res);
		return;
	}
	head.epoch = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	snprintf(head.owner, sizeof(head.owner), "%s", PQgetvalue(res, 0, 1));
	snprintf(head.agent_addr, sizeof(head.agent_addr), "%s", PQgetvalue(res, 0, 2));
	snprintf(head.api_url, sizeof(head.api_url), "%s", PQgetvalue(res, 0, 3));
	PQclear(res);
	if (head.owned) {
		/* what the previous owner made durable: the agents' resends of it are skipped */
		prog = PQexecParams(conn,
				    "SELECT p.agent, p.durable_seq FROM agent_progress p JOIN jobs j ON j.id = p.job_id"
				    " WHERE j.name = $1",
				    1, NULL, params, NULL, NULL, 0);
		if (PQresultStatus(prog) != PGRES_TUPLES_OK) {
			storage_query_fail(r, prog, conn);
			PQclear(prog);
			return;
		}
	}
	l = malloc(sizeof(*l) + (prog ? lines_size(prog) : 1));
	if (!l) {
		PQclear(prog);
		oom(r);
		return;
	}
	*l = head;
	l->progress[0] = '\0';
	if (prog)
		lines_put(prog, l->progress);
	PQclear(prog);
	r->text = (char *)l;
	r->len = sizeof(*l);
}

void storage_lease_renew(PGconn *conn, void *ctx, struct storage_query_result *r)
{
	const struct storage_lease_req *q = ctx;
	char secs[24];
	const char *params[2] = {q->owner, secs};
	PGresult *res;

	snprintf(secs, sizeof(secs), "%d", q->lease_s);
	res = PQexecParams(conn,
			   "UPDATE job_leases SET expires_at = now() + $2::int * interval '1 second'"
			   " WHERE owner = $1 RETURNING job, epoch",
			   2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		storage_query_fail(r, res, conn);
		PQclear(res);
		return;
	}
	if ((r->text = malloc(lines_size(res))) == NULL) {
		PQclear(res);
		oom(r);
		return;
	}
	lines_put(res, r->text);
	r->len = strlen(r->text);
	PQclear(res);
}
