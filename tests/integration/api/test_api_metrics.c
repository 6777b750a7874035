/* test_api_metrics.c: /metrics of the real culpritd, after some traffic (a small job streamed,
 * REST requests, an event), passes `promtool check metrics` (Debian package prometheus), and
 * has culprit_build_info, the standard process_* metrics with plausible values, and the job's
 * own series (culprit_job_*); with metrics_max_jobs 0 the job is left out and counted. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "apitest.h"

static struct h_proc proc;

int main(void)
{
	char dir[512], dsn[512], path[600], cmd[1400];
	const char *extra[3];
	char *text = NULL;
	json_t *j;
	FILE *f;
	int rc;

	h_tmpdir("api_metrics", dir, sizeof(dir));
	h_db_create("culprit_api_metrics", dsn, sizeof(dsn));
	extra[0] = "--db";
	extra[1] = dsn;
	extra[2] = NULL;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	H_CHECK(api_sim_wait(api_sim_start(&proc, "compute_straggler", 20), 110000) == 0, &proc);
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs", NULL, &j) == 200, &proc);
	json_decref(j);
	H_CHECK(api_call(&proc, "POST", "/api/v1/events", "{\"host\":\"node-1\",\"kind\":\"ecc\"}", &j) == 202, &proc);
	json_decref(j);

	api_expect_error(&proc, "GET", "/api/v1/jobs/nojob", NULL, 404);

	H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &text) == 200 && text, &proc);
	H_CHECK(h_metric(text, "culprit_api_requests_total") == 3, &proc);
	H_CHECK(h_metric(text, "culprit_api_responses_total{code=\"2xx\"}") == 2, &proc);
	H_CHECK(h_metric(text, "culprit_api_responses_total{code=\"4xx\"}") == 1, &proc);
	/* the jobs list, the unknown job looked up, the event insert */
	H_CHECK(h_metric(text, "culprit_api_database_answers_total") == 3, &proc);
	H_CHECK(strstr(text, "\nculprit_build_info{version=\"") && strstr(text, "\",commit=\"") &&
			strstr(text, "\",build_type=\""),
		&proc);
	/* the job's series: 20 iterations of about 1 s (the scenario's), no window open */
	H_CHECK(h_metric(text, "culprit_job_step_seconds{job_name=\"sim-compute_straggler\"}") > 0.1, &proc);
	H_CHECK(h_metric(text, "culprit_job_baseline_step_seconds{job_name=\"sim-compute_straggler\"}") > 0.1, &proc);
	H_CHECK(h_metric(text, "culprit_job_incident_open{job_name=\"sim-compute_straggler\"}") >= 0, &proc);
	H_CHECK(h_metric(text, "culprit_job_time_lost_seconds{job_name=\"sim-compute_straggler\"}") >= 0, &proc);
	H_CHECK(h_metric(text, "culprit_job_series_omitted_total") == 0, &proc);
	H_CHECK(h_metric(text, "culprit_action_attempts_total{result=\"ok\"}") == 0, &proc);
	H_CHECK(h_metric(text, "process_cpu_seconds_total") > 0, &proc);
	H_CHECK(h_metric(text, "process_resident_memory_bytes") > 1e6, &proc);
	H_CHECK(h_metric(text, "process_virtual_memory_bytes") >= h_metric(text, "process_resident_memory_bytes"),
		&proc);
	H_CHECK(h_metric(text, "process_open_fds") >= 3, &proc);
	H_CHECK(h_metric(text, "process_max_fds") >= h_metric(text, "process_open_fds"), &proc);
	{
		double start = h_metric(text, "process_start_time_seconds"), now = (double)time(NULL);

		H_CHECK(start > now - 600 && start <= now + 1, &proc);
	}
	snprintf(path, sizeof(path), "%s/metrics.txt", dir);
	f = fopen(path, "w");
	H_CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, &proc);
	free(text);
	/* promtool prints its findings (lint problems too) and exits non-zero on any */
	snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s'", path);
	rc = system(cmd);
	fprintf(stderr, "promtool check metrics: exit %d\n", WIFEXITED(rc) ? WEXITSTATUS(rc) : -1);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, &proc);

	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);

	/* without a database: what needs one is 503, events are still judged in memory; with
	 * metrics_max_jobs 0 the job has no series, and is counted as left out */
	const char *nodb[] = {"--storage", "false", "--metrics-max-jobs", "0", NULL};
	H_CHECK(h_culpritd_start(&proc, dir, nodb) == 0, &proc);
	H_CHECK(api_sim_wait(api_sim_start(&proc, "compute_straggler", 12), 110000) == 0, &proc);
	H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &text) == 200 && text, &proc);
	H_CHECK(!strstr(text, "\nculprit_job_step_seconds{"), &proc);
	H_CHECK(h_metric(text, "culprit_job_series_omitted_total") == 4, &proc); /* a job, 4 series */
	free(text);
	api_expect_error(&proc, "GET", "/api/v1/events", NULL, 503);
	api_expect_error(&proc, "GET", "/api/v1/reports/1", NULL, 503);
	H_CHECK(api_call(&proc, "POST", "/api/v1/events", "{\"host\":\"node-1\",\"kind\":\"ecc\"}", &j) == 202, &proc);
	H_CHECK(json_is_null(json_object_get(j, "ids")) && json_integer_value(json_object_get(j, "accepted")) == 1,
		&proc);
	json_decref(j);
	H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &text) == 200 && text, &proc);
	H_CHECK(h_metric(text, "culprit_api_responses_total{code=\"5xx\"}") == 2, &proc);
	free(text);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "test_api_metrics: ok\n");
	return 0;
}
