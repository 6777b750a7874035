/* test_alert_webhook: a signed generic webhook that fails, culpritd killed in between.
 *
 * compute_straggler (1,024 ranks) is streamed with a fault that ends (--recover-at): the
 * incident fires and resolves. The receiver answers 500 to everything meanwhile, so both
 * states stay pending in the outbox. culpritd is SIGKILLed, the receiver fails two more
 * requests then accepts, and a new culpritd on the same database delivers what was pending:
 * every outbox row accepted exactly once (one 200 per dedup key), firing and resolved among
 * them, each body signed with HMAC-SHA256 of the secret, its dedup_key field equal to the
 * header. Slack and PagerDuty targets point at the same receiver (paths /slack, /pd): each
 * of their rows is accepted once too, in their shapes. Every firing alert says what to do
 * (drain node-64) in each target's shape. */
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

#define SECRET "test-secret-5f1c"

static struct h_proc proc;

static void start(const char *dir, const char *dsn, int rx_port)
{
	char url[128], slack[128], pd[128];
	const char *extra[] = {"--db",
			       dsn,
			       "--webhook-url",
			       url,
			       "--webhook-secret",
			       SECRET,
			       "--alert-backoff-max-s",
			       "2",
			       "--slack-url",
			       slack,
			       "--pagerduty-url",
			       pd,
			       "--pagerduty-routing-key",
			       "rk-test",
			       NULL};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", rx_port);
	snprintf(slack, sizeof(slack), "http://127.0.0.1:%d/slack", rx_port);
	snprintf(pd, sizeof(pd), "http://127.0.0.1:%d/pd", rx_port);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
}

static const char *const paths[3] = {"/hook", "/slack", "/pd"}, *const targets[3] = {"webhook", "slack", "pagerduty"};

/* The fault from iteration 20 to 39: it fires, then resolves; both states queued, the
 * firing tried at least once (the resolve waits behind it: an incident's states go out in
 * order), nothing accepted. */
static void fire_and_resolve(const char *dsn, const char *simlog)
{
	H_CHECK(at_sim("compute_straggler", 60, 40, proc.agent_port, simlog) == 0, &proc);
	for (int64_t deadline = h_now_ms() + 60000;; poll(NULL, 0, 200)) {
		long firing = at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE target = 'webhook' AND"
					       " dedup_key LIKE '%/firing/%' AND attempts > 0");
		long resolved = at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE target = 'webhook' AND"
						 " dedup_key LIKE '%/resolved/%'");

		if (firing >= 1 && resolved >= 1)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE state <> 'pending'") == 0, &proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM incidents WHERE state = 'resolved' AND"
				 " key LIKE 'sim-compute_straggler/%/compute_degradation'") == 1,
		&proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE"
				 " j.name = 'sim-compute_straggler' AND r.category = 'compute_degradation'") >= 1,
		&proc);
}

/* Once every outbox row is sent: as many rows for each target; the metrics (refreshed about
 * once a second) say the same. The rows of a target. */
static long all_sent(const char *dsn)
{
	long rows;

	for (int64_t deadline = h_now_ms() + 90000;; poll(NULL, 0, 200)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE state <> 'sent'") == 0)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	rows = at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE target = 'webhook'");
	H_CHECK(rows >= 2, &proc);
	for (int t = 0; t < 3; t++) {
		char sql[256];

		snprintf(sql, sizeof(sql), "SELECT count(*) FROM alert_outbox WHERE target = '%s'", targets[t]);
		H_CHECK(at_sql_long(dsn, sql) == rows, &proc);
	}
	for (int64_t deadline = h_now_ms() + 10000;; poll(NULL, 0, 200)) {
		char *body = NULL;
		int done;

		H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &body) == 200, &proc);
		done = h_metric(body, "culprit_alert_deliveries_total{target=\"webhook\"}") == (double)rows &&
		       h_metric(body, "culprit_alert_delivery_failures_total{target=\"webhook\"}") +
				       h_metric(body, "culprit_alert_delivery_failures_total{target=\"slack\"}") +
				       h_metric(body, "culprit_alert_delivery_failures_total{target=\"pagerduty\"}") >=
			       2 &&
		       h_metric(body, "culprit_alert_deliveries_total{target=\"pagerduty\"}") == (double)rows &&
		       h_metric(body, "culprit_alert_outbox_pending") == 0;
		if (!done && h_now_ms() > deadline)
			fprintf(stderr, "%s\n", body);
		free(body);
		if (done)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	return rows;
}

/* Slack: a text naming the job; a firing one says to drain the culprit's node. */
static void check_slack(json_t *j)
{
	const char *text = json_string_value(json_object_get(j, "text"));

	H_CHECK(text && strstr(text, "sim-compute_straggler"), NULL);
	H_CHECK(!strstr(text, ":rotating_light:") || strstr(text, "\naction: drain node-64 "), NULL);
}

