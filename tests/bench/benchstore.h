/* benchstore.h: what the storage benchmarks share: batches through a storage writer until
 * every one is done. */
#ifndef CULPRIT_BENCHSTORE_H
#define CULPRIT_BENCHSTORE_H

#include <stddef.h>

#include "writer.h"

/* Starts a writer with cfg (its wake and wake_arg are set here), submits the batches make(0,
 * arg) .. make(n - 1, arg) in order, waiting while its queue is full, and waits for all to be
 * done. Exits the process when one fails. Returns the seconds from the first submit to the
 * last batch done; *st (may be NULL) gets the writer's counters before it stops. */
double bench_store(struct storage_writer_config cfg, size_t n, struct storage_op *(*make)(size_t i, void *arg),
		   void *arg, struct storage_writer_stats *st);

#endif
