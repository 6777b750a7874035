/* api_jobs.c: /api/v1/jobs... and /api/v1/reports/{id}. What culpritd holds in memory (the
 * jobs, their latest report, the open incident) is answered at once; history (reports,
 * incidents, iterations, phases) comes from PostgreSQL through api_query(). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cluster.h"
#include "query.h"
#include "reply.h"
#include "jobs.h"
#include "server.h"

#define REPORTS_LIMIT_MAX 100
#define INCIDENTS_LIMIT_MAX 1000
#define ITERATIONS_SPAN_MAX 10000 /* iterations of one rank per answer */
#define PHASES_SPAN_MAX 64        /* iterations per heat-map answer */
#define PHASES_CELLS_MAX 1000000  /* (rank, iteration) cells per heat-map answer */

static json_t *incident_json(const struct incident *inc)
{
	if (!inc->open && !inc->key[0])
		return json_null();
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I}", "key", inc->key, "state",
			 inc->open ? "open" : "resolved", "category", inc->category, "summary", inc->summary,
			 "first_iter", (json_int_t)inc->first_iter, "updates", (json_int_t)inc->updates, "opened_us",
			 (json_int_t)inc->opened_us, "changed_us", (json_int_t)inc->changed_us);
}

static json_t *job_json(const struct job *job, int detail)
{
	const struct l1 *l = engine_l1(job->engine);
	char url[512];
	json_t *o;

	snprintf(url, sizeof(url), "/api/v1/jobs/%s/reports/latest", job->name);
	o = json_pack("{s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s}, s:I, s:I, s:o, s:o, s:s?}", "job", job->name,
		      "topology", "world", (json_int_t)job->topo.world, "tp", (json_int_t)job->wire_topo.tp, "cp",
		      (json_int_t)job->wire_topo.cp, "pp", (json_int_t)job->wire_topo.pp, "dp",
		      (json_int_t)job->wire_topo.dp, "ep", (json_int_t)job->wire_topo.ep, "gpus_per_node",
		      (json_int_t)job->wire_topo.gpus_per_node, "order", job->wire_topo.order, "records",
		      (json_int_t)job->records, "diagnoses", (json_int_t)job->diagnoses, "window",
		      json_pack("{s:b, s:i, s:i, s:i, s:f}", "open", l->open, "windows", (json_int_t)l->windows,
				"first_iter", (json_int_t)l->first_iter, "last_iter", (json_int_t)l->last_iter,
				"baseline_iter_ms", l->windows ? l->baseline_ms : 0.0),
		      "incident", incident_json(&job->incident), "latest_report", job->latest_report ? url : NULL);
	if (o && detail) {
		const struct store *st = engine_store(((struct job *)job)->engine);

		json_object_set_new(o, "dropped", json_integer((json_int_t)job->dropped));
		json_object_set_new(o, "diagnosing", json_boolean(job->diagnosing));
		json_object_set_new(o, "due", json_boolean(job->due));
		json_object_set_new(o, "max_iter", json_integer(store_any(st) ? (json_int_t)store_max_iter(st) : -1));
		json_object_set_new(o, "events", json_integer((json_int_t)store_event_count(st)));
	}
	return o;
}

static void add_job(const char *key, void *value, void *arg)
{
	(void)key;
	json_array_append_new(arg, job_json(value, 0));
}

struct elsewhere {
	char job[128];
	char *uri; /* the request's path and query */
};

static void elsewhere_free(void *ctx)
{
	struct elsewhere *e = ctx;

	free(e->uri);
	free(e);
}

static void unknown_job(struct evhttp_request *req, const char *job)
{
	reply_error(req, 404, "unknown job", "no job \"%.200s\" is known to this culpritd", job);
}

static void owner_found(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *ctx)
{
	struct elsewhere *e = ctx;
	json_t *o = res->text ? json_loads(res->text, 0, NULL) : NULL;
	const char *base = json_string_value(json_object_get(o, "api_url"));
	char *loc;

	(void)s;
	if (res->failed)
		api_reply_db_error(req, res);
	else if (!base || asprintf(&loc, "%.*s%s", (int)strcspn(base, "\r\n"), base, e->uri) < 0)
		unknown_job(req, e->job);
	else {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Location", loc);
		reply_error(req, 307, "elsewhere", "job \"%.200s\" is owned by the culpritd at %s", e->job, loc);
		free(loc);
	}
	json_decref(o);
}

void api_job_unknown(struct api_req *r)
{
	struct elsewhere *e;
	const char *params[2];

	if (!r->s->cluster) {
		unknown_job(r->req, r->seg[1]);
		return;
	}
	/* many instances: the job's owner answers (307 to its advertise_api_url) */
	e = calloc(1, sizeof(*e));
	if (!e || !(e->uri = strdup(evhttp_request_get_uri(r->req)))) {
		free(e);
		reply_error(r->req, 500, "internal error", "out of memory");
		return;
	}
	snprintf(e->job, sizeof(e->job), "%s", r->seg[1]);
	params[0] = r->seg[1];
	params[1] = cluster_owner(r->s);
	if (api_query_then(r, STORAGE_REST_JOB_OWNER, params, owner_found, e, elsewhere_free) < 0)
		elsewhere_free(e);
}

