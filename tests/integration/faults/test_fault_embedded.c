/* test_fault_embedded: the embedded PostgreSQL is supervised. case5 (12,960 ranks, 1,620
 * node agents of the agent library in this process) streams into culpritd running its own
 * PostgreSQL under its data dir (no --db).
 *
 * 1. In the middle of the stream, with batches in flight, the postmaster is SIGKILLed (as the
 *    OOM killer would). culpritd notices, logs it, starts it again (crash recovery) and
 *    counts it (culprit_embedded_restarts_total 1); the writer resumes and the stream goes on.
 *    Once the new postmaster answers the liveness check its restart backoff starts over: killed
 *    again at once, it is started again at once (not after 1 s).
 * 2. Later, with batches in flight again, the postmaster is stopped (SIGSTOP) and culpritd is
 *    SIGKILLed: the postmaster gets its SIGINT (fast shutdown) but cannot act on it yet. A new
 *    culpritd on the same data dir finds it alive and waits for it (it does not exit); once the
 *    old postmaster runs again and finishes its shutdown, the new culpritd starts its own and
 *    comes up. The agents reconnect and resend what was not acknowledged.
 * Both end with PostgreSQL holding exactly what the agents sent (counts, duration sums,
 * distinct keys: nothing lost, nothing twice). */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "harness.h"
#include "simfeed.h"

#define JOB "sim-case5"
#define ITERS 12
#define KILL_PG_AT 3       /* iteration fed when the postmaster is killed */
#define KILL_CULPRITD_AT 8 /* and when culpritd is */

static struct h_proc proc;

static pid_t postmaster(const char *dir)
{
	char path[700];
	long pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/pg/data/postmaster.pid", dir);
	f = fopen(path, "r");
	if (f && fscanf(f, "%ld", &pid) != 1)
		pid = 0;
	if (f)
		fclose(f);
	return (pid_t)pid;
}

/* Waits until the stream has reached iteration iter with batches in flight. */
static void wait_in_flight(struct simfeed *sf, uint32_t iter, struct fanout_stats *st)
{
	for (int64_t deadline = h_now_ms() + 300000;; poll(NULL, 0, 1)) {
		simfeed_stats(sf, st);
		if (simfeed_iter(sf) >= iter && st->unacked_batches > 0)
			return;
		H_CHECK(h_now_ms() < deadline && !simfeed_fed(sf), &proc);
	}
}

/* Resumes the stopped postmaster once the new culpritd says it waits for it. */
struct resume {
	const char *log_path;
	pid_t pid;
	int seen;
};

static void *resume_main(void *arg)
{
	struct resume *r = arg;
	char needle[64];

	snprintf(needle, sizeof(needle), "postgres (pid %ld) left running", (long)r->pid);
	for (int64_t deadline = h_now_ms() + 60000; h_now_ms() < deadline && !r->seen; poll(NULL, 0, 20))
		r->seen = h_count_lines(r->log_path, needle) > 0;
	kill(r->pid, SIGCONT);
	return NULL;
}

