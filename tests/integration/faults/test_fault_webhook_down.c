/* test_fault_webhook_down: the webhook receiver is down (every connection reset at once)
 * while an incident fires and resolves, for DOWN seconds, then comes back.
 *
 * compute_straggler (1,024 ranks, agents of the agent library in this process) runs with a
 * fault that ends; every incident state is queued in the outbox and retried with backoff
 * capped at alert_backoff_max_s. Checked after the receiver returns: every outbox row of the
 * webhook delivered (answered 200) exactly once, for each incident in order (firing, any
 * updates, resolved), none lost or failed, and the first delivery within the backoff cap
 * (plus the 1 s poll) of the receiver's return.
 *
 * CULPRIT_WEBHOOK_DOWN_S (default 45) and CULPRIT_WEBHOOK_BACKOFF_MAX_S (default 10) make
 * the long run of docs/operations.md ("What survives what"): 150 and 60 (the default cap). */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "receiver.h"
#include "simfeed.h"

static struct h_proc proc;

static int env_int(const char *name, int def)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : def;
}

/* the incident part of a dedup key "<incident key>/<state>/<n>" */
static size_t incident_len(const char *dedup)
{
	const char *a = strrchr(dedup, '/'), *b = a;

	while (b && b > dedup && b[-1] != '/')
		b--;
	return b && b > dedup ? (size_t)(b - 1 - dedup) : strlen(dedup);
}

int main(void)
{
	const int down_s = env_int("CULPRIT_WEBHOOK_DOWN_S", 45), cap_s = env_int("CULPRIT_WEBHOOK_BACKOFF_MAX_S", 10);
	char dsn[512], dir[512], hook[128], cap[16];
	int rx_port, status;
	struct rx *rx = rx_start(&rx_port);
	struct rx_hit *hits;
	struct simfeed *sf;
	struct fanout_stats st;
	int64_t t_down, t_up, t_first = 0, t_all = 0;
	long rows;
	size_t n, ok = 0;

	H_CHECK(rx != NULL, NULL);
	rx_down(rx, 1);
	t_down = h_now_ms();
	snprintf(hook, sizeof(hook), "http://127.0.0.1:%d/hook", rx_port);
	snprintf(cap, sizeof(cap), "%d", cap_s);
	h_db_create("fault_webhook_down", dsn, sizeof(dsn));
	h_tmpdir("fault_webhook_down", dir, sizeof(dir));
	{
		const char *extra[] = {"--db", dsn, "--webhook-url", hook, "--alert-backoff-max-s", cap, NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	/* the fault from iteration 20 to 39: fires, then resolves */
	sf = simfeed_start(&(struct simfeed_config){
		.scenario = "compute_straggler", .iters = 60, .recover_at = 40, .port = proc.agent_port});
	H_CHECK(simfeed_finish(sf, 120000, &st) == 0, &proc);
	simfeed_free(sf);
	/* both states queued, the firing refused at least once (the resolved waits behind it:
	 * an incident's states go out in order) */
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
		if (at_sql_long(
			    dsn,
			    "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/firing/%' AND attempts > 0") >=
			    1 &&
		    at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/resolved/%'") >= 1)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE state <> 'pending'") == 0, &proc);
	H_CHECK(h_now_ms() - t_down < (int64_t)down_s * 1000, &proc); /* DOWN must outlast the incident */
	poll(NULL, 0, (int)(t_down + (int64_t)down_s * 1000 - h_now_ms()));
	rows = at_sql_long(dsn, "SELECT count(*) FROM alert_outbox");
	fprintf(stderr, "receiver down %.1f s; %ld outbox rows, %ld attempts refused; now up\n",
		(double)(h_now_ms() - t_down) / 1000.0, rows,
		at_sql_long(dsn, "SELECT sum(attempts) FROM alert_outbox"));
	rx_down(rx, 0);
	t_up = h_now_ms();

	for (int64_t deadline = t_up + (int64_t)cap_s * 1000 + 30000;; poll(NULL, 0, 50)) {
		long sent = at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE state = 'sent'");

		if (sent > 0 && !t_first)
			t_first = h_now_ms();
		if (sent == rows) {
			t_all = h_now_ms();
			break;
		}
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	fprintf(stderr,
		"after the receiver came back: first delivery in %.1f s, all %ld in %.1f s (backoff cap %d s)\n",
		(double)(t_first - t_up) / 1000.0, rows, (double)(t_all - t_up) / 1000.0, cap_s);
	H_CHECK(t_all - t_up <= (int64_t)cap_s * 1000 + 5000, &proc);
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);

	/* every row once, in order per incident */
	n = rx_hits(rx, &hits);
	for (size_t i = 0; i < n; i++) {
		char sql[600];
		long id;

		H_CHECK(hits[i].status == 200, NULL);
		ok++;
		snprintf(sql, sizeof(sql), "SELECT id FROM alert_outbox WHERE target = 'webhook' AND dedup_key = '%s'",
			 hits[i].dedup);
		id = at_sql_long(dsn, sql);
		H_CHECK(id > 0, NULL);
		fprintf(stderr, "  delivered %s (outbox row %ld)\n", hits[i].dedup, id);
		for (size_t k = 0; k < i; k++) {
			H_CHECK(strcmp(hits[k].dedup, hits[i].dedup) != 0, NULL); /* once */
			if (incident_len(hits[k].dedup) == incident_len(hits[i].dedup) &&
			    strncmp(hits[k].dedup, hits[i].dedup, incident_len(hits[i].dedup)) == 0) {
				snprintf(sql, sizeof(sql), "SELECT id FROM alert_outbox WHERE dedup_key = '%s'",
					 hits[k].dedup);
				H_CHECK(at_sql_long(dsn, sql) < id, NULL); /* in order */
			}
		}
	}
	H_CHECK((long)ok == rows, NULL);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key LIKE '%/resolved/%'") >= 1, NULL);
	rx_hits_free(hits, n);
	rx_stop(rx);
	fprintf(stderr, "ok\n");
	return 0;
}
