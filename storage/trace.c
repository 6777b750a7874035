/* trace.c: see trace.h. A handful of parameterised statements on the worker's connection,
 * each bounded by a LIMIT derived from max_slices, read in text format. */
#include "trace.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pgbuf.h"
#include "query.h"
#include "record.h"

#define EPOCH_US(col) "(extract(epoch FROM " col ") * 1000000)::bigint"
#define MAX_INSTANTS 1000 /* incidents and events of the span */

struct loader {
	PGconn *c;
	struct storage_query_result *r;
	struct trace_data *d;
	char job_id[16];
	int64_t *name_ids; /* sorted, parallel to d->names */
	size_t n_ids;      /* d->names has one more: the placeholder for a name row missing */
};

static int64_t num(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? INT64_MIN : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* One of the slice queries (params: job id, ranks, from, to), at most room rows: NULL on an
 * error (in r), or with d->too_many set when there are more. */
static PGresult *query_slices(PGconn *c, struct storage_query_result *r, const char *sql, const char *const *p4,
			      size_t room, struct trace_data *d)
{
	char lim[32];
	PGresult *res;

	snprintf(lim, sizeof(lim), "%zu", room + 1);
	res = storage_query_rows(c, r, sql, 5, (const char *const[]){p4[0], p4[1], p4[2], p4[3], lim});
	if (res && (size_t)PQntuples(res) > room) {
		PQclear(res);
		d->too_many = 1;
		return NULL;
	}
	return res;
}

static void oom(struct storage_query_result *r)
{
	r->failed = 1;
	snprintf(r->error, sizeof(r->error), "out of memory");
	/* PostgreSQL's out_of_memory: the API answers 500 */
	snprintf(r->sqlstate, sizeof(r->sqlstate), "53200");
}

static struct trace_slice *add_slice(struct trace_data *d)
{
	if (d->n_slices == d->cap_slices) {
		size_t nc = d->cap_slices ? d->cap_slices * 2 : 1024;
		struct trace_slice *ns = realloc(d->slices, nc * sizeof(*ns));

		if (!ns)
			return NULL;
		d->slices = ns;
		d->cap_slices = nc;
	}
	memset(&d->slices[d->n_slices], 0, sizeof(d->slices[0]));
	return &d->slices[d->n_slices++];
}

static int add_instant(struct trace_data *d, int64_t ts, const char *name, const char *detail, const char *host,
		       int64_t id)
{
	struct trace_instant *in;

	if (d->n_instants == d->cap_instants) {
		size_t nc = d->cap_instants ? d->cap_instants * 2 : 16;
		struct trace_instant *ni = realloc(d->instants, nc * sizeof(*ni));

		if (!ni)
			return -1;
		d->instants = ni;
		d->cap_instants = nc;
	}
	in = &d->instants[d->n_instants];
	memset(in, 0, sizeof(*in));
	in->ts_us = ts;
	in->id = id;
	in->name = strdup(name);
	in->detail = strdup(detail);
	in->host = host ? strdup(host) : NULL;
	if (!in->name || !in->detail || (host && !in->host)) {
		free(in->name);
		free(in->detail);
		free(in->host);
		return -1;
	}
	d->n_instants++;
	return 0;
}

/* Index of name_id in the job's names (loaded sorted); the placeholder when missing (a
 * names row is committed before any record that refers to it, so this is defensive). */
static uint32_t name_index(const struct loader *l, int64_t name_id)
{
	size_t lo = 0, hi = l->n_ids;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->name_ids[mid] < name_id)
			lo = mid + 1;
		else if (l->name_ids[mid] > name_id)
			hi = mid;
		else
			return (uint32_t)mid;
	}
	return (uint32_t)l->n_ids;
}

static int load_names(struct loader *l)
{
	PGresult *res =
		storage_query_rows(l->c, l->r, "SELECT name_id, name FROM names WHERE job_id = $1 ORDER BY name_id", 1,
				   (const char *const[]){l->job_id});
	int n;

	if (!res)
		return -1;
	n = PQntuples(res);
	l->d->names = calloc((size_t)n + 2, sizeof(char *));
	l->name_ids = calloc((size_t)n + 1, sizeof(int64_t));
	if (!l->d->names || !l->name_ids) {
		PQclear(res);
		oom(l->r);
		return -1;
	}
	for (int i = 0; i < n; i++) {
		l->name_ids[i] = num(res, i, 0);
		l->d->names[i] = strdup(PQgetvalue(res, i, 1));
		if (!l->d->names[i]) {
			l->d->n_names = (size_t)i;
			PQclear(res);
			oom(l->r);
			return -1;
		}
	}
	l->n_ids = (size_t)n;
	l->d->n_names = (size_t)n;
	PQclear(res);
	if (!(l->d->names[n] = strdup("(unknown name)"))) {
		oom(l->r);
		return -1;
	}
	l->d->n_names = (size_t)n + 1;
	return 0;
}