int main(void)
{
	char dir[600], dsn[800], listen[64];
	const char *extra[] = {"--agent-listen", listen, NULL};
	struct fanout_stats at_kill, st;
	struct simfeed *sf;
	struct resume res;
	pthread_t thr;
	pid_t pm, pm2;
	int64_t t0 = h_now_ms(), t_kill;
	int status;

	h_tmpdir("fault_embedded", dir, sizeof(dir));
	chmod(dir, 0755); /* PostgreSQL runs as "postgres" when we are root: it must reach it */
	snprintf(dsn, sizeof(dsn), "host=%s/pg port=5432 user=culprit dbname=culprit", dir);
	H_CHECK(h_culpritd_start(&proc, dir, NULL) == 0, &proc);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);
	sf = simfeed_start(&(struct simfeed_config){.scenario = "case5", .iters = ITERS, .port = proc.agent_port});

	/* 1. the postmaster killed in the middle of the stream */
	wait_in_flight(sf, KILL_PG_AT, &at_kill);
	pm = postmaster(dir);
	H_CHECK(pm > 0 && kill(pm, SIGKILL) == 0, &proc);
	t_kill = h_now_ms();
	H_CHECK(h_log_wait(&proc, "embedded: postgres started again", 1, 60000), &proc);
	fprintf(stderr,
		"postmaster %ld killed at iteration %u with %llu batches acknowledged, %llu in flight; started again "
		"after %.1f s\n",
		(long)pm, simfeed_iter(sf), (unsigned long long)at_kill.acked_batches,
		(unsigned long long)at_kill.unacked_batches, (double)(h_now_ms() - t_kill) / 1000.0);
	H_CHECK(h_count_lines(proc.log_path, "was killed by signal 9") == 1, &proc);
	/* the writer writes again: the agents get Acks for more than they had */
	for (int64_t deadline = h_now_ms() + 120000;; poll(NULL, 0, 50)) {
		simfeed_stats(sf, &st);
		if (st.acked_batches > at_kill.acked_batches + at_kill.unacked_batches)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	fprintf(stderr, "writing again %.1f s after the kill\n", (double)(h_now_ms() - t_kill) / 1000.0);
	/* once the new postmaster has answered, the cause is gone: killed again, it is started
	 * again at once, not after the backoff's 1 s (that took a minute of running) */
	H_CHECK(h_log_wait(&proc, "answers again; a next restart would be at once", 1, 30000), &proc);
	pm = postmaster(dir);
	H_CHECK(pm > 0 && kill(pm, SIGKILL) == 0, &proc);
	H_CHECK(h_log_wait(&proc, "embedded: postgres started again", 2, 60000), &proc);
	H_CHECK(h_count_lines(proc.log_path, "was killed by signal 9") == 2, &proc);
	H_CHECK(h_count_lines(proc.log_path, "; starting it again in 0 ms") == 2, &proc);

	/* 2. culpritd killed while its postmaster cannot finish shutting down */
	wait_in_flight(sf, KILL_CULPRITD_AT, &at_kill);
	H_CHECK(h_get_metric(proc.http_port, "culprit_embedded_restarts_total") == 2, &proc);
	pm2 = postmaster(dir);
	H_CHECK(pm2 > 0 && pm2 != pm, &proc);
	H_CHECK(kill(pm2, SIGSTOP) == 0, &proc);
	h_proc_stop(&proc, SIGKILL, 10000);
	t_kill = h_now_ms();
	res = (struct resume){proc.log_path, pm2, 0};
	pthread_create(&thr, NULL, resume_main, &res);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	pthread_join(thr, NULL);
	H_CHECK(res.seen, &proc);
	H_CHECK(kill(pm2, 0) < 0, &proc); /* the old postmaster is gone */
	fprintf(stderr,
		"culpritd killed at iteration %u with %llu batches in flight; the next one waited for postmaster %ld "
		"and was up %.1f s later\n",
		simfeed_iter(sf), (unsigned long long)at_kill.unacked_batches, (long)pm2,
		(double)(h_now_ms() - t_kill) / 1000.0);

	H_CHECK(simfeed_finish(sf, 300000, &st) == 0, &proc);
	fprintf(stderr, "%llu records, %llu batches, %llu resent\n", (unsigned long long)st.records,
		(unsigned long long)st.sealed_batches, (unsigned long long)st.resent_batches);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0 && st.acked_batches == st.sealed_batches, &proc);
	H_CHECK(st.resent_batches > 0, &proc);
	H_CHECK(fleet_check_db(dsn, JOB, simfeed_sent(sf)) == 0, &proc);
	simfeed_free(sf);
	H_CHECK(h_get_metric(proc.http_port, "culprit_embedded_restarts_total") == 0, &proc);
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	fprintf(stderr, "ok (%.1f s)\n", (double)(h_now_ms() - t0) / 1000.0);
	return 0;
}
