/* clock.h: the clocks every part of culprit reads. The wall clock in microseconds since
 * the Unix epoch (the agents' scale); the monotonic clock for deadlines and durations. */
#ifndef CULPRIT_CLOCK_H
#define CULPRIT_CLOCK_H

#include <stdbool.h>
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

/* Monotonic microseconds. */
static inline int64_t clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* Monotonic seconds with their fraction, for durations and rates. */
static inline double clock_mono_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The monotonic time ms from now, for pthread_cond_timedwait on a CLOCK_MONOTONIC cond. */
static inline struct timespec clock_mono_after(int ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += ms / 1000;
	t.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static inline bool clock_mono_passed(const struct timespec *t)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

#endif
