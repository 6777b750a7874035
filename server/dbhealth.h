/* dbhealth.h: whether the database makes progress (docs/operations.md, "CulpritDatabaseDown").
 * A liveness check on a connection of its own (storage/probe.h) asks PostgreSQL once a second;
 * the database is down when for db_stall_s (10 s) it has not answered, or the storage writer
 * has not been connected, or the writer's transaction in flight has not committed. Then
 * culprit_database_up is 0, /readyz answers 503, and one warning says why; one line says when
 * it makes progress again. Event loop only. */
#ifndef CULPRIT_DBHEALTH_H
#define CULPRIT_DBHEALTH_H

#include <stdbool.h>
#include <stdint.h>
#include "attrs.h"

struct server;

/* Starts the liveness check (with a database). -1 when it cannot. */
MUST_CHECK int dbhealth_start(struct server *s);
/* Once a second: judges and logs a change. Returns clock_mono_ms() of the liveness check's
 * last answer (0 without a database). */
int64_t dbhealth_tick(struct server *s);
/* 1 with a database that makes progress, else 0 (also without a database). */
bool dbhealth_up(const struct server *s);
void dbhealth_stop(struct server *s);

#endif