/* Phases of one (rank, iter) without a start offset go after the previous phase's end. */
static void place_phases(struct trace_data *d, size_t first, size_t end, const int64_t *offsets,
			 const int64_t *iter_start)
{
	int64_t cursor = INT64_MIN;

	for (size_t i = first; i < end; i++) {
		struct trace_slice *s = &d->slices[i];
		int64_t base = iter_start[i - first];

		if (cursor == INT64_MIN)
			cursor = base;
		if (offsets[i - first] != INT64_MIN) {
			s->start_us = base + offsets[i - first];
			s->start_known = 1;
		} else {
			s->start_us = cursor;
			s->start_known = 0;
		}
		if (s->start_us + s->dur_us > cursor)
			cursor = s->start_us + s->dur_us;
	}
}

/* the rows of steps that can hold the ranks of array p (their first rank is at most
 * STEPS_RANK_SPAN - 1 below): the primary key's range, which a filter on rank cannot use */
#define RANK0_IN(p)                                                                                                    \
	"rank0 BETWEEN (SELECT min(x) FROM unnest(" p "::int[]) x) - 63 AND (SELECT max(x) FROM unnest(" p "::int[]) " \
	"x)"

static const char iters_sql[] = "SELECT rank, iter, " EPOCH_US(
	"ts") ", dur_us FROM iterations"
	      " WHERE job_id = $1 AND rank = ANY($2::int[]) AND " RANK0_IN("$2") " AND iter BETWEEN $3::int AND $4::int"
										 " ORDER BY rank, iter LIMIT $5::int";

static const char phases_sql[] = "SELECT rank, iter, name_id, kind, grp, start_us, dur_us, " EPOCH_US(
	"ts") " FROM phases"
	      " WHERE job_id = $1 AND rank = ANY($2::int[]) AND " RANK0_IN(
		      "$2") " AND iter BETWEEN $3::int AND $4::int"
			    " ORDER BY rank, iter, start_us NULLS LAST, name_id LIMIT $5::int";

static const char kernels_sql[] = "SELECT rank, iter, name_id, kind, " EPOCH_US(
	"ts") ", dur_us, stream FROM raw_kernels"
	      " WHERE job_id = $1 AND rank = ANY($2::int[]) AND iter BETWEEN $3::int AND $4::int"
	      " ORDER BY rank, stream, ts LIMIT $5::int";

/* incidents whose first iteration is in the range: their key is "<job>/<first iter>/<category>" */
static const char incidents_sql[] =
	"SELECT id, category, summary, substring(key FROM '/([0-9]+)/[^/]*$')::int AS first_iter FROM incidents"
	" WHERE job_id = $1 AND substring(key FROM '/([0-9]+)/[^/]*$')::int BETWEEN $2::int AND $3::int"
	" ORDER BY id LIMIT $4::int";

static const char events_sql[] = "SELECT id, kind, source || ': ' || detail, " EPOCH_US(
	"ts") ", host FROM events"
	      " WHERE host = ANY($1::text[]) AND ts BETWEEN to_timestamp($2::bigint / 1e6) AND to_timestamp($3::bigint "
	      "/ 1e6)"
	      " AND (job_id IS NULL OR job_id = $5::int) ORDER BY ts LIMIT $4::int";

int storage_trace_load(struct pg_conn *conn, const struct trace_request *req, struct trace_data *d,
		       struct storage_query_result *r)
{
	struct loader l = {.c = conn, .r = r, .d = d};
	struct pgbuf arr = {0};
	PGresult *res;
	char from[24], to[24], lim[24];
	size_t n_iters, phase0;
	int64_t lo = INT64_MAX, hi = INT64_MIN;
	int rc = -1;

	memset(d, 0, sizeof(*d));
	snprintf(d->job, sizeof(d->job), "%s", req->job);
	d->from_iter = req->from_iter;
	d->to_iter = req->to_iter;

	res = storage_query_rows(conn, r,
				 "SELECT id, coalesce(world, 0), (SELECT " EPOCH_US(
					 "min(ts)") " FROM iterations i WHERE i.job_id = j.id)"
						    " FROM jobs j WHERE name = $1",
				 1, (const char *const[]){req->job});
	if (!res)
		return -1;
	if (PQntuples(res) == 0) {
		PQclear(res);
		return 1;
	}
	snprintf(l.job_id, sizeof(l.job_id), "%s", PQgetvalue(res, 0, 0));
	d->world = (uint32_t)num(res, 0, 1);
	d->job_start_us = num(res, 0, 2) == INT64_MIN ? 0 : num(res, 0, 2);
	PQclear(res);

