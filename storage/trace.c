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
	const struct trace_request *req;
	struct storage_query_result *r;
	struct trace_data *d;
	char job_id[16];
	char from[24], to[24]; /* the iteration range, as parameters */
	struct pgbuf ranks;    /* the ranks as an array literal */
	int64_t *name_ids;     /* sorted, parallel to d->names */
	size_t n_ids;          /* d->names has one more: the placeholder for a name row missing */
	size_t n_iters;        /* the iteration slices come first in d->slices */
	int64_t lo, hi;        /* their span, us since the epoch */
	int64_t *offsets;      /* the phase rows' start offsets and iteration starts, */
	int64_t *bases;        /* by row (load_phases) */
	size_t phase0;         /* the first phase slice */
};

/* What a loader does with one row; -1 out of memory. */
typedef int (*row_fn)(struct loader *l, const PGresult *res, int row);

static int64_t num(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? INT64_MIN : strtoll(PQgetvalue(res, row, col), NULL, 10);
}

static void oom(struct storage_query_result *r)
{
	r->failed = 1;
	snprintf(r->error, sizeof(r->error), "out of memory");
	/* PostgreSQL's out_of_memory: the API answers 500 */
	snprintf(r->sqlstate, sizeof(r->sqlstate), "53200");
}

/* The one row reader: runs sql and hands each of its rows to fn. room: the most rows (more
 * sets d->too_many). 0 ok, -1 failed (r filled), 2 too many rows. */
static int read_rows(struct loader *l, const char *sql, int n, const char *const *p, size_t room, row_fn fn)
{
	PGresult *res = storage_query_rows(l->c, l->r, sql, n, p);
	int rows;

	if (!res)
		return -1;
	rows = PQntuples(res);
	if ((size_t)rows > room) {
		PQclear(res);
		l->d->too_many = 1;
		return 2;
	}
	for (int i = 0; i < rows; i++)
		if (fn(l, res, i) < 0) {
			PQclear(res);
			oom(l->r);
			return -1;
		}
	PQclear(res);
	return 0;
}

/* One of the slice queries (params: job id, ranks, from, to, limit): at most the slices
 * max_slices leaves. */
