/* test_fault_db_down: PostgreSQL (a cluster of the test's own) is stopped for DOWN seconds
 * (60 by default; CULPRIT_DB_DOWN_S overrides) while compute_straggler (1,024 ranks,
 * 128 node agents of the agent library in this process, one iteration every 200 ms) streams
 * into culpritd with a fault that starts just before.
 *
 * While the database is down: /readyz says 503; culpritd keeps diagnosing from memory (the
 * job's in-memory window and its diagnoses advance, the latest report and the open incident
 * are served by the REST API) until its writer queue (writer_queue_records, 150,000 here) is
 * full; then it stops reading from the agents (connections "blocked"); the agents hold what
 * is not acknowledged (their unacknowledged batches grow) and drop nothing.
 * After it restarts: every record stored exactly once, the incident and its report stored. */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "pgtest.h"
#include "simfeed.h"

#define JOB "sim-compute_straggler"
#define ITERS 60 /* the fault starts at 20 */

static struct h_proc proc;

struct job_view {
	long records, diagnoses, last_iter, max_iter;
	int window_open, incident_open;
};

static int job_view(struct job_view *v)
{
	char *body = NULL;
	json_t *j, *w, *inc;
	int code = h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB, NULL, &body);

	memset(v, 0, sizeof(*v));
	j = code == 200 ? json_loads(body, 0, NULL) : NULL;
	free(body);
	if (!j)
		return -1;
	w = json_object_get(j, "window");
	inc = json_object_get(j, "incident");
	v->records = (long)json_integer_value(json_object_get(j, "records"));
	v->diagnoses = (long)json_integer_value(json_object_get(j, "diagnoses"));
	v->max_iter = (long)json_integer_value(json_object_get(j, "max_iter"));
	v->last_iter = (long)json_integer_value(json_object_get(w, "last_iter"));
	v->window_open = json_is_true(json_object_get(w, "open"));
	v->incident_open = json_is_object(inc) && strcmp(json_string_value(json_object_get(inc, "state")), "open") == 0;
	json_decref(j);
	return 0;
}

int main(void)
{
	const char *env = getenv("CULPRIT_DB_DOWN_S");
	const int down_s = env && atoi(env) > 0 ? atoi(env) : 60;
	char pgdir[512], pgdsn[512], dir[600];
	const char *extra[] = {"--db",  pgdsn, "--writer-queue-records", "150000", "--writer-txn-records",
			       "20000", NULL};
	struct simfeed *sf;
	struct fanout_stats st, at_stop;
	struct job_view before, v, best = {0};
	int64_t t0 = h_now_ms(), t_stop, t_start;
	uint64_t max_unacked = 0;
	int not_ready = 0, report_ok = 0, status;
	double max_blocked = 0;

	pgtest_tmpdir("fault_db_down", pgdir, sizeof(pgdir));
	pgtest_cluster_start(pgdir, pgdsn, sizeof(pgdsn));
	h_tmpdir("fault_db_down", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	sf = simfeed_start(&(struct simfeed_config){.scenario = "compute_straggler",
						    .iters = ITERS,
						    .port = proc.agent_port,
						    .ms_per_iter = 200,
						    .max_unacked_bytes = 2 << 20});
	/* the fault's window is open and diagnosed */
	for (int64_t deadline = h_now_ms() + 120000;; poll(NULL, 0, 100)) {
		if (job_view(&before) == 0 && before.window_open && before.diagnoses >= 1 && before.incident_open)
			break;
		H_CHECK(h_now_ms() < deadline && !simfeed_fed(sf), &proc);
	}
	simfeed_stats(sf, &at_stop);
	pgtest_cluster_stop(pgdir);
	t_stop = h_now_ms();
	fprintf(stderr, "PostgreSQL stopped at iteration %u (window to %ld, %ld diagnoses, %ld records in memory)\n",
		simfeed_iter(sf), before.last_iter, before.diagnoses, before.records);

	while (h_now_ms() - t_stop < (int64_t)down_s * 1000) {
		char *body = NULL;
		double blocked;

		if (h_http(proc.http_port, "GET", "/readyz", NULL, &body) == 503)
			not_ready = 1;
		free(body);
		body = NULL;
		if (h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, &body) == 200 && body &&
		    strstr(body, "compute_degradation"))
			report_ok++;
		free(body);
		H_CHECK(job_view(&v) == 0, &proc);
		if (v.diagnoses > best.diagnoses)
			best = v;
		H_CHECK(v.incident_open, &proc);
		blocked = h_get_metric(proc.http_port, "culprit_agent_connections{state=\"blocked\"}");
		if (blocked > max_blocked)
			max_blocked = blocked;
		simfeed_stats(sf, &st);
		if (st.unacked_batches > max_unacked)
			max_unacked = st.unacked_batches;
		H_CHECK(st.dropped_records == 0, &proc);
		poll(NULL, 0, 500);
	}
	simfeed_stats(sf, &st);
	fprintf(stderr,
		"down %.1f s: diagnoses %ld -> %ld (window to iteration %ld, %ld records in memory), latest report "
		"served %d times;"
		" blocked connections up to %.0f; agents' unacknowledged batches %llu -> up to %llu, %llu records "
		"appended, %llu dropped\n",
		(double)(h_now_ms() - t_stop) / 1000.0, before.diagnoses, best.diagnoses, best.last_iter, best.records,
		report_ok, max_blocked, (unsigned long long)at_stop.unacked_batches, (unsigned long long)max_unacked,
		(unsigned long long)st.records, (unsigned long long)st.dropped_records);
	H_CHECK(not_ready, &proc);
	H_CHECK(report_ok > 0, &proc);
	H_CHECK(best.diagnoses > before.diagnoses && best.last_iter > before.last_iter && best.records > before.records,
		&proc);
	H_CHECK(max_blocked > 0, &proc); /* the writer queue filled: backpressure */
	H_CHECK(max_unacked > at_stop.unacked_batches, &proc);

	pgtest_cluster_start(pgdir, pgdsn, sizeof(pgdsn));
	t_start = h_now_ms();
	H_CHECK(simfeed_finish(sf, 180000, &st) == 0, &proc);
	fprintf(stderr,
		"PostgreSQL back: everything acknowledged %.1f s later; %llu records, %llu batches, %llu dropped\n",
		(double)(h_now_ms() - t_start) / 1000.0, (unsigned long long)st.records,
		(unsigned long long)st.sealed_batches, (unsigned long long)st.dropped_records);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0 && st.acked_batches == st.sealed_batches, &proc);
	H_CHECK(fleet_check_db(pgdsn, JOB, simfeed_sent(sf)) == 0, &proc);
	simfeed_free(sf);
	/* the incident and the reports made while the database was down are stored too */
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 200)) {
		if (at_sql_long(pgdsn,
				"SELECT count(*) FROM incidents WHERE key LIKE '" JOB "/%/compute_degradation'") == 1 &&
		    at_sql_long(pgdsn, "SELECT count(*) FROM reports") >= best.diagnoses)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	fprintf(stderr, "ok (%.1f s)\n", (double)(h_now_ms() - t0) / 1000.0);
	return 0;
}
