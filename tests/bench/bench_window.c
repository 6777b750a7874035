/* bench_window.c: how long a takeover takes to read a job's window back from PostgreSQL
 * (storage_window_read, docs/operations.md "Many instances"), beside the same records read
 * through the iterations and phases views (how it was read before), in the same run.
 *
 *   bench_window [--ranks R] [--iters I] [--window W] [--runs N] DSN
 *
 * DSN names a database the benchmark may drop and create a database "bench_window" next to
 * (a superuser on a scratch server, e.g. the one of tests/pg.sh). The storage writer stores I
 * iterations of R ranks (default case5's 12,960 x 14) as node agents send them: a batch per 8
 * ranks and iteration, with 8 phases and 3 kernel summaries (a 12-byte sketch each) per
 * rank-step. Then the last W iterations (default all I: the job's history before them must not
 * cost the read), alternately N times each:
 *   views:  the iterations and phases views and the kernels table (text results), every
 *           field converted, as storage_window_read did before;
 *   window: storage_window_read.
 * Prints every run, the medians, and views / window. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "benchstore.h"
#include "benchutil.h"
#include "migrate.h"
#include "window.h"
#include "writer.h"

#define MAX_RUNS 32
#define NODE 8 /* ranks a batch */

static const char *const phase_names[8] = {"attn",      "mlp",          "ep_dispatch", "ep_combine",
					   "dp_reduce", "pp_send_recv", "optimizer",   "data_loader"};
static const char *const kernel_names[3] = {"sm90_gemm", "flash_attn_fwd", "nccl_all_to_all"};
static const int64_t base_us = INT64_C(1764633600000000);

static void die(const char *what, PGconn *c)
{
	fprintf(stderr, "bench_window: %s%s%s\n", what, c ? ": " : "", c ? PQerrorMessage(c) : "");
	exit(1);
}

static void exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK)
		die(sql, c);
	PQclear(r);
}

/* node n's batch of iteration it */
static struct storage_op *make_batch(uint32_t n, uint32_t it)
{
	size_t arena = 4096 + NODE * (sizeof(struct record_iter) + 8 * (sizeof(struct record_phase) + 8) +
				      3 * (sizeof(struct record_kernel) + 8 + 16));
	struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, arena);
	char agent[32];
	if (!op)
		die("out of memory", NULL);
	snprintf(agent, sizeof agent, "node-%u", n);
	op->job = storage_op_strdup(op, "bench");
	op->agent = storage_op_strdup(op, agent);
	op->seq = it + 1;
	op->names = storage_op_alloc(op, 11 * sizeof(char *));
	op->n_names = 11;
	for (int i = 0; i < 11; i++)
		op->names[i] = storage_op_strdup(op, i < 8 ? phase_names[i] : kernel_names[i - 8]);
	op->iters = storage_op_alloc(op, NODE * sizeof *op->iters);
	op->phases = storage_op_alloc(op, NODE * 8 * sizeof *op->phases);
	op->phase_iter_start_us = storage_op_alloc(op, NODE * 8 * sizeof(int64_t));
	op->kernels = storage_op_alloc(op, NODE * 3 * sizeof *op->kernels);
	op->kernel_iter_start_us = storage_op_alloc(op, NODE * 3 * sizeof(int64_t));
	uint8_t *sk = storage_op_alloc(op, 12);
	if (!op->iters || !op->phases || !op->phase_iter_start_us || !op->kernels || !op->kernel_iter_start_us || !sk)
		die("arena too small", NULL);
	memcpy(sk, "\1\2\3\4\5\6\7\10\11\12\13\14", 12);
	for (uint32_t k = 0; k < NODE; k++) {
		uint32_t r = n * NODE + k;
		int64_t start = base_us + (int64_t)it * 30000000 + r % 1000;
		op->iters[op->n_iters++] = (struct record_iter){r, it, start, 30000000 + r % 97};
		for (uint32_t p = 0; p < 8; p++) {
			op->phase_iter_start_us[op->n_phases] = start;
			op->phases[op->n_phases++] = (struct record_phase){.rank = r,
									   .iter = it,
									   .name = p,
									   .kind = (uint8_t)(p % 3),
									   .group = (uint8_t)(p % 5),
									   .start_us = (int64_t)p * 3000000,
									   .dur_us = 1000000 + r % 1000 + p};
		}
		for (uint32_t q = 0; q < 3; q++) {
			op->kernel_iter_start_us[op->n_kernels] = start;
			op->kernels[op->n_kernels++] = (struct record_kernel){.rank = r,
									      .iter = it,
									      .name = 8 + q,
									      .kind = (uint8_t)(q == 2),
									      .count = 96,
									      .sum_us = 96000 + r % 100,
									      .min_us = 900,
									      .max_us = 1100,
									      .p50_us = 1000,
									      .p99_us = 1090,
									      .sketch = sk,
									      .sketch_len = 12};
		}
	}
	return op;
}

static uint32_t nodes; /* ranks / NODE */

static struct storage_op *batch_at(size_t i, void *arg)
{
	(void)arg;
	return make_batch((uint32_t)(i % nodes), (uint32_t)(i / nodes));
}

