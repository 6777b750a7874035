/* l3.c: KS statistic and median ratio per kernel name, suspect vs pooled peers. */
#include "l3.h"

#include <math.h>
#include <stdlib.h>

int l3_pool(const struct store *s, const uint32_t *peers, size_t npeers, uint32_t first, uint32_t last,
	    struct sketch *pools)
{
	uint32_t K = store_kernel_count(s);
	for (size_t i = 0; i < npeers; i++)
		for (uint32_t k = 0; k < K; k++)
			if (store_kernel_pool(s, peers[i], k, first, last, &pools[k]) < 0)
				return -1;
	return 0;
}

static double score(const struct l3_result *r)
{
	return (r->degraded || r->stall ? 1000 : 0) + (r->stall ? r->max_ratio / 1000 : 0) + r->ratio;
}

int l3_compare(const struct store *s, uint32_t rank, const struct sketch *pools, uint32_t first, uint32_t last,
	       struct l3_result *out, size_t cap)
{
	uint32_t K = store_kernel_count(s);
	struct sketch mine;
	sketch_init(&mine);
	size_t n = 0;
	for (uint32_t k = 0; k < K; k++) {
		sketch_reset(&mine);
		if (store_kernel_pool(s, rank, k, first, last, &mine) < 0) {
			sketch_free(&mine);
			return -1;
		}
		if (!mine.count || !pools[k].count)
			continue;
		struct l3_result r = {.kslot = k};
		double pm = sketch_quantile(&pools[k], 0.5), p99 = sketch_quantile(&pools[k], 0.99);
		r.ratio = pm > 0 ? sketch_quantile(&mine, 0.5) / pm : 1;
		r.ks = sketch_ks(&mine, &pools[k]);
		r.max_ratio = p99 > 0 ? mine.max / p99 : 1;
		r.degraded = l3_degraded(r.ratio, r.ks);
		r.stall = l3_stall(r.ratio, r.ks, r.max_ratio);
		/* insertion by score into out[0..cap) */
		size_t pos = n < cap ? n : cap;
		while (pos > 0 && score(&out[pos - 1]) < score(&r))
			pos--;
		if (pos >= cap)
			continue;
		for (size_t j = (n < cap ? n : cap - 1); j > pos; j--)
			out[j] = out[j - 1];
		out[pos] = r;
		if (n < cap)
			n++;
	}
	sketch_free(&mine);
	return (int)n;
}
