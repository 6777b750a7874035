/* api_trace.c: GET /api/v1/jobs/{job}/trace — the L5 timeline of chosen ranks and
 * iterations as a Perfetto trace or a Chrome JSON trace (docs/api.md, docs/deep-dive-perfetto.md).
 *
 * The loop validates the request and hands it to a query worker, which reads PostgreSQL
 * (storage/trace.c) and encodes the answer (trace_export.c) off the loop; the loop only
 * sends the bytes. */
#include "api_trace.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "jobs.h"
#include "query.h"
#include "reply.h"
#include "server.h"
#include "trace.h"
#include "trace_export.h"
#include "cmp.h"

struct trace_ctx {
	struct trace_request req;
	enum trace_format format;
	int status; /* set by the worker: 413 when over the slice bound */
	size_t slices;
};

static void ctx_free(void *p)
{
	struct trace_ctx *c = p;

	if (c)
		free(c->req.ranks);
	free(c);
}

int api_parse_ranks(const char *s, uint32_t world, size_t max, uint32_t **out, size_t *n_out, char *err,
		    size_t err_size)
{
	uint32_t *r = NULL;
	size_t n = 0;
	const char *p = s;

	*out = NULL;
	*n_out = 0;
	if (!s || !*s) {
		snprintf(err, err_size, "ranks is required: a list like 10352-10359,10336");
		return -1;
	}
	r = malloc(max * sizeof(*r));
	if (!r) {
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	while (*p) {
		char *end;
		unsigned long long a, b;

		if (*p < '0' || *p > '9')
			goto bad;
		errno = 0;
		a = strtoull(p, &end, 10);
		if (errno || a > UINT32_MAX)
			goto bad;
		b = a;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				goto bad;
			b = strtoull(p, &end, 10);
			if (errno || b > UINT32_MAX || b < a)
				goto bad;
			p = end;
		}
		if (*p == ',')
			p++;
		else if (*p)
			goto bad;
		if (b >= world) {
			snprintf(err, err_size, "rank %llu is not in the job (ranks 0-%" PRIu32 ")", b, world - 1);
			free(r);
			return -2;
		}
		if (b - a + 1 > max - n) {
			snprintf(err, err_size, "at most %zu ranks per request", max);
			free(r);
			return -1;
		}
		for (unsigned long long x = a; x <= b; x++)
			r[n++] = (uint32_t)x;
	}
	if (n == 0)
		goto bad;
	qsort(r, n, sizeof(*r), cmp_u32);
	{
		size_t k = 0;

		for (size_t i = 0; i < n; i++)
			if (k == 0 || r[k - 1] != r[i])
				r[k++] = r[i];
		n = k;
	}
	*out = r;
	*n_out = n;
	return 0;
bad:
	snprintf(err, err_size, "ranks must be a list of ranks and ranges like 10352-10359,10336, not \"%.64s\"", s);
	free(r);
	return -1;
}

/* on a query worker */
static void trace_run(struct pg_conn *conn, void *arg, struct storage_query_result *r)
{
	struct trace_ctx *c = arg;
	struct trace_data d;
	int rc = storage_trace_load(conn, &c->req, &d, r);

	if (rc == 2)
		c->status = 413;
	else if (rc == 0) {
		c->slices = d.n_slices;
		if (trace_export(&d, c->format, &r->text, &r->len) < 0) {
			r->failed = 1;
			snprintf(r->error, sizeof(r->error), "out of memory");
			snprintf(r->sqlstate, sizeof(r->sqlstate), "53200");
		}
	}
	storage_trace_free(&d);
}

/* on the loop */
static void trace_done(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *arg)
{
	struct trace_ctx *c = arg;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	char disp[160];

	(void)s;
	if (res->failed) {
		api_reply_db_error(req, res);
		return;
	}
	if (c->status == 413) {
		reply_error(req, 413, "too large",
			    "the trace would hold more than %zu slices (iterations, phases, kernels); ask for fewer "
			    "ranks or iterations",
			    c->req.max_slices);
		return;
	}
	if (!res->text) {
		reply_error(req, 404, "unknown job", "no job \"%.200s\" is stored", c->req.job);
		return;
	}
	evhttp_add_header(h, "Content-Type",
			  c->format == TRACE_FORMAT_CHROME ? "application/json" : "application/octet-stream");
	snprintf(disp, sizeof(disp), "attachment; filename=\"trace.%s\"",
		 c->format == TRACE_FORMAT_CHROME ? "json" : "pftrace");
	evhttp_add_header(h, "Content-Disposition", disp);
	evbuffer_add(evhttp_request_get_output_buffer(req), res->text, res->len);
	reply_send(req, 200);
}

void api_trace(struct api_req *r)
{
	struct job *job;
	struct trace_ctx *c;
	const char *fmt, *ranks;
	int64_t from, to, max_slices;
	int has_from, has_to;
	char err[256];
	int rc;

	job = strmap_get(&r->s->jobs, r->seg[1]); /* NULL: known only from PostgreSQL, or unknown */
	fmt = evhttp_find_header(&r->query, "format");
	if (fmt && strcmp(fmt, "perfetto") != 0 && strcmp(fmt, "chrome") != 0) {
		reply_error(r->req, 400, "bad parameter", "format is perfetto or chrome, not \"%.64s\"", fmt);
		return;
	}
	if ((has_from = api_param_int(r, "from_iter", 0, INT32_MAX, -1, &from)) < 0 ||
	    (has_to = api_param_int(r, "to_iter", 0, INT32_MAX, -1, &to)) < 0)
		return;
	if (api_param_int(r, "max_slices", 1, TRACE_MAX_SLICES, TRACE_MAX_SLICES, &max_slices) < 0)
		return;
	if (has_from && has_to && to < from) {
		reply_error(r->req, 400, "bad range", "to_iter (%" PRId64 ") is before from_iter (%" PRId64 ")", to,
			    from);
		return;
	}
	if (has_from && has_to && to - from + 1 > TRACE_MAX_ITERATIONS) {
		reply_error(r->req, 400, "bad range", "at most %d iterations per trace", TRACE_MAX_ITERATIONS);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		reply_error(r->req, 503, "unavailable", "out of memory");
		return;
	}
	ranks = evhttp_find_header(&r->query, "ranks");
	rc = api_parse_ranks(ranks, job ? job->topo.world : UINT32_MAX, TRACE_MAX_RANKS, &c->req.ranks, &c->req.n_ranks,
			     err, sizeof(err));
	if (rc < 0) {
		reply_error(r->req, rc == -2 ? 404 : 400, rc == -2 ? "unknown rank" : "bad parameter", "%s", err);
		ctx_free(c);
		return;
	}
	snprintf(c->req.job, sizeof(c->req.job), "%s", r->seg[1]);
	c->req.from_iter = has_from ? from : -1;
	c->req.to_iter = has_to ? to : -1;
	c->req.span = TRACE_DEFAULT_ITERATIONS;
	c->req.max_slices = (size_t)max_slices;
	c->format = fmt && strcmp(fmt, "chrome") == 0 ? TRACE_FORMAT_CHROME : TRACE_FORMAT_PERFETTO;
	if (api_query_fn(r, trace_run, trace_done, c, ctx_free) < 0)
		ctx_free(c);
}
