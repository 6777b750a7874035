/* capture.c: see capture.h. */
#include "capture.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_trace.h"
#include "clock.h"
#include "ingest.h"
#include "jobs.h"
#include "log.h"
#include "reply.h"
#include "server.h"

/* ---- POST /api/v1/jobs/{job}/capture ---- */

struct sent {
	json_t *agents;
	uint32_t *served; /* ranks some agent got, marked */
	const uint32_t *ranks;
	size_t n_ranks;
};

static void each_agent(void *arg, const char *agent, const char *host, const uint32_t *ranks, size_t n)
{
	struct sent *st = arg;
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_array_append_new(arr, json_integer(ranks[i]));
		for (size_t k = 0; k < st->n_ranks; k++)
			if (st->ranks[k] == ranks[i])
				st->served[k] = 1;
	}
	json_array_append_new(st->agents, json_pack("{s:s, s:s, s:o}", "agent", agent, "host", host, "ranks", arr));
}

/* The body: {"ranks": [..] or "a-b,c", "iterations": N, "max_events": M}. 0, or the status
 * answered (400). */
static int parse_body(struct api_req *r, uint32_t world, uint32_t **ranks, size_t *n_ranks, uint32_t *iterations,
		      uint32_t *max_events)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	json_error_t jerr;
	json_t *root, *jr, *ji, *jm;
	char err[256];
	int rc;

	root = len ? json_loadb((const char *)evbuffer_pullup(in, -1), len, 0, &jerr) : NULL;
	if (!root || !json_is_object(root)) {
		reply_error(r->req, 400, "bad body", "%s",
			    root  ? "the body is not a JSON object"
			    : len ? jerr.text
				  : "a JSON body is required");
		json_decref(root);
		return 400;
	}
	jr = json_object_get(root, "ranks");
	ji = json_object_get(root, "iterations");
	jm = json_object_get(root, "max_events");
	if (!json_is_integer(ji) || json_integer_value(ji) < 1 || json_integer_value(ji) > CAPTURE_MAX_ITERATIONS) {
		reply_error(r->req, 400, "bad body", "iterations must be an integer in [1, %d]",
			    CAPTURE_MAX_ITERATIONS);
		json_decref(root);
		return 400;
	}
	*iterations = (uint32_t)json_integer_value(ji);
	*max_events = CAPTURE_DEFAULT_MAX_EVENTS;
	if (jm) {
		if (!json_is_integer(jm) || json_integer_value(jm) < 1 || json_integer_value(jm) > CAPTURE_MAX_EVENTS) {
			reply_error(r->req, 400, "bad body", "max_events must be an integer in [1, %d]",
				    CAPTURE_MAX_EVENTS);
			json_decref(root);
			return 400;
		}
		*max_events = (uint32_t)json_integer_value(jm);
	}
	if (json_is_string(jr)) {
		rc = api_parse_ranks(json_string_value(jr), world, CAPTURE_MAX_RANKS, ranks, n_ranks, err, sizeof(err));
	} else if (json_is_array(jr) && json_array_size(jr) > 0 && json_array_size(jr) <= CAPTURE_MAX_RANKS) {
		/* as a list string, so that both forms get the same checks */
		char list[CAPTURE_MAX_RANKS * 12];
		size_t off = 0, i;
		json_t *v;

		rc = 0;
		json_array_foreach(jr, i, v)
		{
			if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX) {
				snprintf(err, sizeof(err), "ranks[%zu] is not a rank number", i);
				rc = -1;
				break;
			}
			off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
						json_integer_value(v));
		}
		if (rc == 0)
			rc = api_parse_ranks(list, world, CAPTURE_MAX_RANKS, ranks, n_ranks, err, sizeof(err));
	} else {
		snprintf(err, sizeof(err),
			 "ranks must be a list of 1 to %d ranks, or a string like \"10352-10359,10336\"",
			 CAPTURE_MAX_RANKS);
		rc = -1;
	}
	json_decref(root);
	if (rc < 0) {
		reply_error(r->req, 400, "bad body", "%s", err);
		return 400;
	}
	return 0;
}

void api_capture(struct api_req *r)
{
	struct job *job;
	uint32_t *ranks = NULL, iterations, max_events;
	size_t n_ranks, n_sent;
	Culprit__V1__Command cmd = CULPRIT__V1__COMMAND__INIT;
	struct sent st = {0};
	json_t *unserved;
	char url[600];
	int64_t id;

	job = strmap_get(&r->s->jobs, r->seg[1]);
	if (!job) {
		api_job_unknown(r);
		return;
	}
	if (parse_body(r, job->topo.world, &ranks, &n_ranks, &iterations, &max_events) != 0)
		return;
	/* capture ids: increasing, and unique across restarts (the wall clock in us) */
	id = clock_wall_us();
	if (id <= r->s->last_capture_id)
		id = r->s->last_capture_id + 1;
	r->s->last_capture_id = id;
	cmd.id = (uint64_t)id;
	cmd.kind = CULPRIT__V1__COMMAND__KIND__CAPTURE;
	cmd.n_ranks = n_ranks;
	cmd.ranks = ranks;
	cmd.iterations = iterations;
	cmd.max_events = max_events;
	st.agents = json_array();
	st.served = calloc(n_ranks, sizeof(*st.served));
	st.ranks = ranks;
	st.n_ranks = n_ranks;
	if (!st.agents || !st.served) {
		json_decref(st.agents);
		free(st.served);
		free(ranks);
		reply_error(r->req, 503, "unavailable", "out of memory");
		return;
	}
	n_sent = ingest_send_command(r->s, job, &cmd, each_agent, &st);
	if (n_sent == 0) {
		reply_error(r->req, 409, "no agent", "no connected agent of job \"%.200s\" serves these ranks",
			    job->name);
		json_decref(st.agents);
		free(st.served);
		free(ranks);
		return;
	}
	r->s->m.captures++;
	r->s->m.capture_commands += n_sent;
	unserved = json_array();
	for (size_t i = 0; i < n_ranks; i++)
		if (!st.served[i])
			json_array_append_new(unserved, json_integer(ranks[i]));
	log_info("job \"%s\": capture %" PRId64 " of %zu ranks for %" PRIu32 " iterations sent to %zu agents",
		 job->name, id, n_ranks, iterations, n_sent);
	snprintf(url, sizeof(url), "/api/v1/jobs/%s/trace?ranks=", job->name);
	{
		/* the trace URL of what is captured: the ranks as a compact list */
		size_t off = strlen(url);

		for (size_t i = 0; i < n_ranks && off + 24 < sizeof(url); i++) {
			size_t j = i;

			while (j + 1 < n_ranks && ranks[j + 1] == ranks[j] + 1)
				j++;
			off += (size_t)snprintf(url + off, sizeof(url) - off, "%s%" PRIu32, i ? "," : "", ranks[i]);
			if (j > i)
				off += (size_t)snprintf(url + off, sizeof(url) - off, "-%" PRIu32, ranks[j]);
			i = j;
		}
	}
	reply_json(r->req, 202,
		   json_pack("{s:I, s:s, s:i, s:i, s:o, s:o, s:s}", "capture", (json_int_t)id, "job", job->name,
			     "iterations", (json_int_t)iterations, "max_events", (json_int_t)max_events, "agents",
			     st.agents, "unserved", unserved, "trace", url));
	free(st.served);
	free(ranks);
}
