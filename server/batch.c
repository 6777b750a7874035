/* batch.c: see batch.h. */
#include "batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "cmp.h"
#include "jobs.h"
#include "record.h"
#include "sketch.h"
#include "text.h"
#include "writer.h"

#define MAX_NAME_LEN 256                   /* bytes in a phase or kernel name */
#define MAX_NAMES 65536                    /* names in one batch's dictionary; name ids on one connection */
#define MAX_SKETCH 65536                   /* bytes in one kernel sketch */
#define MAX_DUR_US (7LL * 86400 * 1000000) /* a week: longer is not a duration we believe */
#define MAX_KERNEL_COUNT INT32_MAX         /* calls of one kernel in one iteration; above: a wrapped negative */

static int serves_in(const uint32_t *ranks, size_t n_ranks, uint32_t rank)
{
	return bsearch(&rank, ranks, n_ranks, sizeof(uint32_t), cmp_u32) != NULL;
}

/* A kernel column holds one value per kernel; rank and iteration may hold one value for all
 * (may_be_one), kind, p50 and p99 may be empty (may_be_one false: then 0 is allowed). */
static bool col_ok(size_t len, size_t n, bool may_be_one)
{
	return len == n || (may_be_one ? n > 0 && len == 1 : len == 0);
}

#define KCOL(b, f, i) ((b)->n_kernel_##f == 1 ? (b)->kernel_##f[0] : (b)->kernel_##f[i])

static int bad(char *err, size_t err_size, const char *what, size_t i)
{
	snprintf(err, err_size, "%s (record %zu)", what, i);
	return -1;
}

/* An iteration number over BATCH_MAX_ITER (the database's integer would wrap it): -1 with
 * the reason, else 0. */
static int iter_bad(uint32_t iter, char *err, size_t err_size, const char *what, size_t i)
{
	if (iter <= BATCH_MAX_ITER)
		return 0;
	snprintf(err, err_size, "%siteration %u is over 2147483647 (2^31 - 1, the largest stored) (record %zu)", what,
		 iter, i);
	return -1;
}

/* A phase or kernel name: 1 to MAX_NAME_LEN bytes of text (common/text.h). 0, or -1 with
 * the reason in err. */
static int name_ok(const char *name, size_t i, char *err, size_t err_size)
{
	const char *why = text_check_str(name, 1, MAX_NAME_LEN);

	if (!why)
		return 0;
	snprintf(err, err_size, "name %s: a name is 1 to %d bytes of UTF-8 without control characters (record %zu)",
		 why, MAX_NAME_LEN, i);
	return -1;
}

/* ---- the agent's name ids on a connection ---- */

static struct batch_name_slot *names_find(const struct batch_name_ids *t, uint32_t id)
{
	if (!t->cap || id >= MAX_NAMES) /* UINT32_MAX marks a free slot */
		return NULL;
	for (size_t j = (id * 0x9E3779B1u) & (t->cap - 1);; j = (j + 1) & (t->cap - 1)) {
		if (t->slots[j].id == id)
			return &t->slots[j];
		if (t->slots[j].id == UINT32_MAX)
			return NULL;
	}
}

/* Defines id as the job's name job_id; 0, or -1 out of memory. */
static int names_put(struct batch_name_ids *t, uint32_t id, uint32_t job_id)
{
	struct batch_name_slot *slot = names_find(t, id);

	if (!slot && (t->n + 1) * 4 > t->cap * 3) { /* at most 3/4 full */
		size_t old_cap = t->cap, cap = old_cap ? old_cap * 2 : 16;
		struct batch_name_slot *old = t->slots, *tab = malloc(cap * sizeof(*tab));

		if (!tab)
			return -1;
		memset(tab, 0xff, cap * sizeof(*tab));
		t->slots = tab;
		t->cap = cap;
		t->n = 0;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].id != UINT32_MAX)
				names_put(t, old[i].id, old[i].job_id); /* fits: no growth */
		free(old);
	}
	if (!slot) {
		size_t j = (id * 0x9E3779B1u) & (t->cap - 1);

		while (t->slots[j].id != UINT32_MAX)
			j = (j + 1) & (t->cap - 1);
		slot = &t->slots[j];
		slot->id = id;
		t->n++;
	}
	slot->job_id = job_id;
	slot->epoch = 0;
	return 0;
}

