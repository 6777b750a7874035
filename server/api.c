/* api.c: see api.h. */
#include "api.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>

#include "clock.h"
#include "log.h"
#include "query.h"
#include "reply.h"
#include "server.h"

/* a request waiting for PostgreSQL */
struct pending {
	uint64_t token;
	struct evhttp_request *req;
	int ok_status;
	char not_found[160];
	api_done_fn done; /* when set, answers instead of finish() */
	void *ctx;
	void (*ctx_free)(void *ctx);
	struct pending *next;
};

struct api {
	struct storage_query *q;
	struct event *wake;
	struct pending *pending;
	size_t n_pending;
	uint64_t next_token;
	uint64_t requests, busy, db_answers; /* for /metrics */
	uint64_t by_class[6];                /* answers by status class: [2] 2xx ... [5] 5xx */
	struct strmap latest;                /* job name -> struct shared_text of its latest report */
};

/* A text shared by the answers that reference it (evbuffer_add_reference: no copy per
 * request); freed when the last answer holding it is written and the cache dropped it. */
struct shared_text {
	int refs;
	uint64_t version;
	size_t len;
	char text[];
};

static void shared_unref(struct shared_text *t)
{
	if (t && --t->refs == 0)
		free(t);
}

static void shared_cleanup(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	shared_unref(arg);
}

void api_reply_shared(struct server *s, struct evhttp_request *req, const char *key, uint64_t version, const char *text)
{
	struct api *a = s->api;
	struct shared_text *t = strmap_get(&a->latest, key);

	if (!t || t->version != version) {
		size_t len = strlen(text);
		struct shared_text *n = malloc(sizeof(*n) + len + 2);

		if (!n || strmap_put(&a->latest, key, n) < 0) {
			free(n);
			reply_text(req, 200, text, strlen(text));
			return;
		}
		n->refs = 1; /* the cache's */
		n->version = version;
		n->len = len + 1;
		memcpy(n->text, text, len);
		n->text[len] = '\n';
		n->text[len + 1] = '\0';
		shared_unref(t);
		t = n;
	}
	t->refs++;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
	if (evbuffer_add_reference(evhttp_request_get_output_buffer(req), t->text, t->len, shared_cleanup, t) < 0) {
		t->refs--;
		reply_text(req, 200, text, strlen(text));
		return;
	}
	reply_send(req, 200);
}

static void drop_shared(const char *key, void *value, void *arg)
{
	(void)key;
	(void)arg;
	shared_unref(value);
}

int api_param_int(struct api_req *r, const char *name, int64_t lo, int64_t hi, int64_t def, int64_t *out)
{
	const char *v = evhttp_find_header(&r->query, name);
	char *end;
	long long x;

	*out = def;
	if (!v)
		return 0;
	errno = 0;
	x = strtoll(v, &end, 10);
	if (!*v || *end || errno || x < lo || x > hi) {
		reply_error(r->req, 400, "bad parameter", "%s must be an integer in [%lld, %lld], not \"%.64s\"", name,
			    (long long)lo, (long long)hi, v);
		return -1;
	}
	*out = x;
	return 1;
}

static int submit(struct api_req *r, int ok_status, const char *not_found, enum storage_rest stmt,
		  const char *const *params, api_done_fn done, void *ctx, void (*ctx_free)(void *ctx),
		  storage_query_fn fn)
{
	struct api *a = r->s->api;
	struct pending *p;
	int nparams = 0;
	const char *sql = fn ? NULL : storage_rest_sql(stmt, &nparams);

	if (!a || !a->q) {
		reply_error(r->req, 503, "unavailable", "culpritd runs without a database (storage = false)");
		return -1;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		reply_error(r->req, 503, "unavailable", "out of memory");
		return -1;
	}
	p->token = ++a->next_token;
	if ((fn ? storage_query_submit_fn(a->q, p->token, fn, ctx)
		: storage_query_submit(a->q, p->token, sql, nparams, params)) < 0) {
		free(p);
		a->busy++;
		reply_error(r->req, 503, "busy", "too many requests wait for the database; try again");
		return -1;
	}
	p->req = r->req;
	p->ok_status = ok_status;
	snprintf(p->not_found, sizeof(p->not_found), "%s", not_found ? not_found : "not found");
	p->done = done;
	p->ctx = ctx;
	p->ctx_free = ctx_free;
	p->next = a->pending;
	a->pending = p;
	a->n_pending++;
	return 0;
}

void api_query(struct api_req *r, int ok_status, const char *not_found, enum storage_rest stmt,
	       const char *const *params)
{
	submit(r, ok_status, not_found, stmt, params, NULL, NULL, NULL, NULL);
}

int api_query_then(struct api_req *r, enum storage_rest stmt, const char *const *params, api_done_fn done, void *ctx,
		   void (*ctx_free)(void *ctx))
{
	return submit(r, 200, NULL, stmt, params, done, ctx, ctx_free, NULL);
}

int api_query_fn(struct api_req *r, storage_query_fn fn, api_done_fn done, void *ctx, void (*ctx_free)(void *ctx))
{
	return submit(r, 200, NULL, STORAGE_REST_STATEMENTS, NULL, done, ctx, ctx_free, fn);
}

/* PostgreSQL's text stays in the log (it may quote the database's schema, or what another
 * client stored); the answer carries a reference to find it there. */
