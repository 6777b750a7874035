/* test_cluster_failover.c: three culpritd instances on one PostgreSQL (docs/operations.md,
 * "Many instances"), two simulated jobs of 12,960 ranks on 1,620 node agents each (the agent
 * library, tests/integration/ingest/simfeed.h). Every agent is configured with instance A;
 * the job leases say sim-case5 is B's and sim-healthy is C's, so A redirects their agents
 * there (the agent library follows). Once case5's compute_degradation incident is open and
 * batches are in flight, B is killed with SIGKILL. Its agents come back to A, which takes the
 * job when B's lease expires, reads the durable sequences and the open incident from
 * PostgreSQL, and the agents resend what was not acknowledged.
 *
 * Checked: A took the job within 10 s of the kill (printed); it read the incident's window
 * back from PostgreSQL with the baseline before it, so that its first report already names
 * the culprits (ranks 10352-10359 on node-1294, compute_degradation), as do its later ones,
 * with B's victims and detection iteration;
 * PostgreSQL holds exactly the records each job's agents sent; the incident continues under
 * the same key and resolves, and the webhook receiver gets one firing and one resolved;
 * sim-healthy, on C, is untouched (no incident, all its records). */
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
#define ITERS 20      /* the fault starts at ITERS / 3 = 6 */
#define RECOVER_AT 14 /* and ends here: the window closes 5 iterations later */
/* the feeder waits at HOLD_AT until B's incident is open, so that B dies early enough in the
 * fault for A to report windows past what B saw (on a loaded machine the feeder had run to
 * iteration 12 before the incident opened, and the window ends at 13) */
#define HOLD_AT 10

static struct h_proc a, b, c;

/* Prints the first line of p's log that contains needle (where a takeover's time went). */
static void print_log_line(const struct h_proc *p, const char *needle)
{
	char line[1024];
	FILE *f = fopen(p->log_path, "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, needle)) {
			fprintf(stderr, "A's log: %s", line);
			break;
		}
	if (f)
		fclose(f);
}

static void start(struct h_proc *p, const char *name, const char *dsn, const char *hook)
{
	const char *extra[] = {"--webhook-url", hook, "--alert-backoff-max-s", "2", NULL};

	H_CHECK(h_culpritd_start_instance(p, name, dsn, extra) == 0, p);
}

/* The lease of job says owner (its first Hello takes it again with the next epoch). */
static void give(const char *dsn, const char *job, const char *owner, const struct h_proc *p)
{
	char sql[512];

	snprintf(sql, sizeof(sql),
		 "INSERT INTO job_leases VALUES ('%s', '%s', 1, '127.0.0.1:%d', 'http://127.0.0.1:%d', now() + "
		 "interval '1 hour')"
		 " RETURNING 1",
		 job, owner, p->agent_port, p->http_port);
	H_CHECK(at_sql_long(dsn, sql) == 1, NULL);
}

/* The incident is open in PostgreSQL (B's): its key. */
static char *incident_open(const char *dsn, struct simfeed *sf)
{
	char *key;

	for (int64_t deadline = h_now_ms() + 240000;; poll(NULL, 0, 50)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM incidents i JOIN jobs j ON j.id = i.job_id"
				     " WHERE j.name = '" JOB "' AND i.state = 'open'") >= 1)
			break;
		H_CHECK(h_now_ms() < deadline && !simfeed_fed(sf), &b);
	}
	key = at_sql(dsn, "SELECT key FROM incidents");
	H_CHECK(key && strstr(key, "/compute_degradation"), &b);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'B' AND epoch = 2)::int FROM job_leases WHERE job = '" JOB "'") == 1,
		&b);
	H_CHECK(h_get_metric(a.http_port, "culprit_hellos_redirected_total") >= 2 * 1620, &a);
	return key;
}

/* A takes the job within 10 s of the kill, continues the incident and reads the window back;
 * the agents' unacknowledged batches are acknowledged by A. */
static void takeover(struct simfeed *sf, const struct fanout_stats *at_kill, int64_t t_kill)
{
	struct fanout_stats st;
	int64_t took_ms;

	H_CHECK(h_log_wait(&a, "job \"" JOB "\": lease acquired", 1, 15000), &a);
	took_ms = h_now_ms() - t_kill;
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 20)) {
		simfeed_stats(sf, &st);
		if (st.acked_batches > at_kill->acked_batches)
			break;
		H_CHECK(h_now_ms() < deadline, &a);
	}
	fprintf(stderr,
		"A took %s %lld ms after the kill (lease_s 4, the default); the first batch acknowledged by A %lld ms "
		"after it\n",
		JOB, (long long)took_ms, (long long)(h_now_ms() - t_kill));
	print_log_line(&a, "job \"" JOB "\": lease acquired");
	H_CHECK(took_ms < 10000, &a);
	H_CHECK(h_log_wait(&a, "continues (compute_degradation", 1, 10000), &a);
	H_CHECK(h_log_wait(&a, "job \"" JOB "\": window read back from the database", 1, 10000), &a);
}