void batch_name_ids_free(struct batch_name_ids *t)
{
	free(t->slots);
	memset(t, 0, sizeof(*t));
}

int batch_take_name_defs(struct batch_name_ids *t, struct job *job, uint32_t max_names, const Culprit__V1__Batch *b,
			 bool *full, char *err, size_t err_size)
{
	for (size_t i = 0; i < b->n_name_defs; i++) {
		const Culprit__V1__NameDef *d = b->name_defs[i];
		uint32_t job_id;

		if (d->id >= MAX_NAMES)
			return bad(err, err_size, "name id too large", i);
		if (name_ok(d->name, i, err, err_size) < 0)
			return -1;
		job_id = jobs_intern(job, d->name, max_names);
		if (job_id == JOBS_NAMES_FULL) {
			*full = true;
			return bad(err, err_size, "the job has max_names_per_job names", i);
		}
		if (job_id == UINT32_MAX || names_put(t, d->id, job_id) < 0)
			return bad(err, err_size, "out of memory", i);
	}
	return 0;
}

/* ---- a batch's names ---- */

void batch_names_free(struct batch_names *bn)
{
	free(bn->ids);
	free(bn->refs);
	if (!bn->own_dict)
		free(bn->strs);
	memset(bn, 0, sizeof(*bn));
}

/* The job's id of the name of a valid batch's record: ref its dictionary index, at its place
 * among the batch's phases, kernels and raw kernels (see struct batch_names). */
static uint32_t batch_name(const struct batch_names *bn, uint32_t ref, size_t at)
{
	return bn->own_dict ? bn->ids[ref] : bn->refs[at];
}

int batch_names_get(struct batch_name_ids *t, const struct job *job, const Culprit__V1__Batch *b,
		    struct batch_names *bn, char *err, size_t err_size)
{
	const uint32_t *cols[2] = {b->phase_name, b->kernel_name};
	size_t lens[3] = {b->n_phase_name, b->n_kernel_name, b->n_raw_kernels}, cap = 0, at = 0;

	memset(bn, 0, sizeof(*bn));
	if (b->n_names > MAX_NAMES)
		return bad(err, err_size, "too many names in the dictionary", b->n_names);
	for (size_t i = 0; i < b->n_names; i++)
		if (name_ok(b->names[i], i, err, err_size) < 0)
			return -1;
	if (b->n_names || !(lens[0] + lens[1] + lens[2])) {
		bn->own_dict = true;
		bn->strs = (const char **)b->names;
		bn->n = b->n_names;
		return 0;
	}
	if (!(bn->refs = malloc((lens[0] + lens[1] + lens[2]) * sizeof(uint32_t))))
		return bad(err, err_size, "out of memory", 0);
	if (++t->epoch == 0) {
		for (size_t i = 0; i < t->cap; i++)
			t->slots[i].epoch = 0;
		t->epoch = 1;
	}
	for (int col = 0; col < 3; col++) /* phase names, kernel names, raw kernel names */
		for (size_t i = 0; i < lens[col]; i++, at++) {
			struct batch_name_slot *slot = names_find(t, col < 2 ? cols[col][i] : b->raw_kernels[i]->name);

			if (!slot) {
				batch_names_free(bn);
				return bad(err, err_size, "name id not defined on this connection", i);
			}
			bn->refs[at] = slot->job_id;
			if (slot->epoch == t->epoch)
				continue;
			if (bn->n == cap) {
				uint32_t *ids = realloc(bn->ids, (cap ? cap * 2 : 64) * sizeof(*ids));
				const char **strs =
					ids ? realloc(bn->strs, (cap ? cap * 2 : 64) * sizeof(*strs)) : NULL;

				if (ids)
					bn->ids = ids;
				if (!strs) {
					batch_names_free(bn);
					return bad(err, err_size, "out of memory", i);
				}
				bn->strs = strs;
				cap = cap ? cap * 2 : 64;
			}
			slot->epoch = t->epoch;
			bn->ids[bn->n] = slot->job_id;
			bn->strs[bn->n++] = jobs_name(job, slot->job_id);
		}
	return 0;
}

