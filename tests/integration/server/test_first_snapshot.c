/* test_first_snapshot.c: a job's first diagnosis copies its window into memory prepared off
 * the event loop (culpritd writes a blank snapshot's pages on its diagnosis thread after the
 * job's first complete iteration), not into fresh memory on the loop: culprit sim --scenario
 * compute_straggler (fault from iteration 20) against the real culpritd, then
 * culprit_diagnosis_snapshots_total says no snapshot was fresh once the report names the
 * straggler's fault. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "harness.h"

int main(void)
{
	struct h_proc p;
	char dsn[1024], dir[600], cmd[2048];
	const char *extra[] = {"--db", dsn, NULL};
	const char *category = NULL;
	json_t *latest = NULL;
	const char *sim[] = {CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--quiet", "--server", cmd, NULL};

	h_db_create("test_first_snapshot", dsn, sizeof(dsn));
	h_tmpdir("first_snapshot", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&p, dir, extra) == 0, &p);

	snprintf(cmd, sizeof(cmd), "127.0.0.1:%d", p.agent_port);
	H_CHECK(h_run(sim, NULL, 120000) == 0, &p);
	/* every batch is acknowledged when the sim ends; the diagnosis may still run */
	for (int64_t deadline = h_now_ms() + 60000; h_now_ms() < deadline && !category; usleep(100000)) {
		char *body = NULL;

		if (h_http(p.http_port, "GET", "/api/v1/jobs/sim-compute_straggler/reports/latest", NULL, &body) ==
		    200) {
			json_decref(latest);
			latest = json_loads(body, 0, NULL);
			category = json_string_value(json_object_get(json_object_get(latest, "verdict"), "category"));
			if (category && strcmp(category, "compute_degradation") != 0)
				category = NULL; /* an earlier report; the window's comes */
		}
		free(body);
	}
	H_CHECK(category != NULL, &p);
	json_decref(latest);
	double fresh = h_get_metric(p.http_port, "culprit_diagnosis_snapshots_total{memory=\"fresh\"}");
	double reused = h_get_metric(p.http_port, "culprit_diagnosis_snapshots_total{memory=\"reused\"}");
	double seconds = h_get_metric(p.http_port, "culprit_diagnosis_snapshot_seconds_total");
	printf("snapshots: %.0f fresh, %.0f into prepared or earlier memory, %.3f s on the loop\n", fresh, reused,
	       seconds);
	H_CHECK(fresh == 0, &p);
	H_CHECK(reused >= 1, &p);
	H_CHECK(h_proc_stop(&p, SIGTERM, 30000) == 0, &p);
	return 0;
}
