/* sketch.h: mergeable duration sketch (DDSketch-style logarithmic buckets).
 *
 * A value v > 0 falls into bucket i = ceil(log(v) / log(gamma)), gamma = (1 + a) / (1 - a)
 * with relative accuracy a = SKETCH_ALPHA (1%): every quantile returned is within 1% of a
 * value of rank q in the data (for values >= SKETCH_MIN_VALUE). Values below
 * SKETCH_MIN_VALUE (durations under 1 us) count in a zero bucket. Merging is exact bucket
 * addition, hence associative and commutative. At most SKETCH_MAX_BINS buckets are kept: a
 * wider range collapses its lowest buckets (low quantiles lose accuracy first).
 *
 * Serialization (the Batch.kernel_sketch bytes of the wire protocol):
 *   u8 magic 0xD5, u8 version 2, varint zeros, zigzag varint lowest non-empty bucket index,
 *   varint number m of non-empty buckets, then per bucket varint (d << 1 | c > 1) with d
 *   its index delta from the previous bucket (0 for the first), followed by varint c - 2
 *   only when its count c is over 1.
 * Count, min, max and sum are not serialized: the record that carries a sketch has them
 * exactly (record_kernel count, min_us, max_us, sum_us). Decoding sets count from the
 * buckets and estimates min, max and sum from them; sketch_set_summary puts the exact
 * values back. */
#ifndef CULPRIT_SKETCH_H
#define CULPRIT_SKETCH_H

#include <stddef.h>
#include <stdint.h>

#define SKETCH_ALPHA 0.01
#define SKETCH_MIN_VALUE 1.0
#define SKETCH_MAX_BINS 2048

struct sketch {
	int32_t lo;    /* bucket index of bins[0] */
	uint32_t n;    /* buckets in use */
	uint32_t cap;  /* allocated buckets */
	uint32_t lent; /* bins belong to the caller (sketch_lend): never freed or resized here */
	uint32_t *bins;
	uint64_t count; /* all values, zeros included */
	uint64_t zeros;
	double sum, min, max;
};

void sketch_init(struct sketch *s);
void sketch_free(struct sketch *s);
void sketch_reset(struct sketch *s); /* empty, keeps its memory */
/* Give the empty sketch s the buckets bins[0..cap), which the caller owns and frees after s
 * (an arena of many sketches: no allocation of its own per sketch). s counts in them until
 * it needs more than cap buckets, then moves to an array of its own, which sketch_free frees. */
void sketch_lend(struct sketch *s, uint32_t *bins, uint32_t cap);
/* s's buckets copied into bins (cap of them, at least s->n), which s is lent from now on;
 * an array of its own is freed. */
void sketch_move(struct sketch *s, uint32_t *bins, uint32_t cap);
/* Add value v weight times. Returns 0, -1 when out of memory. */
int sketch_add(struct sketch *s, double v, uint64_t weight);
/* Add each of v[0..n) once: the same sketch as sketch_add of each in turn, with the range of
 * buckets made room for once per 64 values. Returns 0, -1 when out of memory. */
int sketch_add_ints(struct sketch *s, const int64_t *v, size_t n);
/* dst += src. Returns 0, -1 when out of memory. */
int sketch_merge(struct sketch *dst, const struct sketch *src);
/* Quantile q in [0, 1]; NaN when empty. */
double sketch_quantile(const struct sketch *s, double q);
/* Fraction of values <= v (bucket resolution). */
double sketch_cdf(const struct sketch *s, double v);
/* Two-sample Kolmogorov-Smirnov statistic sup |F_a - F_b| at bucket resolution. */
double sketch_ks(const struct sketch *a, const struct sketch *b);

/* Serialize into buf (cap bytes); returns the bytes needed (write happened only if <= cap). */
size_t sketch_serialize(const struct sketch *s, uint8_t *buf, size_t cap);
/* Replace *s (initialized) with the decoded bytes. Returns 0, -1 on malformed input. */
int sketch_deserialize(struct sketch *s, const uint8_t *buf, size_t len);
/* After sketch_deserialize: the exact min, max and sum of the values it holds. */
void sketch_set_summary(struct sketch *s, double min, double max, double sum);

#endif
