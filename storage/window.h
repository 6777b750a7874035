/* window.h: a job's recent records read back from PostgreSQL, for the instance that takes a
 * job over (docs/operations.md, "Many instances"): the iterations and phases of the window
 * the previous owner held, so that the new owner's diagnoses see what it saw. The one place
 * that reads the records relations for that: the rows of steps as stored (their arrays
 * unpacked here, not through the iterations and phases views) and the kernels through COPY
 * in its binary format. */
#ifndef CULPRIT_STORAGE_WINDOW_H
#define CULPRIT_STORAGE_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"

struct pg_conn;

/* Records as stored; a phase's or kernel's name is an index into names, a kernel's sketch
 * points into the same allocation. One allocation: free() it. */
struct storage_window {
	size_t n_iters, n_phases, n_kernels, n_names;
	struct record_iter *iters;
	struct record_phase *phases;
	struct record_kernel *kernels;
	char **names;
};

/* The iterations and phases of job from iteration from_iter on, its kernel summaries from
 * kernels_from on (the baseline before a window needs no kernels), at most max_iters
 * iterations (the last ones). NULL with a message in err when a statement failed or out of
 * memory; a window of no records when the job has none there. */
struct storage_window *storage_window_read(struct pg_conn *conn, const char *job, uint32_t from_iter,
					   uint32_t kernels_from, uint32_t max_iters, char *err, size_t err_size);

#endif
