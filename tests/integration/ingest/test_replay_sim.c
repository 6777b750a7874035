/* test_replay_sim.c: the two streaming commands end to end, through the real binaries.
 *   1. `culprit sim --out` writes a scenario (1,024 ranks, host lines absent: node-K names),
 *      `culprit replay` streams it to culpritd as 128 node agents, and PostgreSQL holds
 *      exactly the file's records (counts and duration sums per type).
 *   2. `culprit sim --server --per-rank` streams the same scenario as 1,024 rank agents into
 *      a second database: PostgreSQL holds the same records again.
 *   3. A hand-written file whose host lines put 16 ranks on 4 hosts of 4 (not the default
 *      node-K of 8): replay makes one agent per host, serving exactly those ranks.
 *   4. The real alibaba-pai worker CSVs (tests/data) replayed live: culpritd finds what
 *      `culprit diagnose` finds offline, the straggler window of job 1 in the middle of the
 *      run naming worker 6, and no window in job 2. The whole file reaches the server in a
 *      fraction of a second, so the replay must keep its agents within a few iterations of
 *      each other for the server's window (a ring of iterations) to see every iteration. */
#include <inttypes.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "harness.h"

static struct h_proc proc;

struct counts {
	int64_t iters, phases, kernels, iter_dur, phase_dur;
	int64_t misplaced;     /* phases and kernels time-stamped otherwise than their iteration */
	int64_t bad_quantiles; /* kernels stored without their p50/p99 (left to the sketch) */
};

/* Counts the records of a JSONL file (the writer's own format: "type" first, dur_us fields). */
static void file_counts(const char *path, struct counts *c)
{
	gzFile f = gzopen(path, "rb");
	char line[65536];

	H_CHECK(f != NULL, &proc);
	memset(c, 0, sizeof(*c));
	while (gzgets(f, line, sizeof(line))) {
		const char *d = strstr(line, "\"dur_us\":");
		int64_t dur = d ? strtoll(d + 9, NULL, 10) : 0;

		if (strstr(line, "\"type\":\"iter\"")) {
			c->iters++;
			c->iter_dur += dur;
		} else if (strstr(line, "\"type\":\"phase\"")) {
			c->phases++;
			c->phase_dur += dur;
		} else if (strstr(line, "\"type\":\"kernel\"")) {
			c->kernels++;
		}
	}
	gzclose(f);
}

static int64_t q(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	int64_t v = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		v = PQgetisnull(r, 0, 0) ? 0 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	else
		fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return v;
}

static void db_counts(const char *dsn, struct counts *c)
{
	PGconn *pg = PQconnectdb(dsn);

	H_CHECK(PQstatus(pg) == CONNECTION_OK, &proc);
	c->iters = q(pg, "SELECT count(*) FROM iterations");
	c->phases = q(pg, "SELECT count(*) FROM phases");
	c->kernels = q(pg, "SELECT count(*) FROM kernels");
	c->iter_dur = q(pg, "SELECT sum(dur_us) FROM iterations");
	c->phase_dur = q(pg, "SELECT sum(dur_us) FROM phases");
	/* phases and kernels travelled with their iteration: the server stamped them with its
	 * start, not with the time they arrived */
	c->bad_quantiles =
		q(pg, "SELECT count(*) FROM kernels WHERE p50_us < min_us OR p50_us > max_us OR p99_us < p50_us"
		      " OR p99_us > max_us");
	c->misplaced =
		q(pg, "SELECT count(*) FROM phases p JOIN iterations i USING (job_id, rank, iter) WHERE p.ts <> i.ts") +
		q(pg, "SELECT count(*) FROM kernels k JOIN iterations i USING (job_id, rank, iter) WHERE k.ts <> i.ts");
	PQfinish(pg);
}

