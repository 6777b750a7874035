/* outbox.c: see outbox.h. */
#include "outbox.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "connect.h"
#include "log.h"

#define RETRY_MAX_S 30

struct storage_outbox {
	char *dsn;
	PGconn *conn;
	int delay_s;
	time_t retry_at;
	struct log_complaint down;
	_Atomic int connected;
};

struct storage_outbox *storage_outbox_open(const char *dsn)
{
	struct storage_outbox *o = calloc(1, sizeof(*o));

	if (o && !(o->dsn = strdup(dsn ? dsn : ""))) {
		free(o);
		o = NULL;
	}
	return o;
}

static void drop(struct storage_outbox *o)
{
	if (o->conn)
		PQfinish(o->conn);
	o->conn = NULL;
	atomic_store(&o->connected, 0);
}

void storage_outbox_close(struct storage_outbox *o)
{
	if (!o)
		return;
	drop(o);
	free(o->dsn);
	free(o);
}

int storage_outbox_connected(struct storage_outbox *o) { return atomic_load(&o->connected); }

static int ready(struct storage_outbox *o)
{
	char msg[512];

	if (o->conn && PQstatus(o->conn) == CONNECTION_OK)
		return 0;
	drop(o);
	if (time(NULL) < o->retry_at)
		return -1;
	o->conn = storage_connect(o->dsn, "culprit-alerts", 5, msg, sizeof msg);
	if (!o->conn) {
		log_complain(&o->down, LOG_ERROR, "alerts: could not connect to the database: %s (retrying)", msg);
		o->delay_s = o->delay_s ? o->delay_s * 2 : 1;
		if (o->delay_s > RETRY_MAX_S)
			o->delay_s = RETRY_MAX_S;
		o->retry_at = time(NULL) + o->delay_s;
		return -1;
	}
	o->delay_s = 0;
	atomic_store(&o->connected, 1);
	log_release(&o->down, LOG_INFO, "alerts: connected to the database again");
	return 0;
}

/* A statement; NULL (logged, connection dropped when broken) on failure. */
static PGresult *exec(struct storage_outbox *o, const char *what, const char *sql, int n, const char *const *p)
{
	PGresult *r;
	ExecStatusType st;
	char msg[512];

	if (ready(o) < 0)
		return NULL;
	r = PQexecParams(o->conn, sql, n, NULL, p, NULL, NULL, 0);
	st = PQresultStatus(r);
	if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK)
		return r;
	snprintf(msg, sizeof msg, "%s", PQresultErrorMessage(r));
	msg[strcspn(msg, "\n")] = '\0';
	log_complain(&o->down, LOG_ERROR, "alerts: %s failed: %s", what, msg);
	PQclear(r);
	if (PQstatus(o->conn) != CONNECTION_OK)
		drop(o);
	return NULL;
}

/* A statement whose rows do not matter: 0, or -1. */
static int run(struct storage_outbox *o, const char *what, const char *sql, int n, const char *const *p)
{
	PGresult *r = exec(o, what, sql, n, p);

	if (!r)
		return -1;
	PQclear(r);
	return 0;
}

