/* loglimit.h: at most a few log lines a second for a failure that clients can repeat at
 * will (refused tokens, failed TLS handshakes): the first LOG_LIMIT_PER_SECOND of each
 * second are logged, the rest summed up in one line when the next second begins. Metrics
 * count them all. Event loop only. */
#ifndef CULPRIT_LOGLIMIT_H
#define CULPRIT_LOGLIMIT_H

#include <stdbool.h>
#include <time.h>

#include "log.h"

#define LOG_LIMIT_PER_SECOND 5

struct log_limit {
	time_t second;
	unsigned logged, suppressed;
	const char *what; /* "more WHAT not logged" */
};

static inline bool log_limit_allow(struct log_limit *l)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	if (now.tv_sec != l->second) {
		if (l->suppressed)
			log_warning("%u more %s not logged", l->suppressed, l->what);
		l->second = now.tv_sec;
		l->logged = l->suppressed = 0;
	}
	if (l->logged < LOG_LIMIT_PER_SECOND) {
		l->logged++;
		return true;
	}
	l->suppressed++;
	return false;
}

#endif
