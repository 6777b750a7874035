/* diagnosis.h: diagnoses run off the event loop.
 *
 * The loop submits a job's window store itself with the L1 window; one worker thread runs
 * diagnose_run() on it and hands the report back through a result list, waking the loop.
 * The store is read in place, not copied: from submission until its result is taken, the
 * loop does not write to it (jobs.c holds what arrives meanwhile, held.h). The request queue is bounded (queue_max): when it
 * is full the submission is refused and the job stays due, to be submitted again at its
 * next batch — nothing waits and nothing is lost but a stale diagnosis. */
#ifndef CULPRIT_DIAGNOSIS_H
#define CULPRIT_DIAGNOSIS_H

#include <stddef.h>
#include <stdint.h>

#include "diagnose.h"
#include "report.h"
#include "store.h"
#include "attrs.h"

struct diagnosis;

struct diagnosis_result {
	char job[128];
	struct report report;   /* report_free() it */
	int failed;             /* out of memory: report is empty */
	double run_ms;          /* time diagnose_run took */
	uint64_t token;         /* the submitter's */
};

struct diagnosis *diagnosis_start(size_t queue_max, void (*wake)(void *arg), void *arg);
/* Stops the worker after the request it is running; pending requests and results are dropped. */
void diagnosis_stop(struct diagnosis *d);
/* 0, or -1 when the queue is full. The worker reads store until the result is taken (or
 * diagnosis_stop returns); it stays the caller's. */
MUST_CHECK int diagnosis_submit(struct diagnosis *d, const char *job, const struct store *store, const struct diagnose_input *in,
		     uint64_t token);
size_t diagnosis_take(struct diagnosis *d, struct diagnosis_result *out, size_t max);

#endif
