/* test_writer.c: the storage writer against real PostgreSQL.
 *   - 1,000,000 phase rows (plus iterations and kernels) stored, durable seq reported;
 *   - the same batches re-sent store no duplicate (cache path and COPY-conflict path), raw
 *     kernels of a capture included;
 *   - a batch the database refuses is reported failed without holding up the others;
 *   - PostgreSQL restarted in the middle of writing loses nothing once it is back, the
 *     queue refuses submissions while it is down (backpressure), stop reports what is lost;
 *   - fencing: a batch whose lease epoch is no longer the job's (another instance took the
 *     lease) is not written and reported STORAGE_FENCED; another job's batch of the same
 *     group is written. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "migrate.h"
#include "pgtest.h"
#include "retention.h"
#include "window.h"
#include "writer.h"

#include <libpq-fe.h>

#define NAMES 10
#define ITERS_PER_BATCH 100
#define RANKS 100

static const char *const phase_names[NAMES] = {
	"fwd",           "bwd",     "mlp",      "attn", "ep_dispatch", "ep_combine", "dp_reduce_scatter",
	"dp_all_gather", "pp_send", "optimizer"};
static int64_t base_us = INT64_C(1764633600000000); /* 2025-12-02 00:00 UTC */

/* ---- producer side: wake, done items ---- */

struct sink {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int wakes;
	size_t done, failed, fenced;
	uint64_t max_seq;
	uint64_t last_failed_seq;
};

static void wake(void *arg)
{
	struct sink *s = arg;
	pthread_mutex_lock(&s->mu);
	s->wakes++;
	pthread_cond_signal(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

static void drain(struct storage_writer *w, struct sink *s)
{
	struct storage_done d[64];
	size_t n;
	while ((n = storage_writer_take_done(w, d, 64)) > 0) {
		for (size_t i = 0; i < n; i++) {
			s->done++;
			if (d[i].failed == STORAGE_FENCED) {
				s->fenced++;
			} else if (d[i].failed) {
				s->failed++;
				s->last_failed_seq = d[i].seq;
			}
			if (d[i].seq > s->max_seq)
				s->max_seq = d[i].seq;
		}
	}
}

/* Waits for a wake (or 200 ms), then drains done items. */
static void wait_wake(struct storage_writer *w, struct sink *s)
{
	pthread_mutex_lock(&s->mu);
	if (s->wakes == 0) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		t.tv_nsec += 200 * 1000000L;
		if (t.tv_nsec >= 1000000000L) {
			t.tv_sec++;
			t.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&s->cv, &s->mu, &t);
	}
	s->wakes = 0;
	pthread_mutex_unlock(&s->mu);
	drain(w, s);
}

static void submit_wait(struct storage_writer *w, struct sink *s, struct storage_op *op)
{
	while (storage_writer_submit(w, op) < 0)
		wait_wake(w, s);
	drain(w, s);
}

static void wait_done(struct storage_writer *w, struct sink *s, size_t want, int timeout_ms)
{
	int64_t deadline = pgtest_now_ms() + timeout_ms;
	drain(w, s);
	while (s->done < want) {
		CHECK_MSG(pgtest_now_ms() < deadline, "%zu of %zu batches done", s->done, want);
		wait_wake(w, s);
	}
}

/* ---- batches ---- */

/* Batch seq (1-based) of agent "a0": rank (seq-1) % RANKS, iterations
 * ((seq-1) / RANKS) * ITERS_PER_BATCH + 0..99, NAMES phases each, one kernel per iteration. */
static struct storage_op *make_batch(const char *job, uint64_t seq, uint32_t rank_offset)
{
	size_t np = ITERS_PER_BATCH * NAMES, ni = ITERS_PER_BATCH, nk = ITERS_PER_BATCH;
	size_t arena = 1024 + NAMES * 32 + ni * sizeof(struct record_iter) + np * (sizeof(struct record_phase) + 8) +
		       nk * (sizeof(struct record_kernel) + 8 + 16) + 256;
	struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, arena);
	CHECK(op != NULL);
	op->job = storage_op_strdup(op, job);
	op->agent = storage_op_strdup(op, "a0");
	op->source = 7;
	op->seq = seq;
	op->names = storage_op_alloc(op, NAMES * sizeof(char *));
	op->n_names = NAMES;
	for (int i = 0; i < NAMES; i++)
		op->names[i] = storage_op_strdup(op, phase_names[(i + (int)seq) % NAMES]); /* order varies */
	op->iters = storage_op_alloc(op, ni * sizeof *op->iters);
	op->phases = storage_op_alloc(op, np * sizeof *op->phases);
	op->phase_iter_start_us = storage_op_alloc(op, np * sizeof(int64_t));
	op->kernels = storage_op_alloc(op, nk * sizeof *op->kernels);
	op->kernel_iter_start_us = storage_op_alloc(op, nk * sizeof(int64_t));
	uint8_t *sketch = storage_op_alloc(op, 16);
	CHECK(op->job && op->agent && op->iters && op->phases && op->phase_iter_start_us && op->kernels &&
	      op->kernel_iter_start_us && sketch);
	memcpy(sketch, "sketch-bytes\0\1\2\3", 16);
	op->n_iters = ni;
	op->n_phases = np;
	op->n_kernels = nk;
	uint32_t rank = (uint32_t)((seq - 1) % RANKS) + rank_offset;
	uint32_t iter0 = (uint32_t)((seq - 1) / RANKS) * ITERS_PER_BATCH;
	size_t p = 0;
	for (size_t i = 0; i < ni; i++) {
		int64_t start = base_us + (int64_t)(iter0 + i) * 30000000;
		op->iters[i] = (struct record_iter){rank, iter0 + (uint32_t)i, start, 30000000};
		for (uint32_t k = 0; k < NAMES; k++, p++) {
			op->phases[p] = (struct record_phase){.rank = rank,
							      .iter = iter0 + (uint32_t)i,
							      .name = k,
							      .kind = (uint8_t)(k % 4),
							      .group = (uint8_t)(k % 6),
							      .start_us = k == 0 ? RECORD_NO_START : (int64_t)k * 1000,
							      .dur_us = 1000 + (int64_t)k};
			op->phase_iter_start_us[p] = start;
		}
		op->kernels[i] = (struct record_kernel){.rank = rank,
							.iter = iter0 + (uint32_t)i,
							.name = 2,
							.kind = 0,
							.count = 96,
							.sum_us = 96000,
							.min_us = 900,
							.max_us = 1100,
							.p50_us = 1000,
							.p99_us = 1090,
							.sketch = sketch,
							.sketch_len = 16};
		op->kernel_iter_start_us[i] = start;
	}
	return op;
}

