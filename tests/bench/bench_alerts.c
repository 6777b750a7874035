/* bench_alerts: time to detect and to alert on case5, end to end with real processes.
 *
 *   bench_alerts DSN [--runs N] [--iters N]
 *
 * Each run: a fresh database on DSN's server, a webhook receiver on loopback (receiver.c of
 * the alert tests), culpritd (this build's) posting to it, and `culprit sim --scenario case5
 * --iters N` (fault from iteration N/3) streamed by 1,620 agents. Figures per run and their
 * medians:
 *   slowed   iterations of the fault the firing compute_degradation report had seen
 *            (its window's last iteration - fault start + 1): how many slowed iterations
 *            it takes to open the incident;
 *   open->hook  seconds from culpritd logging the anomalous window opened (the arrival of the
 *            data that completed the triggering iteration) to the receiver holding the
 *            webhook with the compute_degradation incident; split into
 *   open->incident (diagnosis: window snapshot, L2, L3, attribution) and
 *   incident->hook (stored with its outbox row in one transaction, delivery thread woken,
 *            POST). Clocks: culpritd's log (UTC, ms) and the receiver's CLOCK_REALTIME. */
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "benchutil.h"
#include "alerttest.h"
#include "harness.h"
#include "receiver.h"

/* Microseconds since the epoch of the first log line containing what (and, when also is not
 * NULL, that too); -1 when none. */
static int64_t log_time(const char *path, const char *what, const char *also)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int64_t t = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		struct tm tm;
		int ms;

		if (!strstr(line, what) || (also && !strstr(line, also)))
			continue;
		memset(&tm, 0, sizeof(tm));
		if (sscanf(line, "%d-%d-%d %d:%d:%d.%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
			   &tm.tm_sec, &ms) != 7)
			continue;
		tm.tm_year -= 1900;
		tm.tm_mon -= 1;
		t = (int64_t)timegm(&tm) * 1000000 + ms * 1000;
		break;
	}
	fclose(f);
	return t;
}

int main(int argc, char **argv)
{
	int runs = 3, iters = 20, n = 0;
	double slowed[32], open_hook[32], open_inc[32], inc_hook[32];

	if (argc < 2 || strncmp(argv[1], "--", 2) == 0) {
		fprintf(stderr, "usage: bench_alerts DSN [--runs N] [--iters N]\n");
		return 2;
	}
	for (int i = 2; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--iters") == 0)
			iters = atoi(argv[i + 1]);
	}
	if (runs < 1 || runs > 32 || iters < 12) {
		fprintf(stderr, "bench_alerts: --runs 1..32, --iters at least 12\n");
		return 2;
	}
	setenv("CULPRIT_TEST_DSN", argv[1], 1);
	printf("case5, %d iterations, fault from iteration %d; %d runs\n", iters, iters / 3, runs);
	printf("%4s %8s %12s %16s %16s\n", "run", "slowed", "open->hook s", "open->incident s", "incident->hook s");
	for (int run = 0; run < runs; run++) {
		char dsn[512], dir[512], url[128], simlog[600];
		int port;
		struct rx *rx = rx_start(&port);
		struct h_proc p;
		struct rx_hit *hits;
		size_t nh;
		int64_t opened, incident = -1, hook = -1;
		long last_iter = -1;

		if (!rx) {
			fprintf(stderr, "bench_alerts: no receiver\n");
			return 1;
		}
		h_db_create("bench_alerts", dsn, sizeof(dsn));
		h_tmpdir("bench_alerts", dir, sizeof(dir));
		snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook", port);
		snprintf(simlog, sizeof(simlog), "%s/sim.log", dir);
		{
			const char *extra[] = {"--db", dsn, "--webhook-url", url, NULL};

			if (h_culpritd_start(&p, dir, extra) < 0)
				return 1;
		}
		if (at_sim("case5", iters, 0, p.agent_port, simlog) != 0) {
			fprintf(stderr, "bench_alerts: culprit sim failed (%s)\n", simlog);
			h_proc_stop(&p, SIGKILL, 1000);
			return 1;
		}
		/* the webhook of the compute_degradation incident (firing, or an update of an
		 * incident that opened as something else) */
		for (int64_t deadline = h_now_ms() + 30000; hook < 0 && h_now_ms() < deadline; poll(NULL, 0, 100)) {
			nh = rx_hits(rx, &hits);
			for (size_t i = 0; i < nh && hook < 0; i++) {
				json_t *j = json_loads(hits[i].body, 0, NULL);
				const char *cat =
					json_string_value(json_object_get(json_object_get(j, "incident"), "category"));
				const char *state = json_string_value(json_object_get(j, "state"));

				if (cat && strcmp(cat, "compute_degradation") == 0 && state &&
				    strcmp(state, "resolved") != 0) {
					hook = hits[i].at_us;
					last_iter = (long)json_integer_value(json_object_get(
						json_object_get(json_object_get(j, "report"), "window"), "last_iter"));
				}
				json_decref(j);
			}
			rx_hits_free(hits, nh);
		}
		h_proc_stop(&p, SIGTERM, 60000);
		rx_stop(rx);
		opened = log_time(p.log_path, "anomalous window opened", NULL);
		incident = log_time(p.log_path, "INCIDENT ", "compute_degradation (window");
		if (hook < 0 || opened < 0 || incident < 0) {
			fprintf(stderr, "bench_alerts: run %d: no compute_degradation webhook or log lines (%s)\n", run,
				p.log_path);
			continue;
		}
		slowed[n] = (double)(last_iter - iters / 3 + 1);
		open_hook[n] = (double)(hook - opened) / 1e6;
		open_inc[n] = (double)(incident - opened) / 1e6;
		inc_hook[n] = (double)(hook - incident) / 1e6;
		printf("%4d %8.0f %12.3f %16.3f %16.3f\n", run + 1, slowed[n], open_hook[n], open_inc[n], inc_hook[n]);
		fflush(stdout);
		n++;
	}
	if (n == 0)
		return 1;
	printf("%4s %8.1f %12.3f %16.3f %16.3f\n", "med", median(slowed, n), median(open_hook, n), median(open_inc, n),
	       median(inc_hook, n));
	return 0;
}
