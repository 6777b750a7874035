/* test_ingest_restart.c: the seed incident's job (case5: 12,960 ranks on 1,620 node agents of
 * the agent library, tests/integration/ingest/simfeed.h) streams into the real culpritd, which
 * posts incident changes to a webhook receiver in this process. Once the compute_degradation
 * incident is open (committed in PostgreSQL) and batches are in flight, culpritd is killed
 * with SIGKILL (nothing flushed, nothing said) and started again on the same agent port and
 * database. The agents reconnect, learn each durable sequence from HelloAck and resend the
 * rest; the fault then ends (--recover-at).
 *
 * Checked: PostgreSQL holds exactly the records the agents sent (counts, duration sums,
 * distinct keys: none lost, none twice); the restarted culpritd continues the incident (the
 * same key, one incident row, no second "firing") and resolves it when the job is back at its
 * baseline, the resolve delivered through the outbox: the receiver gets one firing (one dedup
 * key, delivered at least once: a kill right after a delivery may repeat it) and then
 * one resolved for the incident. */
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "receiver.h"
#include "simfeed.h"

#define JOB "sim-case5"
#define ITERS 21      /* the fault starts at ITERS / 3 = 7 */
#define RECOVER_AT 15 /* and ends here (8 slow iterations: the incident opens well before the feed holds
		       * there, with batches still in flight); the window closes 5 iterations later */

static struct h_proc proc;

static void start(const char *dir, const char *dsn, const char *listen, const char *hook)
{
	const char *extra[] = {
		"--db", dsn, "--webhook-url", hook, "--alert-backoff-max-s", "2", listen ? "--agent-listen" : NULL,
		listen, NULL};

	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
}

int main(void)
{
	char dsn[512], dir[600], listen[64], hook[128], *key;
	int rx_port, firing_lines, status;
	int64_t t_kill, down_ms, t0 = h_now_ms();
	struct rx *rx = rx_start(&rx_port);
	struct rx_hit *hits;
	struct fanout_stats at_kill, st;
	struct simfeed *sf;
	size_t n;
	struct rx_states rs;

	H_CHECK(rx != NULL, NULL);
	snprintf(hook, sizeof(hook), "http://127.0.0.1:%d/hook", rx_port);
	h_db_create("test_ingest_restart", dsn, sizeof(dsn));
	h_tmpdir("ingest_restart", dir, sizeof(dir));
	start(dir, dsn, NULL, hook);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);

	/* near lockstep: an iteration starts when the one before the previous is acknowledged, so
	 * that no rank lags the others by much (a lagging rank looks hung); held before the
	 * recovery until the restart is done */
	sf = simfeed_start(&(struct simfeed_config){.scenario = "case5",
						    .iters = ITERS,
						    .recover_at = RECOVER_AT,
						    .port = proc.agent_port,
						    .hold_at = RECOVER_AT});

	/* the incident is open in PostgreSQL ... */
	for (int64_t deadline = h_now_ms() + 240000;; poll(NULL, 0, 50)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM incidents i JOIN jobs j ON j.id = i.job_id"
				     " WHERE j.name = '" JOB "' AND i.state = 'open'") >= 1)
			break;
		H_CHECK(h_now_ms() < deadline && !simfeed_fed(sf), &proc);
	}
	key = at_sql(dsn, "SELECT key FROM incidents");
	H_CHECK(key && strstr(key, "/compute_degradation"), &proc);
	/* ... and batches are in flight, not only unacknowledged: no Ack came for 50 ms, so the
	 * writer is inside a transaction. Right after a commit the agents hold the batches it
	 * made durable until their Acks arrive; a kill then left nothing to resend (a CI run
	 * killed with 1,877 batches unacknowledged and none was resent). */
	for (int64_t deadline = h_now_ms() + 5000;;) {
		struct fanout_stats before;
		simfeed_stats(sf, &before);
		poll(NULL, 0, 50);
		simfeed_stats(sf, &at_kill);
		if ((at_kill.unacked_batches > 0 && at_kill.acked_batches == before.acked_batches) ||
		    h_now_ms() > deadline)
			break;
	}
	firing_lines = h_count_lines(proc.log_path, " firing: ");
	h_proc_stop(&proc, SIGKILL, 10000);
	t_kill = h_now_ms();
	H_CHECK(proc.pid == 0, &proc);
	fprintf(stderr,
		"killed culpritd at iteration %u with incident %s open, %llu of %llu batches acknowledged, %llu in "
		"flight\n",
		simfeed_iter(sf), key, (unsigned long long)at_kill.acked_batches,
		(unsigned long long)at_kill.sealed_batches, (unsigned long long)at_kill.unacked_batches);
	H_CHECK(at_kill.unacked_batches > 0, &proc);

	start(dir, dsn, listen, hook);
	down_ms = h_now_ms() - t_kill;
	/* the same incident continues */
	H_CHECK(h_log_wait(&proc, "1 incidents were left open", 1, 1000), &proc);
	H_CHECK(h_log_wait(&proc, "continues (compute_degradation", 1, 60000), &proc);
	simfeed_release(sf);

	H_CHECK(simfeed_finish(sf, 300000, &st) == 0, &proc);
	fprintf(stderr,
		"%llu records, %llu batches, %llu resent after the restart (culpritd down %.1f s), %llu connects, %llu "
		"disconnects\n",
		(unsigned long long)st.records, (unsigned long long)st.sealed_batches,
		(unsigned long long)st.resent_batches, (double)down_ms / 1000.0, (unsigned long long)st.connects,
		(unsigned long long)st.disconnects);
	H_CHECK(st.disconnects >= 1620 && st.connects >= 2 * 1620, &proc); /* every agent lost it and came back */
	H_CHECK(st.resent_batches > 0, &proc);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0, &proc);
	H_CHECK(st.acked_batches == st.sealed_batches, &proc);
	H_CHECK(fleet_check_db(dsn, JOB, simfeed_sent(sf)) == 0, &proc);

	/* recovered: the same incident resolves, its resolve delivered */
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/resolved/%'"
				     " AND state = 'sent'") == 1)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	{
		char sql[512];

		H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents") == 1, &proc);
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM incidents WHERE key = '%s' AND state = 'resolved'",
			 key);
		H_CHECK(at_sql_long(dsn, sql) == 1, &proc);
		H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/firing/%'") == 1,
			&proc);
	}
	/* no second "firing" from the restarted culpritd */
	H_CHECK(h_count_lines(proc.log_path, " firing: ") == firing_lines, &proc);
	H_CHECK(h_log_wait(&proc, " resolved: job \"" JOB "\"", 1, 1000), &proc);
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);

	n = rx_hits(rx, &hits);
	rx_states(hits, n, key, &rs);
	fprintf(stderr, "webhook: %zu requests, %zu firing, %zu resolved for %s; %.1f s in all\n", n, rs.firing,
		rs.resolved, key, (double)(h_now_ms() - t0) / 1000.0);
	H_CHECK(rs.other == 0 && rs.firing == 1 && rs.resolved == 1 && rs.firing_at < rs.resolved_at, &proc);
	rx_hits_free(hits, n);
	rx_stop(rx);
	simfeed_free(sf);
	free(key);
	fprintf(stderr, "ok\n");
	return 0;
}
