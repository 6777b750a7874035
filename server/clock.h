/* clock.h: our wall clock, in microseconds since the Unix epoch (the agents' scale), and a
 * monotonic clock for deadlines. */
#ifndef CULPRIT_CLOCK_H
#define CULPRIT_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t clock_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Monotonic milliseconds, for deadlines. */
static inline int64_t clock_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Monotonic microseconds, for durations. */
static inline int64_t clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

#endif
