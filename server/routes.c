/* routes.c: see routes.h. */
#include "routes.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "api.h"
#include "api_trace.h"
#include "auth.h"
#include "capture.h"
#include "reply.h"
#include "text.h"

/* 1 when r->method is in allowed (EVHTTP_REQ_* bits; HEAD counts as GET); else answers 405
 * with an Allow header and returns 0. */
static int method_allowed(struct api_req *r, int allowed)
{
	char allow[64] = "";
	int m = r->method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : (int)r->method;

	if (m & allowed)
		return 1;
	if (allowed & EVHTTP_REQ_GET)
		strcat(allow, "GET, HEAD");
	if (allowed & EVHTTP_REQ_POST)
		strcat(allow, allow[0] ? ", POST" : "POST");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Allow", allow);
	reply_error(r->req, 405, "method not allowed", "this resource answers %s", allow);
	return 0;
}

/* Splits path (after the "/api/v1/" prefix) into percent-decoded segments. 0, or -1 with
 * an answer sent. */
static int split(struct api_req *r, const char *path)
{
	const char *p = path;

	while (*p) {
		const char *slash = strchr(p, '/');
		size_t n = slash ? (size_t)(slash - p) : strlen(p);
		char raw[512];
		size_t len = 0;
		char *dec;

		if (r->nseg == API_MAX_SEGMENTS || n >= sizeof(raw)) {
			reply_error(r->req, 404, "not found", "no such resource");
			return -1;
		}
		memcpy(raw, p, n);
		raw[n] = '\0';
		dec = evhttp_uridecode(raw, 0, &len);
		if (!dec || text_check(dec, len, 0, sizeof(raw))) {
			free(dec);
			reply_error(r->req, 400, "bad path",
				    "a path segment must decode to UTF-8 without control characters (or NUL bytes)");
			return -1;
		}
		r->seg[r->nseg++] = dec;
		if (!slash)
			break;
		p = slash + 1;
	}
	return 0;
}

/* Every route under /api/v1: its method (HEAD is answered as GET), its path, whose "{name}"
 * segments match any one segment, and its handler. docs/api.md and docs/openapi.yaml list
 * the same routes (tests/integration/api/test_openapi.sh checks it). */
static const struct route {
	enum evhttp_cmd_type method;
	const char *path;
	void (*handler)(struct api_req *r);
} routes[] = {
	{EVHTTP_REQ_GET, "/api/v1/jobs", api_jobs_list},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}", api_jobs_get},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/reports", api_jobs_reports},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/reports/latest", api_jobs_latest},
	{EVHTTP_REQ_POST, "/api/v1/jobs/{job}/diagnose", api_jobs_diagnose},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/incidents", api_jobs_incidents},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/ranks/{rank}/iterations", api_jobs_iterations},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/phases", api_jobs_phases},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/heatmap", api_jobs_heatmap},
	{EVHTTP_REQ_GET, "/api/v1/jobs/{job}/trace", api_trace},
	{EVHTTP_REQ_POST, "/api/v1/jobs/{job}/capture", api_capture},
	{EVHTTP_REQ_GET, "/api/v1/reports/{id}", api_reports_get},
	{EVHTTP_REQ_GET, "/api/v1/events", api_events_list},
	{EVHTTP_REQ_POST, "/api/v1/events", api_events_post},
	{EVHTTP_REQ_GET, "/api/v1/incidents/{key}/actions", api_actions_list},
	{EVHTTP_REQ_POST, "/api/v1/incidents/{key}/actions/{n}/approve", api_actions_approve},
	{EVHTTP_REQ_GET, "/api/v1/fleet", api_fleet},
};

/* 1 when the request's segments match route path p (after "/api/v1/") */
static int path_matches(const struct api_req *r, const char *p)
{
	int i = 0;

	for (; *p && i < r->nseg; i++) {
		size_t n = strcspn(p, "/");

		if (p[0] != '{' && (strlen(r->seg[i]) != n || memcmp(r->seg[i], p, n) != 0))
			return 0;
		p += n + (p[n] == '/');
	}
	return !*p && i == r->nseg;
}

/* The handler of the route of r's path and method; 404 for an unknown path, 405 with Allow
 * for a known path and another method. */
static void route(struct api_req *r)
{
	const struct route *found = NULL;
	int allowed = 0, m = r->method == EVHTTP_REQ_HEAD ? EVHTTP_REQ_GET : (int)r->method;

	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		if (!path_matches(r, routes[i].path + 8))
			continue;
		allowed |= (int)routes[i].method;
		if ((int)routes[i].method == m)
			found = &routes[i];
	}
	if (!allowed)
		reply_error(r->req, 404, "not found", "no such resource");
	else if (method_allowed(r, allowed))
		found->handler(r);
}

void routes_print(FILE *f)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		enum evhttp_cmd_type m = routes[i].method;

		/* a method method_allowed() cannot name in Allow prints as "?": test_openapi fails */
		fprintf(f, "%s %s\n",
			m == EVHTTP_REQ_GET    ? "GET"
			: m == EVHTTP_REQ_POST ? "POST"
					       : "?",
			routes[i].path);
	}
}

void routes_dispatch(struct server *s, struct evhttp_request *req)
{
	struct api_req r = {.s = s, .req = req, .method = evhttp_request_get_command(req)};
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = evhttp_uri_get_path(uri), *qs = evhttp_uri_get_query(uri);

	TAILQ_INIT(&r.query);
	api_request_arrived(s);
	if (!auth_http_request(s, req))
		goto out;
	if (qs && evhttp_parse_query_str(qs, &r.query) < 0) {
		reply_error(req, 400, "bad query string", "the query string is not well formed");
		goto out;
	}
	if (!path || strncmp(path, "/api/v1/", 8) != 0) {
		reply_error(req, 404, "not found", "no such resource");
		goto out;
	}
	if (split(&r, path + 8) < 0)
		goto out;
	route(&r);
out:
	for (int i = 0; i < r.nseg; i++)
		free(r.seg[i]);
	evhttp_clear_headers(&r.query);
}
