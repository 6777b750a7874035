/* api_events.c: out-of-band events (port down, link flap, ECC error, thermal throttle...).
 *
 * POST /api/v1/events takes one event object or an array of them (event_body.c validates
 * all before any is used). They are stored in PostgreSQL (table events) through a query
 * worker; once stored, each is added to the window store of every job with a rank on its
 * host (or only to the job it names) and those jobs are marked due, so their next report
 * judges it (consistent / contradicted / unrelated). The answer (202) follows. Without a
 * database they are only added. GET /api/v1/events reads them back from PostgreSQL. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "clock.h"
#include "api.h"
#include "event_body.h"
#include "query.h"
#include "reply.h"
#include "jobs.h"
#include "log.h"
#include "server.h"
#include "strmap.h"
#include "text.h"

#define EVENTS_PER_JOB_MAX 256 /* kept in a job's window store; more are stored, not judged */
#define EVENTS_LIMIT_MAX 1000

struct apply {
	const struct event_in *evs;
	json_t **jobs; /* per event: names of the jobs it was added to */
	size_t n;
	struct server *s;
	struct strmap hosts; /* host -> 1 (the events' hosts) */
	uint64_t not_kept;
	bool no_memory; /* a job's hosts could not all be looked at */
};

/* adds to one job the events on its hosts */
static void apply_job(const char *name, void *value, void *arg)
{
	struct apply *a = arg;
	struct job *job = value;
	struct store *st = engine_store(job->engine);
	struct strmap on = {0}; /* hosts of this job among the events' */
	char host[256];
	int hit = 0;

	for (uint32_t rank = 0; rank < job->topo.world; rank++) {
		const char *h = store_host(st, rank, host, sizeof(host));

		if (strmap_get(&a->hosts, h) && !strmap_get(&on, h) && strmap_put(&on, h, (void *)1) < 0) {
			a->no_memory = true;
			break;
		}
	}
	for (size_t i = 0; i < a->n; i++) {
		const struct event_in *e = &a->evs[i];

		if ((e->job && strcmp(e->job, name) != 0) || !strmap_get(&on, e->host))
			continue;
		if (jobs_add_event(job, e->host, e->kind, e->ts_us, e->source, e->detail, EVENTS_PER_JOB_MAX) < 0) {
			a->not_kept++;
			continue;
		}
		json_array_append_new(a->jobs[i], json_string(name));
		hit = 1;
	}
	strmap_free(&on);
	if (hit) {
		job->due = 1;
		jobs_diagnose_due(a->s, job);
	}
}

/* Adds the events to the jobs in memory (marking them due); returns the answer's "events":
 * each event with the jobs it went to. NULL when out of memory. */
static json_t *apply_events(struct server *s, const struct event_body *b)
{
	struct apply a = {.s = s, .evs = b->ev, .n = b->n};
	json_t *answer = json_array();

	a.jobs = calloc(b->n, sizeof(*a.jobs));
	if (!answer || !a.jobs) {
		json_decref(answer);
		free(a.jobs);
		return NULL;
	}
	for (size_t i = 0; i < b->n; i++) {
		a.jobs[i] = json_array();
		if (strmap_put(&a.hosts, b->ev[i].host, (void *)1) < 0)
			a.no_memory = true;
	}
	if (!a.no_memory)
		strmap_each(&s->jobs, apply_job, &a);
	if (a.no_memory)
		log_error("api: out of memory; events not added to the windows of every job they concern");
	if (a.not_kept)
		log_warning("api: %" PRIu64 " event(s) not added to a job's window (more than %d there)", a.not_kept,
			    EVENTS_PER_JOB_MAX);
	for (size_t i = 0; i < b->n; i++) {
		const struct event_in *e = &b->ev[i];

		json_array_append_new(answer, json_pack("{s:s, s:s, s:I, s:o}", "host", e->host, "kind", e->kind,
							"ts_us", (json_int_t)e->ts_us, "jobs", a.jobs[i]));
	}
	free(a.jobs);
	strmap_free(&a.hosts);
	return answer;
}

