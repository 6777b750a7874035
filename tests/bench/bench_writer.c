/* bench_writer.c: phase records per second persisted by the storage writer (rows of steps,
 * docs/storage.md), beside a raw COPY of the same records into a table of a row per record
 * (the layout before migration 008), in the same run.
 *
 *   bench_writer [--rows N] [--runs R] [--batch B] [--txn T] [--queue Q] DSN
 *
 * DSN names a database the benchmark may drop and create databases next to (a superuser on
 * a scratch server, e.g. the one of tests/pg.sh). Each run uses a fresh database "bench_writer":
 *   raw binary: one COPY (FORMAT binary) of all rows in one transaction into raw_phases, a
 *               plain table with the columns and primary key of the old phases table;
 *   raw text:   the same in text format;
 *   writer:     storage_writer_submit of N/B batches of B phase rows (one agent, increasing
 *               seq, a 10-name dictionary each), timed from the first submit to the last
 *               done item, so it includes name resolution, progress upserts and commits.
 * Prints every run, then medians and writer / best raw. */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "benchstore.h"
#include "benchutil.h"
#include "migrate.h"
#include "writer.h"

#define NAMES 10
#define MAX_RUNS 32
#define PG_EPOCH_US INT64_C(946684800000000)

static const char *const names[NAMES] = {
	"fwd",           "bwd",     "mlp",      "attn", "ep_dispatch", "ep_combine", "dp_reduce_scatter",
	"dp_all_gather", "pp_send", "optimizer"};
static const int64_t base_us = INT64_C(1764633600000000);

static void die(const char *what, PGconn *c)
{
	fprintf(stderr, "bench_writer: %s: %s\n", what, c ? PQerrorMessage(c) : "");
	exit(1);
}

static void exec(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		die(sql, c);
	PQclear(r);
}

static long long scalar(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_TUPLES_OK)
		die(sql, c);
	long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

/* Row i of the data set: batch b = i / batch_rows holds the phases of batch_rows / NAMES
 * rank-steps of the 8 ranks of node b % 125 (an agent's, as culprit sim sends them), NAMES
 * phases per rank-step. */
struct row {
	uint32_t rank, iter, name;
	int64_t iter_start;
	int64_t dur;
};

static struct row row_at(size_t i, size_t batch_rows)
{
	size_t b = i / batch_rows, k = i % batch_rows;
	size_t steps_per_batch = batch_rows / NAMES, step = k / NAMES;
	struct row r;
	r.rank = (uint32_t)((b % 125) * 8 + step % 8);
	r.iter = (uint32_t)((b / 125) * ((steps_per_batch + 7) / 8) + step / 8);
	r.name = (uint32_t)(k % NAMES);
	r.iter_start = base_us + (int64_t)r.iter * 30000000;
	r.dur = 1000 + (int64_t)(k % 97);
	return r;
}

/* ---- raw COPY ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->cap - b->len < n) {
		b->cap = (b->cap + n) * 2;
		b->p = realloc(b->p, b->cap);
		if (!b->p)
			die("out of memory", NULL);
	}
	memcpy(b->p + b->len, d, n);
	b->len += n;
}

static void put16(struct buf *b, uint16_t v)
{
	unsigned char x[2] = {(unsigned char)(v >> 8), (unsigned char)v};
	put(b, x, 2);
}

static void put32(struct buf *b, uint32_t v)
{
	unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
			      (unsigned char)v};
	put(b, x, 4);
}

static void put64(struct buf *b, uint64_t v)
{
	put32(b, (uint32_t)(v >> 32));
	put32(b, (uint32_t)v);
}

static void flush(PGconn *c, struct buf *b, bool all)
{
	if (b->len == 0 || (!all && b->len < 256 * 1024))
		return;
	if (PQputCopyData(c, b->p, (int)b->len) != 1)
		die("PQputCopyData", c);
	b->len = 0;
}

/* One COPY of all rows into raw_phases, a plain table of a row per phase record (the
 * columns and primary key of the phases table before migration 008). */
