/* test_api_capture.c: on-demand capture end to end. The real culpritd on PostgreSQL, `culprit
 * sim` agents streaming compute_straggler (1,024 ranks on 128 node agents, rank 517 slow in
 * mlp from iteration 10); POST /api/v1/jobs/{job}/capture for ranks 516 and 517 while they
 * stream (paced at 25x: about 0.36 s per iteration), once culpritd has iteration 11; the agents answer with raw kernels for 3 iterations, which culpritd stores; the
 * trace export then has kernel slices for exactly those ranks and iterations, and 517's GEMMs
 * are the long ones. Bad bodies, an unknown job and a job without connected agents answer
 * 400, 404 and 409. */
#include <libpq-fe.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apitest.h"

#define JOB "sim-compute_straggler"
#define ITERS 30    /* the fault starts at ITERS / 3 = 10 */
#define PER_ITER 15 /* raw kernels per captured rank-iteration: 3 compute phases x 4 + 3 comm */

static struct h_proc proc;

static void bad_bodies(void)
{
	const char *path = "/api/v1/jobs/" JOB "/capture";

	api_expect_error(&proc, "POST", path, NULL, 400);
	api_expect_error(&proc, "POST", path, "{", 400);
	api_expect_error(&proc, "POST", path, "[1]", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[516]}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[516],\"iterations\":0}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[516],\"iterations\":101}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[516],\"iterations\":\"3\"}", 400);
	api_expect_error(&proc, "POST", path, "{\"iterations\":3}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[],\"iterations\":3}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[1024],\"iterations\":3}", 400); /* not in the job */
	api_expect_error(&proc, "POST", path, "{\"ranks\":[-1],\"iterations\":3}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":\"5-3\",\"iterations\":3}", 400);
	api_expect_error(&proc, "POST", path, "{\"ranks\":[516],\"iterations\":3,\"max_events\":0}", 400);
	api_expect_error(&proc, "GET", path, NULL, 405);
	api_expect_error(&proc, "POST", "/api/v1/jobs/nope/capture", "{\"ranks\":[1],\"iterations\":3}", 404);
}

/* Checks the kernels of the Chrome trace: only ranks 516 and 517, 3 consecutive iterations
 * each, PER_ITER per iteration; returns the mean sm90_gemm duration of rank r in *gemm. */
static void check_trace(double gemm[2])
{
	json_t *j, *ev, *e;
	size_t i;
	int per_iter[2][ITERS] = {{0}};
	double sum[2] = {0, 0};
	int n_gemm[2] = {0, 0};

	H_CHECK(api_call(&proc, "GET", "/api/v1/jobs/" JOB "/trace?ranks=514-519&from_iter=0&to_iter=29&format=chrome",
			 NULL, &j) == 200,
		&proc);
	ev = json_object_get(j, "traceEvents");
	json_array_foreach(ev, i, e)
	{
		json_t *args = json_object_get(e, "args");
		const char *cat = json_string_value(json_object_get(e, "cat"));
		int rank, iter;

		if (!cat || strcmp(cat, "kernel") != 0)
			continue;
		rank = (int)json_integer_value(json_object_get(args, "rank"));
		iter = (int)json_integer_value(json_object_get(args, "iter"));
		H_CHECK(rank == 516 || rank == 517, &proc); /* no other rank was captured */
		H_CHECK(iter >= 0 && iter < ITERS, &proc);
		per_iter[rank - 516][iter]++;
		if (strcmp(json_string_value(json_object_get(e, "name")), "sm90_gemm") == 0) {
			sum[rank - 516] += (double)json_integer_value(json_object_get(args, "dur_us"));
			n_gemm[rank - 516]++;
		}
	}
	json_decref(j);
	for (int r = 0; r < 2; r++) {
		int first = -1, n = 0;

		for (int it = 0; it < ITERS; it++) {
			if (!per_iter[r][it])
				continue;
			if (first < 0)
				first = it;
			H_CHECK(it == first + n, &proc); /* consecutive */
			H_CHECK(per_iter[r][it] == PER_ITER, &proc);
			n++;
		}
		fprintf(stderr, "rank %d: kernels in iterations %d-%d\n", 516 + r, first, first + n - 1);
		H_CHECK(n == 3, &proc);
		H_CHECK(n_gemm[r] == 3 * 4, &proc);
		gemm[r] = sum[r] / n_gemm[r];
	}
}

