/* test_cluster_relay.c: a job with more agents than its owner takes, served through a relay
 * (docs/operations.md, "Many instances", relays). Two culpritd instances on one PostgreSQL:
 * A owns sim-compute_straggler (its lease row says so) and takes at most 16 agent
 * connections (max_connections); the job's 128 node agents (1,024 ranks, the agent library
 * in this process, tests/integration/ingest/simfeed.h) are all configured with B. B
 * redirects agents to A while A's lease row says it has room, and relays the rest to A over
 * one connection once A says it has none.
 *
 * Checked, at iteration 24: A took agents directly and through the relay
 * (culprit_agents_via_relay seen at 100 or more, one relay connection) and B relayed batches
 * (culprit_relayed_batches_total); without relays the agents over A's max_connections never
 * get in and the feed stalls there. Then A is killed (SIGKILL): B ends the relay and closes
 * the agents it relayed (its log line), they come back and B takes the job when A's lease
 * expires. At the end every agent's records are acknowledged and PostgreSQL holds each
 * exactly once (fleet_check_db: counts and duration sums equal what was sent, no duplicate
 * keys); the reports name the straggler: compute_degradation, rank 517 on node-64 first, as
 * culprit, and no other category. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "simfeed.h"

#define JOB "sim-compute_straggler"
#define OWNER_MAX_CONNECTIONS "16"
#define HOLD_AT 24

int main(void)
{
	static struct h_proc a, b;
	char dsn[512], sql[512];
	const char *extra_a[] = {"--max-connections", OWNER_MAX_CONNECTIONS, "--lease-s", "2", NULL};
	const char *extra_b[] = {"--lease-s", "2", NULL};
	struct fanout_stats st;
	struct simfeed *sf;
	double via_relay = 0, relay_conns = 0, relayed;

	h_db_create("test_cluster_relay", dsn, sizeof(dsn));
	H_CHECK(h_culpritd_start_instance(&a, "A", dsn, extra_a) == 0, &a);
	H_CHECK(h_culpritd_start_instance(&b, "B", dsn, extra_b) == 0, &b);
	/* A owns the job: its first Hello (redirected there by B) takes the lease again */
	snprintf(sql, sizeof(sql),
		 "INSERT INTO job_leases VALUES ('" JOB "', 'A', 1, '127.0.0.1:%d', 'http://127.0.0.1:%d',"
		 " now() + interval '1 hour') RETURNING 1",
		 a.agent_port, a.http_port);
	H_CHECK(at_sql_long(dsn, sql) == 1, NULL);

	sf = simfeed_start(&(struct simfeed_config){
		.scenario = "compute_straggler", .iters = 30, .hold_at = HOLD_AT, .port = b.agent_port});
	for (int64_t deadline = h_now_ms() + 120000; !simfeed_holding(sf);) {
		double v = h_get_metric(a.http_port, "culprit_agents_via_relay");
		double r = h_get_metric(a.http_port, "culprit_relay_connections");

		via_relay = v > via_relay ? v : via_relay;
		relay_conns = r > relay_conns ? r : relay_conns;
		H_CHECK(h_now_ms() < deadline, &a); /* without relays the agents over A's limit never get in */
		poll(NULL, 0, 100);
	}
	relayed = h_get_metric(b.http_port, "culprit_relayed_batches_total");
	fprintf(stderr,
		"at iteration %d: A took at most %.0f agents via %.0f relay connection(s); B relayed %.0f batches; "
		"A's connections over max_connections refused: %.0f\n",
		HOLD_AT, via_relay, relay_conns, relayed,
		h_get_metric(a.http_port, "culprit_agent_connections_over_limit_total{limit=\"connections\"}"));
	H_CHECK(via_relay >= 100 && relay_conns == 1, &a);
	H_CHECK(relayed >= 100 * (HOLD_AT - 2), &b);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'A')::int FROM job_leases WHERE job = '" JOB "'") == 1, &a);

	/* the owner dies: B closes the agents it relayed; they come back, B takes the job */
	h_proc_stop(&a, SIGKILL, 10000);
	snprintf(sql, sizeof(sql), "relay of job \"" JOB "\" to 127.0.0.1:%d ended", a.agent_port);
	H_CHECK(h_log_wait(&b, sql, 1, 10000), &b);
	simfeed_release(sf);
	H_CHECK(simfeed_finish(sf, 60000, &st) == 0, &b);
	fprintf(stderr, "%llu records, %llu batches, %llu resent, %llu connects\n", (unsigned long long)st.records,
		(unsigned long long)st.sealed_batches, (unsigned long long)st.resent_batches,
		(unsigned long long)st.connects);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0 && st.acked_batches == st.sealed_batches, &b);
	H_CHECK(fleet_check_db(dsn, JOB, simfeed_sent(sf)) == 0, &b);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'B')::int FROM job_leases WHERE job = '" JOB "'") == 1, &b);

	/* the owners' reports name the straggler */
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn,
				"SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB "'"
				" AND r.category = 'compute_degradation' AND r.json->'suspects'->0->>'rank' = '517'"
				" AND r.json->'suspects'->0->>'host' = 'node-64'"
				" AND r.json->'suspects'->0->>'role' = 'culprit'") >= 1)
			break;
		H_CHECK(h_now_ms() < deadline, &b);
	}
	H_CHECK(at_sql_long(dsn,
			    "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB "'"
			    " AND r.category <> 'compute_degradation'") == 0,
		&b);
	H_CHECK(h_count_lines(b.log_path, "relaying agents of job \"" JOB "\"") >= 1, &b);

	int status = h_proc_stop(&b, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &b);
	simfeed_free(sf);
	fprintf(stderr, "ok\n");
	return 0;
}