static struct storage_writer *start_writer(const char *dsn, struct sink *s, size_t queue, size_t txn)
{
	memset(s, 0, sizeof *s);
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	struct storage_writer_config cfg = {.dsn = dsn,
					    .queue_max_records = queue,
					    .max_txn_records = txn,
					    .wake = wake,
					    .wake_arg = s,
					    .reconnect_min_ms = 50,
					    .reconnect_max_ms = 400};
	struct storage_writer *w = storage_writer_start(&cfg);
	CHECK(w != NULL);
	return w;
}

static void free_sink(struct sink *s)
{
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->mu);
}

struct progress_seen {
	int rows;
	uint64_t seq;
};

static void progress_cb(const char *job, const char *agent, uint64_t seq, void *arg)
{
	struct progress_seen *p = arg;
	if (strcmp(job, "J") == 0 && strcmp(agent, "a0") == 0) {
		p->rows++;
		p->seq = seq;
	}
}

/* ---- tests ---- */

/* A job with its ranks and 1,000 batches (1,000,000 phases, 100,000 iterations, 100,000
 * kernels): every record stored once, with its values and names. */
static void million_load(const char *dsn, struct storage_writer *w, struct sink *s)
{
	struct storage_writer_stats st;
	/* a job with its ranks */
	struct storage_op *job =
		storage_op_new(STORAGE_OP_JOB, 4096 + RANKS * sizeof(struct storage_rank) + RANKS * 16);
	CHECK(job != NULL);
	job->job = storage_op_strdup(job, "J");
	job->topo = (struct storage_topology){.world = RANKS,
					      .tp = 1,
					      .cp = 1,
					      .pp = 2,
					      .dp = 50,
					      .ep = 10,
					      .gpus_per_node = 8,
					      .order = "tp-cp-ep-dp-pp"};
	job->ranks = storage_op_alloc(job, RANKS * sizeof *job->ranks);
	job->n_ranks = RANKS;
	for (uint32_t r = 0; r < RANKS; r++) {
		char host[32];
		snprintf(host, sizeof host, "node-\"%u\"", r / 8); /* quotes survive the array literal */
		job->ranks[r] = (struct storage_rank){r, 0, 0, r % 10, r % 50, r / 50, storage_op_strdup(job, host)};
	}
	submit_wait(w, s, job);

	int64_t t0 = pgtest_now_ms();
	for (uint64_t seq = 1; seq <= 1000; seq++)
		submit_wait(w, s, make_batch("J", seq, 0));
	wait_done(w, s, 1000, 120000);
	int64_t ms = pgtest_now_ms() - t0;
	printf("test_writer: 1,000,000 phases + 100,000 iterations + 100,000 kernels in %" PRId64 " ms\n", ms);
	CHECK(s->failed == 0);
	CHECK(s->max_seq == 1000);
	storage_writer_stats(w, &st);
	CHECK(st.committed_records == 1200000);
	CHECK(st.queued_records == 0 && st.queued_ops == 0);
	CHECK(st.connected == 1);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 1000000);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == 100000);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM kernels WHERE sketch = '\\x736b657463682d627974657300010203'") ==
	      100000);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == 1000);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM names") == NAMES);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM ranks WHERE host LIKE 'node-\"%\"'") == RANKS);
	CHECK(pgtest_scalar(dsn, "SELECT pp FROM jobs WHERE name = 'J'") == 2);
	/* a record's values survive: rank 3 (seq 4) iteration 5, dictionary index 0 = phase_names[4] */
	CHECK(pgtest_scalar(dsn,
			    "SELECT count(*) FROM phases p JOIN names n USING (name_id) WHERE p.rank = 3 AND p.iter = 5"
			    " AND n.name = 'ep_dispatch' AND p.start_us IS NULL AND p.dur_us = 1000 AND p.kind = 0"
			    " AND p.ts = to_timestamp(1764633600 + 5 * 30)") == 1);
}