	/* the ranks as an array literal */
	pgbuf_put(&arr, "{", 1);
	for (size_t i = 0; i < req->n_ranks; i++)
		pgbuf_printf(&arr, i ? ",%" PRIu32 : "%" PRIu32, req->ranks[i]);
	pgbuf_put(&arr, "}", 2);
	d->ranks = calloc(req->n_ranks ? req->n_ranks : 1, sizeof(*d->ranks));
	if (arr.failed || !d->ranks) {
		oom(r);
		goto out;
	}
	d->n_ranks = req->n_ranks;
	for (size_t i = 0; i < req->n_ranks; i++) {
		d->ranks[i].rank = req->ranks[i];
		snprintf(d->ranks[i].host, sizeof(d->ranks[i].host), "unknown host");
	}
	res = storage_query_rows(
		conn, r, "SELECT rank, tp, cp, ep, dp, pp, host FROM ranks WHERE job_id = $1 AND rank = ANY($2::int[])",
		2, (const char *const[]){l.job_id, arr.p});
	if (!res)
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		uint32_t rank = (uint32_t)num(res, i, 0);

		for (size_t k = 0; k < d->n_ranks; k++) {
			struct trace_rank *tr = &d->ranks[k];

			if (tr->rank != rank)
				continue;
			tr->tp = (uint32_t)num(res, i, 1);
			tr->cp = (uint32_t)num(res, i, 2);
			tr->ep = (uint32_t)num(res, i, 3);
			tr->dp = (uint32_t)num(res, i, 4);
			tr->pp = (uint32_t)num(res, i, 5);
			snprintf(tr->host, sizeof(tr->host), "%s", PQgetvalue(res, i, 6));
			tr->known = 1;
		}
	}
	PQclear(res);

	/* the iteration range: the last `span` stored for these ranks when not given */
	if (d->from_iter < 0 || d->to_iter < 0) {
		res = storage_query_rows(
			conn, r,
			"SELECT max(iter) FROM iterations WHERE job_id = $1 AND rank = ANY($2::int[]) AND " RANK0_IN(
				"$2"),
			2, (const char *const[]){l.job_id, arr.p});
		if (!res)
			goto out;
		int64_t last = num(res, 0, 0);

		PQclear(res);
		if (last == INT64_MIN)
			last = 0;
		if (d->to_iter < 0)
			d->to_iter = d->from_iter >= 0 ? d->from_iter + req->span - 1 : last;
		if (d->from_iter < 0)
			d->from_iter = d->to_iter - req->span + 1 < 0 ? 0 : d->to_iter - req->span + 1;
	}
	snprintf(from, sizeof(from), "%" PRId64, d->from_iter);
	snprintf(to, sizeof(to), "%" PRId64, d->to_iter);
	if (load_names(&l) < 0)
		goto out;

	/* iterations */
	res = query_slices(conn, r, iters_sql, (const char *const[]){l.job_id, arr.p, from, to}, req->max_slices, d);
	if (!res) {
		rc = d->too_many ? 2 : rc;
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		struct trace_slice *s = add_slice(d);

		if (!s) {
			PQclear(res);
			oom(r);
			goto out;
		}
		s->type = TRACE_SLICE_ITER;
		s->rank = (uint32_t)num(res, i, 0);
		s->iter = (uint32_t)num(res, i, 1);
		s->start_us = num(res, i, 2);
		s->dur_us = num(res, i, 3);
		s->start_known = 1;
		lo = s->start_us < lo ? s->start_us : lo;
		hi = s->start_us + s->dur_us > hi ? s->start_us + s->dur_us : hi;
	}
	PQclear(res);
	n_iters = d->n_slices;

	/* phases, ordered by (rank, iter, start) */
	res = query_slices(conn, r, phases_sql, (const char *const[]){l.job_id, arr.p, from, to},
			   req->max_slices - n_iters, d);
	if (!res) {
		rc = d->too_many ? 2 : rc;
		goto out;
	}
	{
		int n = PQntuples(res);
		int64_t *offs = calloc((size_t)n + 1, sizeof(int64_t));
		int64_t *bases = calloc((size_t)n + 1, sizeof(int64_t));
		size_t group = 0;

		phase0 = d->n_slices;
		if (!offs || !bases) {
			free(offs);
			free(bases);
			PQclear(res);
			oom(r);
			goto out;
		}
		for (int i = 0; i < n; i++) {
			struct trace_slice *s = add_slice(d);

			if (!s) {
				free(offs);
				free(bases);
				PQclear(res);
				oom(r);
				goto out;
			}
			s->type = TRACE_SLICE_PHASE;
			s->rank = (uint32_t)num(res, i, 0);
			s->iter = (uint32_t)num(res, i, 1);
			s->name = name_index(&l, num(res, i, 2));
			s->kind = (uint8_t)num(res, i, 3);
			s->group = (uint8_t)num(res, i, 4);
			offs[i] = num(res, i, 5);
			s->dur_us = num(res, i, 6);
			bases[i] = num(res, i, 7);
		}
		/* place each (rank, iter) group */
		for (size_t i = phase0; i <= d->n_slices; i++) {
			if (i == d->n_slices || d->slices[i].rank != d->slices[group + phase0].rank ||
			    d->slices[i].iter != d->slices[group + phase0].iter) {
				if (i > group + phase0)
					place_phases(d, group + phase0, i, offs + group, bases + group);
				group = i - phase0;
			}
		}
		free(offs);
		free(bases);
	}
	PQclear(res);

	/* captured raw kernels (migration 006) */
	res = query_slices(conn, r, kernels_sql, (const char *const[]){l.job_id, arr.p, from, to},
			   req->max_slices - d->n_slices, d);
	if (!res) {
		rc = d->too_many ? 2 : rc;
		goto out;
	}
	for (int i = 0; i < PQntuples(res); i++) {
		struct trace_slice *s = add_slice(d);

		if (!s) {
			PQclear(res);
			oom(r);
			goto out;
		}
		s->type = TRACE_SLICE_KERNEL;
		s->rank = (uint32_t)num(res, i, 0);
		s->iter = (uint32_t)num(res, i, 1);
		s->name = name_index(&l, num(res, i, 2));
		s->kind = (uint8_t)num(res, i, 3);
		s->start_us = num(res, i, 4);
		s->dur_us = num(res, i, 5);
		s->stream = (uint32_t)num(res, i, 6);
		s->start_known = 1;
	}
	PQclear(res);

	/* incidents that began in the range: at the earliest start of their first iteration */
	snprintf(lim, sizeof(lim), "%d", MAX_INSTANTS);
	res = storage_query_rows(conn, r, incidents_sql, 4, (const char *const[]){l.job_id, from, to, lim});
	if (!res)
		goto out;
	for (int i = 0; i < PQntuples(res); i++) {
		uint32_t first = (uint32_t)num(res, i, 3);
		int64_t at = INT64_MAX;

		for (size_t k = 0; k < n_iters; k++)
			if (d->slices[k].iter == first && d->slices[k].start_us < at)
				at = d->slices[k].start_us;
		if (at == INT64_MAX)
			continue; /* none of these ranks reported that iteration */
		if (add_instant(d, at, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), NULL, num(res, i, 0)) < 0) {
			PQclear(res);
			oom(r);
			goto out;
		}
	}
	PQclear(res);

	/* out-of-band events on the ranks' hosts during the span */
	if (n_iters > 0) {
		struct pgbuf hosts = {0};
		char los[24], his[24];

		pgbuf_put(&hosts, "{", 1);
		for (size_t i = 0; i < d->n_ranks; i++) {
			if (i)
				pgbuf_put(&hosts, ",", 1);
			pgbuf_array_str(&hosts, d->ranks[i].host);
		}
		pgbuf_put(&hosts, "}", 2);
		snprintf(los, sizeof(los), "%" PRId64, lo);
		snprintf(his, sizeof(his), "%" PRId64, hi);
		if (hosts.failed) {
			pgbuf_free(&hosts);
			oom(r);
			goto out;
		}
		res = storage_query_rows(conn, r, events_sql, 5,
					 (const char *const[]){hosts.p, los, his, lim, l.job_id});
		pgbuf_free(&hosts);
		if (!res)
			goto out;
		for (int i = 0; i < PQntuples(res); i++) {
			if (add_instant(d, num(res, i, 3), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2),
					PQgetvalue(res, i, 4), num(res, i, 0)) < 0) {
				PQclear(res);
				oom(r);
				goto out;
			}
		}
		PQclear(res);
	}
	rc = 0;
out:
	free(l.name_ids);
	pgbuf_free(&arr);
	return rc;
}

void storage_trace_free(struct trace_data *d)
{
	for (size_t i = 0; i < d->n_names; i++)
		free(d->names[i]);
	free(d->names);
	for (size_t i = 0; i < d->n_instants; i++) {
		free(d->instants[i].name);
		free(d->instants[i].detail);
		free(d->instants[i].host);
	}
	free(d->instants);
	free(d->slices);
	free(d->ranks);
	memset(d, 0, sizeof(*d));
}