int batch_names_intern(struct batch_names *bn, struct job *job, uint32_t max_names, bool *full)
{
	if (!bn->own_dict)
		return 0;
	if (!(bn->ids = malloc((bn->n + 1) * sizeof(uint32_t))))
		return -1;
	for (size_t i = 0; i < bn->n; i++)
		if ((bn->ids[i] = jobs_intern(job, bn->strs[i], max_names)) >= JOBS_NAMES_FULL) {
			*full = bn->ids[i] == JOBS_NAMES_FULL;
			return -1;
		}
	return 0;
}

/* ---- checks ---- */

/* The highest iteration a batch may carry: window + BATCH_MAX_ITER_JUMP above the job's
 * highest, or above the batch's lowest when the job has none yet (so that one batch cannot
 * carry the jump either). A far jump would leave the job's window nothing to diagnose. Over
 * BATCH_MAX_ITER is refused apart (iter_bad). */
static uint64_t iter_limit(const Culprit__V1__Batch *b, const struct batch_limits *lim)
{
	uint64_t base = lim->job_iter >= 0 ? (uint64_t)lim->job_iter : UINT32_MAX;

	if (lim->job_iter < 0) {
		for (size_t i = 0; i < b->n_iter_iter; i++)
			base = b->iter_iter[i] < base ? b->iter_iter[i] : base;
		for (size_t i = 0; i < b->n_phase_iter; i++)
			base = b->phase_iter[i] < base ? b->phase_iter[i] : base;
		for (size_t i = 0; i < b->n_kernel_iter; i++)
			base = b->kernel_iter[i] < base ? b->kernel_iter[i] : base;
	}
	return base + lim->window + BATCH_MAX_ITER_JUMP;
}

/* The raw kernels of a batch (those of a capture, server/capture.c). */
static int raw_ok(const Culprit__V1__Batch *b, size_t n_dict, const uint32_t *ranks, size_t n_ranks, int64_t now_us,
		  char *err, size_t err_size)
{
	if (b->n_raw_kernels > BATCH_MAX_RAW) {
		snprintf(err, err_size, "more than %d raw kernels in one batch (%zu)", BATCH_MAX_RAW, b->n_raw_kernels);
		return -1;
	}
	for (size_t i = 0; i < b->n_raw_kernels; i++) {
		const Culprit__V1__RawKernel *k = b->raw_kernels[i];

		if (!serves_in(ranks, n_ranks, k->rank))
			return bad(err, err_size, "raw kernel of a rank this agent does not serve", i);
		if (k->name >= n_dict)
			return bad(err, err_size, "raw kernel name index outside the dictionary", i);
		if (k->kind >= RECORD_KIND_COUNT)
			return bad(err, err_size, "raw kernel kind unknown", i);
		if (k->dur_us < 0 || k->dur_us > MAX_DUR_US)
			return bad(err, err_size, "raw kernel duration negative or over a week", i);
		if (k->start_us < BATCH_MIN_START_US || k->start_us > now_us + BATCH_MAX_AHEAD_US)
			return bad(err, err_size,
				   "raw kernel start before 2000 or more than a day ahead of the server's clock", i);
		if (iter_bad(k->iter, err, err_size, "raw kernel ", i) < 0)
			return -1;
		if (k->stream > BATCH_MAX_STREAM)
			return bad(err, err_size, "raw kernel stream over 65535", i);
	}
	return 0;
}

