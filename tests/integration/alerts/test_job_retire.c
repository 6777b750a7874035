/* test_job_retire: jobs whose agents left end, their incidents resolved as ended, and are
 * forgotten.
 *
 * 1. compute_straggler (1,024 ranks) streams with a fault to the end, its agents staying
 *    (--linger): the incident is open when culpritd is SIGKILLed (the agents go without
 *    Goodbye) and started again with job_retire_s 3: the incident it finds open waits for its
 *    job, which does not come back, so 3 s after start it is resolved ("its agents did not
 *    come back", resolution ended): the incident row says so and the webhook receives the
 *    resolved state.
 * 2. host_delay streams with a fault to the end into that culpritd; its agents leave with the
 *    incident open, saying Goodbye: the job ends, the webhook receives the resolved state
 *    ("the job ended", resolution ended) and GET /api/v1/jobs lists it ended. 3 s later it is
 *    forgotten: culprit_jobs is 0, it is still listed (from PostgreSQL) and
 *    GET .../reports/latest answers from PostgreSQL with the job's last report.
 * 3. The same job streams again: it is created afresh and its records are accepted.
 * 4. 200 jobs whose agents leave together are forgotten together, 3 s later (not 16 a
 *    second). */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "receiver.h"

#define ITERS_ACCEPTED "culprit_records_total{type=\"iteration\",outcome=\"accepted\"}"

static struct h_proc proc;

static void start(const char *dir, const char *dsn, int rx_port, const char *retire_s)
{
	char url[128];
	const char *extra[] = {"--db",   dsn, "--webhook-url", url, "--alert-backoff-max-s", "2", "--job-retire-s",
			       retire_s, NULL};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", rx_port);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
}

/* Waits (up to 60 s) until the receiver accepted a resolved state of an incident of job
 * whose summary says why. */
static void wait_resolved(struct rx *rx, const char *job, const char *why)
{
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
		struct rx_hit *hits;
		size_t n = rx_hits(rx, &hits);
		int found = 0;

		for (size_t i = 0; i < n; i++) {
			json_t *b = json_loads(hits[i].body, 0, NULL), *inc = json_object_get(b, "incident");
			const char *jn = json_string_value(json_object_get(inc, "job")),
				   *st = json_string_value(json_object_get(inc, "state")),
				   *sum = json_string_value(json_object_get(inc, "summary"));

			found |= hits[i].status == 200 && jn && st && sum && !strcmp(jn, job) &&
				 !strcmp(st, "resolved") && strstr(sum, why) &&
				 !strcmp(json_string_value(json_object_get(inc, "resolution")), "ended");
			json_decref(b);
		}
		if (!found && h_now_ms() >= deadline)
			for (size_t i = 0; i < n; i++)
				fprintf(stderr, "hit %zu: %d %s %.600s\n", i, hits[i].status, hits[i].dedup,
					hits[i].body);
		rx_hits_free(hits, n);
		if (found)
			return;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
}

int main(void)
{
	char dsn[512], dir[512], simlog[600], *body = NULL;
	int rx_port, status;
	struct rx *rx = rx_start(&rx_port);
	json_t *j;
	double accepted;

	H_CHECK(rx != NULL, NULL);
	h_db_create("job_retire", dsn, sizeof(dsn));
	h_tmpdir("job_retire", dir, sizeof(dir));
	snprintf(simlog, sizeof(simlog), "%s/sim.log", dir);

	/* 1. an incident left open by a culpritd that was killed; its job never returns */
	start(dir, dsn, rx_port, "600");
	{
		char server[64];
		pid_t sim;

		snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
		sim = fork();
		if (sim == 0) {
			execl(CULPRIT_BIN, CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--iters", "40",
			      "--linger", "600", "--quiet", "--server", server, (char *)NULL);
			_exit(127);
		}
		for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
			if (at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'open'") == 1)
				break;
			H_CHECK(h_now_ms() < deadline, &proc);
		}
		h_proc_stop(&proc, SIGKILL, 5000);
		kill(sim, SIGKILL);
		waitpid(sim, &status, 0);
	}
	start(dir, dsn, rx_port, "3");
	H_CHECK(h_log_wait(&proc, "1 incidents were left open", 1, 10000), &proc);
	wait_resolved(rx, "sim-compute_straggler", "its agents did not come back within 3 s");
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'open'") == 0, &proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'resolved' AND resolution = 'ended' AND"
				 " key LIKE 'sim-compute_straggler/%'") == 1,
		&proc);

	/* 2. a job whose agents leave with its incident open is forgotten */
	H_CHECK(at_sim("host_delay", 30, 0, proc.agent_port, simlog) == 0, &proc);
	wait_resolved(rx, "sim-host_delay", "the job ended: its agents left");
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs?state=ended&q=host_delay", NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	H_CHECK(j && json_array_size(json_object_get(j, "jobs")) == 1, &proc);
	json_decref(j);
	free(body);
	H_CHECK(h_log_wait(&proc, "job \"sim-host_delay\": forgotten after 3 s without agents", 1, 10000), &proc);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs?state=live", NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	H_CHECK(j && json_array_size(json_object_get(j, "jobs")) == 0 &&
			json_integer_value(json_object_get(j, "total")) == 0,
		&proc);
	json_decref(j);
	free(body);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/sim-host_delay", NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	H_CHECK(j && !strcmp(json_string_value(json_object_get(j, "state")), "ended"), &proc);
	json_decref(j);
	free(body);
	H_CHECK(h_get_metric(proc.http_port, "culprit_jobs") == 0, &proc);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/sim-host_delay/reports/latest", NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	H_CHECK(j && json_integer_value(json_object_get(j, "id")) > 0, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "verdict"), "category")), "host_delay") ==
			0,
		&proc);
	json_decref(j);
	free(body);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'open'") == 0, &proc);

	/* 3. the job comes back: created afresh, its records accepted */
	accepted = h_get_metric(proc.http_port, ITERS_ACCEPTED);
	H_CHECK(at_sim("host_delay", 5, 0, proc.agent_port, simlog) == 0, &proc);
	H_CHECK(h_log_wait(&proc, "job \"sim-host_delay\": new", 2, 10000), &proc);
	H_CHECK(h_get_metric(proc.http_port, ITERS_ACCEPTED) >= accepted + 5 * 1024, &proc);

	/* 4. 200 jobs whose agents leave at once are all forgotten at once (they went at 16 a
	 * second: 12.5 s) */
	{
		int fds[200];
		int64_t left;

		for (int i = 0; i < 200; i++) {
			char job[32];

			snprintf(job, sizeof(job), "many-%03d", i);
			fds[i] = h_connect(proc.agent_port);
			H_CHECK(fds[i] >= 0 && h_hello(fds[i], job, "a0", 1, 0), &proc);
		}
		H_CHECK(h_get_metric(proc.http_port, "culprit_jobs") >= 200, &proc);
		for (int i = 0; i < 200; i++)
			close(fds[i]);
		left = h_now_ms();
		while (h_get_metric(proc.http_port, "culprit_jobs") > 1 && h_now_ms() - left < 7000)
			poll(NULL, 0, 100);
		fprintf(stderr, "200 jobs forgotten %lld ms after their agents left (job_retire_s 3)\n",
			(long long)(h_now_ms() - left));
		H_CHECK(h_get_metric(proc.http_port, "culprit_jobs") <= 1, &proc); /* sim-host_delay may stay */
	}

	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	rx_stop(rx);
	printf("ok\n");
	return 0;
}
