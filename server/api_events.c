/* api_events.c: out-of-band events (port down, link flap, ECC error, thermal throttle...).
 *
 * POST /api/v1/events takes one event object or an array of them. All are validated before
 * any is applied. Each event is added to the window store of every job with a rank on its
 * host (or only to the job it names), those jobs are marked due, so their next report
 * judges it (consistent / contradicted / unrelated), and the events are stored in
 * PostgreSQL (table events) through a query worker; the answer (202) comes once stored.
 * GET /api/v1/events reads them back from PostgreSQL. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "api.h"
#include "jobs.h"
#include "log.h"
#include "server.h"
#include "strmap.h"

#define EVENTS_PER_POST_MAX 1000
#define EVENTS_PER_JOB_MAX 256 /* kept in a job's window store; more are stored, not judged */
#define EVENTS_LIMIT_MAX 1000

struct ev {
	const char *job, *host, *kind, *source, *detail;
	json_int_t ts_us;
	json_t *jobs; /* names of the jobs it was added to */
};

static int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* optional string field: 1 present, 0 absent, -1 wrong (answered) */
static int str_field(struct api_req *r, json_t *o, size_t i, const char *name, size_t max, int required,
		     const char **out)
{
	json_t *v = json_object_get(o, name);

	*out = NULL;
	if (!v || json_is_null(v)) {
		if (!required)
			return 0;
		api_reply_error(r->req, 400, "bad event", "event %zu: \"%s\" is required", i, name);
		return -1;
	}
	if (!json_is_string(v) || json_string_length(v) > max || (required && json_string_length(v) == 0) ||
	    strlen(json_string_value(v)) != json_string_length(v)) {
		api_reply_error(r->req, 400, "bad event", "event %zu: \"%s\" must be a string of %s1-%zu bytes", i,
				name, required ? "" : "0 or ", max);
		return -1;
	}
	*out = json_string_value(v);
	return 1;
}

static int parse_event(struct api_req *r, json_t *o, size_t i, struct ev *e)
{
	json_t *ts;

	if (!json_is_object(o)) {
		api_reply_error(r->req, 400, "bad event", "event %zu is not a JSON object", i);
		return -1;
	}
	if (str_field(r, o, i, "host", 255, 1, &e->host) < 0 || str_field(r, o, i, "kind", 63, 1, &e->kind) < 0 ||
	    str_field(r, o, i, "source", 255, 0, &e->source) < 0 ||
	    str_field(r, o, i, "detail", 1024, 0, &e->detail) < 0 || str_field(r, o, i, "job", 127, 0, &e->job) < 0)
		return -1;
	ts = json_object_get(o, "ts_us");
	if (ts && !json_is_null(ts)) {
		/* 1970 .. 9999: what PostgreSQL's timestamptz holds */
		if (!json_is_integer(ts) || json_integer_value(ts) <= 0 || json_integer_value(ts) > 253402300799000000LL) {
			api_reply_error(r->req, 400, "bad event", "event %zu: \"ts_us\" must be a positive integer (epoch microseconds)",
					i);
			return -1;
		}
		e->ts_us = json_integer_value(ts);
	} else {
		e->ts_us = wall_us();
	}
	if (!e->source)
		e->source = "api";
	if (!e->detail)
		e->detail = "";
	return 0;
}

struct apply {
	struct ev *evs;
	size_t n;
	struct server *s;
	struct strmap hosts; /* host -> 1 (the events' hosts) */
	uint64_t not_kept;
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

		if (strmap_get(&a->hosts, h) && !strmap_get(&on, h))
			strmap_put(&on, h, (void *)1);
	}
	for (size_t i = 0; i < a->n; i++) {
		struct ev *e = &a->evs[i];

		if ((e->job && strcmp(e->job, name) != 0) || !strmap_get(&on, e->host))
			continue;
		if (store_event_count(st) >= EVENTS_PER_JOB_MAX || store_add_event(st, e->host, e->kind, e->ts_us,
										    e->source, e->detail) < 0) {
			a->not_kept++;
			continue;
		}
		json_array_append_new(e->jobs, json_string(name));
		hit = 1;
	}
	strmap_free(&on);
	if (hit) {
		job->due = 1;
		jobs_diagnose_due(a->s, job);
	}
}

static const char insert_sql[] =
	"WITH ins AS (INSERT INTO events (job_id, host, kind, ts, source, detail)"
	" SELECT (SELECT id FROM jobs WHERE name = e.job), e.host, e.kind,"
	"  'epoch'::timestamptz + e.ts_us * interval '1 microsecond', e.source, e.detail"
	" FROM json_to_recordset($1::json) AS e(job text, host text, kind text, ts_us bigint, source text, detail text)"
	" RETURNING id) "
	"SELECT json_build_object('accepted', (SELECT count(*) FROM ins), 'ids', (SELECT json_agg(id ORDER BY id) FROM ins),"
	" 'events', $2::json)::text";