int batch_validate(const uint32_t *ranks, size_t n_ranks, const Culprit__V1__Batch *b, size_t n_dict,
		   const struct batch_limits *lim, char *err, size_t err_size)
{
	size_t n, sketch_bytes = 0, sketch_off = 0;
	uint64_t max_iter = iter_limit(b, lim);
	struct sketch scratch;

	n = b->n_iter_rank;
	if (b->n_iter_iter != n || b->n_iter_start_us != n || b->n_iter_dur_us != n)
		return bad(err, err_size, "iteration columns differ in length", n);
	for (size_t i = 0; i < n; i++) {
		if (!serves_in(ranks, n_ranks, b->iter_rank[i]))
			return bad(err, err_size, "iteration of a rank this agent does not serve", i);
		if (b->iter_dur_us[i] < 0 || b->iter_dur_us[i] > MAX_DUR_US)
			return bad(err, err_size, "iteration duration negative or over a week", i);
		if (iter_bad(b->iter_iter[i], err, err_size, "", i) < 0)
			return -1;
		if (b->iter_iter[i] > max_iter)
			return bad(err, err_size, "iteration more than window + 1,000,000 past the job's", i);
		if (b->iter_start_us[i] < BATCH_MIN_START_US || b->iter_start_us[i] > lim->now_us + BATCH_MAX_AHEAD_US)
			return bad(err, err_size,
				   "iteration start before 2000 or more than a day ahead of the server's clock", i);
	}

	n = b->n_phase_rank;
	if (b->n_phase_iter != n || b->n_phase_name != n || b->n_phase_kind != n || b->n_phase_group != n ||
	    b->n_phase_start_us != n || b->n_phase_dur_us != n)
		return bad(err, err_size, "phase columns differ in length", n);
	for (size_t i = 0; i < n; i++) {
		if (!serves_in(ranks, n_ranks, b->phase_rank[i]))
			return bad(err, err_size, "phase of a rank this agent does not serve", i);
		if (b->phase_name[i] >= n_dict)
			return bad(err, err_size, "phase name index outside the dictionary", i);
		if (b->phase_kind[i] >= RECORD_KIND_COUNT || b->phase_group[i] >= RECORD_GROUP_COUNT)
			return bad(err, err_size, "phase kind or group unknown", i);
		if (b->phase_dur_us[i] < 0 || b->phase_dur_us[i] > MAX_DUR_US)
			return bad(err, err_size, "phase duration negative or over a week", i);
		if (b->phase_start_us[i] < -1 || b->phase_start_us[i] > MAX_DUR_US)
			return bad(err, err_size, "phase start offset out of range", i);
		if (iter_bad(b->phase_iter[i], err, err_size, "phase ", i) < 0)
			return -1;
		if (b->phase_iter[i] > max_iter)
			return bad(err, err_size, "iteration more than window + 1,000,000 past the job's", i);
	}

	n = b->n_kernel_name;
	if (!col_ok(b->n_kernel_rank, n, true) || !col_ok(b->n_kernel_iter, n, true) ||
	    !col_ok(b->n_kernel_kind, n, false) || b->n_kernel_count != n || b->n_kernel_sum_us != n ||
	    b->n_kernel_min_us != n || b->n_kernel_max_us != n || !col_ok(b->n_kernel_p50_us, n, false) ||
	    b->n_kernel_p99_us != b->n_kernel_p50_us || !col_ok(b->n_kernel_sketch_len, n, false))
		return bad(err, err_size, "kernel columns differ in length", n);
	for (size_t i = 0; i < n; i++) {
		if (!serves_in(ranks, n_ranks, KCOL(b, rank, i)))
			return bad(err, err_size, "kernel summary of a rank this agent does not serve", i);
		if (b->kernel_name[i] >= n_dict)
			return bad(err, err_size, "kernel name index outside the dictionary", i);
		if (b->n_kernel_kind && b->kernel_kind[i] >= RECORD_KIND_COUNT)
			return bad(err, err_size, "kernel kind unknown", i);
		if (b->kernel_sum_us[i] < 0 || b->kernel_min_us[i] < 0 || b->kernel_max_us[i] < b->kernel_min_us[i] ||
		    b->kernel_max_us[i] > MAX_DUR_US ||
		    (b->n_kernel_p50_us && (b->kernel_p50_us[i] < 0 || b->kernel_p99_us[i] < 0)))
			return bad(err, err_size, "kernel durations inconsistent or out of range", i);
		if (b->kernel_count[i] > MAX_KERNEL_COUNT)
			return bad(err, err_size, "kernel call count negative or wrapped (over 2^31 - 1)", i);
		if (iter_bad(KCOL(b, iter, i), err, err_size, "kernel summary ", i) < 0)
			return -1;
		if (KCOL(b, iter, i) > max_iter)
			return bad(err, err_size, "iteration more than window + 1,000,000 past the job's", i);
		if (b->n_kernel_sketch_len && b->kernel_sketch_len[i] > MAX_SKETCH)
			return bad(err, err_size, "kernel sketch too large", i);
		sketch_bytes += b->n_kernel_sketch_len ? b->kernel_sketch_len[i] : 0;
	}
	if (sketch_bytes != b->kernel_sketches.len)
		return bad(err, err_size, "kernel sketch lengths do not add up to the sketch bytes", n);
	/* a sketch that does not decode would be dropped by the window and by the writer */
	sketch_init(&scratch);
	for (size_t i = 0; i < b->n_kernel_sketch_len; i++) {
		size_t len = b->kernel_sketch_len[i];

		if (len && sketch_deserialize(&scratch, b->kernel_sketches.data + sketch_off, len) < 0) {
			sketch_free(&scratch);
			return bad(err, err_size, "kernel sketch does not decode", i);
		}
		sketch_off += len;
	}
	sketch_free(&scratch);
	return raw_ok(b, n_dict, ranks, n_ranks, lim->now_us, err, err_size);
}

