/* diagnosis.h: diagnoses run off the event loop.
 *
 * The loop refreshes a snapshot of a job's window (store_snapshot_reuse: a copy in place,
 * 18-46 ms at 12,960 ranks, against 60-340 ms for a fresh one; the first one goes into a
 * blank whose pages this thread wrote beforehand, diagnosis_prepare) and submits it with the
 * L1 window; one worker thread runs diagnose_run() on the snapshot and hands the report and
 * the snapshot back through a result list, waking the loop. The request queue is bounded (queue_max): when it
 * is full the submission is refused and the job stays due, to be submitted again at its
 * next batch — nothing waits and nothing is lost but a stale diagnosis. */
#ifndef CULPRIT_DIAGNOSIS_H
#define CULPRIT_DIAGNOSIS_H

#include <stddef.h>
#include <stdint.h>

#include "diagnose.h"
#include "report.h"
#include "store.h"

struct diagnosis;

struct diagnosis_result {
	char job[128];
	struct report report;   /* report_free() it */
	int failed;             /* out of memory: report is empty */
	double run_ms;          /* time diagnose_run took */
	uint64_t token;         /* the submitter's */
	struct store *snapshot; /* handed back for store_snapshot_reuse(); the caller owns it */
	int prepared;           /* from diagnosis_prepare: snapshot is the written blank, no report */
};

struct diagnosis *diagnosis_start(size_t queue_max, void (*wake)(void *arg), void *arg);
/* Stops the worker after the request it is running; pending requests are dropped. */
void diagnosis_stop(struct diagnosis *d);
/* Takes ownership of snapshot when it returns 0; -1 when the queue is full. */
int diagnosis_submit(struct diagnosis *d, const char *job, struct store *snapshot, const struct diagnose_input *in,
		     uint64_t token);
/* Writes every page of a blank snapshot (store_snapshot_blank) on the worker, so that a
 * job's first diagnosis copies into memory already there instead of faulting it in on the
 * loop; it comes back as a result with prepared set. Ownership and queue as diagnosis_submit. */
int diagnosis_prepare(struct diagnosis *d, const char *job, struct store *blank);
size_t diagnosis_take(struct diagnosis *d, struct diagnosis_result *out, size_t max);

#endif