static int same(const char *what, const struct counts *want, const struct counts *got)
{
	fprintf(stderr,
		"%s: iterations %" PRId64 "/%" PRId64 ", phases %" PRId64 "/%" PRId64 ", kernels %" PRId64 "/%" PRId64
		", iteration durations %" PRId64 "/%" PRId64 ", phase durations %" PRId64 "/%" PRId64
		" (sent/stored), %" PRId64 " phases or kernels not at their iteration's time, %" PRId64
		" kernels without p50/p99\n",
		what, want->iters, got->iters, want->phases, got->phases, want->kernels, got->kernels, want->iter_dur,
		got->iter_dur, want->phase_dur, got->phase_dur, got->misplaced, got->bad_quantiles);
	return memcmp(want, got, sizeof(*want)) == 0;
}

/* Runs argv (NULL-terminated) and returns its exit status, -1 when it did not exit. */
static int run(const char *const *argv)
{
	pid_t pid = fork();
	int status;

	if (pid == 0) {
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return -1;
	return WEXITSTATUS(status);
}

/* Part 3's file: job of 16 ranks, 8 GPUs per node by default, but 4 hosts of 4 ranks. */
static void write_hosts_file(const char *path, struct counts *c)
{
	FILE *f = fopen(path, "w");

	H_CHECK(f != NULL, NULL);
	memset(c, 0, sizeof(*c));
	fprintf(f, "{\"type\":\"job\",\"job\":\"H\",\"world\":16,\"tp\":1,\"cp\":1,\"pp\":2,\"dp\":8,"
		   "\"ep\":1,\"order\":\"tp-cp-ep-dp-pp\",\"gpus_per_node\":8}\n");
	for (int r = 0; r < 16; r++)
		fprintf(f, "{\"type\":\"host\",\"job\":\"H\",\"rank\":%d,\"host\":\"gpu-%c\"}\n", r, 'a' + r / 4);
	for (int it = 0; it < 3; it++)
		for (int r = 0; r < 16; r++) {
			fprintf(f,
				"{\"type\":\"iter\",\"job\":\"H\",\"rank\":%d,\"iter\":%d,\"start_us\":%lld,\"dur_us\":"
				"%d}\n",
				r, it, 1796169600000000LL + it * 30000000LL, 30000000 + r);
			fprintf(f,
				"{\"type\":\"phase\",\"job\":\"H\",\"rank\":%d,\"iter\":%d,\"name\":\"mlp\",\"kind\":"
				"\"compute\","
				"\"group\":\"\",\"dur_us\":%d}\n",
				r, it, 1000 + r);
			c->iters++;
			c->iter_dur += 30000000 + r;
			c->phases++;
			c->phase_dur += 1000 + r;
		}
	fclose(f);
}

/* The integer after "key": in the JSON text, -1 when absent. */
static long json_int(const char *json, const char *key)
{
	char k[64];
	const char *p;

	snprintf(k, sizeof(k), "\"%s\":", key);
	p = json ? strstr(json, k) : NULL;
	return p ? strtol(p + strlen(k), NULL, 10) : -1;
}

static void live_alibaba(const char *dir)
{
	const char *src = getenv("CULPRIT_SOURCE_DIR");
	char dsn[512], server[64], csv1[1024], csv2[1024];
	char *body = NULL;

	H_CHECK(src != NULL, NULL);
	snprintf(csv1, sizeof(csv1), "%s/tests/data/alibaba-pai/job_1_norm.csv", src);
	snprintf(csv2, sizeof(csv2), "%s/tests/data/alibaba-pai/job_2_norm.csv", src);
	h_db_create("test_replay_pai", dsn, sizeof(dsn));
	{
		const char *extra[] = {"--db", dsn, "--log-level", "warning", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	{
		const char *a1[] = {CULPRIT_BIN, "replay", "--server", server, "--job", "pai1",
				    "--timeout", "120",    "--quiet",  csv1,   NULL};
		const char *a2[] = {CULPRIT_BIN, "replay", "--server", server, "--job", "pai2",
				    "--timeout", "120",    "--quiet",  csv2,   NULL};

		H_CHECK(run(a1) == 0 && run(a2) == 0, &proc);
	}
	/* job 1: a window in the middle of its 300 iterations, worker 6 the culprit */
	for (int64_t end = h_now_ms() + 30000; h_now_ms() < end; usleep(200000)) {
		free(body);
		body = NULL;
		if (h_http(proc.http_port, "GET", "/api/v1/jobs/pai1/reports/latest", NULL, &body) == 200)
			break;
	}
	fprintf(stderr, "pai1 latest report: %.400s\n", body ? body : "(none)");
	H_CHECK(body && strstr(body, "\"category\":\"compute_degradation\"") &&
			strstr(body, "\"suspects\":[{\"rank\":6,\"host\":\"worker-6\"") &&
			strstr(body, "\"role\":\"culprit\""),
		&proc);
	free(body);
	body = NULL;
	H_CHECK(h_http(proc.http_port, "GET", "/api/v1/jobs", NULL, &body) == 200, &proc);
	{
		const char *j1 = strstr(body, "\"job\":\"pai1\""), *j2 = strstr(body, "\"job\":\"pai2\"");
		long first = json_int(j1, "first_iter"), windows2 = json_int(j2, "windows");

		fprintf(stderr, "pai1 window from iteration %ld; pai2 windows %ld\n", first, windows2);
		H_CHECK(j1 && j2 && first >= 150 && first <= 200 && windows2 == 0, &proc);
	}
	free(body);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
}

int main(void)
{
	char dsn[512], dsn2[512], dsn3[512], dir[600], file[700], server[64];
	struct counts want, got;

	h_db_create("test_replay", dsn, sizeof(dsn));
	h_db_create("test_sim_stream", dsn2, sizeof(dsn2));
	h_db_create("test_replay_hosts", dsn3, sizeof(dsn3));
	h_tmpdir("replay_sim", dir, sizeof(dir));
	snprintf(file, sizeof(file), "%s/scenario.jsonl.gz", dir);
	{
		const char *argv[] = {CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--iters", "4",
				      "--out",     file,  NULL};

		H_CHECK(run(argv) == 0, NULL);
	}
	file_counts(file, &want);
	H_CHECK(want.iters == 4 * 1024 && want.phases > 0 && want.kernels > 0, NULL);

	{
		const char *extra[] = {"--db", dsn, "--log-level", "warning", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	{
		const char *argv[] = {CULPRIT_BIN, "replay", "--server", server, "--timeout", "300", file, NULL};

		H_CHECK(run(argv) == 0, &proc);
	}
	db_counts(dsn, &got);
	H_CHECK(same("replay", &want, &got), &proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);

	{
		const char *extra[] = {"--db", dsn2, "--log-level", "warning", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	{
		const char *argv[] = {CULPRIT_BIN, "sim",       "--scenario", "compute_straggler", "--iters",
				      "4",         "--server",  server,       "--per-rank",        "--speed",
				      "0",         "--timeout", "300",        "--quiet",           NULL};

		H_CHECK(run(argv) == 0, &proc);
	}
	db_counts(dsn2, &got);
	H_CHECK(same("sim --server --per-rank", &want, &got), &proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);

	snprintf(file, sizeof(file), "%s/hosts.jsonl", dir);
	write_hosts_file(file, &want);
	{
		const char *extra[] = {"--db", dsn3, "--log-level", "warning", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
	{
		const char *argv[] = {CULPRIT_BIN, "replay",  "--server", server, "--timeout",
				      "120",       "--quiet", file,       NULL};

		H_CHECK(run(argv) == 0, &proc);
	}
	db_counts(dsn3, &got);
	H_CHECK(same("replay with host lines", &want, &got), &proc);
	{
		PGconn *pg = PQconnectdb(dsn3);
		/* 16 ranks on 4 hosts, 4 each, rank r on gpu-(r / 4) */
		int64_t ranks = q(pg, "SELECT count(*) FROM ranks"),
			right = q(pg, "SELECT count(*) FROM ranks WHERE host = 'gpu-' || chr(97 + rank / 4)"),
			hosts = q(pg, "SELECT count(DISTINCT host) FROM ranks");

		PQfinish(pg);
		fprintf(stderr, "ranks %" PRId64 ", on their host %" PRId64 ", hosts %" PRId64 "\n", ranks, right,
			hosts);
		H_CHECK(ranks == 16 && right == 16 && hosts == 4, &proc);
	}
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);

	live_alibaba(dir);
	fprintf(stderr, "ok\n");
	return 0;
}
