/* benchutil.h: what the benchmark programs share: clocks, a process's RSS and CPU, the
 * median of their runs, pinning to a CPU (a free port: the integration harness's
 * h_free_port). */
#ifndef CULPRIT_BENCHUTIL_H
#define CULPRIT_BENCHUTIL_H

#include <sys/types.h>

/* Monotonic seconds. */
double now_s(void);
/* VmRSS of pid in KiB (-1 when unknown). */
long rss_kib(pid_t pid);
/* A KiB line of /proc/pid/status ("VmRSS", "VmHWM"), -1 when unknown. */
long status_kib(pid_t pid, const char *field);
/* User + system CPU seconds of pid so far (-1 when unknown). */
double cpu_s(pid_t pid);
/* Median of v[0..n) (v is left as it is). */
double median(const double *v, int n);
/* Runs this process (and what it forks after) on CPU cpu only; a message on failure. */
void pin_cpu(int cpu);

#endif
