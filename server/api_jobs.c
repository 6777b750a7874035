/* api_jobs.c: /api/v1/jobs... and /api/v1/reports/{id}. What culpritd holds in memory (the
 * jobs, their latest report, the open incident) is answered at once; history (reports,
 * incidents, iterations, phases) comes from PostgreSQL through api_query(). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "cluster.h"
#include "query.h"
#include "reply.h"
#include "jobs.h"
#include "server.h"

#define JOBS_LIMIT_MAX 500
#define REPORTS_LIMIT_MAX 100
#define INCIDENTS_LIMIT_MAX 1000
#define ITERATIONS_SPAN_MAX 10000 /* iterations of one rank per answer */
#define PHASES_SPAN_MAX 64        /* iterations per heat-map answer */
#define PHASES_CELLS_MAX 1000000  /* (rank, iteration) cells per heat-map answer */

static json_t *incident_json(const struct incident *inc)
{
	if (!inc->open && !inc->key[0])
		return json_null();
	return json_pack("{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:I, s:s?}", "key", inc->key, "state",
			 inc->open ? "open" : "resolved", "category", inc->category, "summary", inc->summary,
			 "first_iter", (json_int_t)inc->first_iter, "updates", (json_int_t)inc->updates, "opened_us",
			 (json_int_t)inc->opened_us, "changed_us", (json_int_t)inc->changed_us, "resolution",
			 inc->open || !inc->resolution[0] ? NULL : inc->resolution);
}

/* The job's last iteration time as L1 saw it (NaN: none yet). */
static double last_step_ms(const struct l1 *l)
{
	return l->nall ? l->all_ms[(l->apos + L1_HISTORY_MAX - 1) % L1_HISTORY_MAX] : NAN;
}

static json_t *number_or_null(double v) { return isnan(v) ? json_null() : json_real(v); }

/* What memory says of a job held here, over what its stored summary says. */
static void live_fields(const struct job *job, json_t *o)
{
	const struct l1 *l = engine_l1(job->engine);
	double base = l->open || l->windows ? l->baseline_ms : l1_baseline(l);

	json_object_set_new(o, "state", json_string(job->ended_us ? "ended" : "live"));
	json_object_set_new(o, "agents", json_integer((json_int_t)job->live_agents));
	json_object_set_new(o, "step_ms", number_or_null(last_step_ms(l)));
	json_object_set_new(o, "baseline_ms", number_or_null(base));
	json_object_set_new(o, "records", json_integer((json_int_t)job->records));
	json_object_set_new(o, "diagnoses", json_integer((json_int_t)job->diagnoses));
	json_object_set_new(o, "window",
			    json_pack("{s:b, s:i, s:i, s:i, s:f}", "open", l->open, "windows", (json_int_t)l->windows,
				      "first_iter", (json_int_t)l->first_iter, "last_iter", (json_int_t)l->last_iter,
				      "baseline_iter_ms", l->windows ? l->baseline_ms : 0.0));
	if (job->incident.open || job->incident.key[0])
		json_object_set_new(o, "incident", incident_json(&job->incident));
}

