/* http.c: the REST API (see docs/api.md): the listener, the routes outside /api/v1 (routes.c
 * has those) and the connections' callbacks. Every answer goes through reply.h. Limits on body size, header size
 * and time are set explicitly: libevent's defaults are unlimited. */
#include "http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "actions.h"
#include "api.h"
#include "auth.h"
#include "console.h"
#include "dbhealth.h"
#include "http_conn.h"
#include "job_metrics.h"
#include "log.h"
#include "reply.h"
#include "routes.h"
#include "server.h"
#include "tls.h"
#include "writer.h"

static int only_get(struct evhttp_request *req)
{
	if (evhttp_request_get_command(req) & (EVHTTP_REQ_GET | EVHTTP_REQ_HEAD))
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
	reply_error(req, 405, "method not allowed", "this resource answers GET and HEAD only");
	return 0;
}

static void healthz(struct evhttp_request *req, void *arg)
{
	(void)arg;
	if (only_get(req))
		reply_json(req, 200, json_pack("{s:s}", "status", "ok"));
}

static void readyz(struct evhttp_request *req, void *arg)
{
	struct server *s = arg;

	if (!only_get(req))
		return;
	if (s->stopping)
		reply_error(req, 503, "not ready", "culpritd is shutting down");
	else if (s->writer && !dbhealth_up(s))
		reply_error(req, 503, "not ready", "the database makes no progress (db_stall_s): see culpritd's log");
	else
		reply_json(req, 200, json_pack("{s:s}", "status", "ready"));
}

static void metrics(struct evhttp_request *req, void *arg)
{
	struct server *s = arg;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	if (!only_get(req) || !auth_http_request(s, req))
		return;
	f = open_memstream(&text, &len);
	if (!f) {
		reply_error(req, 500, "internal error", "out of memory");
		return;
	}
	metrics_render(&s->m, f);
	metrics_render_process(f, s->started_us);
	if (s->writer) {
		struct storage_writer_stats st;

		storage_writer_stats(s->writer, &st);
		fprintf(f,
			"# HELP culprit_writer_queue_records Records waiting in the storage writer's queue.\n"
			"# TYPE culprit_writer_queue_records gauge\nculprit_writer_queue_records %llu\n"
			"# HELP culprit_writer_queue_limit_records Bound of the storage writer's queue.\n"
			"# TYPE culprit_writer_queue_limit_records gauge\nculprit_writer_queue_limit_records %lld\n"
			"# HELP culprit_writer_committed_records_total Records committed to PostgreSQL.\n"
			"# TYPE culprit_writer_committed_records_total counter\nculprit_writer_committed_records_total "
			"%llu\n"
			"# HELP culprit_writer_transactions_total Transactions committed by the storage writer.\n"
			"# TYPE culprit_writer_transactions_total counter\nculprit_writer_transactions_total %llu\n"
			"# HELP culprit_writer_refused_full_total Submissions refused because the writer queue was "
			"full.\n"
			"# TYPE culprit_writer_refused_full_total counter\nculprit_writer_refused_full_total %llu\n"
			"# HELP culprit_writer_conflicts_total Batches that met a key conflict and were stored as "
			"no-ops.\n"
			"# TYPE culprit_writer_conflicts_total counter\nculprit_writer_conflicts_total %llu\n"
			"# HELP culprit_writer_reconnects_total Times the writer reconnected to PostgreSQL.\n"
			"# TYPE culprit_writer_reconnects_total counter\nculprit_writer_reconnects_total %llu\n"
			"# HELP culprit_database_up Whether PostgreSQL makes progress: it answered the liveness check, "
			"the storage writer was connected and its transaction committed, each within db_stall_s.\n"
			"# TYPE culprit_database_up gauge\nculprit_database_up %d\n",
			(unsigned long long)st.queued_records, (long long)s->cfg.writer_queue_records,
			(unsigned long long)st.committed_records, (unsigned long long)st.committed_txns,
			(unsigned long long)st.refused_full, (unsigned long long)st.conflicts,
			(unsigned long long)st.reconnects, dbhealth_up(s));
	}
	api_metrics(s, f);
	actions_metrics(s, f);
	job_metrics_render(s, f);
	http_conn_metrics(s, f);
	fclose(f);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "text/plain; version=0.0.4");
	evbuffer_add(evhttp_request_get_output_buffer(req), text, len);
	free(text);
	reply_send(req, 200);
}

/* evhttp frames a body by the first Content-Length and takes any Transfer-Encoding but
 * chunked for none: a request that says otherwise elsewhere could smuggle a second one. NULL
 * when the framing is unambiguous, else why not. */
