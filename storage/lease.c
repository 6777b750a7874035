/* lease.c: see lease.h. */
#include "lease.h"
#include "clock.h"
#include "incidents.h"
#include "window.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

/* iterations before a window read back for the diagnosis to compare it with (it takes up to
 * 8, diagnose.h's max_baseline; each costs a takeover of a 12,960-rank job about 70 ms of
 * reading, seconds on a loaded machine: 3 give each rank's own past a median all the same) */
#define BASELINE_ITERS 3

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

#define INCIDENT_FIELDS 9

/* Bytes of the incidents' fields (a byte and a string each). */
static size_t incidents_size(const PGresult *res)
{
	size_t len = 0;

	for (int i = 0; i < PQntuples(res); i++)
		for (int f = 0; f < INCIDENT_FIELDS; f++)
			len += 2 + (size_t)PQgetlength(res, i, f);
	return len;
}

static void incidents_put(const PGresult *res, char *p)
{
	for (int i = 0; i < PQntuples(res); i++) {
		for (int f = 0; f < INCIDENT_FIELDS; f++) {
			*p++ = PQgetisnull(res, i, f) ? 0 : 1;
			size_t n = (size_t)PQgetlength(res, i, f);
			memcpy(p, PQgetvalue(res, i, f), n);
			p[n] = '\0';
			p += n + 1;
		}
	}
}

void storage_lease_incidents(const struct storage_lease *l,
			     void (*cb)(const struct storage_open_incident *inc, void *arg), void *arg)
{
	const char *p = l->data + l->incidents_at;

	for (size_t i = 0; i < l->n_incidents; i++) {
		const char *v[INCIDENT_FIELDS];

		for (int f = 0; f < INCIDENT_FIELDS; f++) {
			v[f] = p[0] ? p + 1 : NULL;
			p += strlen(p + 1) + 2;
		}
		struct storage_open_incident inc = {
			.job = v[0],
			.key = v[1],
			.category = v[2],
			.summary = v[3],
			.updates = (uint32_t)strtoul(v[4], NULL, 10),
			.opened_us = strtoll(v[5], NULL, 10),
			.changed_us = strtoll(v[6], NULL, 10),
			.alert = v[7],
			.report_json = v[8],
		};
		cb(&inc, arg);
	}
}

static void oom(struct storage_query_result *r)
{
	snprintf(r->error, sizeof(r->error), "out of memory");
	r->failed = 1;
}

/* The first iteration in an incident's key, "<job>/<first iteration>/<category>"; -1 if none. */
static long key_first_iter(const char *key)
{
	const char *last = strrchr(key, '/'), *p = last;

	while (p && p > key && p[-1] != '/')
		p--;
	return p && p > key ? strtol(p, NULL, 10) : -1;
}

/* Ends the acquisition's transaction; false when COMMIT failed. */
static bool end(PGconn *conn, bool commit)
{
	PGresult *res = PQexec(conn, commit ? "COMMIT" : "ROLLBACK");
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK &&
		  strcmp(PQcmdStatus(res), commit ? "COMMIT" : "ROLLBACK") == 0;

	PQclear(res);
	return ok;
}