static double raw_copy(PGconn *c, size_t rows, size_t batch_rows, bool binary)
{
	const char *table = "raw_phases";
	exec(c, "DROP TABLE IF EXISTS raw_phases");
	exec(c, "CREATE TABLE raw_phases (job_id integer NOT NULL, rank integer NOT NULL, iter integer NOT NULL,"
		" name_id integer NOT NULL, ts timestamptz NOT NULL, kind smallint NOT NULL, grp smallint NOT NULL,"
		" start_us bigint, dur_us bigint NOT NULL, PRIMARY KEY (job_id, rank, iter, name_id, ts))");
	exec(c, "CHECKPOINT");
	char sql[256];
	snprintf(sql, sizeof sql, "COPY %s (job_id, rank, iter, name_id, ts, kind, grp, start_us, dur_us) FROM STDIN%s",
		 table, binary ? " (FORMAT binary)" : "");
	double t0 = now_s();
	exec(c, "BEGIN");
	PGresult *r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COPY_IN)
		die("COPY", c);
	PQclear(r);
	struct buf b = {0};
	if (binary)
		put(&b, "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
	for (size_t i = 0; i < rows; i++) {
		struct row w = row_at(i, batch_rows);
		if (binary) {
			put16(&b, 9);
			put32(&b, 4), put32(&b, 1);
			put32(&b, 4), put32(&b, w.rank);
			put32(&b, 4), put32(&b, w.iter);
			put32(&b, 4), put32(&b, w.name + 1);
			put32(&b, 8), put64(&b, (uint64_t)(w.iter_start - PG_EPOCH_US));
			put32(&b, 2), put16(&b, (uint16_t)(w.name % 4));
			put32(&b, 2), put16(&b, (uint16_t)(w.name % 6));
			put32(&b, 8), put64(&b, (uint64_t)w.name * 1000);
			put32(&b, 8), put64(&b, (uint64_t)w.dur);
		} else {
			time_t sec = (time_t)(w.iter_start / 1000000);
			struct tm tm;
			gmtime_r(&sec, &tm);
			char line[160];
			int n = snprintf(line, sizeof line,
					 "1\t%" PRIu32 "\t%" PRIu32 "\t%" PRIu32
					 "\t%04d-%02d-%02d %02d:%02d:%02d.%06d+00\t%u\t%u\t%u\t%" PRId64 "\n",
					 w.rank, w.iter, w.name + 1, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
					 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(w.iter_start % 1000000), w.name % 4,
					 w.name % 6, w.name * 1000, w.dur);
			put(&b, line, (size_t)n);
		}
		flush(c, &b, false);
	}
	if (binary)
		put16(&b, 0xFFFF);
	flush(c, &b, true);
	if (PQputCopyEnd(c, NULL) != 1)
		die("PQputCopyEnd", c);
	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			die("COPY", c);
		PQclear(r);
	}
	exec(c, "COMMIT");
	double dt = now_s() - t0;
	free(b.p);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM %s", table);
	if ((size_t)scalar(c, sql) != rows)
		die("raw COPY stored a wrong number of rows", NULL);
	exec(c, "DROP TABLE raw_phases");
	return (double)rows / dt;
}

/* ---- writer ---- */

static struct storage_op *make_batch(size_t first_row, size_t n, uint64_t seq, size_t batch_rows)
{
	struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, 1024 + n * (sizeof(struct record_phase) + 8));
	if (!op)
		die("out of memory", NULL);
	op->job = storage_op_strdup(op, "bench");
	op->agent = storage_op_strdup(op, "agent-0");
	op->seq = seq;
	op->names = storage_op_alloc(op, NAMES * sizeof(char *));
	op->n_names = NAMES;
	for (int i = 0; i < NAMES; i++)
		op->names[i] = storage_op_strdup(op, names[i]);
	op->phases = storage_op_alloc(op, n * sizeof *op->phases);
	op->phase_iter_start_us = storage_op_alloc(op, n * sizeof(int64_t));
	if (!op->phases || !op->phase_iter_start_us || !op->names[NAMES - 1])
		die("arena too small", NULL);
	op->n_phases = n;
	for (size_t i = 0; i < n; i++) {
		struct row w = row_at(first_row + i, batch_rows);
		op->phases[i] = (struct record_phase){.rank = w.rank,
						      .iter = w.iter,
						      .name = w.name,
						      .kind = (uint8_t)(w.name % 4),
						      .group = (uint8_t)(w.name % 6),
						      .start_us = (int64_t)w.name * 1000,
						      .dur_us = w.dur};
		op->phase_iter_start_us[i] = w.iter_start;
	}
	return op;
}

struct batches {
	size_t rows, batch_rows;
};

static struct storage_op *batch_at(size_t b, void *arg)
{
	const struct batches *x = arg;
	size_t first = b * x->batch_rows, n = x->rows - first < x->batch_rows ? x->rows - first : x->batch_rows;
	return make_batch(first, n, b + 1, x->batch_rows);
}

