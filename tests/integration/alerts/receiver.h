/* receiver.h: a tiny HTTP server on loopback for alert tests and the alert benchmark. It
 * answers every POST with 500 while failing is on (or for the next n requests), else 200, and
 * keeps what it received: path, X-Culprit-Dedup-Key, X-Culprit-Signature, body, status given
 * and the wall-clock time of arrival. One request per connection, on a thread of its own. */
#ifndef CULPRIT_TEST_RECEIVER_H
#define CULPRIT_TEST_RECEIVER_H

#include <stddef.h>
#include <stdint.h>

struct rx_hit {
	int64_t at_us; /* CLOCK_REALTIME when the body was complete */
	int status;    /* what the receiver answered */
	char path[256];
	char dedup[256];
	char signature[128];
	char *body;
};

struct rx;

/* Listens on 127.0.0.1, a free port (in *port). NULL on failure. */
struct rx *rx_start(int *port);
/* n > 0: answer 500 to the next n requests; n < 0: to every request until changed; 0: accept. */
void rx_fail(struct rx *r, int n);
/* down != 0: the receiver is down, every connection reset at once (its port kept, so that no
 * other process takes it), until called with 0. */
void rx_down(struct rx *r, int down);
/* Copies the hits so far into *out (malloc'd, bodies too); returns how many. */
size_t rx_hits(struct rx *r, struct rx_hit **out);
void rx_hits_free(struct rx_hit *h, size_t n);
/* What hits (answered 200) said of incident key: delivery is at least once, so a repeat of
 * a dedup key counts once; firing_at, resolved_at: the index of the last of each; other: hits
 * of another incident. */
struct rx_states {
	size_t firing, resolved, firing_at, resolved_at, other;
};
void rx_states(const struct rx_hit *hits, size_t n, const char *key, struct rx_states *out);
void rx_stop(struct rx *r);
/* "sha256=<hex>" of body with key. */
void rx_sign(const char *key, const char *body, char *out, size_t size);

#endif