void storage_lease_acquire(PGconn *conn, void *ctx, struct storage_query_result *r)
{
	const struct storage_lease_req *q = ctx;
	char secs[24], room[24];
	const char *params[6] = {q->job, q->owner, q->agent_addr, q->api_url, secs, room};
	struct storage_lease head = {0}, *l;
	PGresult *res, *prog = NULL, *inc = NULL;

	snprintf(secs, sizeof(secs), "%d", q->lease_s);
	snprintf(room, sizeof(room), "%d", q->agent_room);
	/* FOR UPDATE first: it waits for the writers' transactions that hold the row FOR KEY SHARE
	 * (writer.c, "fencing"), so what the previous owner writes is committed before the new
	 * owner reads the durable sequences below, and the previous owner writes nothing after */
	int64_t t0 = clock_mono_ms();
	res = PQexec(conn, "BEGIN");
	if (PQresultStatus(res) == PGRES_COMMAND_OK) {
		PQclear(res);
		res = PQexecParams(conn, "SELECT 1 FROM job_leases WHERE job = $1 AND expires_at < now() FOR UPDATE", 1,
				   NULL, params, NULL, NULL, 0);
	}
	head.lock_ms = clock_mono_ms() - t0;
	if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		/* every acquisition raises the epoch, even a re-acquisition by the same owner id (a
		 * restarted process must not pass for the one it replaces) */
		res = PQexecParams(
			conn,
			"INSERT INTO job_leases AS l (job, owner, epoch, agent_addr, api_url, expires_at, agent_room)"
			" VALUES ($1, $2, 1, $3, $4, clock_timestamp() + $5::int * interval '1 second', $6::int)"
			" ON CONFLICT (job) DO UPDATE SET owner = excluded.owner, epoch = l.epoch + 1,"
			" agent_addr = excluded.agent_addr, api_url = excluded.api_url, expires_at = "
			"excluded.expires_at,"
			" agent_room = excluded.agent_room"
			" WHERE l.expires_at < now() OR l.owner = excluded.owner"
			" RETURNING epoch, owner, agent_addr, agent_room",
			6, NULL, params, NULL, NULL, 0);
	}
	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1) {
		head.owned = 1;
	} else if (PQresultStatus(res) == PGRES_TUPLES_OK) {
		PQclear(res);
		res = PQexecParams(conn, "SELECT epoch, owner, agent_addr, agent_room FROM job_leases WHERE job = $1",
				   1, NULL, params, NULL, NULL, 0);
	}
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		storage_query_fail(r, res, conn);
		if (PQresultStatus(res) == PGRES_TUPLES_OK)
			snprintf(r->error, sizeof(r->error), "the lease row of job \"%s\" went away", q->job);
		PQclear(res);
		end(conn, false);
		return;
	}
	head.epoch = strtoull(PQgetvalue(res, 0, 0), NULL, 10);
	snprintf(head.owner, sizeof(head.owner), "%s", PQgetvalue(res, 0, 1));
	snprintf(head.agent_addr, sizeof(head.agent_addr), "%s", PQgetvalue(res, 0, 2));
	head.agent_room = atoi(PQgetvalue(res, 0, 3));
	PQclear(res);
	if (head.owned) {
		/* what the previous owner made durable: the agents' resends of it are skipped */
		prog = PQexecParams(conn,
				    "SELECT p.agent, p.durable_seq FROM agent_progress p JOIN jobs j ON j.id = p.job_id"
				    " WHERE j.name = $1",
				    1, NULL, params, NULL, NULL, 0);
		/* its open incident continues under the same key (nothing is paged twice) */
		if (PQresultStatus(prog) == PGRES_TUPLES_OK)
			inc = storage_open_incidents_query(conn, q->job);
		if (PQresultStatus(prog) != PGRES_TUPLES_OK || PQresultStatus(inc) != PGRES_TUPLES_OK ||
		    PQnfields(inc) != INCIDENT_FIELDS) {
			storage_query_fail(r, PQresultStatus(prog) != PGRES_TUPLES_OK ? prog : inc, conn);
			PQclear(prog);
			PQclear(inc);
			end(conn, false);
			return;
		}
		head.n_incidents = (size_t)PQntuples(inc);
		head.incidents_at = lines_size(prog);
		/* the newest open incident's window (a hang has none): what its reports go on from,
		 * with the baseline before it that a diagnosis compares the window with */
		long from = head.n_incidents ? key_first_iter(PQgetvalue(inc, (int)head.n_incidents - 1, 1)) : -1;

		if (from >= 0 && strcmp(PQgetvalue(inc, (int)head.n_incidents - 1, 2), "hang") != 0 &&
		    !(head.window = storage_window_read(conn, q->job,
							(uint32_t)(from > BASELINE_ITERS ? from - BASELINE_ITERS : 0),
							(uint32_t)from, q->window_iters, r->error, sizeof(r->error)))) {
			r->failed = 1;
			PQclear(prog);
			PQclear(inc);
			end(conn, false);
			return;
		}
	}
	if (!end(conn, true)) {
		storage_query_fail(r, NULL, conn);
		PQclear(prog);
		PQclear(inc);
		free(head.window);
		return;
	}
	l = malloc(sizeof(*l) + (prog ? lines_size(prog) + incidents_size(inc) : 1));
	if (!l) {
		PQclear(prog);
		PQclear(inc);
		free(head.window);
		oom(r);
		return;
	}
	head.read_ms = clock_mono_ms() - t0 - head.lock_ms;
	*l = head;
	l->data[0] = '\0';
	if (prog) {
		lines_put(prog, l->data);
		incidents_put(inc, l->data + l->incidents_at);
	}
	PQclear(prog);
	PQclear(inc);
	r->text = (char *)l;
	r->len = sizeof(*l);
}

void storage_lease_renew(PGconn *conn, void *ctx, struct storage_query_result *r)
{
	const struct storage_lease_req *q = ctx;
	char secs[24], room[24];
	const char *params[3] = {q->owner, secs, room};
	PGresult *res;

	snprintf(secs, sizeof(secs), "%d", q->lease_s);
	snprintf(room, sizeof(room), "%d", q->agent_room);
	res = PQexecParams(
		conn,
		"UPDATE job_leases SET expires_at = now() + $2::int * interval '1 second', agent_room = $3::int"
		" WHERE owner = $1 RETURNING job, epoch",
		3, NULL, params, NULL, NULL, 0);
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

void storage_lease_release(PGconn *conn, void *ctx, struct storage_query_result *r)
{
	const struct storage_lease_req *q = ctx;
	char epoch[24];
	const char *params[3] = {q->job, q->owner, epoch};
	PGresult *res;

	snprintf(epoch, sizeof(epoch), "%llu", (unsigned long long)q->epoch);
	/* expired, not deleted: the epoch must never be handed out twice */
	res = PQexecParams(
		conn,
		"UPDATE job_leases SET expires_at = '-infinity' WHERE job = $1 AND owner = $2 AND epoch = $3::bigint",
		3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		storage_query_fail(r, res, conn);
	PQclear(res);
}

int storage_lease_release_all(const char *dsn, const char *owner, char *err, size_t err_size)
{
	const char *keys[] = {"dbname", "connect_timeout", NULL}, *vals[] = {dsn, "5", NULL};
	const char *params[1] = {owner};
	PGconn *conn = PQconnectdbParams(keys, vals, 1);
	PGresult *res = NULL;
	int rc = -1;

	if (PQstatus(conn) == CONNECTION_OK)
		res = PQexecParams(conn, "UPDATE job_leases SET expires_at = '-infinity' WHERE owner = $1", 1, NULL,
				   params, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_COMMAND_OK)
		rc = 0;
	else
		snprintf(err, err_size, "%s", PQerrorMessage(conn));
	err[strcspn(err, "\n")] = '\0';
	PQclear(res);
	PQfinish(conn);
	return rc;
}
