/* retention.h: daily partitions of iterations, phases and kernels, and their retention.
 *
 * Runs culprit_maintain_partitions() (schema/migrations/002_partitions.sql): creates the
 * partitions of yesterday .. today + ahead_days (UTC days), drops whole partitions of days
 * older than retention_days, and deletes rows that old from the DEFAULT partitions (where
 * records whose day has no partition land, e.g. replays of old traces).
 *
 * storage_retention_start runs it on a thread of its own with its own connection, at once
 * and then every interval, so the caller's event loop never blocks. Dropping a partition
 * waits for the writer's current transaction; a lock_timeout bounds that wait and a run
 * that times out is retried at the next interval. */
#ifndef CULPRIT_STORAGE_RETENTION_H
#define CULPRIT_STORAGE_RETENTION_H

#include <stddef.h>
#include "attrs.h"

struct storage_retention_config {
	const char *dsn;
	int retention_days; /* >= 1 */
	int ahead_days;     /* partitions created ahead; 0: 3 */
	int interval_s;     /* between runs; 0: 3600 */
};

/* One run, synchronous. Returns the number of partitions created + dropped, or -1 with a
 * message in err. */
MUST_CHECK int storage_retention_run(const char *dsn, int retention_days, int ahead_days, char *err, size_t err_size);

struct storage_retention;
struct storage_retention *storage_retention_start(const struct storage_retention_config *cfg);
/* For a configuration reload; takes effect at the next run, which it triggers. */
void storage_retention_set_days(struct storage_retention *r, int retention_days);
void storage_retention_stop(struct storage_retention *r);

#endif
