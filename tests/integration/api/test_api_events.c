/* test_api_events.c: the seed's incident (case5, 12,960 ranks streamed by `culprit sim`)
 * with the out-of-band "port down" event on node-1294 posted while it runs: the latest
 * report judges it "contradicted" (the slowdown there is compute, not network), the job's
 * diagnosis names node-1294's ranks, and the event is stored in PostgreSQL. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apitest.h"

#define JOB "sim-case5"

static struct h_proc proc;

/* the verdict of the first event of kind on host in the job's latest report, or NULL */
static char *verdict(const char *host, const char *kind, char *out, size_t n)
{
	json_t *j, *evs;
	char *res = NULL;

	if (api_call(&proc, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, &j) != 200) {
		json_decref(j);
		return NULL;
	}
	evs = json_object_get(j, "events");
	for (size_t i = 0; i < json_array_size(evs); i++) {
		json_t *e = json_array_get(evs, i);

		if (strcmp(json_string_value(json_object_get(e, "host")), host) == 0 &&
		    strcmp(json_string_value(json_object_get(e, "kind")), kind) == 0) {
			snprintf(out, n, "%s", json_string_value(json_object_get(e, "verdict")));
			fprintf(stderr, "report: %s on %s: %s (%s)\n", kind, host, out,
				json_string_value(json_object_get(e, "reason")));
			res = out;
			break;
		}
	}
	json_decref(j);
	return res;
}

int main(void)
{
	char dir[512], dsn[512], v[64];
	const char *extra[3];
	json_t *j, *job = NULL;
	pid_t sim;
	int posted = 0;

	h_tmpdir("api_events", dir, sizeof(dir));
	h_db_create("culprit_api_events", dsn, sizeof(dsn));
	extra[0] = "--db";
	extra[1] = dsn;
	extra[2] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	sim = api_sim_start(&proc, "case5", 0);
	/* post the event while the job streams, as soon as its incident is open */
	for (int64_t deadline = h_now_ms() + 110000; !posted;) {
		H_CHECK(h_now_ms() < deadline, &proc);
		if (api_call(&proc, "GET", "/api/v1/jobs/" JOB, NULL, &job) == 200 &&
		    json_is_object(json_object_get(job, "incident"))) {
			H_CHECK(api_call(&proc, "POST", "/api/v1/events",
					 "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"source\":\"oob\",\"detail\":"
					 "\"eth3\"}",
					 &j) == 202,
				&proc);
			/* node-1294 holds ranks of the job: the event went to it */
			H_CHECK(strcmp(json_string_value(json_array_get(
					       json_object_get(json_array_get(json_object_get(j, "events"), 0), "jobs"),
					       0)),
				       JOB) == 0,
				&proc);
			json_decref(j);
			posted = 1;
			fprintf(stderr, "posted port_down on node-1294 at iteration %lld of the stream\n",
				(long long)json_integer_value(json_object_get(job, "max_iter")));
		} else {
			poll(NULL, 0, 200);
		}
		json_decref(job);
	}
	H_CHECK(api_sim_wait(sim, 110000) == 0, &proc);

	/* the next report carries the verdict */
	for (int64_t deadline = h_now_ms() + 60000;;) {
		if (verdict("node-1294", "port_down", v, sizeof(v)))
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 200);
	}
	H_CHECK(strcmp(v, "contradicted") == 0, &proc);

	j = NULL;
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, &j) == 200, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "verdict"), "category")),
		       "compute_degradation") == 0,
		&proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_array_get(json_object_get(j, "suspects"), 0), "host")),
		       "node-1294") == 0,
		&proc);
	json_decref(j);

	/* stored */
	H_CHECK(api_call(&proc, "GET", "/api/v1/events?host=node-1294&kind=port_down", NULL, &j) == 200, &proc);
	H_CHECK(json_array_size(json_object_get(j, "events")) == 1, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_array_get(json_object_get(j, "events"), 0), "detail")),
		       "eth3") == 0,
		&proc);
	json_decref(j);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "test_api_events: ok\n");
	return 0;
}