/* The same batches again: skipped from the cache, no duplicate; the durable sequences read at
 * start-up. The writer stopped. */
static void million_again(const char *dsn, struct storage_writer *w, struct sink *s)
{
	struct storage_writer_stats st;
	char err[512];

	for (uint64_t seq = 1; seq <= 1000; seq++)
		submit_wait(w, s, make_batch("J", seq, 0));
	wait_done(w, s, 2000, 60000);
	storage_writer_stats(w, &st);
	CHECK(st.skipped_batches == 1000);
	CHECK(st.committed_records == 1200000);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 1000000);

	/* start-up load of the durable seqs */
	struct progress_seen seen = {0};
	CHECK_MSG(storage_progress_load(dsn, progress_cb, &seen, err, sizeof err) == 0, "%s", err);
	CHECK(seen.rows == 1 && seen.seq == 1000);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(s);
}

/* A writer that does not know the batches are durable (progress set back): the COPY hits
 * the keys, the transaction is redone through staging, still no duplicate; a batch mixing
 * old and new rows stores exactly the new ones. */
static struct storage_writer *million_redone(const char *dsn, struct sink *s)
{
	struct storage_writer_stats st;
	struct storage_writer *w;

	pgtest_scalar(dsn, "UPDATE agent_progress SET durable_seq = 500");
	w = start_writer(dsn, s, 200000, 50000);
	for (uint64_t seq = 490; seq <= 520; seq++)
		submit_wait(w, s, make_batch("J", seq, 0));
	struct storage_op *mixed = make_batch("J", 1, 0); /* the rows of batch 1 ... */
	mixed->seq = 1001;
	mixed->phases[0].rank = mixed->iters[0].rank = mixed->kernels[0].rank = 5000; /* ... but one new iteration */
	for (int k = 1; k < NAMES; k++)
		mixed->phases[k].rank = 5000;
	submit_wait(w, s, mixed);
	wait_done(w, s, 32, 60000);
	storage_writer_stats(w, &st);
	CHECK_MSG(st.conflicts >= 1, "conflicts %" PRIu64, st.conflicts);
	CHECK(st.skipped_batches == 11); /* 490 .. 500 */
	CHECK(s->failed == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 1000000 + NAMES);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == 100000 + 1);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == 1001);

	return w;
}

/* Refused content: a bad name index (caught before the database), a name that is not UTF-8
 * (refused by the database), a timestamp out of PostgreSQL's range; good batches in the same
 * transaction still land. */
static void million_refused(const char *dsn, struct storage_writer *w, struct sink *s)
{
	struct storage_writer_stats st;

	/* refused content: a bad name index (caught before the database), a name that is not
	 * UTF-8 (refused by the database); good batches in the same transaction still land */
	struct storage_op *bad1 = make_batch("J", 1002, 10000);
	bad1->phases[3].name = NAMES + 5;
	struct storage_op *good1 = make_batch("J", 1003, 10000);
	struct storage_op *bad2 = make_batch("J", 1004, 10000);
	bad2->names[4] = storage_op_strdup(bad2, "\xff\xfe not utf-8");
	struct storage_op *good2 = make_batch("J", 1005, 10000);
	/* a timestamp out of PostgreSQL's range fails the COPY of the whole group: the ops are
	 * retried one by one to find it */
	struct storage_op *bad3 = make_batch("J", 1006, 10000);
	bad3->iters[7].start_us = INT64_C(-300000000000000000); /* about 7500 BC: the ts of its row of steps */
	struct storage_op *good3 = make_batch("J", 1007, 10000);
	submit_wait(w, s, bad1);
	submit_wait(w, s, good1);
	submit_wait(w, s, bad2);
	submit_wait(w, s, good2);
	submit_wait(w, s, bad3);
	submit_wait(w, s, good3);
	wait_done(w, s, 38, 60000);
	CHECK_MSG(s->failed == 3, "failed %zu", s->failed);
	storage_writer_stats(w, &st);
	CHECK(st.failed_batches == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE rank >= 10000") == 3 * ITERS_PER_BATCH * NAMES);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations WHERE rank >= 10000") == 3 * ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == 1007);
}

/* A missing table is the operator's to fix, not the batch's fault: retried, not dropped. */
static void million_missing_table(const char *dsn, struct storage_writer *w, struct sink *s)
{
	struct storage_writer_stats st;

	pgtest_scalar(dsn, "ALTER TABLE steps RENAME TO steps_away");
	submit_wait(w, s, make_batch("J", 1008, 10000));
	int64_t until = pgtest_now_ms() + 1500;
	while (pgtest_now_ms() < until)
		wait_wake(w, s);
	CHECK(s->done == 38);
	storage_writer_stats(w, &st);
	CHECK(st.queued_ops == 1 && st.failed_batches == 3);
	pgtest_scalar(dsn, "ALTER TABLE steps_away RENAME TO steps");
	wait_done(w, s, 39, 60000);
	CHECK(s->failed == 3);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE rank >= 10000") == 4 * ITERS_PER_BATCH * NAMES);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == 1008);
}

