/* test_api_trace.c: GET /api/v1/jobs/{job}/trace of the real culpritd on PostgreSQL filled by
 * `culprit sim` (compute_straggler: 1,024 ranks, 6 iterations, rank 517 on node-64 slow from
 * iteration 2).
 *
 * The Perfetto answer is decoded by protoc (--decode=perfetto.protos.Trace with
 * schema/perfetto_trace.proto) and its tracks (hosts as processes, ranks as threads under
 * them) and slices (per-phase counts) are checked; the Chrome JSON answer is checked
 * structurally: metadata names every process and thread used, slices of each thread nest
 * strictly, ts is relative to the job's start. Then the bounds and bad input, the
 * `culprit trace` command, and both endpoints behind REST tokens (culpritd restarted on the
 * same database with http_read_token and http_write_token). */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "apitest.h"

#define JOB "sim-compute_straggler"
#define ITERS 6
#define PHASES 7 /* dense scenario phases */

static struct h_proc proc;
static char dir[512];

static char *get_raw(const char *path, int *status, size_t *len)
{
	char *body = NULL;

	*status = h_http(proc.http_port, "GET", path, NULL, &body);
	*len = body ? strlen(body) : 0; /* only for JSON answers */
	return body;
}

/* Downloads path into file with `culprit trace`-free plain HTTP: curl is a test package. */
static int download(const char *path, const char *file)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), "curl -s -f -o '%s' 'http://127.0.0.1:%d%s'", file, proc.http_port, path);
	return system(cmd);
}

static int count(const char *text, const char *needle)
{
	int n = 0;

	for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	return n;
}

/* protoc --decode of file: the text format (malloc'd). */
static char *decode(const char *file)
{
	const char *src = getenv("CULPRIT_SOURCE_DIR") ? getenv("CULPRIT_SOURCE_DIR") : CULPRIT_SOURCE_DIR_DEFAULT;
	char cmd[2048];
	FILE *f;
	char *out = NULL;
	size_t n = 0, cap = 0;

	snprintf(cmd, sizeof(cmd),
		 "protoc --decode=perfetto.protos.Trace -I '%s/schema' '%s/schema/perfetto_trace.proto' < '%s'", src,
		 src, file);
	f = popen(cmd, "r");
	H_CHECK(f, &proc);
	for (;;) {
		if (n + 65536 > cap) {
			cap = cap ? cap * 2 : 1 << 20;
			out = realloc(out, cap);
			H_CHECK(out, &proc);
		}
		size_t r = fread(out + n, 1, cap - n - 1, f);
		if (r == 0)
			break;
		n += r;
	}
	out[n] = '\0';
	H_CHECK(pclose(f) == 0, &proc);
	return out;
}

static void perfetto(void)
{
	char file[600], *text;
	const char *path = "/api/v1/jobs/" JOB "/trace?ranks=512-519,0&from_iter=0&to_iter=5";

	snprintf(file, sizeof(file), "%s/trace.pftrace", dir);
	H_CHECK(download(path, file) == 0, &proc);
	text = decode(file);
	/* tracks: node-0 (rank 0) and node-64 (ranks 512-519) as processes, 9 ranks as threads */
	H_CHECK(count(text, "process_name: \"node-0\"") == 1, &proc);
	H_CHECK(count(text, "process_name: \"node-64\"") == 1, &proc);
	H_CHECK(count(text, "thread {") == 9, &proc);
	H_CHECK(count(text, "thread_name: \"rank 517 (tp 5 cp 0 ep 0 dp 0 pp 2)\"") == 1, &proc);
	H_CHECK(count(text, "thread_name: \"rank 0 (") == 1, &proc);
	/* slices: per rank and iteration the iteration and its 7 phases, each begun and ended */
	H_CHECK(count(text, "type: TYPE_SLICE_BEGIN") == 9 * ITERS * (1 + PHASES), &proc);
	H_CHECK(count(text, "type: TYPE_SLICE_END") == 9 * ITERS * (1 + PHASES), &proc);
	H_CHECK(count(text, "name: \"mlp\"") == 9 * ITERS, &proc);
	H_CHECK(count(text, "name: \"dp_reduce_scatter\"") == 9 * ITERS, &proc);
	H_CHECK(count(text, "name: \"iteration 0\"") == 9, &proc);
	H_CHECK(count(text, "name: \"iteration 5\"") == 9, &proc);
	/* the straggler's incident as an instant on the job's incidents track */
	H_CHECK(count(text, "type: TYPE_INSTANT") >= 1, &proc);
	H_CHECK(strstr(text, "name: \"compute_degradation\"") != NULL, &proc);
	H_CHECK(count(text, "sequence_flags: 1") == 1, &proc);
	free(text);
	fprintf(stderr, "ok: perfetto trace: 2 hosts, 9 ranks, %d slices\n", 9 * ITERS * (1 + PHASES));
}