int storage_outbox_claim(struct storage_outbox *o, int limit,
			 void (*cb)(const struct storage_outbox_due *row, void *arg), void *arg)
{
	char lim[16];
	const char *p[1] = {lim};
	PGresult *r;
	int n;

	snprintf(lim, sizeof lim, "%d", limit);
	r = exec(o, "claiming due alerts",
		 /* the claim: retried after 15 s (the delivery's request timeout + 5) if nothing is heard */
		 "UPDATE alert_outbox o SET next_attempt = now() + interval '15 seconds', attempts = o.attempts + 1"
		 " FROM (SELECT a.id FROM alert_outbox a WHERE a.state = 'pending' AND a.next_attempt <= now()"
		 " AND NOT EXISTS (SELECT 1 FROM alert_outbox e WHERE e.state = 'pending' AND e.target = a.target"
		 " AND e.id < a.id AND regexp_replace(e.dedup_key, '/[^/]*/[0-9]+$', '') ="
		 " regexp_replace(a.dedup_key, '/[^/]*/[0-9]+$', ''))"
		 " ORDER BY a.id LIMIT $1 FOR UPDATE OF a SKIP LOCKED) due WHERE o.id = due.id"
		 " RETURNING o.id, o.target, o.dedup_key, o.payload::text, o.attempts,"
		 " extract(epoch FROM now() - o.created)::float8",
		 1, p);
	if (!r)
		return -1;
	n = PQntuples(r);
	for (int i = 0; i < n; i++) {
		struct storage_outbox_due row = {
			.id = strtoll(PQgetvalue(r, i, 0), NULL, 10),
			.target = PQgetvalue(r, i, 1),
			.dedup_key = PQgetvalue(r, i, 2),
			.payload = PQgetvalue(r, i, 3),
			.attempts = atoi(PQgetvalue(r, i, 4)),
			.age_s = strtod(PQgetvalue(r, i, 5), NULL),
		};

		cb(&row, arg);
	}
	PQclear(r);
	return n;
}

int64_t storage_outbox_pending(struct storage_outbox *o)
{
	PGresult *r = exec(o, "counting pending alerts", "SELECT count(*) FROM alert_outbox WHERE state = 'pending'", 0,
			   NULL);
	int64_t n;

	if (!r)
		return -1;
	n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

int storage_outbox_sent(struct storage_outbox *o, int64_t id)
{
	char idb[24];
	const char *p[1] = {idb};

	snprintf(idb, sizeof idb, "%" PRId64, id);
	return run(o, "marking an alert sent",
		   "UPDATE alert_outbox SET state = 'sent', sent = now(), last_error = NULL WHERE id = $1", 1, p);
}

int storage_outbox_retry(struct storage_outbox *o, int64_t id, const char *why, int64_t delay_ms, int give_up)
{
	char idb[24], delay[24];
	const char *p[3] = {idb, why, delay};

	snprintf(idb, sizeof idb, "%" PRId64, id);
	snprintf(delay, sizeof delay, "%" PRId64, delay_ms);
	return run(o, "rescheduling an alert",
		   give_up ? "UPDATE alert_outbox SET state = 'failed', last_error = $2 WHERE id = $1 AND $3::int >= 0"
			   : "UPDATE alert_outbox SET next_attempt = now() + $3::int * interval '1 millisecond',"
			     " last_error = $2 WHERE id = $1",
		   3, p);
}

int storage_outbox_target_back(struct storage_outbox *o, const char *target, const int64_t *skip, size_t n_skip)
{
	char ids[32 * 64 + 8];
	size_t used = (size_t)snprintf(ids, sizeof ids, "{");
	const char *p[2] = {target, ids};

	for (size_t i = 0; i < n_skip && used + 24 < sizeof ids; i++)
		used += (size_t)snprintf(ids + used, sizeof ids - used, "%s%" PRId64, i ? "," : "", skip[i]);
	snprintf(ids + used, sizeof ids - used, "}");
	return run(o, "rescheduling alerts of a target that is back",
		   "UPDATE alert_outbox SET next_attempt = now() WHERE state = 'pending' AND target = $1"
		   " AND next_attempt > now() AND id <> ALL($2::bigint[])",
		   2, p);
}

int storage_outbox_open_alerts(struct storage_outbox *o, char **alerts)
{
	/* every open incident: those a previous culpritd left open are restored and followed by
	 * this one */
	PGresult *r = exec(o, "reading open incidents",
			   "SELECT count(*), coalesce(jsonb_agg(alert), '[]')::text FROM incidents"
			   " WHERE state = 'open' AND alert IS NOT NULL",
			   0, NULL);

	*alerts = NULL;
	if (!r)
		return -1;
	if (strcmp(PQgetvalue(r, 0, 0), "0") != 0)
		*alerts = strdup(PQgetvalue(r, 0, 1));
	PQclear(r);
	return 0;
}
