/* listen.h: a listener that cannot accept (EMFILE, ENFILE, ENOBUFS: out of file descriptors
 * or kernel memory) pauses instead of spinning. libevent's listener is level-triggered: the
 * pending connection stays in the backlog, so without a pause every loop pass retries the
 * accept, fails again and (without an error callback) logs "Error from accept() call". */
#ifndef CULPRIT_LISTEN_H
#define CULPRIT_LISTEN_H

#include "log.h"
#include "attrs.h"

struct event;
struct evconnlistener;

#define LISTEN_PAUSE_MS 100

struct listen_pause {
	struct evconnlistener *l;
	struct event *resume;
	struct log_complaint complaint;
	const char *what;          /* "agent connection", "HTTP connection" */
	unsigned long long errors; /* accept failures, for /metrics */
};

/* Watches l (which the caller owns and frees after listen_pause_free): on an accept error,
 * counts it, logs it (the first time, then rarely), stops accepting for LISTEN_PAUSE_MS and
 * tries again. At most LISTEN_PAUSE_MAX listeners at once. 0 or -1. Event loop only. */
#define LISTEN_PAUSE_MAX 4
MUST_CHECK int listen_pause_init(struct listen_pause *p, struct evconnlistener *l, const char *what);
/* A connection was accepted: logs the recovery once, a second or more after the failure was
 * logged (at the limit, accepts fail and succeed in turn). */
void listen_pause_ok(struct listen_pause *p);
void listen_pause_free(struct listen_pause *p);

#endif