static json_t *job_json(const struct job *job, int detail)
{
	char url[512];
	json_t *o;

	snprintf(url, sizeof(url), "/api/v1/jobs/%s/reports/latest", job->name);
	o = json_pack("{s:s, s:{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s}, s:o, s:s?}", "job", job->name, "topology",
		      "world", (json_int_t)job->topo.world, "tp", (json_int_t)job->wire_topo.tp, "cp",
		      (json_int_t)job->wire_topo.cp, "pp", (json_int_t)job->wire_topo.pp, "dp",
		      (json_int_t)job->wire_topo.dp, "ep", (json_int_t)job->wire_topo.ep, "gpus_per_node",
		      (json_int_t)job->wire_topo.gpus_per_node, "order", job->wire_topo.order, "incident", json_null(),
		      "latest_report", job->latest_report ? url : NULL);
	if (!o)
		return NULL;
	live_fields(job, o);
	if (detail) {
		const struct store *st = engine_store(((struct job *)job)->engine);

		json_object_set_new(o, "dropped", json_integer((json_int_t)job->dropped));
		json_object_set_new(o, "diagnosing", json_boolean(job->diagnosing));
		json_object_set_new(o, "due", json_boolean(job->due));
		json_object_set_new(o, "max_iter", json_integer(store_any(st) ? (json_int_t)store_max_iter(st) : -1));
		json_object_set_new(o, "events", json_integer((json_int_t)store_event_count(st)));
	}
	return o;
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

/* 307 to base + the request's path (another instance owns the job). */
static void redirect(struct evhttp_request *req, const struct elsewhere *e, const char *base)
{
	char *loc;

	if (asprintf(&loc, "%.*s%s", (int)strcspn(base, "\r\n"), base, e->uri) < 0) {
		reply_error(req, 500, "internal error", "out of memory");
		return;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location", loc);
	reply_error(req, 307, "elsewhere", "job \"%.200s\" is owned by the culpritd at %s", e->job, loc);
	free(loc);
}

static void owner_found(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *ctx)
{
	struct elsewhere *e = ctx;
	json_t *o = res->text ? json_loads(res->text, 0, NULL) : NULL;
	const char *base = json_string_value(json_object_get(o, "api_url"));

	(void)s;
	if (res->failed)
		api_reply_db_error(req, res);
	else if (!base)
		unknown_job(req, e->job);
	else
		redirect(req, e, base);
	json_decref(o);
}

static struct elsewhere *elsewhere_new(struct api_req *r)
{
	struct elsewhere *e = calloc(1, sizeof(*e));

	if (!e || !(e->uri = strdup(evhttp_request_get_uri(r->req)))) {
		free(e);
		reply_error(r->req, 500, "internal error", "out of memory");
		return NULL;
	}
	snprintf(e->job, sizeof(e->job), "%s", r->seg[1]);
	return e;
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
	if (!(e = elsewhere_new(r)))
		return;
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

/* Jobs of a page of STORAGE_REST_JOBS_PAGE that this culpritd holds: memory's word on them. */
static void jobs_page(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *ctx)
{
	json_t *page = res->text ? json_loads(res->text, 0, NULL) : NULL, *jobs = json_object_get(page, "jobs"), *o;
	size_t i;

	(void)ctx;
	if (res->failed || !json_is_array(jobs)) {
		json_decref(page);
		api_reply_db_error(req, res);
		return;
	}
	json_array_foreach(jobs, i, o)
	{
		const char *name = json_string_value(json_object_get(o, "job"));
		struct job *job = name ? strmap_get(&s->jobs, name) : NULL;

		if (job)
			live_fields(job, o);
	}
	if (json_is_null(json_object_get(page, "elsewhere")))
		json_object_del(page, "elsewhere");
	reply_json(req, 200, page);
}

static void add_live_name(const char *key, void *value, void *arg)
{
	const struct job *job = value;

	if (!job->ended_us && !job->deposed)
		json_array_append_new(arg, json_string(key));
}

static void add_job(const char *key, void *value, void *arg)
{
	(void)key;
	json_array_append_new(arg, job_json(value, 0));
}

/* A page of the stored jobs, live first (docs/api.md); without a database, the jobs in memory. */
void api_jobs_list(struct api_req *r)
{
	const char *q = evhttp_find_header(&r->query, "q"), *state = evhttp_find_header(&r->query, "state");
	int64_t limit, offset;
	char lim[32], off[32], *live;
	json_t *names;

	if (api_param_int(r, "limit", 1, JOBS_LIMIT_MAX, 50, &limit) < 0 ||
	    api_param_int(r, "offset", 0, INT32_MAX, 0, &offset) < 0)
		return;
	if (state && strcmp(state, "live") != 0 && strcmp(state, "ended") != 0) {
		reply_error(r->req, 400, "bad parameter", "state must be live or ended, not \"%.32s\"", state);
		return;
	}
	if (q && strlen(q) > 255) {
		reply_error(r->req, 400, "bad parameter", "q (a part of the job's name) is at most 255 bytes");
		return;
	}
	if (!r->s->writer) {
		json_t *arr = json_array();

		strmap_each(&r->s->jobs, add_job, arr);
		reply_json(r->req, 200,
			   json_pack("{s:I, s:o}", "total", (json_int_t)json_array_size(arr), "jobs", arr));
		return;
	}
	names = json_array();
	strmap_each(&r->s->jobs, add_live_name, names);
	live = json_dumps(names, JSON_COMPACT);
	json_decref(names);
	if (!live) {
		reply_error(r->req, 500, "internal error", "out of memory");
		return;
	}
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	snprintf(off, sizeof(off), "%" PRId64, offset);
	/* -1: answered 503 already, and there is no ctx to free */
	IGNORE_RESULT(api_query_then(r, STORAGE_REST_JOBS_PAGE,
		       (const char *const[]){live, q && q[0] ? q : NULL, state, lim, off,
					     r->s->cluster ? cluster_owner(r->s) : NULL},
		       jobs_page, NULL, NULL));
	free(live);
}

/* The job's dashboard in Grafana (grafana_url), or nothing. */
static void grafana_link(const struct server *s, json_t *o, const char *job)
{
	const char *base = s->cfg.grafana_url;
	size_t n = strlen(base);
	char *name, url[1024];

	if (!n || !json_is_object(o) || !(name = evhttp_encode_uri(job)))
		return;
	snprintf(url, sizeof(url), "%.*s/d/culprit-job/culprit-job?var-job=%s", (int)(base[n - 1] == '/' ? n - 1 : n),
		 base, name);
	free(name);
	json_object_set_new(o, "grafana_url", json_string(url));
}

/* A job not in memory: another instance's (307), or one stored (culpritd restarted, or forgot it). */
static void job_stored(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *ctx)
{
	struct elsewhere *e = ctx;
	json_t *o = res->text ? json_loads(res->text, 0, NULL) : NULL, *job = json_object_get(o, "job");
	const char *base = json_string_value(json_object_get(o, "owner_api_url"));

	/* a name no stored job can have (not UTF-8) is unknown too */
	int known = !res->failed && json_is_object(job);

	if (res->failed && strncmp(res->sqlstate, "22", 2) != 0)
		api_reply_db_error(req, res);
	else if (base)
		redirect(req, e, base);
	else if (!known)
		unknown_job(req, e->job);
	else {
		grafana_link(s, job, e->job);
		reply_json(req, 200, json_incref(job));
	}
	json_decref(o);
}

void api_jobs_get(struct api_req *r)
{
	struct job *job = strmap_get(&r->s->jobs, r->seg[1]);
	struct elsewhere *e;

	if (job) {
		json_t *o = job_json(job, 1);

		grafana_link(r->s, o, job->name);
		reply_json(r->req, 200, o);
		return;
	}
	if (!r->s->writer) {
		unknown_job(r->req, r->seg[1]);
		return;
	}
	if (!(e = elsewhere_new(r)))
		return;
	if (api_query_then(r, STORAGE_REST_JOB_STORED,
			   (const char *const[]){r->seg[1], r->s->cluster ? cluster_owner(r->s) : NULL}, job_stored, e,
			   elsewhere_free) < 0)
		elsewhere_free(e);
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