/* every slice of a thread nests in the one open before it, or starts after it ended */
static void chrome(void)
{
	int status;
	size_t len;
	char *body = get_raw("/api/v1/jobs/" JOB "/trace?ranks=512-519,0&from_iter=0&to_iter=5&format=chrome", &status,
			     &len);
	json_t *j, *ev, *e;
	json_error_t jerr;
	size_t i, n_x = 0, n_mlp = 0;
	int64_t job_start, iter0_ts = -1;

	H_CHECK(status == 200 && body, &proc);
	j = json_loads(body, 0, &jerr);
	if (!j)
		fprintf(stderr, "chrome trace is not JSON: %s at line %d\n", jerr.text, jerr.line);
	H_CHECK(j, &proc);
	free(body);
	ev = json_object_get(j, "traceEvents");
	H_CHECK(json_is_array(ev), &proc);
	job_start = json_integer_value(json_object_get(json_object_get(j, "otherData"), "job_start_us"));
	H_CHECK(job_start > 0, &proc);

	/* metadata of every (pid, tid) used */
	json_array_foreach(ev, i, e)
	{
		const char *ph = json_string_value(json_object_get(e, "ph"));
		int pid = (int)json_integer_value(json_object_get(e, "pid"));
		int tid = (int)json_integer_value(json_object_get(e, "tid"));
		size_t k;
		json_t *m;
		int has_p = 0, has_t = 0;

		H_CHECK(ph, &proc);
		if (strcmp(ph, "X") != 0)
			continue;
		n_x++;
		if (strcmp(json_string_value(json_object_get(e, "name")), "mlp") == 0)
			n_mlp++;
		json_array_foreach(ev, k, m)
		{
			const char *name = json_string_value(json_object_get(m, "name"));

			if (strcmp(json_string_value(json_object_get(m, "ph")), "M") != 0 ||
			    json_integer_value(json_object_get(m, "pid")) != pid)
				continue;
			if (strcmp(name, "process_name") == 0)
				has_p = 1;
			if (strcmp(name, "thread_name") == 0 && json_integer_value(json_object_get(m, "tid")) == tid)
				has_t = 1;
		}
		H_CHECK(has_p && has_t, &proc);
	}
	H_CHECK(n_x == 9 * ITERS * (1 + PHASES), &proc);
	H_CHECK(n_mlp == 9 * ITERS, &proc);

	/* per thread: events in file order are sorted by ts, and nest strictly */
	json_array_foreach(ev, i, e)
	{
		int64_t ends[16], prev_ts = INT64_MIN;
		int depth = 0, tid;
		size_t k;
		json_t *x;

		if (strcmp(json_string_value(json_object_get(e, "ph")), "X") != 0)
			continue;
		tid = (int)json_integer_value(json_object_get(e, "tid"));
		/* only from the thread's first event */
		int first = 1;
		json_array_foreach(ev, k, x)
		{
			if (k >= i)
				break;
			if (strcmp(json_string_value(json_object_get(x, "ph")), "X") == 0 &&
			    json_integer_value(json_object_get(x, "tid")) == tid)
				first = 0;
		}
		if (!first)
			continue;
		json_array_foreach(ev, k, x)
		{
			int64_t ts, dur;

			if (strcmp(json_string_value(json_object_get(x, "ph")), "X") != 0 ||
			    json_integer_value(json_object_get(x, "tid")) != tid)
				continue;
			ts = json_integer_value(json_object_get(x, "ts"));
			dur = json_integer_value(json_object_get(x, "dur"));
			H_CHECK(ts >= prev_ts && dur >= 0, &proc);
			prev_ts = ts;
			while (depth > 0 && ends[depth - 1] <= ts)
				depth--;
			/* no partial overlap with the slice still open */
			H_CHECK(depth == 0 || ts + dur <= ends[depth - 1], &proc);
			H_CHECK(depth < 16, &proc);
			ends[depth++] = ts + dur;
		}
	}

	/* ts is relative to the job's start: rank 0's iteration 0, as the iterations endpoint says */
	json_array_foreach(ev, i, e)
	{
		json_t *args = json_object_get(e, "args");

		if (strcmp(json_string_value(json_object_get(e, "ph")), "X") == 0 &&
		    strcmp(json_string_value(json_object_get(e, "name")), "iteration 0") == 0 &&
		    json_integer_value(json_object_get(args, "rank")) == 0)
			iter0_ts = json_integer_value(json_object_get(e, "ts"));
	}
	json_decref(j);
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/ranks/0/iterations?from_iter=0&to_iter=0", NULL, &j) ==
			200,
		&proc);
	{
		json_t *it = json_array_get(json_object_get(j, "iterations"), 0);
		int64_t start = json_integer_value(json_object_get(it, "start_us"));

		H_CHECK(iter0_ts >= 0 && iter0_ts < 10000000, &proc); /* the job's first iteration is near 0 */
		H_CHECK(job_start + iter0_ts == start, &proc);
	}
	json_decref(j);
	fprintf(stderr, "ok: chrome trace: %zu slices nest on every thread, metadata complete, ts from the job start\n",
		n_x);
}

