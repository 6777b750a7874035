/* outbox.h: the alert outbox as the delivery thread sees it (table alert_outbox; the writer
 * adds its rows with the incident, storage/writer.h). One connection of its own, opened on
 * first use and again after it broke, at most once per retry delay (1 s doubling to 30 s).
 * Every call is blocking: call it on the delivery thread, never on the event loop. A failure
 * is logged (rate-limited, the recovery once) and answered -1; the caller goes on.
 *
 * Claiming a row moves its next_attempt 15 s into the future (SELECT ... FOR UPDATE SKIP
 * LOCKED inside the UPDATE), so that a culpritd that dies mid-request leaves the row to be
 * retried once the claim expires. Rows go in order per target and incident: a row waits
 * while an older one of the same incident ("<incident key>/<state>/<n>") is pending. */
#ifndef CULPRIT_STORAGE_OUTBOX_H
#define CULPRIT_STORAGE_OUTBOX_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

struct storage_outbox;

/* A claimed row (strings valid during the callback only). */
struct storage_outbox_due {
	int64_t id;
	const char *target; /* as stored: the caller checks it */
	const char *dedup_key;
	const char *payload;
	int attempts; /* this one included */
	double age_s; /* since the row was made */
};

/* NULL when out of memory. Does not connect yet. */
struct storage_outbox *storage_outbox_open(const char *dsn);
void storage_outbox_close(struct storage_outbox *o);
/* Connected (as of the last call): readable from any thread. */
int storage_outbox_connected(struct storage_outbox *o);
/* Claims up to limit due rows, calling cb for each. How many, or -1. */
MUST_CHECK int storage_outbox_claim(struct storage_outbox *o, int limit,
			 void (*cb)(const struct storage_outbox_due *row, void *arg), void *arg);
/* Rows in state 'pending', or -1. */
int64_t storage_outbox_pending(struct storage_outbox *o);
MUST_CHECK int storage_outbox_sent(struct storage_outbox *o, int64_t id);
/* A failed attempt: next_attempt delay_ms from now, or state 'failed' with give_up. */
MUST_CHECK int storage_outbox_retry(struct storage_outbox *o, int64_t id, const char *why, int64_t delay_ms, int give_up);
/* The target answers again: its pending rows waiting out their backoff are due now, but the
 * ones in skip (in flight, keeping their claim). */
MUST_CHECK int storage_outbox_target_back(struct storage_outbox *o, const char *target, const int64_t *skip, size_t n_skip);
/* The Alertmanager alerts of the open incidents, a JSON array (malloc'd) in *alerts, or
 * NULL when none is open. 0, or -1. */
MUST_CHECK int storage_outbox_open_alerts(struct storage_outbox *o, char **alerts);

#endif
