/* probe.h: is the database answering? A thread with a connection of its own asks PostgreSQL
 * "SELECT 1" once a second, under a connect timeout and a statement timeout (on the server,
 * and on this side: a stopped server enforces nothing), and says when it last answered. A
 * hung server (SIGSTOP, a full disk that blocks writes, a network that drops packets) is then
 * seen within those timeouts, whatever the writer is waiting for; culpritd decides what "down"
 * is (server/main.c, db_stall_s). The connection is made again after every failure. */
#ifndef CULPRIT_STORAGE_PROBE_H
#define CULPRIT_STORAGE_PROBE_H

#include <stddef.h>
#include <stdint.h>

struct storage_probe;

/* Starts the thread; timeout_s bounds a connection and a statement (at least 2). The first
 * answer is counted from now: a probe that never got one has last_ok = its start. NULL when
 * out of memory. */
struct storage_probe *storage_probe_start(const char *dsn, int timeout_s);
/* clock_mono_ms() of the last answer (or of the start), and the last failure's message in
 * err (empty after an answer). Any thread. */
int64_t storage_probe_last_ok_ms(struct storage_probe *p, char *err, size_t err_size);
/* Stops the thread (within timeout_s) and frees p. */
void storage_probe_stop(struct storage_probe *p);

#endif
