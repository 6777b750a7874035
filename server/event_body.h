/* event_body.h: the body of POST /api/v1/events, parsed and validated. Pure (jansson, libc):
 * no server state, so that it is unit-tested and fuzzed on its own.
 *
 * A body is one event object or an array of 1..EVENT_BODY_MAX of them:
 *   {"host": "node-1294", "kind": "port_down", "ts_us": 1796207474198102,
 *    "source": "oob", "detail": "eth3", "job": "J"}
 * host and kind are required; every string is text (common/text.h: UTF-8 without control
 * characters) within its bound; every event is checked before any is accepted. */
#ifndef CULPRIT_EVENT_BODY_H
#define CULPRIT_EVENT_BODY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

#define EVENT_BODY_MAX 1000
#define EVENT_HOST_MAX 255
#define EVENT_KIND_MAX 63
#define EVENT_SOURCE_MAX 255
#define EVENT_DETAIL_MAX 1024
#define EVENT_JOB_MAX 127
#define EVENT_TS_MAX 253402300799000000LL /* 9999-12-31, what timestamptz holds */

struct event_in {
	const char *host, *kind, *source, *detail; /* source "api", detail "" when absent */
	const char *job;                           /* NULL: every job with a rank on host */
	int64_t ts_us;                             /* now_us when absent */
};

struct event_body {
	json_t *root; /* owns the strings above */
	struct event_in *ev;
	size_t n;
};

/* Parses body[0..len). Returns 0 with *out filled (event_body_free it), or the HTTP status
 * to answer (400 malformed or invalid, 413 too many events) with a message in err. */
MUST_CHECK int event_body_parse(const char *body, size_t len, int64_t now_us, struct event_body *out, char *err, size_t err_size);
void event_body_free(struct event_body *b);

#endif