/* ---- conversion ---- */

/* Iteration start of (rank, iter) in this batch, for partitioning the phases and kernels. */
struct start_index {
	uint64_t *keys;
	int64_t *starts;
	size_t cap;
};

static int start_index_build(struct start_index *x, const Culprit__V1__Batch *b)
{
	size_t cap = 16;

	while (cap < b->n_iter_rank * 2)
		cap *= 2;
	x->keys = malloc(cap * sizeof(uint64_t));
	x->starts = malloc(cap * sizeof(int64_t));
	if (!x->keys || !x->starts)
		return -1;
	x->cap = cap;
	memset(x->keys, 0xff, cap * sizeof(uint64_t));
	for (size_t i = 0; i < b->n_iter_rank; i++) {
		uint64_t k = ((uint64_t)b->iter_rank[i] << 32) | b->iter_iter[i];
		size_t j = (k * 0x9E3779B97F4A7C15ULL) >> 40 & (cap - 1);

		while (x->keys[j] != UINT64_MAX && x->keys[j] != k)
			j = (j + 1) & (cap - 1);
		x->keys[j] = k;
		x->starts[j] = b->iter_start_us[i];
	}
	return 0;
}

static int64_t start_index_get(const struct start_index *x, uint32_t rank, uint32_t iter, int64_t fallback)
{
	uint64_t k = ((uint64_t)rank << 32) | iter;
	size_t j = (k * 0x9E3779B97F4A7C15ULL) >> 40 & (x->cap - 1);

	for (; x->keys[j] != UINT64_MAX; j = (j + 1) & (x->cap - 1))
		if (x->keys[j] == k)
			return x->starts[j];
	return fallback;
}

