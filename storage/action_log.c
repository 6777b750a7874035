/* action_log.c: see action_log.h. */
#include "action_log.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "connect.h"
#include "log.h"

struct storage_action_log {
	char *dsn;
	PGconn *conn;
	struct log_complaint down;
};

struct storage_action_log *storage_action_log_open(const char *dsn)
{
	struct storage_action_log *a = calloc(1, sizeof(*a));

	if (a && !(a->dsn = strdup(dsn ? dsn : ""))) {
		free(a);
		a = NULL;
	}
	return a;
}

void storage_action_log_close(struct storage_action_log *a)
{
	if (!a)
		return;
	if (a->conn)
		PQfinish(a->conn);
	free(a->dsn);
	free(a);
}

static const char *const insert_sql =
	"INSERT INTO action_attempts (incident_key, job, action_n, kind, target, op, mode, who, attempt, "
	"started_at, finished_at, exit_code, result, output, input) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, "
	"to_timestamp($10::double precision / 1e6), to_timestamp($11::double precision / 1e6), $12, $13, $14, $15)";

int storage_action_log_record(struct storage_action_log *a, const struct storage_action_row *r)
{
	char n[16], attempt[16], started[24], finished[24], code[16], msg[512] = "";
	const char *p[15] = {r->incident, r->job,  n,       r->kind,  r->target, r->op,     r->mode,
			     r->who,      attempt, started, finished, NULL,      r->result, r->output ? r->output : "",
			     r->input};

	snprintf(n, sizeof(n), "%d", r->action_n);
	snprintf(attempt, sizeof(attempt), "%d", r->attempt);
	snprintf(started, sizeof(started), "%" PRId64, r->started_us);
	snprintf(finished, sizeof(finished), "%" PRId64, r->finished_us);
	if (r->exit_code >= 0) {
		snprintf(code, sizeof(code), "%d", r->exit_code);
		p[11] = code;
	}
	for (int tries = 0; tries < 2; tries++) {
		PGresult *res;

		if (!a->conn || PQstatus(a->conn) != CONNECTION_OK) {
			if (a->conn)
				PQfinish(a->conn);
			if (!(a->conn = storage_connect(a->dsn, "culprit-actions", 5, msg, sizeof(msg))))
				continue;
		}
		res = PQexecParams(a->conn, insert_sql, 15, NULL, p, NULL, NULL, 0);
		if (PQresultStatus(res) == PGRES_COMMAND_OK) {
			PQclear(res);
			log_release(&a->down, LOG_INFO, "actions: recording attempts in the database again");
			return 0;
		}
		snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(res));
		msg[strcspn(msg, "\n")] = '\0';
		PQclear(res);
	}
	log_complain(&a->down, LOG_ERROR, "actions: could not record attempt %d of %s on %s (incident %s): %s",
		     r->attempt, r->kind, r->target, r->incident, msg);
	return -1;
}