/* Records name the producer's ids (sparse, in no order): each lands with its name; a
 * record naming an id that none of its batch's names has is refused, the batch beside it
 * lands. The writer stopped. */
static void million_sparse_names(const char *dsn, struct storage_writer *w, struct sink *s)
{
	/* records name the producer's ids (sparse, in no order: 900, 800, ..., 0): each lands with
	 * its name; a record naming an id that none of its batch's names has is refused before
	 * the database, and the batch beside it lands */
	struct storage_op *sparse = make_batch("J", 1009, 10000), *unnamed = make_batch("J", 1010, 10000);
	for (struct storage_op **op = (struct storage_op *[]){sparse, unnamed, NULL}; *op; op++) {
		CHECK(((*op)->name_ids = storage_op_alloc(*op, NAMES * sizeof(uint32_t))) != NULL);
		for (uint32_t k = 0; k < NAMES; k++)
			(*op)->name_ids[k] = (NAMES - 1 - k) * 100;
		for (size_t i = 0; i < (*op)->n_phases; i++)
			(*op)->phases[i].name = (NAMES - 1 - (*op)->phases[i].name) * 100;
		for (size_t i = 0; i < (*op)->n_kernels; i++)
			(*op)->kernels[i].name = (NAMES - 1 - (*op)->kernels[i].name) * 100;
	}
	unnamed->phases[3].name = 150;
	submit_wait(w, s, unnamed);
	submit_wait(w, s, sparse);
	wait_done(w, s, 41, 60000);
	CHECK(s->failed == 4);
	/* seq 1009: rank 10008, iterations 1000..1099; phase k (dur_us 1000 + k) is phase_names[(k + 1009) % NAMES] */
	for (int k = 0; k < NAMES; k++) {
		char sql[400];
		snprintf(sql, sizeof sql,
			 "SELECT count(*) FROM phases p JOIN names n USING (name_id) WHERE p.rank = 10008 AND p.iter "
			 ">= 1000"
			 " AND p.iter < 1100 AND p.dur_us = %d AND n.name = '%s'",
			 1000 + k, phase_names[(k + 1009) % NAMES]);
		CHECK_MSG(pgtest_scalar(dsn, sql) == ITERS_PER_BATCH, "phase %d of seq 1009 misnamed", k);
	}
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM kernels k JOIN names n USING (name_id) WHERE k.rank = 10008"
				 " AND k.iter >= 1000 AND k.iter < 1100 AND n.name = 'bwd'") == ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE rank = 10009") == 0);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(s);
}

/* Stopped at once (timeout 0) with a full queue: whole batches are either stored or counted
 * as not written, nothing in between. */
static void million_stop_at_once(const char *dsn, struct sink *s)
{
	struct storage_writer *w;

	w = start_writer(dsn, s, 200000, 50000);
	for (uint64_t seq = 2001; seq <= 2100; seq++)
		submit_wait(w, s, make_batch("J", seq, 20000));
	uint64_t lost = storage_writer_stop(w, 0);
	long long stored = pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE rank >= 20000");
	CHECK(stored % (ITERS_PER_BATCH * NAMES) == 0);
	CHECK_MSG((uint64_t)stored / (ITERS_PER_BATCH * NAMES) * 1200 + lost == 100 * 1200,
		  "stored %lld, lost %" PRIu64, stored, lost);
	printf("test_writer: stop at once: %lld phases stored, %" PRIu64 " records not written\n", stored, lost);
	free_sink(s);
}