static double writer_run(const char *dsn, PGconn *c, size_t rows, size_t batch_rows, size_t txn, size_t queue)
{
	exec(c, "CHECKPOINT");
	struct storage_writer_config cfg = {.dsn = dsn, .queue_max_records = queue, .max_txn_records = txn};
	struct batches x = {rows, batch_rows};
	struct storage_writer_stats st;
	double dt = bench_store(cfg, (rows + batch_rows - 1) / batch_rows, batch_at, &x, &st);
	if ((size_t)scalar(c, "SELECT count(*) FROM phases") != rows)
		die("the writer stored a wrong number of rows", NULL);
	printf("    writer: %" PRIu64 " transactions, %" PRIu64 " refusals (queue full)\n", st.committed_txns,
	       st.refused_full);
	return (double)rows / dt;
}

int main(int argc, char **argv)
{
	size_t rows = 2000000, batch = 1000, txn = 50000, queue = 200000;
	int runs = 3;
	const char *dsn = NULL;
	for (int i = 1; i < argc; i++) {
		if (i + 1 < argc && strcmp(argv[i], "--rows") == 0)
			rows = strtoull(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--runs") == 0)
			runs = atoi(argv[++i]);
		else if (i + 1 < argc && strcmp(argv[i], "--batch") == 0)
			batch = strtoull(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--txn") == 0)
			txn = strtoull(argv[++i], NULL, 10);
		else if (i + 1 < argc && strcmp(argv[i], "--queue") == 0)
			queue = strtoull(argv[++i], NULL, 10);
		else if (argv[i][0] != '-' && !dsn)
			dsn = argv[i];
		else {
			fprintf(stderr,
				"usage: bench_writer [--rows N] [--runs R] [--batch B] [--txn T] [--queue Q] DSN\n");
			return 2;
		}
	}
	if (!dsn)
		dsn = getenv("CULPRIT_TEST_DSN");
	if (!dsn || runs < 1 || runs > MAX_RUNS || batch < NAMES || batch % NAMES || rows == 0) {
		fprintf(stderr,
			"usage: bench_writer [--rows N] [--runs 1..%d] [--batch B (multiple of %d)] [--txn T] "
			"[--queue Q] DSN\n",
			MAX_RUNS, NAMES);
		return 2;
	}
	PGconn *admin = PQconnectdb(dsn);
	if (PQstatus(admin) != CONNECTION_OK)
		die("connect", admin);
	exec(admin, "SET client_min_messages = warning");
	char bdsn[2048];
	snprintf(bdsn, sizeof bdsn, "%s dbname=bench_writer", dsn);
	printf("bench_writer: %zu phase rows a run, batches of %zu, transactions of <= %zu, queue %zu, %d runs\n", rows,
	       batch, txn, queue, runs);
	double raw_b[MAX_RUNS], raw_t[MAX_RUNS], wr[MAX_RUNS], ratio[MAX_RUNS];
	for (int run = 0; run < runs; run++) {
		exec(admin, "DROP DATABASE IF EXISTS bench_writer");
		exec(admin, "CREATE DATABASE bench_writer");
		char err[512];
		if (storage_migrate(bdsn, NULL, err, sizeof err) < 0) {
			fprintf(stderr, "bench_writer: %s\n", err);
			return 1;
		}
		PGconn *c = PQconnectdb(bdsn);
		if (PQstatus(c) != CONNECTION_OK)
			die("connect", c);
		exec(c, "SET client_min_messages = warning");
		raw_b[run] = raw_copy(c, rows, batch, true);
		raw_t[run] = raw_copy(c, rows, batch, false);
		wr[run] = writer_run(bdsn, c, rows, batch, txn, queue);
		double best = raw_b[run] > raw_t[run] ? raw_b[run] : raw_t[run];
		ratio[run] = wr[run] / best;
		printf("run %d: raw COPY binary %.0f, text %.0f; writer %.0f rows/s (%.0f%% of the best raw)\n",
		       run + 1, raw_b[run], raw_t[run], wr[run], 100.0 * ratio[run]);
		fflush(stdout);
		PQfinish(c);
	}
	exec(admin, "DROP DATABASE IF EXISTS bench_writer");
	PQfinish(admin);
	double mb = median(raw_b, runs), mt = median(raw_t, runs), mw = median(wr, runs);
	double best = mb > mt ? mb : mt;
	printf("median: raw COPY binary %.0f, text %.0f; writer %.0f rows/s\n", mb, mt, mw);
	printf("writer / best raw COPY: ratio of medians %.2f, median of per-run ratios %.2f (target >= 0.70)\n",
	       mw / best, median(ratio, runs));
	return 0;
}
