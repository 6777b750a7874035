/* reports.c: see reports.h. */
#include "reports.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static PGresult *exec(PGconn *c, const char *sql, int n, const char *const *p, PGresult **failed)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, p, NULL, NULL, 0);
	ExecStatusType s = PQresultStatus(r);

	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
		return r;
	*failed = r;
	return NULL;
}

PGresult *storage_report_write(PGconn *c, int32_t job_id, const struct storage_op *op, const char **what)
{
	char job[16], first[16], last[16], updates[16], opened[24], changed[24], report_id[24] = "";
	const struct storage_incident *inc = &op->incident;
	PGresult *r, *failed = NULL;

	snprintf(job, sizeof job, "%" PRId32, job_id);
	if (op->report_json) {
		const char *p[5] = {job, first, last, op->category ? op->category : "none", op->report_json};

		snprintf(first, sizeof first, "%" PRIu32, op->first_iter);
		snprintf(last, sizeof last, "%" PRIu32, op->last_iter);
		*what = "report insert";
		r = exec(c,
			 "INSERT INTO reports (job_id, first_iter, last_iter, category, json)"
			 " VALUES ($1, $2, $3, $4, $5::jsonb) RETURNING id",
			 5, p, &failed);
		if (!r)
			return failed;
		snprintf(report_id, sizeof report_id, "%s", PQgetvalue(r, 0, 0));
		PQclear(r);
	}
	if (inc->key) {
		const char *p[11] = {job,
				     inc->key,
				     inc->category ? inc->category : "none",
				     inc->state ? inc->state : "open",
				     inc->summary ? inc->summary : "",
				     report_id[0] ? report_id : NULL,
				     opened,
				     changed,
				     updates,
				     inc->alert,
				     inc->resolution};

		snprintf(updates, sizeof updates, "%" PRIu32, inc->updates);
		snprintf(opened, sizeof opened, "%" PRId64, inc->opened_us);
		snprintf(changed, sizeof changed, "%" PRId64, inc->changed_us);
		*what = "incident upsert";
		r = exec(
			c,
			"INSERT INTO incidents (job_id, key, category, state, summary, report_id, opened, updated,"
			" resolved, updates, alert, resolution) VALUES ($1, $2, $3, $4::text, $5, $6::bigint,"
			" to_timestamp($7::float8 / 1e6), to_timestamp($8::float8 / 1e6),"
			" CASE WHEN $4::text = 'resolved' THEN to_timestamp($8::float8 / 1e6) END, $9, $10::jsonb,"
			" CASE WHEN $4::text = 'resolved' THEN $11 END)"
			" ON CONFLICT (job_id, key) DO UPDATE SET category = EXCLUDED.category, state = EXCLUDED.state,"
			" summary = EXCLUDED.summary, report_id = COALESCE(EXCLUDED.report_id, incidents.report_id),"
			" updated = EXCLUDED.updated, resolved = EXCLUDED.resolved,"
			" updates = GREATEST(EXCLUDED.updates, incidents.updates),"
			" alert = COALESCE(EXCLUDED.alert, incidents.alert), resolution = EXCLUDED.resolution",
			11, p, &failed);
		if (!r)
			return failed;
		PQclear(r);
	}
	for (size_t i = 0; i < op->n_outbox; i++) {
		const struct storage_outbox_row *o = &op->outbox[i];
		const char *p[3] = {o->target, o->dedup_key, o->payload};

		*what = "alert outbox insert";
		r = exec(c,
			 "INSERT INTO alert_outbox (target, dedup_key, payload) VALUES ($1, $2, $3::jsonb)"
			 " ON CONFLICT (target, dedup_key) DO NOTHING",
			 3, p, &failed);
		if (!r)
			return failed;
		PQclear(r);
	}
	return NULL;
}