static int read_slices(struct loader *l, const char *sql, row_fn fn)
{
	size_t room = l->req->max_slices - l->d->n_slices;
	char lim[32];

	snprintf(lim, sizeof(lim), "%zu", room + 1);
	return read_rows(l, sql, 5, (const char *const[]){l->job_id, l->ranks.p, l->from, l->to, lim}, room, fn);
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

static int name_row(struct loader *l, const PGresult *res, int i)
{
	if (i == 0) {
		size_t n = (size_t)PQntuples(res);

		l->d->names = calloc(n + 2, sizeof(char *));
		l->name_ids = calloc(n + 1, sizeof(int64_t));
		if (!l->d->names || !l->name_ids)
			return -1;
	}
	l->name_ids[i] = num(res, i, 0);
	l->d->names[i] = strdup(PQgetvalue(res, i, 1));
	if (!l->d->names[i])
		return -1;
	l->n_ids = (size_t)i + 1;
	l->d->n_names = (size_t)i + 1;
	return 0;
}

/* The job's names, sorted by id, and the placeholder for an id not among them. */
static int load_names(struct loader *l)
{
	if (read_rows(l, "SELECT name_id, name FROM names WHERE job_id = $1 ORDER BY name_id", 1,
		      (const char *const[]){l->job_id}, SIZE_MAX, name_row) < 0)
		return -1;
	if (!l->d->names)
		l->d->names = calloc(2, sizeof(char *));
	if (!l->d->names || !(l->d->names[l->n_ids] = strdup("(unknown name)"))) {
		oom(l->r);
		return -1;
	}
	l->d->n_names = l->n_ids + 1;
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

static int job_row(struct loader *l, const PGresult *res, int i)
{
	snprintf(l->job_id, sizeof(l->job_id), "%s", PQgetvalue(res, i, 0));
	l->d->world = (uint32_t)num(res, i, 1);
	l->d->job_start_us = num(res, i, 2) == INT64_MIN ? 0 : num(res, i, 2);
	l->d->tp = (uint32_t)num(res, i, 3);
	l->d->cp = (uint32_t)num(res, i, 4);
	l->d->pp = (uint32_t)num(res, i, 5);
	l->d->dp = (uint32_t)num(res, i, 6);
	l->d->ep = (uint32_t)num(res, i, 7);
	l->d->gpus_per_node = (uint32_t)num(res, i, 8);
	snprintf(l->d->order, sizeof(l->d->order), "%s", PQgetvalue(res, i, 9));
	return 0;
}

/* The job's id, world and time origin: 1 when the job is not stored. */
static int load_job(struct loader *l)
{
	int rc = read_rows(l,
			   "SELECT id, coalesce(world, 0), (SELECT " EPOCH_US(
				   "min(ts)") " FROM iterations i WHERE i.job_id = j.id),"
					      " coalesce(tp, 0), coalesce(cp, 0), coalesce(pp, 0), coalesce(dp, 0),"
					      " coalesce(ep, 0), coalesce(gpus_per_node, 0), coalesce(rank_order, '')"
					      " FROM jobs j WHERE name = $1",
			   1, (const char *const[]){l->req->job}, SIZE_MAX, job_row);

	return rc == 0 && !l->job_id[0] ? 1 : rc;
}

static int rank_row(struct loader *l, const PGresult *res, int i)
{
	uint32_t rank = (uint32_t)num(res, i, 0);

	for (size_t k = 0; k < l->d->n_ranks; k++) {
		struct trace_rank *tr = &l->d->ranks[k];

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
	return 0;
}

/* The ranks asked, with their hosts and coordinates where a ranks row has them. */
static int load_ranks(struct loader *l)
{
	const struct trace_request *req = l->req;
	struct trace_data *d = l->d;

	pgbuf_put(&l->ranks, "{", 1);
	for (size_t i = 0; i < req->n_ranks; i++)
		pgbuf_printf(&l->ranks, i ? ",%" PRIu32 : "%" PRIu32, req->ranks[i]);
	pgbuf_put(&l->ranks, "}", 2);
	d->ranks = calloc(req->n_ranks ? req->n_ranks : 1, sizeof(*d->ranks));
	if (l->ranks.failed || !d->ranks) {
		oom(l->r);
		return -1;
	}
	d->n_ranks = req->n_ranks;
	for (size_t i = 0; i < req->n_ranks; i++) {
		d->ranks[i].rank = req->ranks[i];
		snprintf(d->ranks[i].host, sizeof(d->ranks[i].host), "unknown host");
	}
	return read_rows(l,
			 "SELECT rank, tp, cp, ep, dp, pp, host FROM ranks WHERE job_id = $1 AND rank = ANY($2::int[])",
			 2, (const char *const[]){l->job_id, l->ranks.p}, SIZE_MAX, rank_row);
}

static int last_row(struct loader *l, const PGresult *res, int i)
{
	int64_t last = num(res, i, 0) == INT64_MIN ? 0 : num(res, i, 0);
	struct trace_data *d = l->d;

	if (d->to_iter < 0)
		d->to_iter = d->from_iter >= 0 ? d->from_iter + l->req->span - 1 : last;
	if (d->from_iter < 0)
		d->from_iter = d->to_iter - l->req->span + 1 < 0 ? 0 : d->to_iter - l->req->span + 1;
	return 0;
}

/* The iteration range: the last `span` stored for these ranks where a bound is not given. */
static int load_range(struct loader *l)
{
	if (l->d->from_iter < 0 || l->d->to_iter < 0) {
		int rc = read_rows(
			l,
			"SELECT max(iter) FROM iterations WHERE job_id = $1 AND rank = ANY($2::int[]) AND " RANK0_IN(
				"$2"),
			2, (const char *const[]){l->job_id, l->ranks.p}, SIZE_MAX, last_row);

		if (rc != 0)
			return rc;
	}
	snprintf(l->from, sizeof(l->from), "%" PRId64, l->d->from_iter);
	snprintf(l->to, sizeof(l->to), "%" PRId64, l->d->to_iter);
	return 0;
}

static int iter_row(struct loader *l, const PGresult *res, int i)
{
	struct trace_slice *s = add_slice(l->d);

	if (!s)
		return -1;
	s->type = TRACE_SLICE_ITER;
	s->rank = (uint32_t)num(res, i, 0);
	s->iter = (uint32_t)num(res, i, 1);
	s->start_us = num(res, i, 2);
	s->dur_us = num(res, i, 3);
	s->start_known = 1;
	l->lo = s->start_us < l->lo ? s->start_us : l->lo;
	l->hi = s->start_us + s->dur_us > l->hi ? s->start_us + s->dur_us : l->hi;
	l->n_iters++;
	return 0;
}

static int phase_row(struct loader *l, const PGresult *res, int i)
{
	struct trace_slice *s;

	if (i == 0) {
		l->offsets = calloc((size_t)PQntuples(res) + 1, sizeof(int64_t));
		l->bases = calloc((size_t)PQntuples(res) + 1, sizeof(int64_t));
		if (!l->offsets || !l->bases)
			return -1;
	}
	if (!(s = add_slice(l->d)))
		return -1;
	s->type = TRACE_SLICE_PHASE;
	s->rank = (uint32_t)num(res, i, 0);
	s->iter = (uint32_t)num(res, i, 1);
	s->name = name_index(l, num(res, i, 2));
	s->kind = (uint8_t)num(res, i, 3);
	s->group = (uint8_t)num(res, i, 4);
	l->offsets[i] = num(res, i, 5);
	s->dur_us = num(res, i, 6);
	l->bases[i] = num(res, i, 7);
	return 0;
}

/* The phases, ordered by (rank, iter, start), each (rank, iter) group placed in time. */
static int load_phases(struct loader *l)
{
	struct trace_data *d = l->d;
	size_t group = 0;
	int rc;

	l->phase0 = d->n_slices;
	if ((rc = read_slices(l, phases_sql, phase_row)) != 0)
		return rc;
	for (size_t i = l->phase0; i <= d->n_slices; i++) {
		if (i == d->n_slices || d->slices[i].rank != d->slices[group + l->phase0].rank ||
		    d->slices[i].iter != d->slices[group + l->phase0].iter) {
			if (i > group + l->phase0)
				place_phases(d, group + l->phase0, i, l->offsets + group, l->bases + group);
			group = i - l->phase0;
		}
	}
	return 0;
}

static int kernel_row(struct loader *l, const PGresult *res, int i)
{
	struct trace_slice *s = add_slice(l->d);

	if (!s)
		return -1;
	s->type = TRACE_SLICE_KERNEL;
	s->rank = (uint32_t)num(res, i, 0);
	s->iter = (uint32_t)num(res, i, 1);
	s->name = name_index(l, num(res, i, 2));
	s->kind = (uint8_t)num(res, i, 3);
	s->start_us = num(res, i, 4);
	s->dur_us = num(res, i, 5);
	s->stream = (uint32_t)num(res, i, 6);
	s->start_known = 1;
	return 0;
}

/* An incident that began in the range, at the earliest start of its first iteration. */
static int incident_row(struct loader *l, const PGresult *res, int i)
{
	uint32_t first = (uint32_t)num(res, i, 3);
	int64_t at = INT64_MAX;

	for (size_t k = 0; k < l->n_iters; k++)
		if (l->d->slices[k].iter == first && l->d->slices[k].start_us < at)
			at = l->d->slices[k].start_us;
	if (at == INT64_MAX)
		return 0; /* none of these ranks reported that iteration */
	return add_instant(l->d, at, PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), NULL, num(res, i, 0));
}

static int load_incidents(struct loader *l)
{
	char lim[24];

	snprintf(lim, sizeof(lim), "%d", MAX_INSTANTS);
	return read_rows(l, incidents_sql, 4, (const char *const[]){l->job_id, l->from, l->to, lim}, SIZE_MAX,
			 incident_row);
}

static int event_row(struct loader *l, const PGresult *res, int i)
{
	return add_instant(l->d, num(res, i, 3), PQgetvalue(res, i, 1), PQgetvalue(res, i, 2), PQgetvalue(res, i, 4),
			   num(res, i, 0));
}

/* The out-of-band events on the ranks' hosts during the span of their iterations. */
static int load_events(struct loader *l)
{
	struct pgbuf hosts = {0};
	char los[24], his[24], lim[24];
	int rc;

	if (l->n_iters == 0)
		return 0;
	pgbuf_put(&hosts, "{", 1);
	for (size_t i = 0; i < l->d->n_ranks; i++) {
		if (i)
			pgbuf_put(&hosts, ",", 1);
		pgbuf_array_str(&hosts, l->d->ranks[i].host);
	}
	pgbuf_put(&hosts, "}", 2);
	if (hosts.failed) {
		pgbuf_free(&hosts);
		oom(l->r);
		return -1;
	}
	snprintf(los, sizeof(los), "%" PRId64, l->lo);
	snprintf(his, sizeof(his), "%" PRId64, l->hi);
	snprintf(lim, sizeof(lim), "%d", MAX_INSTANTS);
	rc = read_rows(l, events_sql, 5, (const char *const[]){hosts.p, los, his, lim, l->job_id}, SIZE_MAX, event_row);
	pgbuf_free(&hosts);
	return rc;
}

int storage_trace_load(struct pg_conn *conn, const struct trace_request *req, struct trace_data *d,
		       struct storage_query_result *r)
{
	struct loader l = {.c = conn, .req = req, .r = r, .d = d, .lo = INT64_MAX, .hi = INT64_MIN};
	int rc;

	memset(d, 0, sizeof(*d));
	snprintf(d->job, sizeof(d->job), "%s", req->job);
	d->from_iter = req->from_iter;
	d->to_iter = req->to_iter;
	rc = load_job(&l);
	if (rc == 0)
		rc = load_ranks(&l);
	if (rc == 0)
		rc = load_range(&l);
	if (rc == 0)
		rc = load_names(&l);
	if (rc == 0)
		rc = read_slices(&l, iters_sql, iter_row);
	if (rc == 0)
		rc = load_phases(&l);
	if (rc == 0)
		rc = read_slices(&l, kernels_sql, kernel_row); /* captured raw kernels */
	if (rc == 0)
		rc = load_incidents(&l);
	if (rc == 0)
		rc = load_events(&l);
	free(l.name_ids);
	free(l.offsets);
	free(l.bases);
	pgbuf_free(&l.ranks);
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
