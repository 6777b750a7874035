/* test_fault_sigterm: SIGTERM drains, a second SIGTERM exits at once.
 *
 * 1. 396 node agents (3,168 ranks) stream into culpritd on the test PostgreSQL; in the middle
 *    of the stream culpritd gets SIGTERM. It stops accepting (a new connection is refused),
 *    commits what it received, sends the last Acks and exits 0. Every record an agent saw
 *    acknowledged is in PostgreSQL: for every agent, agent_progress (committed with the
 *    records) holds at least the sequence the agent saw acknowledged. Started again, culpritd
 *    gets the rest: PostgreSQL ends with exactly what was sent.
 * 2. On a PostgreSQL cluster of the test's own: /readyz says ready before any agent came. The
 *    database is stopped while records wait in culpritd's writer queue: a SIGTERM drain would
 *    wait (up to 30 s). It is still running 3 s later; a second SIGTERM makes it exit within 2 s. The database and culpritd started
 *    again, the agents resend what was not committed: exactly what was sent is stored.
 * 3. The same without a second SIGTERM: culpritd gives up and exits 0 within the documented
 *    30 s of the SIGTERM (the drain, the writers and the rest of the stop share one deadline). */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "fleet.h"
#include "harness.h"
#include "pgtest.h"

#define NODES 396 /* 8 ranks each; PP 9, EP 32: a multiple of 36 */
#define ITERS 30

static struct h_proc proc;

struct stream {
	struct fleet *f;
	uint32_t first, n;
};

static void *stream_main(void *arg)
{
	struct stream *st = arg;

	/* an iteration at a time, each in batches of its own (the agents flush every 100 ms):
	 * at full speed the whole stream fits in two batches an agent, and SIGTERM would find
	 * nothing in flight */
	for (uint32_t it = st->first; it < st->first + st->n; it++) {
		fleet_stream(st->f, it, 1);
		poll(NULL, 0, 150);
	}
	return NULL;
}

/* agent_progress of job: durable_seq per node agent (index = node number) */
static void db_progress(const char *dsn, const char *job, uint64_t *seq, uint32_t n)
{
	PGconn *c = PQconnectdb(dsn);
	const char *p[1] = {job};
	PGresult *r;

	H_CHECK(PQstatus(c) == CONNECTION_OK, &proc);
	r = PQexecParams(
		c,
		"SELECT p.agent, p.durable_seq FROM agent_progress p JOIN jobs j ON j.id = p.job_id WHERE j.name = $1",
		1, NULL, p, NULL, NULL, 0);
	H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, &proc);
	memset(seq, 0, n * sizeof(*seq));
	for (int i = 0; i < PQntuples(r); i++) {
		unsigned node;

		if (sscanf(PQgetvalue(r, i, 0), "node-%u", &node) == 1 && node < n)
			seq[node] = strtoull(PQgetvalue(r, i, 1), NULL, 10);
	}
	PQclear(r);
	PQfinish(c);
}

