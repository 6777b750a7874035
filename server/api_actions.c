/* api_actions.c: the actions of an open incident (actions.h; docs/api.md, "Actions").
 *   GET  /api/v1/incidents/{key}/actions              what culpritd did or waits to do
 *   POST /api/v1/incidents/{key}/actions/{n}/approve  an operator approves action n
 * The key ("<job>/<first iteration>/<category>") is one path segment: its slashes are sent
 * as %2F. */
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>

#include "actions.h"
#include "api.h"
#include "auth.h"
#include "reply.h"
#include "server.h"

void api_actions_list(struct api_req *r)
{
	json_t *j = actions_json(r->s, r->seg[1]);

	if (!j) {
		reply_error(r->req, 404, "not found", "no open incident with actions here has the key \"%s\"",
			    r->seg[1]);
		return;
	}
	reply_json(r->req, 200, j);
}

void api_actions_approve(struct api_req *r)
{
	const char *h = evhttp_find_header(evhttp_request_get_input_headers(r->req), "Authorization");
	char who[200], msg[512], *end;
	long n = strtol(r->seg[3], &end, 10);
	int status;

	if (!auth_operator(r->s->auth, h, who, sizeof(who))) {
		r->s->m.http_auth_forbidden++;
		reply_error(r->req, 403, "forbidden",
			    "approving an action needs an operator's token (operator_tokens_file)");
		return;
	}
	if (*end || end == r->seg[3] || n < 0 || n >= ACTIONS_PER_INCIDENT) {
		reply_error(r->req, 404, "not found", "no action \"%s\" (actions are numbered 0 to %d)", r->seg[3],
			    ACTIONS_PER_INCIDENT - 1);
		return;
	}
	status = actions_approve(r->s, r->seg[1], (int)n, who, msg, sizeof(msg));
	if (status != 202) {
		reply_error(r->req, status,
			    status == 409   ? "conflict"
			    : status == 404 ? "not found"
					    : "unavailable",
			    "%s", msg);
		return;
	}
	reply_json(r->req, 202,
		   json_pack("{s:s, s:i, s:s, s:s, s:s}", "incident", r->seg[1], "n", (int)n, "state", "handed_to_hook",
			     "by", who, "detail", msg));
}