struct storage_op *batch_to_op(const Culprit__V1__Batch *b, const struct batch_names *bn, const struct job *job,
			       const char *agent, uint64_t source)
{
	size_t arena = 512 + strlen(agent) + strlen(job->name);
	struct storage_op *op;
	struct start_index starts = {0};
	uint8_t *sketches;
	size_t sketch_off = 0;
	int64_t fallback = clock_wall_us();

	arena += bn->n * (sizeof(char *) + sizeof(uint32_t));
	for (size_t i = 0; i < bn->n; i++)
		arena += strlen(bn->strs[i]) + 1;
	arena += b->n_iter_rank * sizeof(struct record_iter);
	arena += b->n_phase_rank * (sizeof(struct record_phase) + sizeof(int64_t));
	arena += b->n_kernel_name * (sizeof(struct record_kernel) + sizeof(int64_t));
	arena += b->kernel_sketches.len;
	arena += b->n_raw_kernels * sizeof(struct record_raw_kernel);
	/* every allocation from the arena is aligned to 16 bytes */
	arena += 16 * (16 + bn->n);

	op = storage_op_new(STORAGE_OP_BATCH, arena);
	if (!op)
		return NULL;
	if (start_index_build(&starts, b) < 0)
		goto fail;
	op->job = storage_op_strdup(op, job->name);
	op->agent = storage_op_strdup(op, agent);
	op->source = source;
	op->seq = b->seq;
	op->n_names = bn->n;
	op->names = storage_op_alloc(op, bn->n * sizeof(char *) + 1);
	op->name_ids = storage_op_alloc(op, bn->n * sizeof(uint32_t) + 1);
	op->n_iters = b->n_iter_rank;
	op->iters = storage_op_alloc(op, op->n_iters * sizeof(struct record_iter) + 1);
	op->n_phases = b->n_phase_rank;
	op->phases = storage_op_alloc(op, op->n_phases * sizeof(struct record_phase) + 1);
	op->phase_iter_start_us = storage_op_alloc(op, op->n_phases * sizeof(int64_t) + 1);
	op->n_kernels = b->n_kernel_name;
	op->kernels = storage_op_alloc(op, op->n_kernels * sizeof(struct record_kernel) + 1);
	op->kernel_iter_start_us = storage_op_alloc(op, op->n_kernels * sizeof(int64_t) + 1);
	op->n_raw_kernels = b->n_raw_kernels;
	op->raw_kernels = storage_op_alloc(op, op->n_raw_kernels * sizeof(struct record_raw_kernel) + 1);
	if (!op->job || !op->agent || !op->names || !op->name_ids || !op->iters || !op->phases ||
	    !op->phase_iter_start_us || !op->kernels || !op->kernel_iter_start_us || !op->raw_kernels)
		goto fail;
	for (size_t i = 0; i < bn->n; i++)
		if (!(op->names[i] = storage_op_strdup(op, bn->strs[i])))
			goto fail;
	memcpy(op->name_ids, bn->ids, bn->n * sizeof(uint32_t));
	for (size_t i = 0; i < op->n_iters; i++) {
		struct record_iter *r = &op->iters[i];

		r->rank = b->iter_rank[i];
		r->iter = b->iter_iter[i];
		r->start_us = b->iter_start_us[i];
		r->dur_us = b->iter_dur_us[i];
	}
	for (size_t i = 0; i < op->n_phases; i++) {
		struct record_phase *r = &op->phases[i];

		r->rank = b->phase_rank[i];
		r->iter = b->phase_iter[i];
		r->name = batch_name(bn, b->phase_name[i], i);
		r->kind = (uint8_t)b->phase_kind[i];
		r->group = (uint8_t)b->phase_group[i];
		r->start_us = b->phase_start_us[i] < 0 ? RECORD_NO_START : b->phase_start_us[i];
		r->dur_us = b->phase_dur_us[i];
		op->phase_iter_start_us[i] = start_index_get(&starts, r->rank, r->iter, fallback);
	}
	sketches = storage_op_alloc(op, b->kernel_sketches.len + 1);
	if (!sketches)
		goto fail;
	if (b->kernel_sketches.len)
		memcpy(sketches, b->kernel_sketches.data, b->kernel_sketches.len);
	for (size_t i = 0; i < op->n_kernels; i++) {
		struct record_kernel *r = &op->kernels[i];

		r->rank = KCOL(b, rank, i);
		r->iter = KCOL(b, iter, i);
		r->name = batch_name(bn, b->kernel_name[i], b->n_phase_name + i);
		r->kind = (uint8_t)(b->n_kernel_kind ? b->kernel_kind[i]
						     : record_kernel_kind_of(jobs_name(job, r->name)));
		r->count = b->kernel_count[i];
		r->sum_us = b->kernel_sum_us[i];
		r->min_us = b->kernel_min_us[i];
		r->max_us = b->kernel_max_us[i];
		r->sketch = NULL;
		r->sketch_len = 0;
		if (b->n_kernel_sketch_len && b->kernel_sketch_len[i]) {
			r->sketch = sketches + sketch_off;
			r->sketch_len = b->kernel_sketch_len[i];
			sketch_off += r->sketch_len;
		}
		if (b->n_kernel_p50_us) {
			r->p50_us = b->kernel_p50_us[i];
			r->p99_us = b->kernel_p99_us[i];
		} else if (r->sketch) {
			/* read off the sketch by the storage writer, on its thread: the window
			 * decodes the sketch itself and needs no quantiles */
			r->p50_us = r->p99_us = RECORD_QUANTILES_FROM_SKETCH;
		} else {
			(void)record_kernel_quantiles(r, NULL); /* from the summary: no decoding */
		}
		op->kernel_iter_start_us[i] = start_index_get(&starts, r->rank, r->iter, fallback);
	}
	for (size_t i = 0; i < op->n_raw_kernels; i++) {
		const Culprit__V1__RawKernel *k = b->raw_kernels[i];

		op->raw_kernels[i] = (struct record_raw_kernel){
			.rank = k->rank,
			.iter = k->iter,
			.name = batch_name(bn, k->name, b->n_phase_name + b->n_kernel_name + i),
			.kind = (uint8_t)k->kind,
			.stream = k->stream,
			.start_us = k->start_us,
			.dur_us = k->dur_us};
	}
	free(starts.keys);
	free(starts.starts);
	return op;
fail:
	free(starts.keys);
	free(starts.starts);
	storage_op_free(op);
	return NULL;
}
