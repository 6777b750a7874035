/* hooks.h: runs the action hook (setting action_hook) off the event loop: one thread takes
 * runs from a bounded queue (HOOKS_QUEUE_MAX; full: the run is refused and counted), starts the
 * program with the action's JSON on its standard input, gives it action_timeout_s (then kills
 * its process group), retries a failure up to action_retries times (1 s, 2 s, 4 s ... apart),
 * and records every attempt in PostgreSQL (storage/action_log.h), or only logs it when storage
 * is off. A run may also be a decision to record without running anything (awaiting an
 * approval, approved). See docs/operations.md, "Actions". */
#ifndef CULPRIT_HOOKS_H
#define CULPRIT_HOOKS_H

#include <stdatomic.h>
#include <stdint.h>
#include "attrs.h"

#define HOOKS_QUEUE_MAX 256
#define HOOKS_OUTPUT_MAX 4096 /* bytes of the hook's output kept */

enum hook_result { HOOK_OK, HOOK_FAILED, HOOK_TIMEOUT, HOOK_ERROR, HOOK_DRY_RUN, HOOK_RESULTS };

const char *hook_result_name(enum hook_result r);

/* One action to run (or, with record_only, to record): every string is the run's own. */
struct hook_run {
	char *incident, *job, *kind, *target, *who, *input;
	const char *op;          /* "apply" or "resume" */
	const char *mode;        /* "dry_run", "approve", "auto" */
	const char *record_only; /* NULL: run the hook; else the result to record ("awaiting_approval" ...) */
	int n;                   /* the action's number in its incident */
	char *program;           /* action_hook when submitted */
	int timeout_s, retries;
};

struct hooks;

/* Starts the thread; dsn NULL: attempts are logged, not stored. NULL on failure. */
struct hooks *hooks_start(const char *dsn);
/* Takes r (freed by the thread). 0, or -1 when the queue is full or stopped (r stays the
 * caller's: hook_run_free). Event loop. */
MUST_CHECK int hooks_submit(struct hooks *h, struct hook_run *r);
void hook_run_free(struct hook_run *r);
/* Stops taking runs; an attempt running is given until timeout_ms, then killed. What waits
 * in the queue is logged and dropped. */
void hooks_stop(struct hooks *h, int timeout_ms);
/* Attempts so far by enum hook_result, runs refused (queue full), and runs waiting. */
void hooks_counts(struct hooks *h, uint64_t attempts[HOOK_RESULTS], uint64_t *refused, uint64_t *waiting);

#endif