/* PagerDuty Events v2: dedup_key is the incident key; a trigger carries the action. 1 for a resolve. */
static int check_pagerduty(json_t *j, const struct rx_hit *hit)
{
	const char *action = json_string_value(json_object_get(j, "event_action"));
	const char *key = json_string_value(json_object_get(j, "dedup_key"));

	H_CHECK(strcmp(json_string_value(json_object_get(j, "routing_key")), "rk-test") == 0, NULL);
	H_CHECK(action && (strcmp(action, "trigger") == 0 || strcmp(action, "resolve") == 0), NULL);
	H_CHECK(key && strncmp(hit->dedup, key, strlen(key)) == 0, NULL);
	H_CHECK(json_string_value(json_object_get(json_object_get(j, "payload"), "summary")) != NULL, NULL);
	if (strcmp(action, "trigger") == 0) {
		const char *act = json_string_value(
			json_object_get(json_object_get(json_object_get(j, "payload"), "custom_details"), "action"));

		H_CHECK(act && strncmp(act, "drain node-64 ", 14) == 0, NULL);
	}
	return strcmp(action, "resolve") == 0;
}

/* The webhook: signed, its dedup_key the header's; a firing one carries the report naming
 * the culprit and what to do about it, in the incident and in the report's finding. */
static void check_webhook(json_t *j, const struct rx_hit *hit)
{
	char sig[128];

	rx_sign(SECRET, hit->body, sig, sizeof(sig));
	if (strcmp(sig, hit->signature) != 0) {
		fprintf(stderr, "bad signature %s, expected %s\n", hit->signature, sig);
		H_CHECK(0, NULL);
	}
	H_CHECK(strcmp(json_string_value(json_object_get(j, "dedup_key")), hit->dedup) == 0, NULL);
	H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(j, "incident"), "category")),
		       "compute_degradation") == 0,
		NULL);
	if (!strstr(hit->dedup, "/firing/"))
		return;
	json_t *report = json_object_get(j, "report"), *incident = json_object_get(j, "incident");
	json_t *finding = json_array_get(json_object_get(report, "findings"), 0);

	H_CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(report, "suspects"), 0), "rank")) ==
			517,
		NULL);
	H_CHECK(strcmp(json_string_value(json_object_get(incident, "host")), "node-64") == 0, NULL);
	H_CHECK(strncmp(json_string_value(json_object_get(incident, "action")), "drain node-64 ", 14) == 0, NULL);
	H_CHECK(strcmp(json_string_value(
			       json_object_get(json_array_get(json_object_get(finding, "actions"), 0), "target")),
		       "node-64") == 0,
		NULL);
}

int main(void)
{
	char dsn[512], dir[512], simlog[600];
	int rx_port;
	struct rx *rx = rx_start(&rx_port);
	struct rx_hit *hits;
	size_t n, ok[3] = {0}, failed = 0;
	long rows;
	int resolves = 0;
	int status;

	H_CHECK(rx != NULL, NULL);
	rx_fail(rx, -1);
	h_db_create("alert_webhook", dsn, sizeof(dsn));
	h_tmpdir("alert_webhook", dir, sizeof(dir));
	snprintf(simlog, sizeof(simlog), "%s/sim.log", dir);
	start(dir, dsn, rx_port);
	fire_and_resolve(dsn, simlog);
	/* killed with the alerts pending; the receiver fails two more, then accepts */
	h_proc_stop(&proc, SIGKILL, 5000);
	rx_fail(rx, 2);
	start(dir, dsn, rx_port);
	rows = all_sent(dsn);
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);

	n = rx_hits(rx, &hits);
	for (size_t i = 0; i < n; i++) {
		char sql[512];
		json_t *j;
		int t = -1;

		if (hits[i].status != 200) {
			failed++;
			continue;
		}
		for (int k = 0; k < 3; k++)
			if (strcmp(hits[i].path, paths[k]) == 0)
				t = k;
		H_CHECK(t >= 0, NULL);
		ok[t]++;
		/* one accepted delivery per dedup key and target, and each is an outbox row */
		for (size_t k = 0; k < i; k++)
			if (hits[k].status == 200 && strcmp(hits[k].dedup, hits[i].dedup) == 0 &&
			    strcmp(hits[k].path, hits[i].path) == 0) {
				fprintf(stderr, "dedup key %s delivered twice to %s\n", hits[i].dedup, hits[i].path);
				H_CHECK(0, NULL);
			}
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM alert_outbox WHERE target = '%s' AND dedup_key = '%s'",
			 targets[t], hits[i].dedup);
		H_CHECK(at_sql_long(dsn, sql) == 1, NULL);
		j = json_loads(hits[i].body, 0, NULL);
		H_CHECK(j != NULL, NULL);
		if (t == 0)
			check_webhook(j, &hits[i]);
		else if (t == 1)
			check_slack(j);
		else
			resolves += check_pagerduty(j, &hits[i]);
		json_decref(j);
	}
	fprintf(stderr,
		"webhook: %ld outbox rows per target, %zu requests answered 500, accepted: %zu webhook, %zu slack, %zu "
		"pagerduty\n",
		rows, failed, ok[0], ok[1], ok[2]);
	for (int t = 0; t < 3; t++)
		H_CHECK(ok[t] == (size_t)rows, NULL);
	H_CHECK(resolves == 1, NULL);
	H_CHECK(failed >= 4, NULL); /* at least one per target before the kill, two after */
	rx_hits_free(hits, n);
	rx_stop(rx);
	printf("ok\n");
	return 0;
}