void api_reply_db_error(struct evhttp_request *req, const struct storage_query_result *res)
{
	static struct log_limit limit = {.what = "failed REST queries"};
	static uint32_t counter;
	uint32_t rnd = 0;
	char ref[24];

	if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
		rnd = (uint32_t)clock_mono_us();
	snprintf(ref, sizeof(ref), "%08x%04x", rnd, ++counter & 0xffff);
	if (log_limit_allow(&limit))
		log_warning("api: query failed (reference %s): %s (SQLSTATE %s)", ref, LOG_ESC(res->error),
			    res->sqlstate[0] ? res->sqlstate : "none");
	if (strncmp(res->sqlstate, "22", 2) == 0)
		reply_error(req, 400, "bad parameter",
			    "the database cannot read a value of this request as its type (reference %s in culpritd's "
			    "log)",
			    ref);
	else if (!res->sqlstate[0] || strcmp(res->sqlstate, "57014") == 0 || strncmp(res->sqlstate, "08", 2) == 0 ||
		 strncmp(res->sqlstate, "57P", 3) == 0)
		reply_error(req, 503, "database unavailable",
			    "the database did not answer in time or is not reachable (reference %s in culpritd's log)",
			    ref);
	else
		reply_error(req, 500, "internal error", "the database refused the query (reference %s in culpritd's log)",
			    ref);
}

static void finish(struct server *s, struct pending *p, struct storage_query_result *res)
{
	if (p->done) {
		p->done(s, p->req, res, p->ctx);
		if (p->ctx_free)
			p->ctx_free(p->ctx);
	} else if (!res->failed && res->text)
		reply_text(p->req, p->ok_status, res->text, strlen(res->text));
	else if (!res->failed)
		reply_error(p->req, 404, "not found", "%s", p->not_found);
	else
		api_reply_db_error(p->req, res);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	struct api *a = s->api;
	struct storage_query_result res[32];
	size_t n;

	(void)fd;
	(void)what;
	while ((n = storage_query_take(a->q, res, 32)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct pending **pp = &a->pending, *p;

			while (*pp && (*pp)->token != res[i].token)
				pp = &(*pp)->next;
			p = *pp;
			if (p) {
				*pp = p->next;
				a->n_pending--;
				a->db_answers++;
				finish(s, p, &res[i]);
				free(p);
			}
			free(res[i].text);
		}
	}
}

static void query_wake(void *arg)
{
	struct server *s = arg;

	event_active(s->api->wake, EV_READ, 0);
}

int api_start(struct server *s)
{
	struct api *a = calloc(1, sizeof(*a));

	if (!a)
		return -1;
	s->api = a;
	if (!s->db_dsn)
		return 0;
	a->wake = event_new(s->base, -1, 0, wake_cb, s);
	if (a->wake)
		a->q = storage_query_start(&(struct storage_query_config){
			.dsn = s->db_dsn, .threads = 2, .queue_max = 256, .wake = query_wake, .wake_arg = s});
	if (!a->q) {
		log_error("could not start the REST query workers");
		return -1;
	}
	return 0;
}

void api_stop(struct server *s)
{
	struct api *a = s->api;

	if (!a)
		return;
	storage_query_stop(a->q);
	if (a->wake)
		event_free(a->wake);
	strmap_each(&a->latest, drop_shared, NULL);
	strmap_free(&a->latest);
	while (a->pending) {
		struct pending *p = a->pending;

		a->pending = p->next; /* its request went with evhttp_free() */
		if (p->ctx_free)
			p->ctx_free(p->ctx);
		free(p);
	}
	free(a);
	s->api = NULL;
}

void api_request_arrived(struct server *s)
{
	if (s->api)
		s->api->requests++;
}

void api_answered(struct server *s, struct evhttp_request *req)
{
	int code = evhttp_request_get_response_code(req);

	if (s->api && code >= 200 && code < 600)
		s->api->by_class[code / 100]++;
}

void api_metrics(const struct server *s, FILE *f)
{
	const struct api *a = s->api;

	if (!a)
		return;
	fprintf(f,
		"# HELP culprit_api_requests_total REST requests under /api/v1.\n"
		"# TYPE culprit_api_requests_total counter\nculprit_api_requests_total %llu\n"
		"# HELP culprit_api_database_answers_total REST requests answered from PostgreSQL.\n"
		"# TYPE culprit_api_database_answers_total counter\nculprit_api_database_answers_total %llu\n"
		"# HELP culprit_api_busy_total REST requests refused (503) because the query queue was full.\n"
		"# TYPE culprit_api_busy_total counter\nculprit_api_busy_total %llu\n"
		"# HELP culprit_api_responses_total REST answers under /api/v1 sent, by status class.\n"
		"# TYPE culprit_api_responses_total counter\n"
		"culprit_api_responses_total{code=\"2xx\"} %llu\nculprit_api_responses_total{code=\"4xx\"} %llu\n"
		"culprit_api_responses_total{code=\"5xx\"} %llu\n"
		"# HELP culprit_api_pending_requests REST requests waiting for PostgreSQL.\n"
		"# TYPE culprit_api_pending_requests gauge\nculprit_api_pending_requests %zu\n",
		(unsigned long long)a->requests, (unsigned long long)a->db_answers, (unsigned long long)a->busy,
		(unsigned long long)a->by_class[2], (unsigned long long)a->by_class[4],
		(unsigned long long)a->by_class[5], a->n_pending);
}
