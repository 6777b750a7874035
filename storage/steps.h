/* steps.h: a batch's iterations and phases as rows of the table steps (migration 008): one row
 * per iteration and block of ranks [rank0, rank0 + STEPS_RANK_SPAN) of the batch, holding the
 * ranks' iteration starts and durations and their phases' in one array [rank][1 + phase][2];
 * the row's phases (names, kinds, groups) are a phase set stored once (phase_sets).
 *
 * The rows follow from the batch's content alone (records sorted by iteration and rank), so a
 * resent batch gives the same rows and keys. A (rank, iteration) or (rank, iteration, phase)
 * twice in one batch keeps its first record, as the old per-record primary keys did. */
#ifndef CULPRIT_STORAGE_STEPS_H
#define CULPRIT_STORAGE_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "pgbuf.h"
#include "op.h"

#define STEPS_RANK_SPAN 64 /* the readers' filter rank0 BETWEEN rank - 63 AND rank relies on it */
#define STEPS_COLUMNS "ts, job_id, iter, rank0, set_id, ranks, cells, wide_cells"

/* The phases of a row, by database name id ascending. */
struct steps_set {
	const int32_t *names;
	const int16_t *kinds, *grps;
	size_t n;
};
/* Answers the set's id in phase_sets, or -1 (the walk stops and fails). */
typedef int64_t (*steps_set_fn)(void *arg, const struct steps_set *set);

/* Reusable memory of the row builder. Zero-initialise; steps_free releases it. */
struct steps {
	struct steps_ref *refs;
	size_t refs_cap;
	int64_t *cells; /* [rank][1 + phase] starts, then durs */
	size_t cells_cap;
	int32_t *col_of; /* [the producer's name id]: column of the current row, -1 */
	size_t col_of_cap;
	struct steps_col *cols; /* the current row's phase names, by database id */
	size_t cols_cap;
	int32_t *set_names;
	int16_t *set_kinds, *set_grps;
	size_t set_cap;
};

/* Appends the binary COPY tuples (STEPS_COLUMNS) of op's iterations and phases to b, asking
 * set_id for each row's phase set; with b NULL only asks (to resolve the sets before a COPY).
 * name_ids maps the producer's name ids to database ids (all present: checked before).
 * Returns the number of rows, or -1 when out of memory or set_id failed (b may hold part). */
long steps_copy(struct steps *s, struct pgbuf *b, const struct storage_op *op, int32_t job_id, const int32_t *name_ids,
		size_t n_name_ids, steps_set_fn set_id, void *arg);
void steps_free(struct steps *s);

#endif