static void reply_applied(struct server *s, struct evhttp_request *req, const struct event_body *b, json_t *ids)
{
	json_t *events = apply_events(s, b);

	if (!events) {
		json_decref(ids);
		reply_error(req, 500, "internal error", "out of memory");
		return;
	}
	reply_json(req, 202,
		   json_pack("{s:I, s:o, s:o}", "accepted", (json_int_t)b->n, "ids", ids ? ids : json_null(), "events",
			     events));
}

/* the events are stored: only now do they reach the jobs' windows */
static void stored(struct server *s, struct evhttp_request *req, const struct storage_query_result *res, void *ctx)
{
	json_t *ids;

	if (res->failed) {
		api_reply_db_error(req, res);
		return;
	}
	ids = res->text ? json_loads(res->text, 0, NULL) : NULL;
	reply_applied(s, req, ctx, ids ? ids : json_array());
}

static void body_free(void *ctx)
{
	event_body_free(ctx);
	free(ctx);
}

void api_events_post(struct api_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	struct event_body *b = calloc(1, sizeof(*b));
	json_t *rows;
	char *rows_text, err[512];
	int status;

	if (!b) {
		reply_error(r->req, 500, "internal error", "out of memory");
		return;
	}
	status = event_body_parse(len ? (const char *)evbuffer_pullup(in, -1) : "", len, clock_wall_us(), b, err,
				  sizeof(err));
	if (status) {
		reply_error(r->req, status,
			    status == 413   ? "too many events"
			    : status == 400 ? "bad event"
					    : "internal error",
			    "%s", err);
		free(b);
		return;
	}
	for (size_t i = 0; i < b->n; i++)
		if (b->ev[i].job && !strmap_get(&r->s->jobs, b->ev[i].job)) {
			reply_error(r->req, 404, "unknown job",
				    "event %zu: no job \"%.127s\" is known to this culpritd", i, b->ev[i].job);
			body_free(b);
			return;
		}
	if (!r->s->db_dsn) { /* no database: kept in memory only */
		reply_applied(r->s, r->req, b, NULL);
		body_free(b);
		return;
	}
	/* stored first, applied when stored: a 503 leaves nothing behind */
	rows = json_array();
	for (size_t i = 0; rows && i < b->n; i++) {
		const struct event_in *e = &b->ev[i];

		json_array_append_new(rows, json_pack("{s:s?, s:s, s:s, s:I, s:s, s:s}", "job", e->job, "host", e->host,
						      "kind", e->kind, "ts_us", (json_int_t)e->ts_us, "source",
						      e->source, "detail", e->detail));
	}
	rows_text = rows ? json_dumps(rows, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;
	json_decref(rows);
	if (!rows_text) {
		reply_error(r->req, 500, "internal error", "out of memory");
		body_free(b);
		return;
	}
	if (api_query_then(r, STORAGE_REST_EVENTS_INSERT, (const char *const[]){rows_text}, stored, b, body_free) < 0)
		body_free(b);
	free(rows_text);
}

void api_events_list(struct api_req *r)
{
	int64_t limit;
	char lim[32];
	const char *host = evhttp_find_header(&r->query, "host"), *kind = evhttp_find_header(&r->query, "kind"),
		   *since = evhttp_find_header(&r->query, "since");

	if (api_param_int(r, "limit", 1, EVENTS_LIMIT_MAX, 100, &limit) < 0)
		return;
	if ((host && text_check_str(host, 0, EVENT_HOST_MAX)) || (kind && text_check_str(kind, 0, EVENT_KIND_MAX)) ||
	    (since && text_check_str(since, 1, 64))) {
		reply_error(r->req, 400, "bad parameter",
			    "host (up to 255 bytes), kind (63) and since (1 to 64) are UTF-8 without control characters");
		return;
	}
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	api_query(r, 200, "no answer", STORAGE_REST_EVENTS_LIST, (const char *const[]){host, kind, since, lim});
}