static void bounds(void)
{
	json_t *j;

	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace", NULL, 400); /* no ranks */
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=a-b", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=5-3", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1,,2", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=0-256", NULL, 400); /* 257 ranks */
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1024", NULL, 404);  /* >= world */
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1&format=xml", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1&from_iter=5&to_iter=4", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1&from_iter=0&to_iter=1000", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=1&from_iter=-1", NULL, 400);
	api_expect_error(&proc, "GET", "/api/v1/jobs/nope/trace?ranks=1", NULL, 404);
	api_expect_error(&proc, "POST", "/api/v1/jobs/" JOB "/trace?ranks=1", "{}", 405);
	/* 8 ranks x 6 iterations x 8 slices = 384 > 100 */
	api_expect_error(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=512-519&from_iter=0&to_iter=5&max_slices=100",
			 NULL, 413);
	/* exactly at the bound: 1 rank x 6 x 8 = 48 */
	{
		int status;
		size_t len;
		char *b =
			get_raw("/api/v1/jobs/" JOB "/trace?ranks=3&from_iter=0&to_iter=5&max_slices=48&format=chrome",
				&status, &len);

		H_CHECK(status == 200 && b && strstr(b, "\"slices\":48"), &proc);
		free(b);
	}
	/* without a range: the last 10 stored, i.e. iterations 0-5 here */
	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=3&format=chrome", NULL, &j) == 200, &proc);
	H_CHECK(json_integer_value(json_object_get(json_object_get(j, "otherData"), "from_iter")) == 0, &proc);
	H_CHECK(json_integer_value(json_object_get(json_object_get(j, "otherData"), "to_iter")) == ITERS - 1, &proc);
	json_decref(j);
}

static void cli(void)
{
	char cmd[2048], file[600], *text;
	int rc;

	snprintf(file, sizeof(file), "%s/cli.pftrace", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s trace --server 127.0.0.1:%d --job %s --ranks 517 --from-iter 2 --to-iter 3 -o '%s'", CULPRIT_BIN,
		 proc.http_port, JOB, file);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, &proc);
	text = decode(file);
	H_CHECK(count(text, "type: TYPE_SLICE_BEGIN") == 2 * (1 + PHASES), &proc);
	free(text);
	/* the Chrome trace it writes is read back by `culprit diagnose`, which finds the straggler */
	snprintf(file, sizeof(file), "%s/cli.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s trace --server 127.0.0.1:%d --job %s --ranks 384-639 --format chrome -o '%s' > '%s.said'",
		 CULPRIT_BIN, proc.http_port, JOB, file, file);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, &proc);
	{
		char said[700];

		snprintf(said, sizeof(said), "%s.said", file);
		H_CHECK(h_count_lines(said, "wrote ") == 1 && h_count_lines(said, file) == 1 &&
				h_count_lines(said, "Chrome JSON") == 1,
			&proc);
	}
	{
		char out[700];
		json_t *rep;

		snprintf(out, sizeof(out), "%s/cli.report.json", dir);
		snprintf(cmd, sizeof(cmd), "%s diagnose '%s' > '%s'", CULPRIT_BIN, file, out);
		rc = system(cmd);
		H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0, &proc);
		rep = json_load_file(out, 0, NULL);
		H_CHECK(rep != NULL, &proc);
		H_CHECK(strcmp(json_string_value(json_object_get(rep, "job")), JOB) == 0, &proc);
		H_CHECK(strcmp(json_string_value(json_object_get(json_object_get(rep, "verdict"), "category")),
			       "compute_degradation") == 0,
			&proc);
		H_CHECK(json_integer_value(json_object_get(json_array_get(json_object_get(rep, "suspects"), 0), "rank")) ==
				517,
			&proc);
		json_decref(rep);
	}
	/* a server error: exit 1 and no file left behind */
	snprintf(file, sizeof(file), "%s/none.json", dir);
	snprintf(cmd, sizeof(cmd),
		 "%s trace --server 127.0.0.1:%d --job nope --ranks 1 --format chrome -o '%s' 2>/dev/null", CULPRIT_BIN,
		 proc.http_port, file);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1 && access(file, F_OK) != 0, &proc);
	fprintf(stderr, "ok: culprit trace\n");
}

