/* held.h: what comes for a job while a diagnosis reads its window.
 *
 * culpritd's diagnosis thread reads a job's window store in place (no copy): while it runs,
 * the loop must not write to that store. What arrives for the job meanwhile (batches of
 * records, hosts of ranks, events, new names) is held here, in arrival order, and given to
 * the store when the diagnosis is back (held_release). A diagnosis takes 20-350 ms, so a
 * hold is a few batches; it is bounded by HELD_MAX_BYTES all the same (what does not fit is
 * refused and counted by the caller as records the window could not hold).
 *
 * Names are the exception to "later": a batch's names need their job-wide ids at once. A
 * new name gets the next id (the store's count plus the names held before it) and is
 * interned in that order first when the hold is released, so its id does not change. */
#ifndef CULPRIT_HELD_H
#define CULPRIT_HELD_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "strmap.h"
#include "attrs.h"

#define HELD_MAX_BYTES ((size_t)128 << 20)

struct held {
	unsigned char *buf; /* entries, each 8-byte aligned: header, then its payload */
	size_t len, cap;
	char **names; /* names new to the job, in the order of their ids */
	size_t nnames, names_cap;
	struct strmap name_ids; /* name -> index in names */
	size_t events;          /* events held */
};

/* Each returns 0, or -1 when the entry would pass HELD_MAX_BYTES or memory is out (nothing
 * of it is held). Kernel sketches are copied. */
MUST_CHECK int held_batch(struct held *h, const struct record_iter *iters, size_t n_iters, const struct record_phase *phases,
	       size_t n_phases, const struct record_kernel *kernels, size_t n_kernels);
MUST_CHECK int held_hosts(struct held *h, const uint32_t *ranks, size_t n, const char *host);
MUST_CHECK int held_event(struct held *h, const char *host, const char *kind, int64_t ts_us, const char *source,
	       const char *detail);
/* Index of a held name (0, 1, ...), -1 when it is not held. */
int held_find_name(const struct held *h, const char *name);
/* Holds a new name; its index, or -1 when out of memory. */
MUST_CHECK int held_add_name(struct held *h, const char *name);

/* What held_release gives back, in arrival order; names come first, in index order. */
struct held_sink {
	void (*name)(void *arg, const char *name);
	void (*batch)(void *arg, const struct record_iter *iters, size_t n_iters, const struct record_phase *phases,
		      size_t n_phases, const struct record_kernel *kernels, size_t n_kernels);
	void (*hosts)(void *arg, const uint32_t *ranks, size_t n, const char *host);
	void (*event)(void *arg, const char *host, const char *kind, int64_t ts_us, const char *source,
		      const char *detail);
	void *arg;
};

/* Gives everything held to sink, then empties the hold (its memory is freed). The sink may
 * hold again: that goes into a fresh hold, not this release. */
void held_release(struct held *h, const struct held_sink *sink);
/* Bytes held (entries and names). */
size_t held_bytes(const struct held *h);
void held_free(struct held *h);

#endif
