/* kernel_summary.c: raw kernel durations -> summary + sketch; wire size of a Batch. */
#include "kernel_summary.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "culprit.pb-c.h"

void kernel_summary_init(struct kernel_summary *ks)
{
	memset(ks, 0, sizeof(*ks));
	sketch_init(&ks->sk);
}

void kernel_summary_free(struct kernel_summary *ks)
{
	sketch_free(&ks->sk);
	free(ks->sorted);
	free(ks->buf);
	memset(ks, 0, sizeof(*ks));
}

struct kernel_summary *kernel_summary_create(void)
{
	struct kernel_summary *ks = malloc(sizeof(*ks));

	if (ks)
		kernel_summary_init(ks);
	return ks;
}

void kernel_summary_destroy(struct kernel_summary *ks)
{
	if (!ks)
		return;
	kernel_summary_free(ks);
	free(ks);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

int kernel_summary_make(struct kernel_summary *ks, struct record_kernel *k, const int64_t *durs, size_t n,
			const char **why)
{
	if (!n) {
		*why = "no durations";
		return -1;
	}
	if (n > ks->sorted_cap) {
		int64_t *p = realloc(ks->sorted, n * sizeof(*p));
		if (!p)
			goto oom;
		ks->sorted = p;
		ks->sorted_cap = n;
	}
	memcpy(ks->sorted, durs, n * sizeof(*durs));
	qsort(ks->sorted, n, sizeof(*ks->sorted), cmp_i64);
	if (ks->sorted[0] < 0) {
		*why = "negative kernel duration";
		return -1;
	}
	sketch_reset(&ks->sk);
	k->sum_us = 0;
	for (size_t i = 0; i < n; i++) {
		k->sum_us += ks->sorted[i];
		if (sketch_add(&ks->sk, (double)ks->sorted[i], 1) < 0)
			goto oom;
	}
	if (!k->count)
		k->count = (uint32_t)n;
	k->min_us = ks->sorted[0];
	k->max_us = ks->sorted[n - 1];
	k->p50_us = ks->sorted[(n - 1) / 2];
	k->p99_us = ks->sorted[(size_t)((double)(n - 1) * 0.99 + 0.5)];
	if (n <= KERNEL_SUMMARY_EXACT_MAX) {
		/* min, p50 and max are every value: the server rebuilds them exactly from the
		 * summary fields (store.c add_summary), a sketch would only add bytes */
		k->sketch = NULL;
		k->sketch_len = 0;
		return 0;
	}
	size_t need = sketch_serialize(&ks->sk, NULL, 0);
	if (need > ks->buf_cap) {
		uint8_t *p = realloc(ks->buf, need);
		if (!p)
			goto oom;
		ks->buf = p;
		ks->buf_cap = need;
	}
	k->sketch_len = (uint32_t)sketch_serialize(&ks->sk, ks->buf, ks->buf_cap);
	k->sketch = ks->buf;
	return 0;
oom:
	*why = "out of memory";
	return -1;
}

size_t kernel_summary_wire_bytes(const struct record_iter *it, size_t nit, const struct record_phase *ph, size_t nph,
				 const struct record_kernel *k, size_t nk, const uint32_t *fresh, size_t nfresh,
				 const char *const *name_of)
{
	Culprit__V1__Batch m = CULPRIT__V1__BATCH__INIT;
	size_t total = nit * 4 + nph * 7 + nk * 11;
	uint64_t *v = calloc(total ? total : 1, sizeof(*v)); /* every repeated field, 8 bytes */
	uint8_t *sk = NULL;
	Culprit__V1__NameDef *defs = calloc(nfresh ? nfresh : 1, sizeof(*defs));
	Culprit__V1__NameDef **def_ptrs = calloc(nfresh ? nfresh : 1, sizeof(*def_ptrs));
	size_t bytes = 0;
	if (!v || !defs || !def_ptrs)
		goto out;
	/* no dictionary: the records carry the agent's name ids (agent/agent.c) */
	uint64_t *p = v;
#define COL(field, n, expr, T)                   \
	do {                                     \
		T *col = (T *)p;                 \
		for (size_t i = 0; i < (n); i++) \
			col[i] = (T)(expr);      \
		m.n_##field = (n);               \
		m.field = col;                   \
		p += (n);                        \
	} while (0)
	COL(iter_rank, nit, it[i].rank, uint32_t);
	COL(iter_iter, nit, it[i].iter, uint32_t);
	COL(iter_start_us, nit, it[i].start_us, int64_t);
	COL(iter_dur_us, nit, it[i].dur_us, int64_t);
	COL(phase_rank, nph, ph[i].rank, uint32_t);
	COL(phase_iter, nph, ph[i].iter, uint32_t);
	COL(phase_name, nph, ph[i].name, uint32_t);
	COL(phase_kind, nph, ph[i].kind, uint32_t);
	COL(phase_group, nph, ph[i].group, uint32_t);
	COL(phase_start_us, nph, ph[i].start_us == RECORD_NO_START ? -1 : ph[i].start_us, int64_t);
	COL(phase_dur_us, nph, ph[i].dur_us, int64_t);
	/* as agent/agent.c kernel_columns packs them: rank and iteration once when shared,
	 * kind and p50/p99 only when the server cannot derive them */
	bool one_rank = nk > 0, one_iter = nk > 0, need_q = false, need_kind = !name_of;
	for (size_t i = 0; i < nk; i++) {
		need_kind = need_kind || k[i].kind != record_kernel_kind_of(name_of[k[i].name]);
		one_rank = one_rank && k[i].rank == k[0].rank;
		one_iter = one_iter && k[i].iter == k[0].iter;
		need_q = need_q || (!k[i].sketch_len && k[i].count > 3);
	}
	COL(kernel_rank, one_rank ? 1 : nk, k[i].rank, uint32_t);
	COL(kernel_iter, one_iter ? 1 : nk, k[i].iter, uint32_t);
	COL(kernel_name, nk, k[i].name, uint32_t);
	COL(kernel_kind, need_kind ? nk : 0, k[i].kind, uint32_t);
	COL(kernel_count, nk, k[i].count, uint32_t);
	COL(kernel_sum_us, nk, k[i].sum_us, int64_t);
	COL(kernel_min_us, nk, k[i].min_us, int64_t);
	COL(kernel_max_us, nk, k[i].max_us, int64_t);
	COL(kernel_p50_us, need_q ? nk : 0, k[i].p50_us, int64_t);
	COL(kernel_p99_us, need_q ? nk : 0, k[i].p99_us, int64_t);
#undef COL
	uint32_t *sk_len = (uint32_t *)p;
	size_t sk_bytes = 0;
	for (size_t i = 0; i < nk; i++) {
		sk_len[i] = k[i].sketch_len;
		sk_bytes += k[i].sketch_len;
	}
	if (sk_bytes) {
		m.n_kernel_sketch_len = nk;
		m.kernel_sketch_len = sk_len;
		if (!(sk = malloc(sk_bytes)))
			goto out;
		for (size_t i = 0, off = 0; i < nk; off += k[i].sketch_len, i++)
			memcpy(sk + off, k[i].sketch, k[i].sketch_len);
		m.kernel_sketches.len = sk_bytes;
		m.kernel_sketches.data = sk;
	}
	/* the definitions of the names this connection has not had yet */
	for (size_t i = 0; i < nfresh; i++) {
		culprit__v1__name_def__init(&defs[i]);
		defs[i].id = fresh[i];
		defs[i].name = (char *)name_of[fresh[i]];
		def_ptrs[i] = &defs[i];
	}
	m.n_name_defs = nfresh;
	m.name_defs = def_ptrs;
	m.seq = 1;
	bytes = culprit__v1__batch__get_packed_size(&m) + 4;
out:
	free(v);
	free(defs);
	free(def_ptrs);
	free(sk);
	return bytes;
}
