/* kernel_summary.h: the agent side of "kernel sketches on the wire": the raw durations of
 * one kernel name on one rank over one step become a record_kernel with its summary
 * fields (count, sum, min, max, p50, p99) and a mergeable duration sketch
 * (diagnose/sketch.h, 1% relative accuracy), and the size of a step's Batch on the wire
 * can be measured (the figure in docs/importers.md). */
#ifndef CULPRIT_KERNEL_SUMMARY_H
#define CULPRIT_KERNEL_SUMMARY_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "sketch.h"
#include "attrs.h"

/* Up to this many calls the summary fields hold every value and no sketch is sent. */
#define KERNEL_SUMMARY_EXACT_MAX 3

struct kernel_summary {
	struct sketch sk;
	int64_t *sorted;
	size_t sorted_cap;
	uint8_t *buf; /* the last sketch's bytes */
	size_t buf_cap;
};

void kernel_summary_init(struct kernel_summary *ks);
void kernel_summary_free(struct kernel_summary *ks);
/* The same on the heap, for callers that do not know the struct (the Python package);
 * NULL when out of memory. */
struct kernel_summary *kernel_summary_create(void);
void kernel_summary_destroy(struct kernel_summary *ks);
/* Fills k's count (when 0), sum/min/max/p50/p99 and sketch from durs[0..n) (n > 0, every
 * value >= 0); no sketch (sketch_len 0) up to KERNEL_SUMMARY_EXACT_MAX calls. k->sketch
 * points into ks until the next call. Returns 0, -1 on a negative
 * duration or out of memory (*why says which). */
MUST_CHECK int kernel_summary_make(struct kernel_summary *ks, struct record_kernel *k, const int64_t *durs, size_t n,
			const char **why);
/* Bytes of one Batch frame holding these records, packed as agent/agent.c packs it: no
 * dictionary (the records' name fields are the agent's name ids), with the
 * definitions of the fresh[0..nfresh) names, those the connection has not had yet (none in
 * the steady state), plus the frame's 4-byte length prefix. name_of (indexed by name id;
 * needed when nfresh > 0, else NULL: unknown) gives the names, and tells whether the
 * kernel kinds follow from them (record_kernel_kind_of) and need not be sent. */
size_t kernel_summary_wire_bytes(const struct record_iter *it, size_t nit, const struct record_phase *ph, size_t nph,
				 const struct record_kernel *k, size_t nk, const uint32_t *fresh, size_t nfresh,
				 const char *const *name_of);

#endif
