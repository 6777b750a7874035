/* window.c: see window.h. */
#include "window.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "hex.h"

static void fail(char *err, size_t size, const char *what, PGconn *conn)
{
	snprintf(err, size, "could not read the job's %s: %s", what, PQerrorMessage(conn));
	err[strcspn(err, "\n")] = '\0';
}

/* The index of the database's name id in ids (ascending), or n when it is not there. */
static size_t name_index(const int32_t *ids, size_t n, const char *value)
{
	int32_t id = (int32_t)strtol(value, NULL, 10);
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && ids[lo] == id ? lo : n;
}

/* A bytea in PostgreSQL's hex output ("\x0a1b..."): its length, and its bytes into out
 * when out is not NULL. 0 for NULL, empty or not hex. */
static size_t bytea_hex(const PGresult *r, int row, int col, uint8_t *out)
{
	const char *v = PQgetvalue(r, row, col);
	size_t len = (size_t)PQgetlength(r, row, col), n;

	if (PQgetisnull(r, row, col) || len < 4 || v[0] != '\\' || v[1] != 'x' || len % 2)
		return 0;
	n = (len - 2) / 2;
	for (size_t i = 0; out && i < n; i++) {
		int hi = hex_digit(v[2 + 2 * i]), lo = hex_digit(v[3 + 2 * i]);

		if (hi < 0 || lo < 0)
			return 0;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return n;
}

struct storage_window *storage_window_read(PGconn *conn, const char *job, uint32_t from_iter, uint32_t max_iters,
					   char *err, size_t err_size)
{
	char from[16], max[16], first[16];
	const char *params[3] = {job, from, max};
	PGresult *it, *ph, *nm, *kn = NULL;
	struct storage_window *w = NULL;

	snprintf(from, sizeof(from), "%u", from_iter);
	snprintf(max, sizeof(max), "%u", max_iters);
	/* the first iteration read: the last max_iters from from_iter on (steps' iter is indexed) */
	it = PQexecParams(conn,
			  "SELECT greatest($2::int, coalesce(max(s.iter), 0) - $3::int + 1) FROM steps s"
			  " JOIN jobs j ON j.id = s.job_id WHERE j.name = $1",
			  3, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(it) != PGRES_TUPLES_OK || PQntuples(it) != 1) {
		fail(err, err_size, "iterations", conn);
		PQclear(it);
		return NULL;
	}
	snprintf(first, sizeof(first), "%s", PQgetvalue(it, 0, 0));
	PQclear(it);
	params[1] = first;
	it = PQexecParams(conn,
			  "SELECT i.rank, i.iter, (extract(epoch FROM i.ts) * 1000000)::bigint, i.dur_us"
			  " FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = $1 AND i.iter >= $2::int",
			  2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(it) != PGRES_TUPLES_OK) {
		fail(err, err_size, "iterations", conn);
		PQclear(it);
		return NULL;
	}
	ph = PQexecParams(conn,
			  "SELECT p.rank, p.iter, p.name_id, p.kind, p.grp, p.start_us, p.dur_us"
			  " FROM phases p JOIN jobs j ON j.id = p.job_id WHERE j.name = $1 AND p.iter >= $2::int",
			  2, NULL, params, NULL, NULL, 0);
	nm = PQresultStatus(ph) == PGRES_TUPLES_OK
		     ? PQexecParams(
			       conn,
			       "SELECT n.name_id, n.name FROM names n JOIN jobs j ON j.id = n.job_id WHERE j.name = $1"
			       " ORDER BY n.name_id",
			       1, NULL, params, NULL, NULL, 0)
		     : NULL;
	if (PQresultStatus(ph) != PGRES_TUPLES_OK || PQresultStatus(nm) != PGRES_TUPLES_OK) {
		fail(err, err_size, PQresultStatus(ph) != PGRES_TUPLES_OK ? "phases" : "names", conn);
		goto out;
	}
	kn = PQexecParams(conn,
			  "SELECT k.rank, k.iter, k.name_id, k.kind, k.count, k.sum_us, k.min_us, k.max_us, k.p50_us,"
			  " k.p99_us, k.sketch FROM kernels k JOIN jobs j ON j.id = k.job_id"
			  " WHERE j.name = $1 AND k.iter >= $2::int",
			  2, NULL, params, NULL, NULL, 0);
	if (PQresultStatus(kn) != PGRES_TUPLES_OK) {
		fail(err, err_size, "kernels", conn);
		goto out;
	}
	size_t ni = (size_t)PQntuples(it), np = (size_t)PQntuples(ph), nk = (size_t)PQntuples(kn),
	       nn = (size_t)PQntuples(nm), text = 0, sketches = 0;

	for (size_t k = 0; k < nn; k++)
		text += (size_t)PQgetlength(nm, (int)k, 1) + 1;
	for (size_t k = 0; k < nk; k++)
		sketches += bytea_hex(kn, (int)k, 10, NULL);
	w = calloc(1, sizeof(*w) + ni * sizeof(*w->iters) + np * sizeof(*w->phases) + nk * sizeof(*w->kernels) +
			      nn * (sizeof(char *) + sizeof(int32_t)) + text + sketches);
	if (!w) {
		snprintf(err, err_size, "out of memory for a window of %zu iterations, %zu phases and %zu kernels", ni,
			 np, nk);
		goto out;
	}
	w->iters = (struct record_iter *)(w + 1);
	w->phases = (struct record_phase *)(w->iters + ni);
	w->kernels = (struct record_kernel *)(w->phases + np);
	w->names = (char **)(w->kernels + nk);
	int32_t *ids = (int32_t *)(w->names + nn); /* the database's name ids, ascending */
	char *t = (char *)(ids + nn);
	uint8_t *sk = (uint8_t *)(t + text);

	for (size_t k = 0; k < nn; k++) {
		size_t len = (size_t)PQgetlength(nm, (int)k, 1);

		ids[k] = (int32_t)strtol(PQgetvalue(nm, (int)k, 0), NULL, 10);
		memcpy(t, PQgetvalue(nm, (int)k, 1), len + 1);
		w->names[k] = t;
		t += len + 1;
	}
	w->n_names = nn;
	for (size_t k = 0; k < ni; k++)
		w->iters[w->n_iters++] =
			(struct record_iter){.rank = (uint32_t)strtoul(PQgetvalue(it, (int)k, 0), NULL, 10),
					     .iter = (uint32_t)strtoul(PQgetvalue(it, (int)k, 1), NULL, 10),
					     .start_us = strtoll(PQgetvalue(it, (int)k, 2), NULL, 10),
					     .dur_us = strtoll(PQgetvalue(it, (int)k, 3), NULL, 10)};
	for (size_t k = 0; k < np; k++) {
		size_t name = name_index(ids, nn, PQgetvalue(ph, (int)k, 2));

		if (name == nn)
			continue; /* not in the job's dictionary: cannot be */
		w->phases[w->n_phases++] = (struct record_phase){
			.rank = (uint32_t)strtoul(PQgetvalue(ph, (int)k, 0), NULL, 10),
			.iter = (uint32_t)strtoul(PQgetvalue(ph, (int)k, 1), NULL, 10),
			.name = (uint32_t)name,
			.kind = (uint8_t)atoi(PQgetvalue(ph, (int)k, 3)),
			.group = (uint8_t)atoi(PQgetvalue(ph, (int)k, 4)),
			.start_us = PQgetisnull(ph, (int)k, 5) ? RECORD_NO_START
							       : strtoll(PQgetvalue(ph, (int)k, 5), NULL, 10),
			.dur_us = strtoll(PQgetvalue(ph, (int)k, 6), NULL, 10)};
	}
	for (size_t k = 0; k < nk; k++) {
		size_t name = name_index(ids, nn, PQgetvalue(kn, (int)k, 2)), len = bytea_hex(kn, (int)k, 10, sk);

		if (name == nn)
			continue;
		w->kernels[w->n_kernels++] =
			(struct record_kernel){.rank = (uint32_t)strtoul(PQgetvalue(kn, (int)k, 0), NULL, 10),
					       .iter = (uint32_t)strtoul(PQgetvalue(kn, (int)k, 1), NULL, 10),
					       .name = (uint32_t)name,
					       .kind = (uint8_t)atoi(PQgetvalue(kn, (int)k, 3)),
					       .count = (uint32_t)strtoul(PQgetvalue(kn, (int)k, 4), NULL, 10),
					       .sum_us = strtoll(PQgetvalue(kn, (int)k, 5), NULL, 10),
					       .min_us = strtoll(PQgetvalue(kn, (int)k, 6), NULL, 10),
					       .max_us = strtoll(PQgetvalue(kn, (int)k, 7), NULL, 10),
					       .p50_us = strtoll(PQgetvalue(kn, (int)k, 8), NULL, 10),
					       .p99_us = strtoll(PQgetvalue(kn, (int)k, 9), NULL, 10),
					       .sketch = len ? sk : NULL,
					       .sketch_len = (uint32_t)len};
		sk += len;
	}
out:
	PQclear(it);
	PQclear(ph);
	PQclear(nm);
	PQclear(kn);
	return w;
}