static void drain_keeps_acknowledged(void)
{
	char dsn[512], dir[600], listen[64];
	const char *extra[] = {"--db", dsn, NULL, NULL, NULL};
	struct agent_stats st;
	struct stream s;
	pthread_t thr;
	uint64_t db_seq[NODES], acked_total = 0, in_flight = 0;
	int64_t t_term, t_exit;
	int status, refused = 0;

	h_db_create("fault_sigterm", dsn, sizeof(dsn));
	h_tmpdir("fault_sigterm", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);
	s = (struct stream){fleet_new("fault-sigterm", NODES, proc.agent_port), 0, ITERS};
	pthread_create(&thr, NULL, stream_main, &s);
	/* in the middle: some acknowledged, some in flight */
	for (int64_t deadline = h_now_ms() + 120000;; poll(NULL, 0, 5)) {
		fleet_stats(s.f, &st);
		if (st.batches_acked >= 1000 && st.unacked_batches > 0)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	kill(proc.pid, SIGTERM);
	t_term = h_now_ms();
	fprintf(stderr, "SIGTERM with %llu batches acknowledged and %llu in flight\n",
		(unsigned long long)st.batches_acked, (unsigned long long)st.unacked_batches);
	/* stops accepting at once (while it drains, and of course once it is gone): within 2 s of
	 * its taking the signal, which on a loaded machine may itself come seconds after the
	 * kill (two CI runs at load 11-14 logged it 1.5 s or more late) */
	h_log_wait(&proc, "shutting down: no new connections", 1, 20000);
	for (int64_t deadline = h_now_ms() + 2000; h_now_ms() < deadline && !refused; poll(NULL, 0, 20)) {
		int fd = h_connect(proc.agent_port);

		refused = fd < 0;
		if (fd >= 0)
			close(fd);
	}
	status = h_proc_stop(&proc, 0, 40000);
	t_exit = h_now_ms();
	H_CHECK(refused, &proc);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	H_CHECK(h_log_wait(&proc, "shutting down: no new connections", 1, 0), &proc);
	H_CHECK(h_count_lines(proc.log_path, "were not committed") == 0, &proc);
	/* every acknowledged batch is committed */
	db_progress(dsn, "fault-sigterm", db_seq, NODES);
	for (uint32_t i = 0; i < NODES; i++) {
		struct agent_stats a;

		fleet_agent_stats(s.f, i, &a);
		if (a.durable_seq > db_seq[i]) {
			fprintf(stderr, "agent node-%u saw %llu acknowledged, PostgreSQL has %llu\n", i,
				(unsigned long long)a.durable_seq, (unsigned long long)db_seq[i]);
			H_CHECK(0, &proc);
		}
		acked_total += a.batches_acked;
		in_flight += a.unacked_batches;
	}
	fprintf(stderr,
		"SIGTERM: culpritd exited 0 in %.2f s; %llu batches acknowledged, all of them in PostgreSQL; %llu "
		"still held by the agents\n",
		(double)(t_exit - t_term) / 1000.0, (unsigned long long)acked_total, (unsigned long long)in_flight);

	/* the rest goes to the next culpritd */
	extra[2] = "--agent-listen";
	extra[3] = listen;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	pthread_join(thr, NULL);
	H_CHECK(fleet_flush(s.f, 120000) == 0, &proc);
	fleet_stats(s.f, &st);
	H_CHECK(st.records_dropped == 0 && st.batches_rejected == 0 && st.batches_acked == st.batches_sealed, &proc);
	H_CHECK(fleet_check_db(dsn, "fault-sigterm", fleet_sent(s.f)) == 0, &proc);
	fleet_free(s.f);
	status = h_proc_stop(&proc, SIGTERM, 40000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
}

static void db_down_stop(int second_signal)
{
	char pgdir[512], pgdsn[512], dir[600], listen[64];
	const char *extra[] = {"--db", pgdsn, NULL, NULL, NULL};
	struct fleet *f;
	struct agent_stats st;
	int64_t t_second;
	int status;
	pid_t pid;

	pgtest_tmpdir("fault_sigterm_pg", pgdir, sizeof(pgdir));
	pgtest_cluster_start(pgdir, pgdsn, sizeof(pgdsn));
	h_tmpdir("fault_sigterm_2", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	/* ready before any agent came: the writer connects while idle */
	for (int64_t deadline = h_now_ms() + 10000;; poll(NULL, 0, 50)) {
		char *body = NULL;
		int code = h_http(proc.http_port, "GET", "/readyz", NULL, &body);

		free(body);
		if (code == 200)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);
	f = fleet_new("fault-sigterm-2", 36, proc.agent_port);
	fleet_stream(f, 0, 10);
	H_CHECK(fleet_flush(f, 60000) == 0, &proc);

	/* the database goes away; more records arrive and wait in the writer queue */
	pgtest_cluster_stop(pgdir);
	fleet_stream(f, 10, 10);
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 50)) {
		char *body = NULL;
		int code = h_http(proc.http_port, "GET", "/readyz", NULL, &body);

		free(body);
		if (code == 503) /* the writer found the database gone */
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	fleet_stats(f, &st);
	H_CHECK(st.unacked_batches > 0, &proc);

	pid = proc.pid;
	kill(pid, SIGTERM);
	poll(NULL, 0, 3000);
	H_CHECK(waitpid(pid, &status, WNOHANG) == 0, &proc); /* still draining: the database is away */
	H_CHECK(h_log_wait(&proc, "shutting down: no new connections", 1, 0), &proc);
	t_second = h_now_ms();
	if (second_signal) {
		status = h_proc_stop(&proc, SIGTERM, 10000);
		fprintf(stderr, "second SIGTERM: culpritd exited in %.2f s with %llu batches unacknowledged\n",
			(double)(h_now_ms() - t_second) / 1000.0, (unsigned long long)st.unacked_batches);
		H_CHECK(status != -1 && h_now_ms() - t_second <= 2000, &proc);
		H_CHECK(h_log_wait(&proc, "second signal: exiting now", 1, 0), &proc);
	} else {
		/* within 30 s of the SIGTERM (3 s of them spent above), and up to 3 s for the exit
		 * itself on a loaded machine (ASan's leak check included) */
		status = h_proc_stop(&proc, 0, 60000);
		fprintf(stderr,
			"SIGTERM with the database down: culpritd exited %.2f s after it with %llu batches "
			"unacknowledged\n",
			(double)(h_now_ms() - t_second + 3000) / 1000.0, (unsigned long long)st.unacked_batches);
		H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
		H_CHECK(h_now_ms() - t_second <= 27000 + 3000, &proc);
		H_CHECK(h_log_wait(&proc, "gave up waiting for the database", 1, 0), &proc);
	}

	/* nothing lost: the agents resend what was not committed to the next culpritd */
	pgtest_cluster_start(pgdir, pgdsn, sizeof(pgdsn));
	extra[2] = "--agent-listen";
	extra[3] = listen;
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	H_CHECK(fleet_flush(f, 60000) == 0, &proc);
	fleet_stats(f, &st);
	H_CHECK(st.records_dropped == 0 && st.batches_acked == st.batches_sealed, &proc);
	H_CHECK(fleet_check_db(pgdsn, "fault-sigterm-2", fleet_sent(f)) == 0, &proc);
	fleet_free(f);
	status = h_proc_stop(&proc, SIGTERM, 40000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	pgtest_cluster_stop(pgdir);
}

int main(void)
{
	int64_t t0 = h_now_ms();

	drain_keeps_acknowledged();
	db_down_stop(1);
	db_down_stop(0);
	fprintf(stderr, "ok (%.1f s)\n", (double)(h_now_ms() - t0) / 1000.0);
	return 0;
}