static struct job *find_job(struct api_req *r)
{
	struct job *job = strmap_get(&r->s->jobs, r->seg[1]);

	if (!job)
		api_job_unknown(r);
	return job;
}

/* Many instances: the jobs this one holds, and those the others own (their leases). */
static void jobs_elsewhere(struct server *s, struct evhttp_request *req, const struct storage_query_result *res,
			   void *ctx)
{
	json_t *others = res->text ? json_loads(res->text, 0, NULL) : NULL;

	(void)s;
	if (res->failed || !json_is_array(others)) {
		json_decref(others);
		api_reply_db_error(req, res);
		return;
	}
	reply_json(req, 200, json_pack("{s:O,s:o}", "jobs", (json_t *)ctx, "elsewhere", others));
}

static void jobs_free(void *ctx) { json_decref(ctx); }

void api_jobs_list(struct api_req *r)
{
	json_t *arr = json_array();
	const char *params[1];

	strmap_each(&r->s->jobs, add_job, arr);
	if (!r->s->cluster) {
		reply_json(r->req, 200, json_pack("{s:o}", "jobs", arr));
		return;
	}
	params[0] = cluster_owner(r->s);
	if (api_query_then(r, STORAGE_REST_JOBS_ELSEWHERE, params, jobs_elsewhere, arr, jobs_free) < 0)
		json_decref(arr);
}

void api_jobs_get(struct api_req *r)
{
	struct job *job = find_job(r);

	if (job)
		reply_json(r->req, 200, job_json(job, 1));
}

/* From memory; for a job culpritd does not hold now (forgotten, or from before a restart)
 * or has not diagnosed since it started, the newest stored report. */
void api_jobs_latest(struct api_req *r)
{
	struct job *job = strmap_get(&r->s->jobs, r->seg[1]);
	char nf[300];

	if (job && job->latest_report) {
		api_reply_shared(r->s, r->req, job->name, job->diagnoses, job->latest_report);
		return;
	}
	if (!r->s->writer) {
		if (job)
			reply_error(r->req, 404, "no report", "job \"%.200s\" has not been diagnosed yet", job->name);
		else
			find_job(r); /* 404 */
		return;
	}
	snprintf(nf, sizeof(nf), "job \"%.200s\" has no stored report", r->seg[1]);
	api_query(r, 200, nf, STORAGE_REST_REPORT_LATEST, (const char *const[]){r->seg[1]});
}

void api_jobs_diagnose(struct api_req *r)
{
	struct job *job = find_job(r);
	char url[512];

	if (!job)
		return;
	job->due = 1;
	jobs_diagnose_due(r->s, job);
	snprintf(url, sizeof(url), "/api/v1/jobs/%s/reports/latest", job->name);
	reply_json(r->req, 202,
		   json_pack("{s:s, s:s, s:I, s:s}", "job", job->name, "status", job->diagnosing ? "running" : "queued",
			     "diagnoses", (json_int_t)job->diagnoses, "latest", url));
}

void api_jobs_reports(struct api_req *r)
{
	int64_t limit, before;
	int has_before;
	char lim[32], bef[32], nf[300];

	if (api_param_int(r, "limit", 1, REPORTS_LIMIT_MAX, 20, &limit) < 0 ||
	    (has_before = api_param_int(r, "before", 1, INT64_MAX, 0, &before)) < 0)
		return;
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	snprintf(bef, sizeof(bef), "%" PRId64, before);
	snprintf(nf, sizeof(nf), "no job \"%.200s\" is stored", r->seg[1]);
	api_query(r, 200, nf, STORAGE_REST_REPORTS, (const char *const[]){r->seg[1], has_before ? bef : NULL, lim});
}

void api_jobs_incidents(struct api_req *r)
{
	struct job *job;
	int64_t limit;
	char lim[32], nf[300], *cur;
	json_t *inc;

	if (api_param_int(r, "limit", 1, INCIDENTS_LIMIT_MAX, 100, &limit) < 0)
		return;
	/* a job known only from PostgreSQL (culpritd restarted) has no current incident */
	job = strmap_get(&r->s->jobs, r->seg[1]);
	inc = job ? incident_json(&job->incident) : json_null();
	cur = json_dumps(inc, JSON_COMPACT | JSON_REAL_PRECISION(10) | JSON_ENCODE_ANY);
	json_decref(inc);
	if (!cur) {
		reply_error(r->req, 500, "internal error", "out of memory");
		return;
	}
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	snprintf(nf, sizeof(nf), "no job \"%.200s\" is stored", r->seg[1]);
	api_query(r, 200, nf, STORAGE_REST_INCIDENTS, (const char *const[]){r->seg[1], cur, lim});
	free(cur);
}