int main(void)
{
	char dsn[512], dir[512];
	pid_t sim;
	json_t *j, *agents;
	double gemm[2];

	h_db_create("test_api_capture", dsn, sizeof(dsn));
	h_tmpdir("api_capture", dir, sizeof(dir));
	if (h_culpritd_start(&proc, dir, (const char *const[]){"--db", dsn, NULL}) < 0) {
		h_dump_log(&proc);
		return 1;
	}
	api_expect_error(&proc, "POST", "/api/v1/jobs/" JOB "/capture", "{\"ranks\":[516],\"iterations\":3}", 404);

	/* paced at 25x: 30 iterations of about 9 s take about 11 s, so that the capture, sent
	 * once culpritd has seen iteration 11, arrives with iterations to go even when culpritd
	 * lags behind the simulator (ASan, a loaded machine) */
	sim = fork();
	if (sim == 0) {
		char server[64];

		snprintf(server, sizeof(server), "127.0.0.1:%d", proc.agent_port);
		execl(CULPRIT_BIN, CULPRIT_BIN, "sim", "--scenario", "compute_straggler", "--server", server, "--iters",
		      "30", "--speed", "25", (char *)NULL);
		_exit(127);
	}
	H_CHECK(sim > 0, &proc);
	for (int64_t deadline = h_now_ms() + 60000;;) {
		int status = api_call(&proc, "GET", "/api/v1/jobs/" JOB, NULL, &j);
		json_int_t max_iter = json_integer_value(json_object_get(j, "max_iter"));

		json_decref(j);
		if (status == 200 && max_iter >= 1)
			break; /* every agent has said Hello (they connect on their first records) */
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 20);
	}
	/* capture once the fault began (iteration 10) */
	for (int64_t deadline = h_now_ms() + 60000;;) {
		int status = api_call(&proc, "GET", "/api/v1/jobs/" JOB, NULL, &j);
		json_int_t max_iter = json_integer_value(json_object_get(j, "max_iter"));

		json_decref(j);
		if (status == 200 && max_iter >= 11)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
		poll(NULL, 0, 20);
	}
	H_CHECK(api_call(&proc, "POST", "/api/v1/jobs/" JOB "/capture", "{\"ranks\":[517,516],\"iterations\":3}", &j) ==
			202,
		&proc);
	H_CHECK(json_integer_value(json_object_get(j, "capture")) > 0, &proc);
	agents = json_object_get(j, "agents");
	H_CHECK(json_array_size(agents) == 1, &proc);
	H_CHECK(strcmp(json_string_value(json_object_get(json_array_get(agents, 0), "agent")), "node-64") == 0, &proc);
	H_CHECK(json_array_size(json_object_get(json_array_get(agents, 0), "ranks")) == 2, &proc);
	H_CHECK(json_array_size(json_object_get(j, "unserved")) == 0, &proc);
	H_CHECK(strstr(json_string_value(json_object_get(j, "trace")), "ranks=516-517") != NULL, &proc);
	json_decref(j);
	H_CHECK(api_sim_wait(sim, 300000) == 0, &proc);
	bad_bodies();

	/* stored exactly once: 2 ranks x 3 iterations x PER_ITER */
	{
		PGconn *c = PQconnectdb(dsn);
		PGresult *r = PQexec(c, "SELECT count(*), count(DISTINCT (rank, iter)) FROM raw_kernels");

		H_CHECK(PQresultStatus(r) == PGRES_TUPLES_OK, &proc);
		H_CHECK(atoi(PQgetvalue(r, 0, 0)) == 2 * 3 * PER_ITER && atoi(PQgetvalue(r, 0, 1)) == 6, &proc);
		PQclear(r);
		PQfinish(c);
	}
	/* counted: one capture, one Command (node-64), its raw kernels */
	{
		char *text = NULL;

		H_CHECK(h_http(proc.http_port, "GET", "/metrics", NULL, &text) == 200 && text, &proc);
		H_CHECK(h_metric(text, "culprit_captures_total") == 1, &proc);
		H_CHECK(h_metric(text, "culprit_capture_commands_total") == 1, &proc);
		H_CHECK(h_metric(text, "culprit_records_total{type=\"raw_kernel\",outcome=\"accepted\"}") ==
				2 * 3 * PER_ITER,
			&proc);
		free(text);
	}
	check_trace(gemm);
	fprintf(stderr, "mean sm90_gemm: rank 516 %.0f us, rank 517 %.0f us\n", gemm[0], gemm[1]);
	/* 517's mlp is 3x slower since iteration 10: its GEMMs are the long ones */
	H_CHECK(gemm[1] > 2.5 * gemm[0], &proc);

	/* the agents are gone: nobody to send a capture to */
	for (int64_t deadline = h_now_ms() + 30000;;) {
		int status = api_call(&proc, "POST", "/api/v1/jobs/" JOB "/capture",
				      "{\"ranks\":[516],\"iterations\":3}", &j);

		json_decref(j);
		if (status == 409)
			break;
		H_CHECK(status == 202 && h_now_ms() < deadline, &proc);
		poll(NULL, 0, 100);
	}
	fprintf(stderr, "ok: 409 without connected agents\n");
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "test_api_capture: passed\n");
	return 0;
}