static void test_million(const char *base)
{
	char dsn[1024], err[512];
	struct sink s;
	struct storage_writer *w;

	pgtest_db_create(base, "test_writer_million", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	w = start_writer(dsn, &s, 200000, 50000);
	million_load(dsn, w, &s);
	million_again(dsn, w, &s);
	w = million_redone(dsn, &s);
	million_refused(dsn, w, &s);
	million_missing_table(dsn, w, &s);
	million_sparse_names(dsn, w, &s);
	million_stop_at_once(dsn, &s);
}

static void test_restart(void)
{
	char dir[256], dsn_pg[1024], dsn[1200], err[512];
	pgtest_tmpdir("writer-restart", dir, sizeof dir);
	pgtest_cluster_start(dir, dsn_pg, sizeof dsn_pg);
	pgtest_scalar(dsn_pg, "CREATE DATABASE culprit");
	snprintf(dsn, sizeof dsn, "%s dbname=culprit", dsn_pg);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);

	struct sink s;
	/* 20 batches of queue, 5 per transaction */
	struct storage_writer *w = start_writer(dsn, &s, 20 * 1200, 5 * 1200);
	const uint64_t total = 300;
	uint64_t seq = 1;
	for (; seq <= 100; seq++)
		submit_wait(w, &s, make_batch("J", seq, 0));

	/* the first connection, made idle or busy as the writer thread happened to start, is
	 * not a reconnection */
	struct storage_writer_stats st;
	storage_writer_stats(w, &st);
	CHECK(st.reconnects == 0);

	/* PostgreSQL goes away while the writer is busy */
	pgtest_cluster_stop(dir);
	int64_t deadline = pgtest_now_ms() + 60000;
	size_t refused_at = 0;
	for (;;) {
		struct storage_op *op = make_batch("J", seq, 0);
		if (storage_writer_submit(w, op) == 0) {
			seq++;
			continue;
		}
		storage_op_free(op);
		storage_writer_stats(w, &st);
		if (st.connected == 0) {
			refused_at = (size_t)seq;
			break;
		}
		CHECK_MSG(pgtest_now_ms() < deadline, "writer never noticed the database was gone");
		wait_wake(w, &s);
	}
	/* backpressure: the queue is full and stays full while the database is down */
	storage_writer_stats(w, &st);
	CHECK(st.refused_full >= 1);
	CHECK(st.queued_records > 0);
	drain(w, &s);
	size_t done_before = s.done;
	wait_wake(w, &s);
	wait_wake(w, &s);
	CHECK(s.done == done_before);
	printf("test_writer: database down, queue full at seq %zu with %" PRIu64 " records queued\n", refused_at,
	       st.queued_records);

	/* back: everything lands, exactly once */
	pgtest_cluster_start(dir, dsn_pg, sizeof dsn_pg);
	for (; seq <= total; seq++)
		submit_wait(w, &s, make_batch("J", seq, 0));
	wait_done(w, &s, total, 120000);
	storage_writer_stats(w, &st);
	CHECK(s.failed == 0);
	CHECK(st.reconnects >= 1);
	CHECK_MSG(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == (long long)total * ITERS_PER_BATCH * NAMES,
		  "phases: %lld", pgtest_scalar(dsn, "SELECT count(*) FROM phases"));
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == (long long)total * ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == (long long)total);

	/* stopping with the database down gives up after the timeout and says what was lost */
	pgtest_cluster_stop(dir);
	for (uint64_t k = 1; k <= 3; k++)
		submit_wait(w, &s, make_batch("J", total + k, 0));
	uint64_t lost = storage_writer_stop(w, 300);
	CHECK_MSG(lost == 3 * 1200, "lost %" PRIu64, lost);
	free_sink(&s);
	pgtest_rmdir(dir);
}

/* Partition maintenance while the writer writes today's rows: the rows already in DEFAULT
 * move into the new partitions, nothing is lost or doubled, no batch fails. */
static void test_partitions_live(const char *base)
{
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_writer_live", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t saved = base_us;
	base_us = (int64_t)now.tv_sec * 1000000 - 3600 * INT64_C(1000000); /* an hour ago: today or yesterday */
	struct sink s;
	struct storage_writer *w = start_writer(dsn, &s, 50000, 10000);
	for (uint64_t seq = 1; seq <= 300; seq++) {
		submit_wait(w, &s, make_batch("J", seq, 0));
		if (seq == 100 || seq == 200) {
			int tries = 0;
			while (storage_retention_run(dsn, 7, 2, err, sizeof err) < 0) {
				fprintf(stderr, "retention (tolerated, retried): %s\n", err);
				CHECK(++tries < 5);
			}
		}
	}
	wait_done(w, &s, 300, 120000);
	CHECK(s.failed == 0);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(&s);
	CHECK(storage_retention_run(dsn, 7, 2, err, sizeof err) >= 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 300 * ITERS_PER_BATCH * NAMES);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == 300 * ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps_default") == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(DISTINCT tableoid) FROM steps") >= 1);
	base_us = saved;
}

/* Raw kernels of a capture travel in their batch: stored with it, exactly once (a resend
 * skipped from the cache, and redone through staging by a writer that does not know), two
 * executions of one kernel that start in the same microsecond as two rows (not a conflict:
 * the first round commits without staging). */
