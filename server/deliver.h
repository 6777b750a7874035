/* deliver.h: the alert delivery thread. It owns a PostgreSQL connection and an event_base of
 * its own driving libcurl's multi interface (HTTP and HTTPS), never culpritd's event loop.
 * It claims due rows of alert_outbox, POSTs them to their target, marks them sent, or
 * reschedules them with exponential backoff and jitter until they are older than the give-up
 * age (then state 'failed'). While an incident is open it re-sends its Alertmanager alert
 * (incidents.alert) every resend interval, so that Alertmanager keeps it firing. */
#ifndef CULPRIT_DELIVER_H
#define CULPRIT_DELIVER_H

#include <stdint.h>

enum deliver_target { DELIVER_ALERTMANAGER, DELIVER_WEBHOOK, DELIVER_SLACK, DELIVER_PAGERDUTY, DELIVER_TARGETS };

struct deliver_config {
	const char *dsn;
	const char *url[DELIVER_TARGETS]; /* "" or NULL: target off. Alertmanager: its base URL */
	const char *webhook_secret;       /* HMAC-SHA256 key of X-Culprit-Signature ("" : unsigned) */
	int resend_s;                     /* Alertmanager re-send interval of open incidents */
	int backoff_max_s;                /* retry delay cap */
	int give_up_s;                    /* a row older than this after a failure is given up */
	int backoff_min_ms;               /* first retry delay (0: 1000) */
};

struct deliver_stats {
	uint64_t sent[DELIVER_TARGETS];     /* outbox rows delivered (2xx) */
	uint64_t failures[DELIVER_TARGETS]; /* attempts that failed (error, timeout, non-2xx) */
	uint64_t given_up[DELIVER_TARGETS]; /* rows marked failed after the give-up age */
	uint64_t resends, resend_failures;  /* Alertmanager re-sends of open incidents */
	int64_t pending;                    /* outbox rows pending (as of the last poll; -1 unknown) */
	int connected;                      /* to the database */
};

const char *deliver_target_name(enum deliver_target t);
/* Starts the thread (call from the main thread: initialises libcurl). NULL on failure. */
struct deliver *deliver_start(const struct deliver_config *cfg);
/* New outbox rows are committed: poll now. Any thread. */
void deliver_wake(struct deliver *d);
void deliver_get_stats(struct deliver *d, struct deliver_stats *out);
/* Stops the thread: requests in flight are abandoned (their rows are retried when their
 * claim expires, by this or another culpritd). */
void deliver_stop(struct deliver *d);

#endif
