/* heatmap_db.c: see heatmap_db.h. Five parameterised statements on the worker's connection, read
 * in text format; the cells come a row of steps at a time (a batch's ranks in one
 * iteration), their values as two arrays. */
#include "heatmap_db.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query.h"

static int64_t num(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? -1 : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* The next element of a one-dimensional integer array's text ("{1,NULL,3}"): its value (-1
 * for NULL); *p moves past it. */
static int64_t next_elem(const char **p)
{
	int64_t v = -1;

	while (**p == '{' || **p == ',')
		(*p)++;
	if (**p == 'N')
		*p += 4;
	else if (**p && **p != '}')
		v = strtoll(*p, (char **)p, 10);
	return v;
}

/* The cells of iterations [from, to]: a row per steps row. */
static int read_cells(PGconn *c, const char *job_id, const char *name_id, uint32_t from, uint32_t to,
		      const struct storage_heatmap_sink *sink, struct storage_query_result *r)
{
	char f[16], t[16];
	PGresult *res;
	int rc = 0;

	snprintf(f, sizeof(f), "%" PRIu32, from);
	snprintf(t, sizeof(t), "%" PRIu32, to);
	res = storage_query_rows(
		c, r,
		"SELECT s.iter, s.rank0, s.ranks,"
		" (SELECT array_agg(coalesce(s.cells[k][1][2], s.wide_cells[k][1][2]) ORDER BY k)"
		"  FROM generate_series(1, x.n) k),"
		" CASE WHEN $4::int IS NOT NULL THEN (SELECT array_agg(coalesce(s.cells[k][x.p + 1][2],"
		"  s.wide_cells[k][x.p + 1][2]) ORDER BY k) FROM generate_series(1, x.n) k) END "
		"FROM steps s LEFT JOIN phase_sets ps ON ps.set_id = s.set_id"
		" CROSS JOIN LATERAL (SELECT coalesce(array_length(s.cells, 1), array_length(s.wide_cells, 1)) AS n,"
		"  array_position(ps.names, $4::int) AS p) x "
		"WHERE s.job_id = $1 AND s.iter BETWEEN $2::int AND $3::int",
		4, (const char *const[]){job_id, f, t, name_id});
	if (!res)
		return -1;
	for (int i = 0; i < PQntuples(res) && rc == 0; i++) {
		uint32_t iter = (uint32_t)num(res, i, 0), rank0 = (uint32_t)num(res, i, 1);
		const char *ranks = PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2);
		const char *steps = PQgetvalue(res, i, 3),
			   *vals = PQgetisnull(res, i, 4) ? NULL : PQgetvalue(res, i, 4);

		for (uint32_t k = 0; *steps && *steps != '}' && rc == 0; k++) {
			int64_t step = next_elem(&steps), val = vals ? next_elem(&vals) : step;
			int64_t rank = ranks ? next_elem(&ranks) : (int64_t)rank0 + k;

			if (rank >= 0)
				rc = sink->cell(sink->arg, (uint32_t)rank, iter, step, name_id ? val : step);
			while (*steps == '}')
				steps++;
		}
	}
	PQclear(res);
	return rc;
}

int storage_heatmap_read(PGconn *c, const char *job, const char *metric, int64_t first_iter, uint32_t n,
			 const struct storage_heatmap_sink *sink, struct storage_query_result *r)
{
	struct storage_topology t = {0};
	char job_id[16], *name_id = NULL;
	uint32_t from = 0, to = 0, have = 0;
	PGresult *res;
	int rc = -1;

	res = storage_query_rows(
		c, r,
		"SELECT j.id, j.world, j.tp, j.cp, j.pp, j.dp, j.ep, j.gpus_per_node, coalesce(j.rank_order, ''),"
		" (SELECT max(iter) FROM steps s WHERE s.job_id = j.id),"
		" (SELECT name_id FROM names n WHERE n.job_id = j.id AND n.name = $2) FROM jobs j WHERE j.name = $1",
		2, (const char *const[]){job, metric});
	if (!res)
		return -1;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 0;
	}
	snprintf(job_id, sizeof(job_id), "%s", PQgetvalue(res, 0, 0));
	t.world = (uint32_t)num(res, 0, 1);
	t.tp = (uint32_t)num(res, 0, 2);
	t.cp = (uint32_t)num(res, 0, 3);
	t.pp = (uint32_t)num(res, 0, 4);
	t.dp = (uint32_t)num(res, 0, 5);
	t.ep = (uint32_t)num(res, 0, 6);
	t.gpus_per_node = (uint32_t)num(res, 0, 7);
	snprintf(t.order, sizeof(t.order), "%s", PQgetvalue(res, 0, 8));
	if (!PQgetisnull(res, 0, 9)) {
		int64_t max = num(res, 0, 9);

		/* the range asked, within the iterations stored */
		from = first_iter >= 0 ? (uint32_t)first_iter : (uint32_t)(max + 1 >= n ? max + 1 - n : 0);
		to = (int64_t)from + n - 1 < max ? from + n - 1 : (uint32_t)max;
		have = from <= to ? to - from + 1 : 0;
	}
	if (strcmp(metric, "step") != 0)
		name_id = PQgetisnull(res, 0, 10) ? strdup("0") : strdup(PQgetvalue(res, 0, 10));
	PQclear(res);
	if (strcmp(metric, "step") != 0 && !name_id)
		goto out;
	if (sink->job(sink->arg, &t, from, have) < 0)
		goto out;
	if (!(res = storage_query_rows(c, r, "SELECT rank, host FROM ranks WHERE job_id = $1", 1,
				       (const char *const[]){job_id})))
		goto out;
	for (int i = 0; i < PQntuples(res); i++)
		if (sink->host(sink->arg, (uint32_t)num(res, i, 0), PQgetvalue(res, i, 1)) < 0) {
			PQclear(res);
			goto out;
		}
	PQclear(res);
	if (!(res = storage_query_rows(
		      c, r,
		      "SELECT DISTINCT n.name FROM phase_sets ps CROSS JOIN LATERAL unnest(ps.names) u(id)"
		      " JOIN names n ON n.name_id = u.id WHERE ps.job_id = $1 ORDER BY 1",
		      1, (const char *const[]){job_id})))
		goto out;
	for (int i = 0; i < PQntuples(res); i++)
		if (sink->phase(sink->arg, PQgetvalue(res, i, 0)) < 0) {
			PQclear(res);
			goto out;
		}
	PQclear(res);
	if (!(res = storage_query_rows(
		      c, r,
		      "SELECT (s->>'rank')::int FROM (SELECT json FROM reports WHERE job_id = $1"
		      " ORDER BY created DESC, id DESC LIMIT 1) r CROSS JOIN LATERAL jsonb_array_elements(CASE"
		      " jsonb_typeof(r.json->'suspects') WHEN 'array' THEN r.json->'suspects' ELSE '[]' END) s"
		      " WHERE s->>'role' = 'culprit'",
		      1, (const char *const[]){job_id})))
		goto out;
	for (int i = 0; i < PQntuples(res); i++)
		if (sink->culprit(sink->arg, (uint32_t)num(res, i, 0)) < 0) {
			PQclear(res);
			goto out;
		}
	PQclear(res);
	if (have && read_cells(c, job_id, name_id, from, to, sink, r) < 0)
		goto out;
	rc = 1;
out:
	free(name_id);
	return rc;
}
