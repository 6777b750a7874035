/* test_alert_outbox: the delivery thread's retry policy on rows put in the outbox directly
 * (no diagnosis involved). The receiver answers 500 to everything:
 *   - a row queued two minutes ago with alert_give_up_s = 60 is given up at its first failure:
 *     state 'failed', last_error says why, culprit_alert_given_up_total counts it;
 *   - a fresh row is retried with growing delays (backoff from 1 s, jitter [0.5, 1]) and
 *     stays pending, its last_error set;
 * then the receiver accepts, and the pending row is delivered once, signed, and marked sent. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "receiver.h"

#define SECRET "outbox-secret"

int main(void)
{
	char dsn[512], dir[512], url[128], *v;
	struct h_proc proc;
	int rx_port, status;
	struct rx *rx = rx_start(&rx_port);
	struct rx_hit *hits;
	size_t n, accepted = 0;
	int64_t t_first = 0, t_last = 0;
	int tries_b = 0;

	H_CHECK(rx != NULL, NULL);
	rx_fail(rx, -1);
	h_db_create("alert_outbox", dsn, sizeof(dsn));
	h_tmpdir("alert_outbox", dir, sizeof(dir));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", rx_port);
	{
		const char *extra[] = {"--db",
				       dsn,
				       "--webhook-url",
				       url,
				       "--webhook-secret",
				       SECRET,
				       "--alert-give-up-s",
				       "60",
				       "--alert-backoff-max-s",
				       "300",
				       NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	v = at_sql(dsn, "INSERT INTO alert_outbox (target, dedup_key, payload, created) VALUES"
			" ('webhook', 'old/firing/0', '{\"n\": 1}', now() - interval '2 minutes'),"
			" ('webhook', 'new/firing/0', '{\"n\": 2}', now()) RETURNING id");
	H_CHECK(v != NULL, &proc);
	free(v);

	/* the old row: given up at its first failure */
	for (int64_t deadline = h_now_ms() + 20000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key = 'old/firing/0' AND"
				     " state = 'failed' AND last_error = 'HTTP status 500'") == 1)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	H_CHECK(at_sql_long(dsn, "SELECT attempts FROM alert_outbox WHERE dedup_key = 'old/firing/0'") == 1, &proc);

	/* the new row: three failed attempts, then still pending */
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT attempts FROM alert_outbox WHERE dedup_key = 'new/firing/0'") >= 3)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key = 'new/firing/0' AND"
				 " state = 'pending' AND last_error = 'HTTP status 500'") == 1,
		&proc);
	for (int64_t deadline = h_now_ms() + 10000;; poll(NULL, 0, 200)) {
		char *body = NULL;
		int done;

		H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &body) == 200, &proc);
		done = h_metric(body, "culprit_alert_given_up_total{target=\"webhook\"}") == 1 &&
		       h_metric(body, "culprit_alert_delivery_failures_total{target=\"webhook\"}") >= 3;
		free(body);
		if (done)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}

	/* accepted now: delivered once and marked sent */
	rx_fail(rx, 0);
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM alert_outbox WHERE dedup_key = 'new/firing/0' AND"
				     " state = 'sent' AND sent IS NOT NULL") == 1)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);

	n = rx_hits(rx, &hits);
	for (size_t i = 0; i < n; i++) {
		char sig[128];

		H_CHECK(strcmp(hits[i].path, "/hook") == 0, NULL);
		rx_sign(SECRET, hits[i].body, sig, sizeof(sig));
		H_CHECK(strcmp(sig, hits[i].signature) == 0, NULL);
		if (strcmp(hits[i].dedup, "old/firing/0") == 0) {
			H_CHECK(hits[i].status == 500, NULL); /* never tried again */
			continue;
		}
		H_CHECK(strcmp(hits[i].dedup, "new/firing/0") == 0, NULL);
		if (tries_b == 0)
			t_first = hits[i].at_us;
		if (tries_b == 2)
			t_last = hits[i].at_us;
		tries_b++;
		accepted += hits[i].status == 200;
	}
	rx_hits_free(hits, n);
	fprintf(stderr, "outbox: new row tried %d times, accepted %zu; attempts 1 to 3 %.2f s apart\n", tries_b,
		accepted, (double)(t_last - t_first) / 1e6);
	H_CHECK(accepted == 1, NULL);
	/* delays after attempts 1 and 2: [0.5, 1] s + [1, 2] s, plus up to a second of polling each */
	H_CHECK(t_last - t_first >= 1500000 && t_last - t_first <= 6000000, NULL);
	rx_stop(rx);
	printf("ok\n");
	return 0;
}