/* A's reports after B's (ids past b_reports), kill_iter where B died. */
static void check_reports(const char *dsn, long b_reports, uint32_t kill_iter)
{
	char sql[512];

	/* A's first report already names the culprits (the 8 ranks of node-1294): its window was
	 * read back from PostgreSQL, not only what the agents sent after the takeover */
	snprintf(sql, sizeof(sql),
		 "SELECT (category = 'compute_degradation' AND (json->'suspects'->0->>'rank')::int BETWEEN 10352 AND "
		 "10359"
		 " AND json->'suspects'->0->>'host' = 'node-1294' AND first_iter = 6)::int FROM reports WHERE id > %ld"
		 " ORDER BY id LIMIT 1",
		 b_reports);
	H_CHECK(at_sql_long(dsn, sql) == 1, &a);
	/* with the victims and the detection B's reports had: the baseline before the window was
	 * read back too (without it A's reports said 0 victims and detected iteration 0) */
	{
		long b_victims, a_victims, b_detected, a_detected;

		snprintf(sql, sizeof(sql),
			 "SELECT (json->'victims'->>'ranks')::int FROM reports WHERE id <= %ld AND category = "
			 "'compute_degradation' ORDER BY id DESC LIMIT 1",
			 b_reports);
		b_victims = at_sql_long(dsn, sql);
		snprintf(sql, sizeof(sql),
			 "SELECT (json->'window'->>'detected_iter')::int FROM reports WHERE id <= %ld AND category = "
			 "'compute_degradation' ORDER BY id DESC LIMIT 1",
			 b_reports);
		b_detected = at_sql_long(dsn, sql);
		snprintf(sql, sizeof(sql),
			 "SELECT (json->'victims'->>'ranks')::int FROM reports WHERE id > %ld ORDER BY id LIMIT 1",
			 b_reports);
		a_victims = at_sql_long(dsn, sql);
		snprintf(sql, sizeof(sql),
			 "SELECT (json->'window'->>'detected_iter')::int FROM reports WHERE id > %ld ORDER BY id LIMIT "
			 "1",
			 b_reports);
		a_detected = at_sql_long(dsn, sql);
		fprintf(stderr, "B's last report: %ld victims, detected at iteration %ld; A's first: %ld, %ld\n",
			b_victims, b_detected, a_victims, a_detected);
		H_CHECK(b_victims > 0 && a_victims >= b_victims / 2 && a_detected == b_detected && b_detected > 0, &a);
	}
	/* with the kernel evidence B's had: the window's kernel summaries were read back too
	 * (without them the first report has the slow GEMM's isolated calls at 1.0x) */
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM (SELECT json FROM reports WHERE id > %ld ORDER BY id LIMIT 1) r,"
		 " jsonb_array_elements(r.json->'suspects'->0->'kernels') k"
		 " WHERE k->>'name' = 'sm90_gemm' AND (k->>'max_ratio')::float > 2",
		 b_reports);
	H_CHECK(at_sql_long(dsn, sql) == 1, &a);
	/* and so do its reports of windows past what B could have seen */
	snprintf(sql, sizeof(sql),
		 "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB "'"
		 " AND r.last_iter >= %u AND r.category = 'compute_degradation'"
		 " AND (r.json->'suspects'->0->>'rank')::int BETWEEN 10352 AND 10359"
		 " AND r.json->'suspects'->0->>'host' = 'node-1294' AND r.json->'suspects'->0->>'role' = 'culprit'",
		 kill_iter + 2);
	H_CHECK(at_sql_long(dsn, sql) >= 1, &a);
}

/* The same incident resolves, its resolve delivered once; none for sim-healthy. */
static void check_resolved(const char *dsn, const char *key)
{
	char sql[512];

	/* the same incident resolves, its resolve delivered; none for sim-healthy */
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/resolved/%'"
				     " AND state = 'sent'") == 1)
			break;
		H_CHECK(h_now_ms() < deadline, &a);
	}
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents") == 1, &a);
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM incidents WHERE key = '%s' AND state = 'resolved'", key);
	H_CHECK(at_sql_long(dsn, sql) == 1, &a);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/firing/%'") == 1, &a);
	H_CHECK(h_count_lines(a.log_path, " firing: ") == 0, &a);
	H_CHECK(h_log_wait(&a, " resolved: job \"" JOB "\"", 1, 1000), &a);
}

