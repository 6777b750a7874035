/* window.c: see window.h. */
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

static void fail(char *err, size_t size, const char *what, PGconn *conn)
{
	snprintf(err, size, "could not read the job's %s: %s", what, PQerrorMessage(conn));
	err[strcspn(err, "\n")] = '\0';
}

struct storage_window *storage_window_read(PGconn *conn, const char *job, uint32_t from_iter, uint32_t max_iters,
					   char *err, size_t err_size)
{
	char from[16], max[16];
	const char *params[3] = {job, from, max};
	PGresult *it, *ph, *nm;
	struct storage_window *w = NULL;

	snprintf(from, sizeof(from), "%u", from_iter);
	snprintf(max, sizeof(max), "%u", max_iters);
	/* the last max_iters iterations from from_iter on; phases by their iteration */
	it = PQexecParams(conn,
			  "WITH j AS (SELECT id FROM jobs WHERE name = $1),"
			  " lo AS (SELECT greatest($2::int, coalesce(max(i.iter), 0) - $3::int + 1) AS it"
			  "  FROM iterations i, j WHERE i.job_id = j.id)"
			  " SELECT i.rank, i.iter, (extract(epoch FROM i.ts) * 1000000)::bigint, i.dur_us"
			  " FROM iterations i, j, lo WHERE i.job_id = j.id AND i.iter >= lo.it",
			  3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(it) != PGRES_TUPLES_OK) {
		fail(err, err_size, "iterations", conn);
		PQclear(it);
		return NULL;
	}
	ph = PQexecParams(conn,
			  "WITH j AS (SELECT id FROM jobs WHERE name = $1),"
			  " lo AS (SELECT greatest($2::int, coalesce(max(i.iter), 0) - $3::int + 1) AS it"
			  "  FROM iterations i, j WHERE i.job_id = j.id)"
			  " SELECT p.rank, p.iter, p.name_id, p.kind, p.grp, p.start_us, p.dur_us"
			  " FROM phases p, j, lo WHERE p.job_id = j.id AND p.iter >= lo.it",
			  3, NULL, params, NULL, NULL, 0);
	nm = PQresultStatus(ph) == PGRES_TUPLES_OK
		     ? PQexecParams(conn, "SELECT n.name_id, n.name FROM names n JOIN jobs j ON j.id = n.job_id WHERE j.name = $1"
				    " ORDER BY n.name_id",
				    1, NULL, params, NULL, NULL, 0)
		     : NULL;
	if (PQresultStatus(ph) != PGRES_TUPLES_OK || PQresultStatus(nm) != PGRES_TUPLES_OK) {
		fail(err, err_size, PQresultStatus(ph) != PGRES_TUPLES_OK ? "phases" : "names", conn);
		goto out;
	}
	size_t ni = (size_t)PQntuples(it), np = (size_t)PQntuples(ph), nn = (size_t)PQntuples(nm), text = 0;

	for (size_t k = 0; k < nn; k++)
		text += (size_t)PQgetlength(nm, (int)k, 1) + 1;
	w = calloc(1, sizeof(*w) + ni * sizeof(*w->iters) + np * sizeof(*w->phases) + nn * (sizeof(char *) + sizeof(int32_t)) +
			      text);
	if (!w) {
		snprintf(err, err_size, "out of memory for a window of %zu iterations and %zu phases", ni, np);
		goto out;
	}
	w->iters = (struct record_iter *)(w + 1);
	w->phases = (struct record_phase *)(w->iters + ni);
	w->names = (char **)(w->phases + np);
	int32_t *ids = (int32_t *)(w->names + nn); /* the database's name ids, ascending */
	char *t = (char *)(ids + nn);

	for (size_t k = 0; k < nn; k++) {
		size_t len = (size_t)PQgetlength(nm, (int)k, 1);

		ids[k] = (int32_t)strtol(PQgetvalue(nm, (int)k, 0), NULL, 10);
		memcpy(t, PQgetvalue(nm, (int)k, 1), len + 1);
		w->names[k] = t;
		t += len + 1;
	}
	w->n_names = nn;
	for (size_t k = 0; k < ni; k++)
		w->iters[w->n_iters++] = (struct record_iter){
			.rank = (uint32_t)strtoul(PQgetvalue(it, (int)k, 0), NULL, 10),
			.iter = (uint32_t)strtoul(PQgetvalue(it, (int)k, 1), NULL, 10),
			.start_us = strtoll(PQgetvalue(it, (int)k, 2), NULL, 10),
			.dur_us = strtoll(PQgetvalue(it, (int)k, 3), NULL, 10)};
	for (size_t k = 0; k < np; k++) {
		int32_t id = (int32_t)strtol(PQgetvalue(ph, (int)k, 2), NULL, 10);
		size_t lo = 0, hi = nn;

		while (lo < hi) { /* the name's index in names */
			size_t mid = lo + (hi - lo) / 2;

			if (ids[mid] < id)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo == nn || ids[lo] != id)
			continue; /* not in the job's dictionary: cannot be */
		w->phases[w->n_phases++] = (struct record_phase){
			.rank = (uint32_t)strtoul(PQgetvalue(ph, (int)k, 0), NULL, 10),
			.iter = (uint32_t)strtoul(PQgetvalue(ph, (int)k, 1), NULL, 10),
			.name = (uint32_t)lo,
			.kind = (uint8_t)atoi(PQgetvalue(ph, (int)k, 3)),
			.group = (uint8_t)atoi(PQgetvalue(ph, (int)k, 4)),
			.start_us = PQgetisnull(ph, (int)k, 5) ? RECORD_NO_START : strtoll(PQgetvalue(ph, (int)k, 5), NULL, 10),
			.dur_us = strtoll(PQgetvalue(ph, (int)k, 6), NULL, 10)};
	}
out:
	PQclear(it);
	PQclear(ph);
	PQclear(nm);
	return w;
}
