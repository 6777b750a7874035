/* sketch.c: DDSketch-style log-bucket sketch with exact merge and compact bytes. */
#include "sketch.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* log(gamma) with gamma = (1 + a) / (1 - a) */
static double log_gamma(void) { return log1p(2 * SKETCH_ALPHA / (1 - SKETCH_ALPHA)); }

static int32_t bucket_of_log(double v) { return (int32_t)ceil(log(v) / log_gamma()); }

/* The buckets of the integers below SKETCH_TABLE (durations in microseconds, mostly), made
 * once by the same formula, so the same buckets: a load instead of a log and a division
 * (a third of `culprit diagnose`'s thread that stores the records, at 3.7 M durations). */
#define SKETCH_TABLE 65536
static int32_t bucket_table[SKETCH_TABLE];
static pthread_once_t bucket_once = PTHREAD_ONCE_INIT;

static void bucket_table_init(void)
{
	for (int i = 1; i < SKETCH_TABLE; i++)
		bucket_table[i] = bucket_of_log(i);
}

static int32_t bucket_of(double v)
{
	if (v >= 1 && v < SKETCH_TABLE && v == (double)(int32_t)v) {
		pthread_once(&bucket_once, bucket_table_init);
		return bucket_table[(int32_t)v];
	}
	return bucket_of_log(v);
}

/* representative value of bucket i: 2 gamma^i / (gamma + 1), within alpha of any member */
static double bucket_value(int32_t i)
{
	double g = 1 + 2 * SKETCH_ALPHA / (1 - SKETCH_ALPHA);
	return 2 * exp(i * log_gamma()) / (g + 1);
}

void sketch_init(struct sketch *s)
{
	memset(s, 0, sizeof(*s));
	s->min = INFINITY;
	s->max = -INFINITY;
}

void sketch_free(struct sketch *s)
{
	if (!s->lent)
		free(s->bins);
	sketch_init(s);
}

void sketch_reset(struct sketch *s)
{
	uint32_t *bins = s->bins, cap = s->cap, lent = s->lent;
	sketch_init(s);
	s->bins = bins;
	s->cap = cap;
	s->lent = lent;
}

void sketch_lend(struct sketch *s, uint32_t *bins, uint32_t cap)
{
	sketch_free(s);
	s->bins = bins;
	s->cap = cap;
	s->lent = 1;
}

/* the bucket array of s becomes b (of its own), the old one freed unless lent */
static void adopt(struct sketch *s, uint32_t *b)
{
	if (!s->lent)
		free(s->bins);
	s->bins = b;
	s->lent = 0;
}

void sketch_move(struct sketch *s, uint32_t *bins, uint32_t cap)
{
	if (s->n)
		memcpy(bins, s->bins, s->n * sizeof(*bins));
	adopt(s, bins);
	s->cap = cap;
	s->lent = 1;
}

/* make bucket range [lo, hi] representable; collapses the lowest buckets past MAX_BINS */
static int ensure(struct sketch *s, int32_t lo, int32_t hi)
{
	if (s->n == 0) {
		if (hi - lo + 1 > SKETCH_MAX_BINS)
			lo = hi - SKETCH_MAX_BINS + 1;
		uint32_t need = (uint32_t)(hi - lo + 1);
		if (need > s->cap) {
			uint32_t cap = need < 16 ? 16 : need;
			uint32_t *b = s->lent ? malloc(cap * sizeof(*b)) : realloc(s->bins, cap * sizeof(*b));
			if (!b)
				return -1;
			s->bins = b;
			s->cap = cap;
			s->lent = 0;
		}
		memset(s->bins, 0, need * sizeof(*s->bins));
		s->lo = lo;
		s->n = need;
		return 0;
	}
	int32_t cur_hi = s->lo + (int32_t)s->n - 1;
	int32_t nlo = lo < s->lo ? lo : s->lo;
	int32_t nhi = hi > cur_hi ? hi : cur_hi;
	if (nhi - nlo + 1 > SKETCH_MAX_BINS)
		nlo = nhi - SKETCH_MAX_BINS + 1;
	if (nlo == s->lo && nhi == cur_hi)
		return 0;
	uint32_t need = (uint32_t)(nhi - nlo + 1);
	uint32_t *b = s->bins;
	if (need > s->cap) {
		uint32_t cap = need * 2 > SKETCH_MAX_BINS ? SKETCH_MAX_BINS : need * 2;
		if (cap < need)
			cap = need;
		b = malloc(cap * sizeof(*b));
		if (!b)
			return -1;
		s->cap = cap;
	} else if (nlo == s->lo) {
		memset(b + s->n, 0, (need - s->n) * sizeof(*b));
		s->n = need;
		return 0;
	} else if (nlo < s->lo) {
		/* a lower bucket that fits: shift in place (no array of its own for a lent one) */
		uint32_t d = (uint32_t)(s->lo - nlo);
		memmove(b + d, b, s->n * sizeof(*b));
		memset(b, 0, d * sizeof(*b));
		memset(b + d + s->n, 0, (need - d - s->n) * sizeof(*b));
		s->lo = nlo;
		s->n = need;
		return 0;
	} else {
		b = malloc(s->cap * sizeof(*b));
		if (!b)
			return -1;
	}
	memset(b, 0, need * sizeof(*b));
	for (uint32_t k = 0; k < s->n; k++) {
		int32_t idx = s->lo + (int32_t)k;
		int32_t dst = idx < nlo ? 0 : idx - nlo; /* collapse below the new low end */
		uint64_t v = (uint64_t)b[dst] + s->bins[k];
		b[dst] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	}
	adopt(s, b);
	s->lo = nlo;
	s->n = need;
	return 0;
}