static void test_raw_kernels(const char *base)
{
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_writer_raw", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	struct sink s;
	struct storage_writer *w = start_writer(dsn, &s, 200000, 50000);

	for (int round = 0; round < 3; round++) {
		if (round == 2) {
			/* progress set back: the COPY hits the keys, redone through staging */
			CHECK(storage_writer_stop(w, 5000) == 0);
			free_sink(&s);
			pgtest_scalar(dsn, "UPDATE agent_progress SET durable_seq = 0");
			w = start_writer(dsn, &s, 200000, 50000);
		}
		/* a batch of raw kernels only (names: its dictionary) */
		struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, 4096);
		CHECK(op != NULL);
		op->job = storage_op_strdup(op, "R");
		op->agent = storage_op_strdup(op, "a0");
		op->seq = 1;
		op->names = storage_op_alloc(op, 2 * sizeof(char *));
		op->n_names = 2;
		op->names[0] = storage_op_strdup(op, "sm90_gemm");
		op->names[1] = storage_op_strdup(op, "nccl_all_reduce");
		op->raw_kernels = storage_op_alloc(op, 5 * sizeof *op->raw_kernels);
		CHECK(op->raw_kernels != NULL);
		op->n_raw_kernels = 5;
		for (uint32_t k = 0; k < 3; k++)
			op->raw_kernels[k] = (struct record_raw_kernel){.rank = 7,
									.iter = 12,
									.name = k == 2,
									.kind = k == 2,
									.stream = k == 2 ? 13 : 7,
									.start_us = base_us + 1000 * k,
									.dur_us = 900 + k};
		op->raw_kernels[3] = op->raw_kernels[1]; /* the same start twice more, between others */
		op->raw_kernels[4] = op->raw_kernels[1];
		op->raw_kernels[4].dur_us = 5;
		submit_wait(w, &s, op);
		wait_done(w, &s, round == 2 ? 1 : (size_t)round + 1, 30000);
		CHECK(s.failed == 0);
		CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM raw_kernels") == 5);
		if (round == 0) {
			struct storage_writer_stats st0;
			storage_writer_stats(w, &st0);
			CHECK_MSG(st0.conflicts == 0, "conflicts %" PRIu64, st0.conflicts);
		}
	}
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM raw_kernels WHERE ts = to_timestamp(1764633600.001)"
				 " AND nth BETWEEN 0 AND 2") == 3);
	CHECK(pgtest_scalar(dsn, "SELECT sum(dur_us) FROM raw_kernels WHERE ts = to_timestamp(1764633600.001)") ==
	      901 + 901 + 5);
	struct storage_writer_stats st;
	storage_writer_stats(w, &st);
	CHECK_MSG(st.conflicts >= 1, "conflicts %" PRIu64, st.conflicts);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM raw_kernels k JOIN names n USING (name_id) WHERE k.rank = 7"
				 " AND k.iter = 12 AND n.name = 'nccl_all_reduce' AND k.kind = 1 AND k.stream = 13"
				 " AND k.dur_us = 902 AND k.ts = to_timestamp(1764633600.002)") == 1);
	CHECK(pgtest_scalar(dsn, "SELECT durable_seq FROM agent_progress") == 1);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(&s);
	printf("test_writer: raw kernels stored once (cache and staging paths)\n");
}

/* The layout of steps (migration 008): one row per iteration and block of 64 ranks of a batch;
 * the views give back every record as sent, a value beyond 32 bits included (the row's wide
 * matrices); the same records again under another seq are a no-op, as with the old keys. */
/* What test_steps_layout wrote, read back by storage_window_read (a takeover's read): every
 * record as sent, from iteration 5, from 6, and the last one iteration; the kernels from a
 * later iteration than the steps (a window's baseline is read without them). */
static void window_read_back(const char *dsn)
{
	char err[256];
	PGconn *conn = PQconnectdb(dsn);
	CHECK(PQstatus(conn) == CONNECTION_OK);
	for (int from = 5; from <= 7; from++) { /* 7: from 5, at most one iteration (the last) */
		struct storage_window *win =
			storage_window_read((struct pg_conn *)conn, "S", from == 7 ? 5 : (uint32_t)from, 0,
					    from == 7 ? 1 : 64, err, sizeof err);
		CHECK_MSG(win != NULL, "%s", err);
		uint32_t first = from == 5 ? 5 : 6;
		size_t its = (7 - first) * 9;
		CHECK_MSG(win->n_iters == its && win->n_phases == its * 2 - 1 && win->n_kernels == its,
			  "from %d: %zu iterations, %zu phases, %zu kernels", from, win->n_iters, win->n_phases,
			  win->n_kernels);
		CHECK(win->n_names == 3);
		int64_t seen = 0;
		for (size_t i = 0; i < win->n_iters; i++) {
			const struct record_iter *r = &win->iters[i];
			CHECK(r->iter >= first && r->iter <= 6);
			CHECK(r->start_us == base_us + r->iter * 30000000 + r->rank * 10 &&
			      r->dur_us == 29000000 + r->rank);
			seen += r->rank + 1000 * r->iter;
		}
		CHECK(seen ==
		      (100 + 0 + 1 + 2 + 3 + 4 + 5 + 6 + 9) * (int64_t)(7 - first) + 9000 * (first == 5 ? 11 : 6));
		for (size_t i = 0; i < win->n_phases; i++) {
			const struct record_phase *p = &win->phases[i];
			const char *name = win->names[p->name];
			int b = strcmp(name, "b") == 0;
			CHECK(p->iter >= first && p->iter <= 6 && (b || strcmp(name, "a") == 0));
			CHECK(!(p->rank == 3 && p->iter == 6 && b));
			CHECK(p->kind == b && p->group == 4);
			CHECK(p->start_us == (b ? 5000 : RECORD_NO_START));
			CHECK(p->dur_us ==
			      (p->rank == 2 && p->iter == 6 && b ? INT64_C(3000000000) : 1000 * (b + 1) + p->rank));
		}
		for (size_t i = 0; i < win->n_kernels; i++) {
			const struct record_kernel *k = &win->kernels[i];
			uint32_t r = k->rank;
			CHECK(k->iter >= first && k->iter <= 6 && strcmp(win->names[k->name], "k") == 0);
			CHECK(k->kind == 1 && k->count == 7 + r && k->p50_us == 100 && k->p99_us == 109);
			CHECK(k->sum_us == (r == 9 ? INT64_C(-5) : 700 + (int64_t)r) &&
			      k->min_us == (r == 9 ? INT64_MIN + 1 : 90) &&
			      k->max_us == (r == 9 ? INT64_C(5000000000) : 110));
			if (r % 2) {
				CHECK(k->sketch == NULL && k->sketch_len == 0);
			} else {
				CHECK(k->sketch_len == 8);
				CHECK(memcmp(k->sketch,
					     (uint8_t[8]){0, 0xff, (uint8_t)r, (uint8_t)k->iter, 0x80, 1, 2, 3},
					     8) == 0);
			}
		}
		free(win);
	}
	{
		struct storage_window *win = storage_window_read((struct pg_conn *)conn, "S", 5, 6, 64, err, sizeof err);

		CHECK_MSG(win != NULL, "%s", err);
		CHECK_MSG(win->n_iters == 2 * 9 && win->n_kernels == 9, "steps from 5, kernels from 6: %zu, %zu",
			  win->n_iters, win->n_kernels);
		for (size_t i = 0; i < win->n_kernels; i++)
			CHECK(win->kernels[i].iter == 6);
		free(win);
	}
	PQfinish(conn);
}