#define READ_TOKEN "read-token-r3ad"
#define WRITE_TOKEN "write-token-wr1te"

static int http(const char *method, const char *path, const char *hdr, const char *body)
{
	char *b = NULL;
	int st = h_http_ex(proc.http_port, method, path, hdr, body, NULL, &b);

	free(b);
	return st;
}

static void tokens(const char *dsn)
{
	char conf[700], cmd[2048], file[600];
	FILE *f;
	int rc;

	snprintf(conf, sizeof(conf), "%s/tokens.conf", dir);
	f = fopen(conf, "w");
	H_CHECK(f != NULL, &proc);
	fprintf(f, "http_read_token = %s\nhttp_write_token = %s\n", READ_TOKEN, WRITE_TOKEN);
	fclose(f);
	H_CHECK(h_culpritd_start(&proc, dir, (const char *const[]){"--db", dsn, "--config", conf, NULL}) == 0, &proc);
	/* without a token: 401; the read token reads a trace but may not start a capture */
	H_CHECK(http("GET", "/api/v1/jobs/" JOB "/trace?ranks=517", NULL, NULL) == 401, &proc);
	H_CHECK(http("GET", "/api/v1/jobs/" JOB "/trace?ranks=517&format=chrome",
		     "Authorization: Bearer " READ_TOKEN "\r\n", NULL) == 200,
		&proc);
	H_CHECK(http("POST", "/api/v1/jobs/" JOB "/capture", "Authorization: Bearer " READ_TOKEN "\r\n",
		     "{\"ranks\":[517],\"iterations\":1}") == 403,
		&proc);
	/* the commands pass their token: $CULPRIT_API_TOKEN, or --token */
	snprintf(file, sizeof(file), "%s/tok.pftrace", dir);
	snprintf(cmd, sizeof(cmd), "CULPRIT_API_TOKEN=%s %s trace --server 127.0.0.1:%d --job %s --ranks 517 -o '%s'",
		 READ_TOKEN, CULPRIT_BIN, proc.http_port, JOB, file);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 0 && access(file, F_OK) == 0, &proc);
	snprintf(cmd, sizeof(cmd), "%s trace --server 127.0.0.1:%d --job %s --ranks 517 -o '%s.2' 2>/dev/null",
		 CULPRIT_BIN, proc.http_port, JOB, file);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, &proc); /* 401 */
	/* the job is not live on this culpritd (no agent said Hello since the restart): 404, past auth */
	snprintf(cmd, sizeof(cmd),
		 "%s capture --server 127.0.0.1:%d --job %s --ranks 517 --iterations 1 --token %s >/dev/null 2>&1",
		 CULPRIT_BIN, proc.http_port, JOB, WRITE_TOKEN);
	rc = system(cmd);
	H_CHECK(WIFEXITED(rc) && WEXITSTATUS(rc) == 1, &proc);
	H_CHECK(http("POST", "/api/v1/jobs/" JOB "/capture", "Authorization: Bearer " WRITE_TOKEN "\r\n",
		     "{\"ranks\":[517],\"iterations\":1}") == 404,
		&proc);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "ok: trace and capture behind REST tokens\n");
}

int main(void)
{
	char dsn[512];
	pid_t sim;

	h_db_create("test_api_trace", dsn, sizeof(dsn));
	h_tmpdir("api_trace", dir, sizeof(dir));
	if (h_culpritd_start(&proc, dir, (const char *const[]){"--db", dsn, NULL}) < 0) {
		h_dump_log(&proc);
		return 1;
	}
	sim = api_sim_start(&proc, "compute_straggler", ITERS);
	H_CHECK(api_sim_wait(sim, 300000) == 0, &proc);
	/* the straggler's incident is stored (diagnosis and its write follow the records) */
	for (int64_t deadline = h_now_ms() + 120000;;) {
		json_t *j;
		int status = api_call(&proc, "GET", "/api/v1/jobs/" JOB "/incidents", NULL, &j);
		size_t n = json_array_size(json_object_get(j, "incidents"));

		json_decref(j);
		if (status == 200 && n > 0)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 200);
	}
	perfetto();
	chrome();
	bounds();
	cli();
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	tokens(dsn);
	fprintf(stderr, "test_api_trace: passed\n");
	return 0;
}
