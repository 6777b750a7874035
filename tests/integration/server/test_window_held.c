/* test_window_held.c: culpritd diagnoses a job's window in place, holding what comes for the
 * job meanwhile and giving it to the window after (server/held.h). culprit sim --scenario
 * compute_straggler with 16 kernel names per rank (the window's default most), as fast as culpritd takes it, so that
 * batches arrive while diagnoses run; then:
 * - records were held (culprit_window_records_held_total > 0) and none refused;
 * - the window has every record the agents sent (the job's "records" equals the iteration,
 *   phase and kernel records accepted, "dropped" is 0) and reached the last iteration: what
 *   was held was given to it;
 * - the report is right: compute_degradation, rank 517 first, on node-64.
 * On the code that diagnosed a copy of the window, the held counter did not exist. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"

#define JOB "sim-compute_straggler"

static json_t *get(int port, const char *path)
{
	char *body = NULL;
	json_t *j = NULL;

	if (h_http(port, "GET", path, NULL, &body) == 200)
		j = json_loads(body, 0, NULL);
	free(body);
	return j;
}

int main(void)
{
	struct h_proc p;
	char dsn[1024], dir[600], addr[64];
	const char *extra[] = {"--db", dsn, NULL};
	const char *category = NULL;
	json_t *latest = NULL, *job = NULL;
	const char *sim[] = {CULPRIT_BIN, "sim",     "--scenario", "compute_straggler", "--kernels", "16",
			     "--speed",   "0",       "--quiet",    "--server",          addr,        NULL};

	h_db_create("test_window_held", dsn, sizeof(dsn));
	h_tmpdir("window_held", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&p, dir, extra) == 0, &p);

	snprintf(addr, sizeof(addr), "127.0.0.1:%d", p.agent_port);
	H_CHECK(h_run(sim, NULL, 180000) == 0, &p);
	/* every batch is acknowledged when the sim ends; the last diagnosis may still run */
	for (int64_t deadline = h_now_ms() + 60000; h_now_ms() < deadline; usleep(100000)) {
		json_decref(job);
		job = get(p.http_port, "/api/v1/jobs/" JOB);
		if (job && !json_is_true(json_object_get(job, "diagnosing")) &&
		    json_integer_value(json_object_get(job, "max_iter")) == 59)
			break;
	}
	H_CHECK(job != NULL, &p);
	double held = h_get_metric(p.http_port, "culprit_window_records_held_total");
	double not_held = h_get_metric(p.http_port, "culprit_window_records_not_held_total");
	double accepted = h_get_metric(p.http_port, "culprit_records_total{type=\"iteration\",outcome=\"accepted\"}") +
			  h_get_metric(p.http_port, "culprit_records_total{type=\"phase\",outcome=\"accepted\"}") +
			  h_get_metric(p.http_port, "culprit_records_total{type=\"kernel\",outcome=\"accepted\"}");
	json_int_t records = json_integer_value(json_object_get(job, "records"));

	printf("records: %.0f held while a diagnosis ran, %.0f not held; the window has %lld of %.0f accepted, "
	       "dropped %lld, max_iter %lld, %lld diagnoses\n",
	       held, not_held, (long long)records, accepted,
	       (long long)json_integer_value(json_object_get(job, "dropped")),
	       (long long)json_integer_value(json_object_get(job, "max_iter")),
	       (long long)json_integer_value(json_object_get(job, "diagnoses")));
	H_CHECK(held > 0, &p);
	H_CHECK(not_held == 0, &p);
	H_CHECK(accepted > 0 && (double)records == accepted, &p);
	H_CHECK(json_integer_value(json_object_get(job, "dropped")) == 0, &p);
	H_CHECK(json_integer_value(json_object_get(job, "max_iter")) == 59, &p);
	json_decref(job);

	latest = get(p.http_port, "/api/v1/jobs/" JOB "/reports/latest");
	H_CHECK(latest != NULL, &p);
	category = json_string_value(json_object_get(json_object_get(latest, "verdict"), "category"));
	printf("latest report: %s\n", category ? category : "(none)");
	H_CHECK(category && strcmp(category, "compute_degradation") == 0, &p);
	json_t *first = json_array_get(json_object_get(latest, "suspects"), 0);
	H_CHECK(json_integer_value(json_object_get(first, "rank")) == 517, &p);
	H_CHECK(json_string_value(json_object_get(first, "host")) &&
			strcmp(json_string_value(json_object_get(first, "host")), "node-64") == 0,
		&p);
	json_decref(latest);
	H_CHECK(h_proc_stop(&p, SIGTERM, 30000) == 0, &p);
	return 0;
}