static void test_steps_layout(const char *base)
{
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_writer_steps", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	struct sink s;
	struct storage_writer *w = start_writer(dsn, &s, 200000, 50000);

	/* ranks 0..6, 9 and 100 (another block of 64), iterations 5 and 6, phases "a" and "b"; rank 3
	 * lacks "b" in iteration 6, "a" has no known start, and rank 2's "b" of iteration 6 lasts
	 * 3,000 s (beyond 32 bits of microseconds); a kernel "k" per rank-step, with a sketch on even
	 * ranks, negative and 64-bit figures on rank 9 */
	static const uint32_t ranks[] = {100, 0, 1, 2, 3, 4, 5, 6, 9}; /* out of order on purpose */
	for (uint64_t seq = 1; seq <= 2; seq++) {
		size_t ni = 2 * 9, np = 2 * ni, nk = ni;
		struct storage_op *op =
			storage_op_new(STORAGE_OP_BATCH, 4096 + ni * sizeof(struct record_iter) +
								 np * (sizeof(struct record_phase) + 8) +
								 nk * (sizeof(struct record_kernel) + 8 + 8));
		CHECK(op != NULL);
		op->job = storage_op_strdup(op, "S");
		op->agent = storage_op_strdup(op, "node-0");
		op->seq = seq;
		op->names = storage_op_alloc(op, 3 * sizeof(char *));
		op->n_names = 3;
		op->names[0] = storage_op_strdup(op, "a");
		op->names[1] = storage_op_strdup(op, "b");
		op->names[2] = storage_op_strdup(op, "k");
		op->iters = storage_op_alloc(op, ni * sizeof *op->iters);
		op->phases = storage_op_alloc(op, np * sizeof *op->phases);
		op->phase_iter_start_us = storage_op_alloc(op, np * sizeof(int64_t));
		op->kernels = storage_op_alloc(op, nk * sizeof *op->kernels);
		op->kernel_iter_start_us = storage_op_alloc(op, nk * sizeof(int64_t));
		CHECK(op->iters && op->phases && op->phase_iter_start_us && op->kernels && op->kernel_iter_start_us);
		for (uint32_t it = 5; it <= 6; it++) {
			for (size_t k = 0; k < 9; k++) {
				uint32_t r = ranks[k];
				int64_t start = base_us + it * 30000000 + r * 10; /* each rank its own start */
				op->iters[op->n_iters++] = (struct record_iter){r, it, start, 29000000 + r};
				uint8_t *sk = r % 2 ? NULL : storage_op_alloc(op, 8);
				if (sk)
					memcpy(sk, (uint8_t[8]){0, 0xff, (uint8_t)r, (uint8_t)it, 0x80, 1, 2, 3}, 8);
				op->kernel_iter_start_us[op->n_kernels] = start;
				op->kernels[op->n_kernels++] =
					(struct record_kernel){.rank = r,
							       .iter = it,
							       .name = 2,
							       .kind = 1,
							       .count = 7 + r,
							       .sum_us = r == 9 ? INT64_C(-5) : 700 + (int64_t)r,
							       .min_us = r == 9 ? INT64_MIN + 1 : 90,
							       .max_us = r == 9 ? INT64_C(5000000000) : 110,
							       .p50_us = 100,
							       .p99_us = 109,
							       .sketch = sk,
							       .sketch_len = sk ? 8 : 0};
				for (uint32_t nm = 0; nm < 2; nm++) {
					if (r == 3 && it == 6 && nm == 1)
						continue;
					int64_t dur = r == 2 && it == 6 && nm == 1 ? INT64_C(3000000000)
										   : 1000 * (nm + 1) + r;
					op->phase_iter_start_us[op->n_phases] = start;
					op->phases[op->n_phases++] =
						(struct record_phase){.rank = r,
								      .iter = it,
								      .name = nm,
								      .kind = (uint8_t)nm,
								      .group = 4,
								      .start_us = nm == 0 ? RECORD_NO_START : 5000,
								      .dur_us = dur};
				}
			}
		}
		submit_wait(w, &s, op);
		wait_done(w, &s, seq, 30000);
		CHECK(s.failed == 0);
		/* 2 iterations x 2 blocks of ranks; seq 2 (the same records) added nothing */
		CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps") == 4);
		CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == 18);
		CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases") == 35);
	}
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE rank0 = 0 AND ranks = '{0,1,2,3,4,5,6,9}'") == 2);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE rank0 = 100 AND ranks IS NULL") ==
	      2); /* contiguous */
	/* only iteration 6's block of ranks 0..9 needed the wide cells */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE wide_cells IS NOT NULL AND cells IS NULL"
				 " AND iter = 6 AND rank0 = 0") == 1);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM steps WHERE cells IS NOT NULL") == 3);
	/* one phase set ("a", "b"), stored once for the four rows */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phase_sets") == 1);
	CHECK(pgtest_scalar(dsn, "SELECT count(DISTINCT set_id) FROM steps") == 1);
	/* every record as sent: starts, durations, kinds, groups, unknown starts */
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations WHERE ts = to_timestamp(1764633600 + iter * 30)"
				 " + rank * 10 * interval '1 microsecond' AND dur_us = 29000000 + rank") == 18);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases p JOIN names n ON n.name_id = p.name_id JOIN iterations "
				 "i ON i.job_id = p.job_id"
				 " AND i.rank = p.rank AND i.iter = p.iter AND i.ts = p.ts WHERE p.grp = 4 AND "
				 "((n.name = 'a' AND p.kind = 0"
				 " AND p.start_us IS NULL AND p.dur_us = 1000 + p.rank) OR (n.name = 'b' AND p.kind = 1"
				 " AND p.start_us = 5000 AND p.dur_us = CASE WHEN p.rank = 2 AND p.iter = 6"
				 " THEN 3000000000 ELSE 2000 + p.rank END))") == 35);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM phases WHERE rank = 3 AND iter = 6") == 1);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(&s);
	window_read_back(dsn);
	printf("test_writer: steps layout: 4 rows for 18 rank-steps, one phase set, a 3,000 s phase kept exactly;"
	       " the window read back as sent\n");
}