/* the records through the views, every field converted: rows read */
static size_t views_read(PGconn *c, uint32_t first)
{
	static const char *const sql[3] = {
		"SELECT i.rank, i.iter, (extract(epoch FROM i.ts) * 1000000)::bigint, i.dur_us FROM iterations i"
		" JOIN jobs j ON j.id = i.job_id WHERE j.name = 'bench' AND i.iter >= ",
		"SELECT p.rank, p.iter, p.name_id, p.kind, p.grp, p.start_us, p.dur_us FROM phases p"
		" JOIN jobs j ON j.id = p.job_id WHERE j.name = 'bench' AND p.iter >= ",
		"SELECT k.rank, k.iter, k.name_id, k.kind, k.count, k.sum_us, k.min_us, k.max_us, k.p50_us, k.p99_us,"
		" k.sketch FROM kernels k JOIN jobs j ON j.id = k.job_id WHERE j.name = 'bench' AND k.iter >= "};
	size_t rows = 0;
	int64_t sum = 0;
	for (int q = 0; q < 3; q++) {
		char text[512];
		snprintf(text, sizeof text, "%s%u", sql[q], first);
		PGresult *r = PQexec(c, text);
		if (PQresultStatus(r) != PGRES_TUPLES_OK)
			die(sql[q], c);
		for (int i = 0; i < PQntuples(r); i++)
			for (int f = 0; f < PQnfields(r) - (q == 2); f++)
				sum += strtoll(PQgetvalue(r, i, f), NULL, 10);
		rows += (size_t)PQntuples(r);
		PQclear(r);
	}
	return sum ? rows : 0; /* the sum: the conversions are used, as the reader's were */
}

int main(int argc, char **argv)
{
	uint32_t ranks = 12960, iters = 14, window = 0;
	int runs = 5;
	const char *dsn = NULL;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--ranks") == 0)
			ranks = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--iters") == 0)
			iters = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--window") == 0)
			window = (uint32_t)strtoul(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[++i]);
		else if (argv[i][0] != '-' && !dsn)
			dsn = argv[i];
		else
			dsn = NULL, runs = 0;
	}
	if (!dsn)
		dsn = getenv("CULPRIT_TEST_DSN");
	if (!window)
		window = iters;
	if (!dsn || runs < 1 || runs > MAX_RUNS || ranks < NODE || ranks % NODE || iters < 1 || window > iters) {
		fprintf(stderr,
			"usage: bench_window [--ranks R (a multiple of %d)] [--iters I] [--window W <= I]\n"
			"                    [--runs 1..%d] DSN\n",
			NODE, MAX_RUNS);
		return 2;
	}
	PGconn *admin = PQconnectdb(dsn);
	if (PQstatus(admin) != CONNECTION_OK)
		die("connect", admin);
	exec(admin, "SET client_min_messages = warning");
	exec(admin, "DROP DATABASE IF EXISTS bench_window");
	exec(admin, "CREATE DATABASE bench_window");
	char bdsn[2048], err[512];
	snprintf(bdsn, sizeof bdsn, "%s dbname=bench_window", dsn);
	if (storage_migrate(bdsn, NULL, err, sizeof err) < 0) {
		fprintf(stderr, "bench_window: %s\n", err);
		return 1;
	}
	double t0 = now_s();
	nodes = ranks / NODE;
	struct storage_writer_config cfg = {.dsn = bdsn, .queue_max_records = 400000, .max_txn_records = 100000};
	bench_store(cfg, (size_t)nodes * iters, batch_at, NULL, NULL);
	printf("bench_window: %u ranks x %u iterations stored in %.1f s (8 phases, 3 kernels a rank-step)\n", ranks,
	       iters, now_s() - t0);
	PGconn *c = PQconnectdb(bdsn);
	if (PQstatus(c) != CONNECTION_OK)
		die("connect", c);
	exec(c, "VACUUM ANALYZE");
	double tv[MAX_RUNS], tw[MAX_RUNS];
	size_t want = (size_t)ranks * window * 12;
	for (int run = 0; run < runs; run++) {
		t0 = now_s();
		size_t rows = views_read(c, iters - window);
		tv[run] = now_s() - t0;
		t0 = now_s();
		struct storage_window *w =
			storage_window_read((struct pg_conn *)c, "bench", iters - window, iters - window, window, err,
					    sizeof err);
		tw[run] = now_s() - t0;
		if (!w)
			die(err, NULL);
		size_t got = w->n_iters + w->n_phases + w->n_kernels;
		free(w);
		if (rows != want || got != want) {
			fprintf(stderr, "bench_window: %zu records through the views, %zu read, %zu stored\n", rows,
				got, want);
			return 1;
		}
		printf("run %d: views %.2f s, window %.2f s (%zu records)\n", run + 1, tv[run], tw[run], got);
	}
	double mv = median(tv, runs), mw = median(tw, runs);
	printf("medians of %d (the last %u iterations): views %.2f s, window %.2f s: %.1fx; %.1f us per rank-step\n",
	       runs, window, mv, mw, mv / mw, mw * 1e6 / ((double)ranks * window));
	PQfinish(c);
	exec(admin, "DROP DATABASE bench_window");
	PQfinish(admin);
	return 0;
}
