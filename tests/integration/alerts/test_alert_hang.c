/* test_alert_hang: a hang pages when ranks stopped, not when their records are late.
 *
 * A job of 16 ranks, iterations of 100 ms, from two agents written by hand: node-a (ranks
 * 0-7) sends each iteration as it ends; node-b (ranks 8-15) lags LAG iterations behind, as
 * agents on a loaded machine do, its connection busy all the while. For 12 s (more than the
 * 5 s a hang needs) no incident opens. Then node-b stops sending (its connection stays
 * open) and node-a, whose ranks would wait for it at the next collective, stops a second
 * later: a hang incident opens within 10 s (docs/operations.md, "Hangs"), keyed by the
 * last iteration node-b reported, with no window in its report, its webhook annotation
 * listing ranks 8-15 in order. */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "alerttest.h"
#include "harness.h"
#include "receiver.h"

#define JOB "lagging"
#define LAG 10
#define STEP_US 100000
#define FIRING "culprit_incident_changes_total{state=\"firing\"}"

static struct h_proc proc;

static int64_t wall_us(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

static int agent(const char *host, uint32_t first_rank)
{
	int fd = h_connect(proc.agent_port);
	struct h_hello h = {.job = JOB,
			    .agent = host,
			    .host = host,
			    .world = 16,
			    .pp = 1,
			    .dp = 16,
			    .ep = 1,
			    .first_rank = first_rank,
			    .n_ranks = 8};

	H_CHECK(fd >= 0 && h_hello_ok(fd, &h), &proc);
	return fd;
}

static void send_iter(int fd, uint64_t *seq, uint32_t first_rank, uint32_t iter, int64_t t0)
{
	struct h_batch b = {.seq = ++*seq,
			    .first_rank = first_rank,
			    .n_ranks = 8,
			    .iter = iter,
			    .start_us = t0 + (int64_t)iter * STEP_US,
			    .dur_us = STEP_US,
			    .kernel_count = 1};

	h_send_batch(fd, &b);
}

/* node-a sends iterations up to `to` as they end, node-b (when b >= 0) LAG behind; returns
 * the next iteration of node-a */
static uint32_t stream(int a, int b, uint64_t seq[2], uint32_t from, uint32_t to, int64_t t0)
{
	for (uint32_t k = from; k < to; k++) {
		int64_t due = t0 + (int64_t)(k + 1) * STEP_US, now = wall_us();

		if (due > now)
			poll(NULL, 0, (int)((due - now) / 1000));
		send_iter(a, &seq[0], 0, k, t0);
		if (b >= 0 && k >= LAG)
			send_iter(b, &seq[1], 8, k - LAG, t0);
	}
	return to;
}

int main(void)
{
	char dsn[512], dir[512], url[128], key[128], *body = NULL;
	const char *extra[] = {"--db", dsn, "--webhook-url", url, NULL};
	int rx_port, a, b;
	struct rx *rx = rx_start(&rx_port);
	uint64_t seq[2] = {0, 0};
	uint32_t k, b_last;
	int64_t t0, stopped_ms, paged_ms = -1;
	struct rx_hit *hits;
	size_t n;
	json_t *j;

	H_CHECK(rx != NULL, NULL);
	h_db_create("alert_hang", dsn, sizeof(dsn));
	h_tmpdir("alert_hang", dir, sizeof(dir));
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", rx_port);
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	a = agent("node-a", 0);
	b = agent("node-b", 8);
	t0 = wall_us() - 2 * LAG * STEP_US; /* a history to begin with */

	/* 1. node-b lags LAG iterations (1 s) behind for 12 s: no page */
	k = stream(a, b, seq, 0, 2 * LAG, t0);
	k = stream(a, b, seq, k, k + 120, t0);
	H_CHECK(h_get_metric(proc.http_port, FIRING) == 0, &proc);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB "/incidents", NULL, &body) == 200, &proc);
	H_CHECK(strstr(body, "\"hang\"") == NULL, &proc);
	free(body);
	fprintf(stderr, "12 s with node-b %d iterations behind: no incident\n", LAG);

	/* 2. node-b stops; node-a stops a second later (its ranks wait) */
	b_last = k - 1 - LAG;
	k = stream(a, -1, seq, k, k + LAG, t0);
	stopped_ms = h_now_ms();
	for (int64_t deadline = stopped_ms + 20000; h_now_ms() < deadline && paged_ms < 0; poll(NULL, 0, 100))
		if (h_get_metric(proc.http_port, FIRING) >= 1)
			paged_ms = h_now_ms();
	H_CHECK(paged_ms > 0, &proc);
	fprintf(stderr, "hang paged %.1f s after the job stopped\n", (double)(paged_ms - stopped_ms) / 1000);
	H_CHECK(paged_ms - stopped_ms <= 10000, &proc);

	/* its own key and window: the iteration node-b reported last, no closed window */
	snprintf(key, sizeof(key), JOB "/%u/hang", b_last);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB "/incidents", NULL, &body) == 200, &proc);
	fprintf(stderr, "incidents: %.400s\n", body);
	H_CHECK(strstr(body, key) != NULL, &proc);
	free(body);
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs/" JOB "/reports/latest", NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	free(body);
	H_CHECK(j && json_is_null(json_object_get(j, "window")), &proc);
	json_decref(j);

	/* the webhook's annotation: ranks 8-15 in order */
	for (int64_t deadline = h_now_ms() + 20000;; poll(NULL, 0, 100)) {
		const char *sus = NULL;

		n = rx_hits(rx, &hits);
		for (size_t i = 0; i < n && !sus; i++) {
			j = json_loads(hits[i].body, 0, NULL);
			sus = json_string_value(json_object_get(json_object_get(j, "incident"), "suspects"));
			if (sus) {
				fprintf(stderr, "suspects: %s\n", sus);
				H_CHECK(strncmp(sus, "8 (node-b, culprit), 9 (node-b, culprit), 10 (node-b, culprit)",
						60) == 0,
					&proc);
				H_CHECK(json_integer_value(json_object_get(json_object_get(j, "incident"),
									   "first_iter")) == (json_int_t)b_last,
					&proc);
			}
			json_decref(j);
		}
		rx_hits_free(hits, n);
		if (sus)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	h_proc_stop(&proc, SIGTERM, 30000);
	rx_stop(rx);
	printf("ok\n");
	return 0;
}
