/* alerttest.h: what the alert tests share beside the receiver: running `culprit sim`, and
 * one-value SQL queries on the test's database. */
#ifndef CULPRIT_TEST_ALERTTEST_H
#define CULPRIT_TEST_ALERTTEST_H

#include <sys/types.h>

/* Runs `culprit sim --scenario S --iters N --recover-at R --server 127.0.0.1:port --quiet`
 * (no --recover-at when recover_at <= 0) with its output appended to log; returns its exit status (-1 when it could not run). */
int at_sim(const char *scenario, int iters, int recover_at, int port, const char *log);
/* The same started, not waited for: its pid (-1 when fork failed). */
pid_t at_sim_start(const char *scenario, int iters, int recover_at, int port, const char *log);
/* First column of the first row of sql on dsn, malloc'd ("" when no row); NULL on error
 * (printed). */
char *at_sql(const char *dsn, const char *sql);
/* at_sql as a number (-1 on error). */
long at_sql_long(const char *dsn, const char *sql);

#endif
