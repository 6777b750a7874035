/* steps.h: a batch's iterations and phases as rows of the table steps (migration 008): one row
 * per iteration and block of ranks [rank0, rank0 + STEPS_RANK_SPAN) of the batch, holding the
 * ranks' iteration starts and durations and their phases' as matrices [rank][1 + phase].
 *
 * The rows follow from the batch's content alone (records sorted by iteration and rank), so a
 * resent batch gives the same rows and keys. A (rank, iteration) or (rank, iteration, phase)
 * twice in one batch keeps its first record, as the old per-record primary keys did. */
#ifndef CULPRIT_STORAGE_STEPS_H
#define CULPRIT_STORAGE_STEPS_H

#include <stddef.h>
#include <stdint.h>

#include "pgbuf.h"
#include "writer.h"

#define STEPS_RANK_SPAN 64 /* the readers' filter rank0 BETWEEN rank - 63 AND rank relies on it */
#define STEPS_COLUMNS "ts, job_id, iter, rank0, ranks, names, kinds, grps, starts, durs, wide_starts, wide_durs"

/* Reusable memory of the row builder. Zero-initialise; steps_free releases it. */
struct steps {
	struct steps_ref *refs;
	size_t refs_cap;
	int64_t *cells; /* [rank][1 + phase] starts, then durs */
	size_t cells_cap;
	int32_t *col_of; /* [the producer's name id]: column of the current row, -1 */
	size_t col_of_cap;
	uint32_t *cols;  /* [column]: the producer's name id */
	size_t cols_cap;
};

/* Appends the binary COPY tuples (STEPS_COLUMNS) of op's iterations and phases to b. name_ids
 * maps the producer's name ids to database ids (all present: checked before). Returns the
 * number of rows, or -1 when out of memory (b may hold part of them). */
long steps_copy(struct steps *s, struct pgbuf *b, const struct storage_op *op, int32_t job_id,
                const int32_t *name_ids, size_t n_name_ids);
void steps_free(struct steps *s);

#endif
