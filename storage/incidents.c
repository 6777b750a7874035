/* incidents.c: see incidents.h. */
#include "incidents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

static const char *value(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

PGresult *storage_open_incidents_query(PGconn *c, const char *job)
{
	const char *params[1] = {job};

	return PQexecParams(
		c,
		"SELECT j.name, i.key, i.category, i.summary, i.updates,"
		" (extract(epoch FROM i.opened) * 1e6)::bigint, (extract(epoch FROM i.updated) * 1e6)::bigint,"
		" i.alert::text, rp.json::text"
		/* its latest report of its category (the last one may say "none") */
		" FROM incidents i JOIN jobs j ON j.id = i.job_id LEFT JOIN LATERAL (SELECT r.json FROM reports r"
		" WHERE r.job_id = i.job_id AND r.category = i.category AND r.created >= i.opened - interval '1 hour'"
		" ORDER BY r.id DESC LIMIT 1) rp ON true"
		" WHERE i.state = 'open' AND i.key IS NOT NULL AND ($1::text IS NULL OR j.name = $1) ORDER BY i.id",
		1, NULL, params, NULL, NULL, 0);
}

void storage_open_incident_row(const PGresult *r, int i, struct storage_open_incident *inc)
{
	*inc = (struct storage_open_incident){
		.job = PQgetvalue(r, i, 0),
		.key = PQgetvalue(r, i, 1),
		.category = PQgetvalue(r, i, 2),
		.summary = PQgetvalue(r, i, 3),
		.updates = (uint32_t)strtoul(PQgetvalue(r, i, 4), NULL, 10),
		.opened_us = strtoll(PQgetvalue(r, i, 5), NULL, 10),
		.changed_us = strtoll(PQgetvalue(r, i, 6), NULL, 10),
		.alert = value(r, i, 7),
		.report_json = value(r, i, 8),
	};
}

int storage_open_incidents_load(const char *dsn, void (*cb)(const struct storage_open_incident *inc, void *arg),
				void *arg, char *err, size_t err_size)
{
	PGconn *c = PQconnectdb(dsn);
	PGresult *r;
	int n;

	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, err_size, "could not connect to the database: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQfinish(c);
		return -1;
	}
	r = storage_open_incidents_query(c, NULL);
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(err, err_size, "could not read open incidents: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	n = PQntuples(r);
	for (int i = 0; i < n; i++) {
		struct storage_open_incident inc;

		storage_open_incident_row(r, i, &inc);
		cb(&inc, arg);
	}
	PQclear(r);
	PQfinish(c);
	return n;
}