int main(void)
{
	char dsn[512], hook[128], *key;
	int rx_port;
	uint32_t kill_iter;
	long b_reports;
	int64_t t_kill, t0 = h_now_ms();
	struct rx *rx = rx_start(&rx_port);
	struct rx_hit *hits;
	struct fanout_stats at_kill, st, st2;
	struct simfeed *sf, *sf2;
	size_t n;
	struct rx_states rs;

	H_CHECK(rx != NULL, NULL);
	snprintf(hook, sizeof(hook), "http://127.0.0.1:%d/hook", rx_port);
	h_db_create("test_cluster_failover", dsn, sizeof(dsn));
	start(&a, "A", dsn, hook);
	start(&b, "B", dsn, hook);
	start(&c, "C", dsn, hook);
	give(dsn, JOB, "B", &b);
	give(dsn, "sim-healthy", "C", &c);

	sf = simfeed_start(&(struct simfeed_config){.scenario = "case5",
						    .iters = ITERS,
						    .recover_at = RECOVER_AT,
						    .hold_at = HOLD_AT,
						    .port = a.agent_port});
	sf2 = simfeed_start(&(struct simfeed_config){.scenario = "healthy", .iters = ITERS, .port = a.agent_port});
	key = incident_open(dsn, sf);
	/* B is killed while batches are in flight */
	simfeed_release(sf);
	for (int64_t deadline = h_now_ms() + 5000;; poll(NULL, 0, 1)) {
		simfeed_stats(sf, &at_kill);
		if (at_kill.unacked_batches > 0 || h_now_ms() > deadline)
			break;
	}
	kill_iter = simfeed_iter(sf);
	h_proc_stop(&b, SIGKILL, 10000);
	t_kill = h_now_ms();
	H_CHECK(b.pid == 0, &b);
	b_reports = at_sql_long(dsn, "SELECT coalesce(max(id), 0) FROM reports");
	fprintf(stderr,
		"killed B at iteration %u with incident %s open, %llu of %llu batches acknowledged, %llu in flight\n",
		kill_iter, key, (unsigned long long)at_kill.acked_batches, (unsigned long long)at_kill.sealed_batches,
		(unsigned long long)at_kill.unacked_batches);
	H_CHECK(at_kill.unacked_batches > 0, &a);
	takeover(sf, &at_kill, t_kill);

	H_CHECK(simfeed_finish(sf, 300000, &st) == 0, &a);
	H_CHECK(simfeed_finish(sf2, 300000, &st2) == 0, &c);
	fprintf(stderr, "%s: %llu records, %llu batches, %llu resent, %llu connects; sim-healthy: %llu records\n", JOB,
		(unsigned long long)st.records, (unsigned long long)st.sealed_batches,
		(unsigned long long)st.resent_batches, (unsigned long long)st.connects,
		(unsigned long long)st2.records);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0 && st.acked_batches == st.sealed_batches, &a);
	H_CHECK(st2.dropped_records == 0 && st2.rejected_batches == 0 && st2.acked_batches == st2.sealed_batches, &c);
	H_CHECK(fleet_check_db(dsn, JOB, simfeed_sent(sf)) == 0, &a);
	H_CHECK(fleet_check_db(dsn, "sim-healthy", simfeed_sent(sf2)) == 0, &c);
	check_reports(dsn, b_reports, kill_iter);
	check_resolved(dsn, key);

	n = rx_hits(rx, &hits);
	rx_states(hits, n, key, &rs);
	fprintf(stderr, "webhook: %zu requests, %zu firing, %zu resolved for %s; %.1f s in all\n", n, rs.firing,
		rs.resolved, key, (double)(h_now_ms() - t0) / 1000.0);
	H_CHECK(rs.other == 0 && rs.firing == 1 && rs.resolved == 1 && rs.firing_at < rs.resolved_at, &a);
	int status = h_proc_stop(&a, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &a);
	status = h_proc_stop(&c, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &c);
	rx_hits_free(hits, n);
	rx_stop(rx);
	simfeed_free(sf);
	simfeed_free(sf2);
	free(key);
	fprintf(stderr, "ok\n");
	return 0;
}