static void bump(struct sketch *s, int32_t idx, uint64_t w)
{
	int32_t k = idx < s->lo ? 0 : idx - s->lo;
	uint64_t v = (uint64_t)s->bins[k] + w;
	s->bins[k] = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

int sketch_add(struct sketch *s, double v, uint64_t weight)
{
	if (!weight || isnan(v))
		return 0;
	if (v < SKETCH_MIN_VALUE) {
		s->zeros += weight;
	} else {
		int32_t idx = bucket_of(v);
		if (ensure(s, idx, idx) < 0)
			return -1;
		bump(s, idx, weight);
	}
	s->count += weight;
	s->sum += v * (double)weight;
	if (v < s->min)
		s->min = v;
	if (v > s->max)
		s->max = v;
	return 0;
}

int sketch_add_ints(struct sketch *s, const int64_t *v, size_t n)
{
	int32_t idx[64];
	pthread_once(&bucket_once, bucket_table_init);
	while (n) {
		size_t m = n < 64 ? n : 64;
		int32_t lo = INT32_MAX, hi = INT32_MIN;
		double sum = s->sum, min = s->min, max = s->max; /* in registers: the same order of adding */
		for (size_t i = 0; i < m; i++) {
			double x = (double)v[i];
			idx[i] = INT32_MIN; /* under SKETCH_MIN_VALUE (1): a zero */
			if (v[i] >= 1) {
				idx[i] = v[i] < SKETCH_TABLE ? bucket_table[v[i]] : bucket_of_log(x);
				lo = idx[i] < lo ? idx[i] : lo;
				hi = idx[i] > hi ? idx[i] : hi;
			}
			sum += x;
			if (x < min)
				min = x;
			if (x > max)
				max = x;
		}
		s->sum = sum;
		s->min = min;
		s->max = max;
		if (hi != INT32_MIN && ensure(s, lo, hi) < 0)
			return -1;
		for (size_t i = 0; i < m; i++) {
			if (idx[i] == INT32_MIN)
				s->zeros++;
			else
				bump(s, idx[i], 1);
		}
		s->count += m;
		v += m;
		n -= m;
	}
	return 0;
}

int sketch_merge(struct sketch *dst, const struct sketch *src)
{
	if (src->count == 0)
		return 0;
	if (src->n) {
		if (ensure(dst, src->lo, src->lo + (int32_t)src->n - 1) < 0)
			return -1;
		for (uint32_t k = 0; k < src->n; k++)
			if (src->bins[k])
				bump(dst, src->lo + (int32_t)k, src->bins[k]);
	}
	dst->zeros += src->zeros;
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
	return 0;
}

double sketch_quantile(const struct sketch *s, double q)
{
	if (s->count == 0)
		return NAN;
	if (q <= 0)
		return s->min;
	if (q >= 1)
		return s->max;
	/* rank of the q-quantile, 0-based, lower */
	double rank = q * (double)(s->count - 1);
	if (rank < (double)s->zeros)
		return s->min < SKETCH_MIN_VALUE ? s->min : 0;
	double acc = (double)s->zeros;
	for (uint32_t k = 0; k < s->n; k++) {
		acc += s->bins[k];
		if (acc > rank) {
			double v = bucket_value(s->lo + (int32_t)k);
			if (v < s->min)
				v = s->min;
			if (v > s->max)
				v = s->max;
			return v;
		}
	}
	return s->max;
}

double sketch_cdf(const struct sketch *s, double v)
{
	if (s->count == 0)
		return NAN;
	if (v < SKETCH_MIN_VALUE)
		return v >= 0 ? (double)s->zeros / (double)s->count : 0;
	int32_t idx = bucket_of(v);
	uint64_t acc = s->zeros;
	for (uint32_t k = 0; k < s->n && s->lo + (int32_t)k <= idx; k++)
		acc += s->bins[k];
	return (double)acc / (double)s->count;
}

double sketch_ks(const struct sketch *a, const struct sketch *b)
{
	if (a->count == 0 || b->count == 0)
		return NAN;
	double na = (double)a->count, nb = (double)b->count;
	double fa = (double)a->zeros / na, fb = (double)b->zeros / nb;
	double d = fabs(fa - fb);
	int32_t lo = a->n ? a->lo : b->lo, hi = lo - 1;
	if (a->n && b->n && b->lo < lo)
		lo = b->lo;
	if (a->n)
		hi = a->lo + (int32_t)a->n - 1;
	if (b->n && b->lo + (int32_t)b->n - 1 > hi)
		hi = b->lo + (int32_t)b->n - 1;
	for (int32_t i = lo; i <= hi; i++) {
		if (a->n && i >= a->lo && i < a->lo + (int32_t)a->n)
			fa += a->bins[i - a->lo] / na;
		if (b->n && i >= b->lo && i < b->lo + (int32_t)b->n)
			fb += b->bins[i - b->lo] / nb;
		double x = fabs(fa - fb);
		if (x > d)
			d = x;
	}
	return d;
}

/* --- bytes --- */

static size_t put_varint(uint8_t *buf, size_t cap, size_t pos, uint64_t v)
{
	do {
		uint8_t byte = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			byte |= 0x80;
		if (pos < cap)
			buf[pos] = byte;
		pos++;
	} while (v);
	return pos;
}

size_t sketch_serialize(const struct sketch *s, uint8_t *buf, size_t cap)
{
	size_t pos = 0;
	if (pos < cap)
		buf[pos] = 0xD5;
	pos++;
	if (pos < cap)
		buf[pos] = 2;
	pos++;
	pos = put_varint(buf, cap, pos, s->zeros);
	/* non-empty buckets only: their number, then per bucket the index delta from the
	 * previous one (from the lowest index for the first), see sketch.h */
	uint64_t m = 0;
	for (uint32_t k = 0; k < s->n; k++)
		m += s->bins[k] != 0;
	int64_t lo = 0;
	uint32_t k0 = 0;
	while (k0 < s->n && !s->bins[k0])
		k0++;
	if (m)
		lo = s->lo + (int64_t)k0;
	pos = put_varint(buf, cap, pos, (uint64_t)((lo << 1) ^ (lo >> 63)));
	pos = put_varint(buf, cap, pos, m);
	int64_t prev = lo;
	for (uint32_t k = k0; k < s->n; k++) {
		if (!s->bins[k])
			continue;
		int64_t idx = s->lo + (int64_t)k;
		/* most buckets hold one value: one byte for a small delta and a count of 1 */
		pos = put_varint(buf, cap, pos, (uint64_t)(idx - prev) << 1 | (s->bins[k] > 1));
		if (s->bins[k] > 1)
			pos = put_varint(buf, cap, pos, s->bins[k] - 2);
		prev = idx;
	}
	return pos;
}

static int get_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *out)
{
	uint64_t v = 0;
	for (int shift = 0; shift < 64; shift += 7) {
		if (*pos >= len)
			return -1;
		uint8_t b = buf[(*pos)++];
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -1;
}

int sketch_deserialize(struct sketch *s, const uint8_t *buf, size_t len)
{
	size_t pos = 2;
	uint64_t zeros, zlo, n;
	if (len < 2 || buf[0] != 0xD5 || buf[1] != 2)
		return -1;
	if (get_varint(buf, len, &pos, &zeros) || get_varint(buf, len, &pos, &zlo) || get_varint(buf, len, &pos, &n))
		return -1;
	if (n > SKETCH_MAX_BINS || n > len - pos || zeros > UINT32_MAX)
		return -1;
	int64_t lo = (int64_t)(zlo >> 1) ^ -(int64_t)(zlo & 1);
	if (lo < INT32_MIN / 2 || lo > INT32_MAX / 2)
		return -1;
	sketch_reset(s);
	uint64_t count = zeros;
	double sum = 0;
	int64_t idx = lo;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t d, c = 1;
		if (get_varint(buf, len, &pos, &d) || ((d & 1) && get_varint(buf, len, &pos, &c)))
			return -1;
		if (d & 1)
			c += 2;
		d >>= 1;
		if (c > UINT32_MAX || (k > 0 && d == 0) || d > SKETCH_MAX_BINS)
			return -1;
		idx += (int64_t)d;
		if (idx - lo >= SKETCH_MAX_BINS)
			return -1;
		if (ensure(s, (int32_t)idx, (int32_t)idx) < 0)
			return -1;
		bump(s, (int32_t)idx, c);
		count += c;
		sum += (double)c * bucket_value((int32_t)idx);
	}
	if (pos != len)
		return -1;
	/* min, max and sum are not on the wire: estimates from the buckets, which a caller
	 * holding the exact summary fields overwrites */
	s->count = count;
	s->zeros = zeros;
	s->sum = sum;
	s->min = zeros ? 0 : (n ? bucket_value(lo) : INFINITY);
	s->max = n ? bucket_value((int32_t)idx) : (zeros ? 0 : -INFINITY);
	return 0;
}

void sketch_set_summary(struct sketch *s, double min, double max, double sum)
{
	if (!s->count || !(min <= max))
		return;
	s->min = min;
	s->max = max;
	s->sum = sum;
}