static void test_fencing(const char *base)
{
	char dsn[1024], err[512];
	pgtest_db_create(base, "test_writer_fence", dsn, sizeof dsn);
	CHECK_MSG(storage_migrate(dsn, NULL, err, sizeof err) >= 0, "%s", err);
	pgtest_scalar(dsn, "INSERT INTO job_leases VALUES ('F', 'A', 1, 'a:1', 'http://a', now() + interval '1 hour')");
	struct sink s;
	memset(&s, 0, sizeof s);
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cv, NULL);
	struct storage_writer *w = storage_writer_start(&(struct storage_writer_config){.dsn = dsn,
											.queue_max_records = 200000,
											.max_txn_records = 50000,
											.wake = wake,
											.wake_arg = &s,
											.lease_owner = "A"});
	CHECK(w != NULL);

	struct storage_op *op = make_batch("F", 1, 0);
	op->lease_epoch = 1;
	submit_wait(w, &s, op);
	wait_done(w, &s, 1, 30000);
	CHECK(s.failed == 0 && s.fenced == 0);
	CHECK(pgtest_scalar(dsn, "SELECT count(*) FROM iterations") == ITERS_PER_BATCH);

	/* instance B takes the job over: A's next batch of it must not be written, G's must */
	pgtest_scalar(dsn, "UPDATE job_leases SET owner = 'B', epoch = 2");
	op = make_batch("F", 2, 0);
	op->lease_epoch = 1;
	submit_wait(w, &s, op);
	submit_wait(w, &s, make_batch("G", 1, 0)); /* no lease: not fenced */
	wait_done(w, &s, 3, 30000);
	CHECK_MSG(s.fenced == 1 && s.failed == 0, "fenced %zu failed %zu", s.fenced, s.failed);
	CHECK(pgtest_scalar(dsn,
			    "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'F'") ==
	      ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn,
			    "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'G'") ==
	      ITERS_PER_BATCH);
	CHECK(pgtest_scalar(dsn, "SELECT p.durable_seq FROM agent_progress p JOIN jobs j ON j.id = p.job_id"
				 " WHERE j.name = 'F'") == 1);

	/* A takes it back (epoch 3): its batches with the new epoch are written */
	pgtest_scalar(dsn, "UPDATE job_leases SET owner = 'A', epoch = 3");
	op = make_batch("F", 2, 0);
	op->lease_epoch = 3;
	submit_wait(w, &s, op);
	wait_done(w, &s, 4, 30000);
	CHECK(s.fenced == 1 && s.failed == 0);
	CHECK(pgtest_scalar(dsn,
			    "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'F'") ==
	      2 * ITERS_PER_BATCH);
	struct storage_writer_stats st;
	storage_writer_stats(w, &st);
	CHECK_MSG(st.fenced_batches == 1, "fenced_batches %" PRIu64, st.fenced_batches);
	CHECK(storage_writer_stop(w, 5000) == 0);
	free_sink(&s);
	printf("test_writer: a deposed owner's batch is fenced, nothing else is held up\n");
}

int main(void)
{
	const char *base = pgtest_base_dsn();
	test_steps_layout(base);
	test_fencing(base);
	test_million(base);
	test_raw_kernels(base);
	test_partitions_live(base);
	test_restart();
	printf("test_writer: ok\n");
	return 0;
}
