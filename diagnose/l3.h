/* l3.h: L3, per-kernel duration distributions of a suspect against its pooled peers.
 *
 * For every kernel name the suspect's sketches over the window are pooled and compared
 * with the pooled sketches of its peers: the two-sample Kolmogorov-Smirnov statistic D,
 * the ratio of medians, and the suspect's maximum over the peers' 99th percentile. A
 * kernel is "degraded" when D > 0.5 and the median ratio > 1.3 (or < 1/1.3 is not
 * flagged: faster is never a fault); it is a "stall" when its median is normal
 * (ratio < 1.3) but its maximum is more than 10 times the peers' p99 — the shape of a JIT
 * compilation or of a one-off blocking call. */
#ifndef CULPRIT_L3_H
#define CULPRIT_L3_H

#include <stddef.h>
#include <stdint.h>

#include "sketch.h"
#include "store.h"

/* A kernel's reading against its peers (the thresholds above) */
#define L3_DEGRADED_KS 0.5
#define L3_DEGRADED_RATIO 1.3
#define L3_STALL_MAX_RATIO 10.0

static inline int l3_degraded(double ratio, double ks) { return ks > L3_DEGRADED_KS && ratio > L3_DEGRADED_RATIO; }

static inline int l3_stall(double ratio, double ks, double max_ratio)
{
	return !l3_degraded(ratio, ks) && ratio < L3_DEGRADED_RATIO && max_ratio > L3_STALL_MAX_RATIO;
}

struct l3_result {
	uint32_t kslot;
	double ratio, ks, max_ratio;
	int degraded, stall;
};

/* Pools, for each kernel slot k < store_kernel_count(), the window sketches of peers into
 * pools[k] (initialized by the caller). Returns 0, -1 when out of memory. */
int l3_pool(const struct store *s, const uint32_t *peers, size_t npeers, uint32_t first, uint32_t last,
	    struct sketch *pools);
/* Compares rank against pools; writes up to cap results (kernels with data on both sides),
 * degraded and stalled first, by decreasing ratio. Returns the number written, -1 on OOM. */
int l3_compare(const struct store *s, uint32_t rank, const struct sketch *pools, uint32_t first, uint32_t last,
	       struct l3_result *out, size_t cap);

#endif
