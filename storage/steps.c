/* steps.c: see steps.h. */
#include "steps.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"

#define NONE INT64_MIN /* a NULL cell */

struct steps_ref {
	uint32_t iter, rank;
	uint32_t phase; /* 0: the iteration record, 1: a phase (iterations sort first) */
	uint32_t i;     /* index in op->iters or op->phases */
};

static int ref_cmp(const void *pa, const void *pb)
{
	const struct steps_ref *a = pa, *b = pb;
	if (a->iter != b->iter)
		return a->iter < b->iter ? -1 : 1;
	if (a->rank != b->rank)
		return a->rank < b->rank ? -1 : 1;
	if (a->phase != b->phase)
		return a->phase < b->phase ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static int grow(void **p, size_t *cap, size_t n, size_t size)
{
	if (n <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 64;
	while (nc < n)
		nc *= 2;
	void *np = realloc(*p, nc * size);
	if (!np)
		return -1;
	*p = np;
	*cap = nc;
	return 0;
}

struct steps_col {
	int32_t id; /* database name id */
	uint32_t i; /* the first phase of the row with that producer name */
};

static int col_cmp(const void *pa, const void *pb)
{
	const struct steps_col *a = pa, *b = pb;
	if (a->id != b->id)
		return a->id < b->id ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

static bool fits_int4(int64_t v) { return v == NONE || (v >= INT32_MIN && v <= INT32_MAX); }

/* The cells [rank][1 + phase][2]: (start, duration) pairs, NONE as NULL. */
static void copy_cells(struct pgbuf *b, const int64_t *starts, const int64_t *durs, uint32_t n_ranks, uint32_t width,
		       bool wide)
{
	size_t n = (size_t)n_ranks * width, nulls = 0;
	for (size_t k = 0; k < n; k++)
		nulls += (starts[k] == NONE) + (durs[k] == NONE);
	uint32_t dims[3] = {n_ranks, width, 2};
	pgbuf_copy_array(b, wide ? PGBUF_INT8OID : PGBUF_INT4OID, wide ? 8 : 4, 3, dims, nulls);
	for (size_t k = 0; k < 2 * n; k++) {
		int64_t v = k % 2 ? durs[k / 2] : starts[k / 2];
		if (v == NONE)
			pgbuf_copy_null(b);
		else if (wide)
			pgbuf_copy_int8(b, v);
		else
			pgbuf_copy_int4(b, (int32_t)v);
	}
}

/* The row of refs [a, end) with n_cols phase columns (s->col_of). */
static void copy_row(struct steps *s, struct pgbuf *b, const struct storage_op *op, int32_t job_id, int64_t set_id,
		     const struct steps_ref *refs, size_t a, size_t end, size_t n_cols)
{
	uint32_t ranks[STEPS_RANK_SPAN];
	size_t n_ranks = 0, width = 1 + n_cols;
	for (size_t k = a; k < end; k++)
		if (k == a || refs[k].rank != refs[k - 1].rank)
			ranks[n_ranks++] = refs[k].rank;
	size_t n = n_ranks * width;
	int64_t *starts = s->cells, *durs = s->cells + n;
	for (size_t k = 0; k < 2 * n; k++)
		s->cells[k] = NONE;
	/* absolute iteration starts first (the iteration record's, else its phases' as the
	 * producer found it), made relative to the row's ts below */
	size_t r = 0;
	for (size_t k = a; k < end; k++) {
		if (k > a && refs[k].rank != refs[k - 1].rank)
			r++;
		int64_t *row_s = starts + r * width, *row_d = durs + r * width;
		if (refs[k].phase == 0) {
			const struct record_iter *it = &op->iters[refs[k].i];
			if (row_d[0] == NONE) {
				row_s[0] = it->start_us;
				row_d[0] = it->dur_us;
			}
			continue;
		}
		const struct record_phase *ph = &op->phases[refs[k].i];
		if (row_s[0] == NONE)
			row_s[0] = op->phase_iter_start_us[refs[k].i];
		size_t c = 1 + (size_t)s->col_of[ph->name];
		if (row_d[c] != NONE)
			continue; /* the same phase again: the first one stays */
		row_d[c] = ph->dur_us;
		row_s[c] = ph->start_us == RECORD_NO_START ? NONE : ph->start_us;
	}
	int64_t ts = starts[0];
	bool wide = false;
	for (r = 0; r < n_ranks; r++)
		starts[r * width] = (int64_t)((uint64_t)starts[r * width] - (uint64_t)ts);
	for (size_t k = 0; k < 2 * n; k++)
		wide |= !fits_int4(s->cells[k]);

	pgbuf_copy_tuple(b, 8);
	pgbuf_copy_timestamptz(b, ts);
	pgbuf_copy_int4(b, job_id);
	pgbuf_copy_int4(b, (int32_t)refs[a].iter);
	pgbuf_copy_int4(b, (int32_t)ranks[0]);
	if (set_id < 0)
		pgbuf_copy_null(b);
	else
		pgbuf_copy_int4(b, (int32_t)set_id);
	if (ranks[n_ranks - 1] - ranks[0] == n_ranks - 1) {
		pgbuf_copy_null(b); /* rank0, rank0 + 1, ... */
	} else {
		uint32_t nr = (uint32_t)n_ranks;
		pgbuf_copy_array(b, PGBUF_INT4OID, 4, 1, &nr, 0);
		for (r = 0; r < n_ranks; r++)
			pgbuf_copy_int4(b, (int32_t)ranks[r]);
	}
	if (wide)
		pgbuf_copy_null(b);
	copy_cells(b, starts, durs, (uint32_t)n_ranks, (uint32_t)width, wide);
	if (!wide)
		pgbuf_copy_null(b);
}

long steps_copy(struct steps *s, struct pgbuf *b, const struct storage_op *op, int32_t job_id, const int32_t *name_ids,
		size_t n_name_ids, steps_set_fn set_id, void *arg)
{
	size_t n = op->n_iters + op->n_phases;
	if (n == 0)
		return 0;
	size_t kinds_cap = s->set_cap, grps_cap = s->set_cap;
	if (grow((void **)&s->refs, &s->refs_cap, n, sizeof *s->refs) < 0 ||
	    grow((void **)&s->col_of, &s->col_of_cap, n_name_ids + 1, sizeof *s->col_of) < 0 ||
	    grow((void **)&s->cols, &s->cols_cap, n_name_ids + 1, sizeof *s->cols) < 0 ||
	    grow((void **)&s->set_kinds, &kinds_cap, n_name_ids + 1, sizeof *s->set_kinds) < 0 ||
	    grow((void **)&s->set_grps, &grps_cap, n_name_ids + 1, sizeof *s->set_grps) < 0 ||
	    grow((void **)&s->set_names, &s->set_cap, n_name_ids + 1, sizeof *s->set_names) < 0)
		return -1;
	struct steps_ref *refs = s->refs;
	for (size_t i = 0; i < op->n_iters; i++)
		refs[i] = (struct steps_ref){op->iters[i].iter, op->iters[i].rank, 0, (uint32_t)i};
	for (size_t i = 0; i < op->n_phases; i++)
		refs[op->n_iters + i] = (struct steps_ref){op->phases[i].iter, op->phases[i].rank, 1, (uint32_t)i};
	qsort(refs, n, sizeof *refs, ref_cmp);
	memset(s->col_of, 0xff, (n_name_ids + 1) * sizeof *s->col_of);
	long rows = 0;
	for (size_t a = 0, end; a < n; a = end) {
		size_t n_ranks = 0, n_names = 0, n_cols = 0;
		for (end = a;
		     end < n && refs[end].iter == refs[a].iter && refs[end].rank - refs[a].rank < STEPS_RANK_SPAN;
		     end++) {
			n_ranks += end == a || refs[end].rank != refs[end - 1].rank;
			if (refs[end].phase) {
				uint32_t name = op->phases[refs[end].i].name;
				if (s->col_of[name] < 0) {
					s->col_of[name] = 0;
					s->cols[n_names++] = (struct steps_col){name_ids[name], refs[end].i};
				}
			}
		}
		/* the columns by database name id; two producer names of one database name share one */
		qsort(s->cols, n_names, sizeof *s->cols, col_cmp);
		for (size_t k = 0; k < n_names; k++) {
			const struct record_phase *ph = &op->phases[s->cols[k].i];
			if (k == 0 || s->cols[k].id != s->cols[k - 1].id) {
				s->set_names[n_cols] = s->cols[k].id;
				s->set_kinds[n_cols] = (int16_t)ph->kind;
				s->set_grps[n_cols] = (int16_t)ph->group;
				n_cols++;
			}
			s->col_of[ph->name] = (int32_t)n_cols - 1;
		}
		int64_t set = -1;
		if (n_cols > 0) {
			struct steps_set st = {s->set_names, s->set_kinds, s->set_grps, n_cols};
			if ((set = set_id(arg, &st)) < 0)
				return -1;
		}
		if (b) {
			if (grow((void **)&s->cells, &s->cells_cap, 2 * n_ranks * (1 + n_cols), sizeof *s->cells) < 0)
				return -1;
			copy_row(s, b, op, job_id, set, refs, a, end, n_cols);
		}
		for (size_t k = 0; k < n_names; k++)
			s->col_of[op->phases[s->cols[k].i].name] = -1;
		rows++;
	}
	return rows;
}

void steps_free(struct steps *s)
{
	free(s->refs);
	free(s->cells);
	free(s->col_of);
	free(s->cols);
	free(s->set_names);
	free(s->set_kinds);
	free(s->set_grps);
	memset(s, 0, sizeof *s);
}