/* from_iter and to_iter: a range of at most span iterations (to_iter defaults to the end of it) */
static int iter_range(struct api_req *r, int64_t span, int64_t *from, int64_t *to)
{
	int has_to;

	if (api_param_int(r, "from_iter", 0, INT32_MAX, 0, from) < 0 ||
	    (has_to = api_param_int(r, "to_iter", 0, INT32_MAX, 0, to)) < 0)
		return -1;
	if (!has_to)
		*to = *from + span - 1 > INT32_MAX ? INT32_MAX : *from + span - 1;
	if (*to < *from) {
		reply_error(r->req, 400, "bad range", "to_iter (%" PRId64 ") is before from_iter (%" PRId64 ")", *to,
			    *from);
		return -1;
	}
	if (*to - *from + 1 > span) {
		reply_error(r->req, 400, "bad range", "at most %" PRId64 " iterations per request", span);
		return -1;
	}
	return 0;
}

void api_jobs_iterations(struct api_req *r)
{
	struct job *job;
	int64_t from, to;
	long long rank;
	char *end, rk[32], f[32], t[32], nf[300];

	job = strmap_get(&r->s->jobs, r->seg[1]); /* NULL: known only from PostgreSQL, or unknown */
	rank = strtoll(r->seg[3], &end, 10);
	if (!r->seg[3][0] || *end || rank < 0) {
		reply_error(r->req, 400, "bad rank", "rank must be a non-negative integer, not \"%.64s\"", r->seg[3]);
		return;
	}
	if (rank > INT32_MAX || (job && rank >= job->topo.world)) {
		reply_error(r->req, 404, "unknown rank", "job \"%.200s\" has ranks 0-%u", r->seg[1],
			    job ? job->topo.world - 1 : INT32_MAX);
		return;
	}
	if (iter_range(r, ITERATIONS_SPAN_MAX, &from, &to) < 0)
		return;
	snprintf(rk, sizeof(rk), "%lld", rank);
	snprintf(f, sizeof(f), "%" PRId64, from);
	snprintf(t, sizeof(t), "%" PRId64, to);
	snprintf(nf, sizeof(nf), "no job \"%.200s\" is stored", r->seg[1]);
	api_query(r, 200, nf, STORAGE_REST_ITERATIONS, (const char *const[]){r->seg[1], rk, f, t});
}

void api_jobs_phases(struct api_req *r)
{
	struct job *job;
	const char *name;
	int64_t from, to, rfrom, rto;
	char f[32], t[32], rf[32], rt[32], lim[32], nf[300];

	job = strmap_get(&r->s->jobs, r->seg[1]); /* NULL: known only from PostgreSQL, or unknown */
	name = evhttp_find_header(&r->query, "name");
	if (!name || !name[0] || strlen(name) > 255) {
		reply_error(r->req, 400, "bad parameter", "name (the phase name, 1-255 bytes) is required");
		return;
	}
	if (iter_range(r, PHASES_SPAN_MAX, &from, &to) < 0 ||
	    api_param_int(r, "from_rank", 0, INT32_MAX, 0, &rfrom) < 0 ||
	    api_param_int(r, "to_rank", 0, INT32_MAX, job ? (int64_t)job->topo.world - 1 : INT32_MAX, &rto) < 0)
		return;
	if (rto < rfrom) {
		reply_error(r->req, 400, "bad range", "to_rank (%" PRId64 ") is before from_rank (%" PRId64 ")", rto,
			    rfrom);
		return;
	}
	snprintf(f, sizeof(f), "%" PRId64, from);
	snprintf(t, sizeof(t), "%" PRId64, to);
	snprintf(rf, sizeof(rf), "%" PRId64, rfrom);
	snprintf(rt, sizeof(rt), "%" PRId64, rto);
	snprintf(lim, sizeof(lim), "%d", PHASES_CELLS_MAX);
	snprintf(nf, sizeof(nf), "no job \"%.200s\" is stored", r->seg[1]);
	api_query(r, 200, nf, STORAGE_REST_PHASES, (const char *const[]){r->seg[1], name, f, t, rf, rt, lim});
}

void api_reports_get(struct api_req *r)
{
	long long id;
	char *end, buf[32];

	id = strtoll(r->seg[1], &end, 10);
	if (!r->seg[1][0] || *end || id <= 0) {
		reply_error(r->req, 400, "bad report id", "a report id is a positive integer, not \"%.64s\"",
			    r->seg[1]);
		return;
	}
	snprintf(buf, sizeof(buf), "%lld", id);
	api_query(r, 200, "no report with this id", STORAGE_REST_REPORT, (const char *const[]){buf});
}
