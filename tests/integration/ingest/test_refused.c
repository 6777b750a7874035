/* test_refused.c: `culprit sim` and `culprit replay` fail fast when culpritd refuses their
 * connections. culpritd runs with max_connections_per_addr 4; the simulator's 128 node
 * agents and the replay's 8 rank agents all come from 127.0.0.1, so most are closed at
 * accept. Each command must exit non-zero within seconds (not reconnect forever) and
 * say why: culpritd refused the connections, naming the limit. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct h_proc proc;

static int file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int found = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void expect_refused(const char *what, const char *const *argv, const char *err)
{
	int64_t t0 = h_now_ms();
	int rc = h_run(argv, err, 30000);
	int64_t ms = h_now_ms() - t0;

	fprintf(stderr, "%s: exit %d after %lld ms\n", what, rc, (long long)ms);
	if (rc <= 0 || ms > 15000 || !file_has(err, "refused the connections") ||
	    !file_has(err, "max_connections_per_addr")) {
		FILE *f = fopen(err, "r");
		char line[4096];

		while (f && fgets(line, sizeof(line), f))
			fputs(line, stderr);
		if (f)
			fclose(f);
		H_CHECK(!"refused quickly, with the reason", &proc);
	}
}

int main(void)
{
	char dir[600], server[64], err[700];
	const char *extra[] = {"--storage", "false", "--max-connections-per-addr", "4", NULL};
	const char *src = getenv("CULPRIT_SOURCE_DIR");
	char traces[8][1024];

	h_tmpdir("refused", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	snprintf(err, sizeof(err), "%s/stderr", dir);

	const char *sim[] = {CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--iters", "20", "--server", server,
			     "--speed",   "0",   NULL};
	expect_refused("sim (128 node agents)", sim, err);

	H_CHECK(src != NULL, &proc);
	const char *replay[13] = {CULPRIT_BIN, "replay", "--per-rank", "--server", server};
	for (int r = 0; r < 8; r++) {
		snprintf(traces[r], sizeof(traces[r]), "%s/tests/data/param-dlrm-8rank/rank-%d.json.gz", src, r);
		replay[5 + r] = traces[r];
	}
	expect_refused("replay (8 rank agents)", replay, err);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_over_limit_total{limit=\"per_address\"}") > 0,
		&proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 10000) == 0, &proc);
	printf("ok\n");
	return 0;
}