static void post_events(struct api_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in), n;
	json_error_t jerr;
	json_t *body, *rows = NULL, *answer = NULL;
	struct apply a = {.s = r->s};
	char *rows_text = NULL, *answer_text = NULL;

	if (len == 0) {
		api_reply_error(r->req, 400, "malformed JSON", "the body is empty: one event object or an array of them");
		return;
	}
	body = json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &jerr);
	if (!body) {
		api_reply_error(r->req, 400, "malformed JSON", "line %d, column %d: %s", jerr.line, jerr.column, jerr.text);
		return;
	}
	n = json_is_array(body) ? json_array_size(body) : 1;
	if (n == 0 || n > EVENTS_PER_POST_MAX) {
		api_reply_error(r->req, n ? 413 : 400, n ? "too many events" : "bad event",
				"between 1 and %d events per request, not %zu", EVENTS_PER_POST_MAX, n);
		json_decref(body);
		return;
	}
	a.evs = calloc(n, sizeof(*a.evs));
	if (!a.evs) {
		api_reply_error(r->req, 500, "internal error", "out of memory");
		json_decref(body);
		return;
	}
	a.n = n;
	for (size_t i = 0; i < n; i++) {
		if (parse_event(r, json_is_array(body) ? json_array_get(body, i) : body, i, &a.evs[i]) < 0)
			goto out;
		if (a.evs[i].job && !strmap_get(&r->s->jobs, a.evs[i].job)) {
			api_reply_error(r->req, 404, "unknown job", "event %zu: no job \"%.127s\" is known to this culpritd",
					i, a.evs[i].job);
			goto out;
		}
	}
	/* valid: apply to the jobs in memory */
	rows = json_array();
	answer = json_array();
	for (size_t i = 0; i < n; i++) {
		a.evs[i].jobs = json_array();
		strmap_put(&a.hosts, a.evs[i].host, (void *)1);
	}
	strmap_each(&r->s->jobs, apply_job, &a);
	if (a.not_kept)
		log_warning("api: %" PRIu64 " event(s) not added to a job's window (more than %d there)", a.not_kept,
			    EVENTS_PER_JOB_MAX);
	for (size_t i = 0; i < n; i++) {
		struct ev *e = &a.evs[i];

		json_array_append_new(rows, json_pack("{s:s?, s:s, s:s, s:I, s:s, s:s}", "job", e->job, "host", e->host,
						      "kind", e->kind, "ts_us", e->ts_us, "source", e->source, "detail",
						      e->detail));
		json_array_append_new(answer, json_pack("{s:s, s:s, s:I, s:O}", "host", e->host, "kind", e->kind,
							"ts_us", e->ts_us, "jobs", e->jobs));
	}
	rows_text = json_dumps(rows, JSON_COMPACT);
	answer_text = json_dumps(answer, JSON_COMPACT);
	if (!rows_text || !answer_text)
		api_reply_error(r->req, 500, "internal error", "out of memory");
	else if (!r->s->db_dsn) /* no database: kept in memory only */
		api_reply_json(r->req, 202, json_pack("{s:I, s:n, s:O}", "accepted", (json_int_t)n, "ids", "events",
						      answer));
	else
		api_query(r, 202, "nothing stored", insert_sql, 2, (const char *const[]){rows_text, answer_text});
out:
	for (size_t i = 0; i < n; i++)
		json_decref(a.evs[i].jobs);
	strmap_free(&a.hosts);
	free(a.evs);
	free(rows_text);
	free(answer_text);
	json_decref(rows);
	json_decref(answer);
	json_decref(body);
}

static const char list_sql[] =
	"SELECT json_build_object('events', coalesce(json_agg(json_build_object('id', e.id, 'host', e.host, 'kind', e.kind,"
	" 'ts_us', (extract(epoch FROM e.ts) * 1000000)::bigint, 'source', e.source, 'detail', e.detail,"
	" 'job', j.name, 'received', e.received) ORDER BY e.ts DESC, e.id DESC), '[]'::json))::text "
	"FROM (SELECT * FROM events WHERE ($1::text IS NULL OR host = $1) AND ($2::text IS NULL OR kind = $2)"
	" AND ($3::text IS NULL OR ts >= CASE WHEN $3 ~ '^[0-9]{1,17}$'"
	"  THEN 'epoch'::timestamptz + $3::bigint * interval '1 microsecond' ELSE $3::timestamptz END)"
	" ORDER BY ts DESC, id DESC LIMIT $4::int) e LEFT JOIN jobs j ON j.id = e.job_id";

static void get_events(struct api_req *r)
{
	int64_t limit;
	char lim[32];
	const char *host = evhttp_find_header(&r->query, "host"), *kind = evhttp_find_header(&r->query, "kind"),
		   *since = evhttp_find_header(&r->query, "since");

	if (api_param_int(r, "limit", 1, EVENTS_LIMIT_MAX, 100, &limit) < 0)
		return;
	if ((host && strlen(host) > 255) || (kind && strlen(kind) > 63) || (since && (!since[0] || strlen(since) > 64))) {
		api_reply_error(r->req, 400, "bad parameter", "host (up to 255 bytes), kind (63), since (64) are too long or empty");
		return;
	}
	snprintf(lim, sizeof(lim), "%" PRId64, limit);
	api_query(r, 200, "no answer", list_sql, 4, (const char *const[]){host, kind, since, lim});
}

void api_events_route(struct api_req *r)
{
	if (r->nseg != 1) {
		api_reply_error(r->req, 404, "not found", "no such resource");
		return;
	}
	if (!api_method(r, EVHTTP_REQ_GET | EVHTTP_REQ_POST))
		return;
	if (r->method == EVHTTP_REQ_POST)
		post_events(r);
	else
		get_events(r);
}