static const char *bad_framing(struct evhttp_request *req)
{
	const struct evkeyval *kv;
	const char *length = NULL;
	int encodings = 0;

	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(req), next)
	{
		if (evutil_ascii_strcasecmp(kv->key, "Content-Length") == 0) {
			if (length && strcmp(length, kv->value) != 0)
				return "conflicting Content-Length headers";
			length = kv->value;
		} else if (evutil_ascii_strcasecmp(kv->key, "Transfer-Encoding") == 0 &&
			   (encodings++ || evutil_ascii_strcasecmp(kv->value, "chunked") != 0)) {
			return "the only Transfer-Encoding accepted is chunked";
		}
	}
	return NULL;
}

static void answered(struct evhttp_request *req, void *arg)
{
	struct server *s = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));

	http_conn_answered(s, req);
	if (path && strncmp(path, "/api/v1/", 8) == 0)
		api_answered(s, req);
}

/* The routes outside /api/v1 (routes.c holds those) and the console (console.c): GET (and
 * HEAD) only. */
static const struct {
	const char *path;
	void (*handler)(struct evhttp_request *req, void *arg);
} fixed[] = {{"/healthz", healthz}, {"/readyz", readyz}, {"/metrics", metrics}};

void http_routes_print(FILE *f)
{
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		fprintf(f, "GET %s\n", fixed[i].path);
	fprintf(f, "GET /\nGET /console/{file}\n");
	routes_print(f);
}

static void route(struct evhttp_request *req, void *arg)
{
	struct server *s = arg;
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(req));
	const char *bad = bad_framing(req);
	size_t i = 0;

	http_conn_request(s, req);
	evhttp_request_set_on_complete_cb(req, answered, s);
	if (bad) {
		http_conn_bad_request(s, req, bad);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		reply_error(req, 400, "bad request", "%s", bad);
		return;
	}
	while (path && i < sizeof(fixed) / sizeof(fixed[0]) && strcmp(path, fixed[i].path) != 0)
		i++;
	if (path && i < sizeof(fixed) / sizeof(fixed[0]))
		fixed[i].handler(req, s);
	else if (path && strncmp(path, "/api/v1/", 8) == 0)
		routes_dispatch(s, req);
	else if (path && console_path(path))
		console_serve(s, req, path);
	else
		reply_error(req, 404, "not found", "%s", evhttp_request_get_uri(req));
}

void http_apply_limits(struct server *s)
{
	evhttp_set_max_body_size(s->http, (ev_ssize_t)s->cfg.http_max_body);
	evhttp_set_max_headers_size(s->http, (ev_ssize_t)s->cfg.http_max_headers);
	evhttp_set_timeout(s->http, (int)s->cfg.http_timeout_s);
}

int http_start(struct server *s)
{
	char host[256];
	const char *colon = strrchr(s->cfg.http_listen, ':');
	size_t n = colon ? (size_t)(colon - s->cfg.http_listen) : 0;
	struct evhttp_bound_socket *bound;

	if (!colon || n >= sizeof(host)) {
		log_error("invalid http_listen address \"%s\"", s->cfg.http_listen);
		return -1;
	}
	memcpy(host, s->cfg.http_listen, n);
	host[n] = '\0';
	if (host[0] == '[' && n > 1 && host[n - 1] == ']') {
		memmove(host, host + 1, n - 2);
		host[n - 2] = '\0';
	}
	s->http = evhttp_new(s->base);
	if (!s->http || api_start(s) < 0 || http_conn_start(s) < 0 || console_load(s) < 0)
		return -1;
	http_apply_limits(s);
	/* every method reaches the routes, which answer 405 with Allow in JSON */
	evhttp_set_allowed_methods(s->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD | EVHTTP_REQ_PUT |
						    EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS);
	evhttp_set_default_content_type(s->http, "application/json");
	evhttp_set_gencb(s->http, route, s);
	bound = evhttp_bind_socket_with_handle(s->http, host, (uint16_t)atoi(colon + 1));
	if (!bound) {
		log_error("could not listen for HTTP on %s: %s", s->cfg.http_listen, strerror(errno));
		return -1;
	}
	if (http_conn_listening(s, bound) < 0)
		return -1;
	log_info("REST API on %s://%s", s->tls ? "https" : "http", s->cfg.http_listen);
	return 0;
}

void http_stop(struct server *s)
{
	http_conn_stop(s); /* before evhttp_free closes the connections: forgets them first */
	if (s->http)
		evhttp_free(s->http);
	s->http = NULL;
	api_console_stop(s);
	api_stop(s);
	console_free(s);
}
