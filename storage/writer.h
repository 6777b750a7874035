/* writer.h: batched, durable writes to PostgreSQL off the event loop.
 *
 * One writer thread owns one libpq connection. Producers (culpritd's event loop, benchmarks)
 * submit operations into a bounded queue; the thread groups what is queued into one
 * transaction (COPY for records), commits, and reports which (source, seq) pairs are now
 * durable. A full queue refuses the submission: the producer must stop reading its input
 * until the writer calls its wake function (backpressure, never silent drops).
 *
 * Thread safety: storage_writer_submit, storage_writer_take_done and the stats getter may be
 * called from any one producer thread; callbacks run on the writer thread and must only wake
 * the producer (e.g. event_active()). */
#ifndef CULPRIT_STORAGE_WRITER_H
#define CULPRIT_STORAGE_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "op.h"
#include "attrs.h"

struct storage_writer;

struct storage_writer_config {
	const char *dsn;
	size_t queue_max_records; /* bound on queued records (iters + phases + kernels + raw kernels) */
	size_t max_txn_records;   /* at most this many records per transaction */
	void (*wake)(void *arg);  /* called on the writer thread when done items or queue space appear */
	void *wake_arg;
	/* Optional (0: default). */
	int reconnect_min_ms;    /* first retry delay after the database went away (100) */
	int reconnect_max_ms;    /* delay doubles up to this (5000) */
	const char *lease_owner; /* this instance's id in job_leases (NULL: ops are not fenced) */
};

struct storage_done {
	uint64_t source;
	char job[128];
	char agent[128];
	uint64_t seq; /* durable: committed, or a resend of something already committed */
	int failed;   /* 1: NOT stored. The batch was rejected by the database for its content
	               * (bad name index, invalid UTF-8, value out of range): retrying cannot
	               * help; the writer logged why. The producer decides (e.g. drop the agent).
	               * STORAGE_FENCED: NOT stored, the job's lease is no longer op's lease_epoch
	               * (another instance owns the job: its agents must go there). */
#define STORAGE_FENCED 2
};

struct storage_writer_stats {
	uint64_t queued_records, queued_ops;
	uint64_t committed_records, committed_txns;
	uint64_t refused_full; /* submissions refused because the queue was full */
	uint64_t conflicts;    /* batches that hit a key conflict and were redone as no-ops */
	uint64_t reconnects;
	uint64_t skipped_batches; /* batches whose seq was already durable (resends), reported done */
	uint64_t failed_batches;  /* batches rejected for their content, reported done with failed=1 */
	uint64_t fenced_batches;  /* batches of a lease lost, reported done with failed=STORAGE_FENCED */
	int64_t busy_since_ms;    /* clock_mono_ms() at which the group being written was taken; 0: idle */
	int connected;
};

struct storage_writer *storage_writer_start(const struct storage_writer_config *cfg);
/* Drains the queue for up to timeout_ms (also while the database is unreachable), then gives
 * up: the transaction in flight is finished if the database answers, the rest is dropped.
 * Stops the thread, frees w, and returns (and logs) how many records were not written. */
uint64_t storage_writer_stop(struct storage_writer *w, int timeout_ms); /* returns the records not written */
/* 0: queued (the writer owns op). -1: queue full (the caller keeps op; wait for wake).
 * An op larger than queue_max_records is accepted when the queue is empty. A STORAGE_OP_JOB
 * counts as one record and produces no done item; every STORAGE_OP_BATCH produces exactly one. */
MUST_CHECK int storage_writer_submit(struct storage_writer *w, struct storage_op *op);
/* Moves up to max done items into out; returns how many. */
size_t storage_writer_take_done(struct storage_writer *w, struct storage_done *out, size_t max);
void storage_writer_stats(struct storage_writer *w, struct storage_writer_stats *out);

/* Synchronous (use once at start-up, before the event loop runs): calls cb for every
 * (job, agent, durable_seq) stored. Returns 0, or -1 with a message in err. */
MUST_CHECK int storage_progress_load(const char *dsn,
			  void (*cb)(const char *job, const char *agent, uint64_t durable_seq, void *arg), void *arg,
			  char *err, size_t err_size);

#endif
