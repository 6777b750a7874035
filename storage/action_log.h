/* action_log.h: the action_attempts rows (schema/migrations/012_action_attempts.sql), written by
 * the hook runner's thread (server/hooks.c) on one connection of its own, opened on first use
 * and again after it broke. Blocking: never call it on the event loop. */
#ifndef CULPRIT_STORAGE_ACTION_LOG_H
#define CULPRIT_STORAGE_ACTION_LOG_H

#include <stdint.h>
#include "attrs.h"

struct storage_action_log;

/* One row (strings are copied by the call). exit_code < 0: none (not run, timed out, or
 * killed); input may be NULL. */
struct storage_action_row {
	const char *incident, *job, *kind, *target, *op, *mode, *who, *result, *output, *input;
	int action_n, attempt, exit_code;
	int64_t started_us, finished_us; /* wall clock */
};

/* NULL when out of memory. Does not connect yet. */
struct storage_action_log *storage_action_log_open(const char *dsn);
void storage_action_log_close(struct storage_action_log *a);
/* Inserts the row, connecting first when needed (tries twice). 0, or -1 (logged). */
MUST_CHECK int storage_action_log_record(struct storage_action_log *a, const struct storage_action_row *r);

#endif
