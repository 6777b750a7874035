/* test_sketch.c: quantiles within the stated 1% relative error, exact and associative
 * merge, bytes round trip and rejection of malformed bytes, KS statistic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sketch.h"

static void fill(struct sketch *s, double *x, size_t n, gsl_rng *rng, double mu, double sigma)
{
	for (size_t i = 0; i < n; i++) {
		x[i] = 1 + gsl_ran_lognormal(rng, mu, sigma);
		assert_int_equal(sketch_add(s, x[i], 1), 0);
	}
}

static void quantiles_within_error(void **state)
{
	(void)state;
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 7);
	const double qs[] = {0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999};
	for (int rep = 0; rep < 10; rep++) {
		size_t n = 1000 + 3000 * (size_t)rep;
		double *x = malloc(n * sizeof(double));
		struct sketch s;
		sketch_init(&s);
		fill(&s, x, n, rng, 5 + rep, 0.3 + 0.3 * rep);
		gsl_sort(x, 1, n);
		assert_int_equal(s.count, n);
		for (size_t i = 0; i < sizeof(qs) / sizeof(*qs); i++) {
			double est = sketch_quantile(&s, qs[i]);
			/* the estimate is within 1% of the value of rank floor(q (n - 1)) */
			double exact = x[(size_t)(qs[i] * (double)(n - 1))];
			if (fabs(est - exact) > SKETCH_ALPHA * exact * (1 + 1e-9))
				fail_msg("q %.3f: %.6g vs exact %.6g", qs[i], est, exact);
		}
		assert_true(sketch_quantile(&s, 0) == x[0]);
		assert_true(sketch_quantile(&s, 1) == x[n - 1]);
		sketch_free(&s);
		free(x);
	}
	gsl_rng_free(rng);
}

static size_t bytes_of(const struct sketch *s, uint8_t *buf, size_t cap)
{
	size_t n = sketch_serialize(s, buf, cap);
	assert_true(n <= cap);
	return n;
}

static void merge_associative(void **state)
{
	(void)state;
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 11);
	double x[3000];
	struct sketch a, b, c, ab, ab_c, bc, a_bc, all;
	sketch_init(&a);
	sketch_init(&b);
	sketch_init(&c);
	sketch_init(&all);
	fill(&a, x, 1000, rng, 3, 0.2);
	for (int i = 0; i < 1000; i++)
		sketch_add(&all, x[i], 1);
	fill(&b, x, 1000, rng, 7, 1.0);
	for (int i = 0; i < 1000; i++)
		sketch_add(&all, x[i], 1);
	fill(&c, x, 1000, rng, 10, 0.5);
	for (int i = 0; i < 1000; i++)
		sketch_add(&all, x[i], 1);
	sketch_init(&ab);
	sketch_merge(&ab, &a);
	sketch_merge(&ab, &b);
	sketch_init(&ab_c);
	sketch_merge(&ab_c, &ab);
	sketch_merge(&ab_c, &c);
	sketch_init(&bc);
	sketch_merge(&bc, &b);
	sketch_merge(&bc, &c);
	sketch_init(&a_bc);
	sketch_merge(&a_bc, &a);
	sketch_merge(&a_bc, &bc);
	static uint8_t b1[65536], b2[65536], b3[65536];
	size_t n1 = bytes_of(&ab_c, b1, sizeof(b1)), n2 = bytes_of(&a_bc, b2, sizeof(b2));
	size_t n3 = bytes_of(&all, b3, sizeof(b3));
	/* identical buckets and counts; the f64 sum may differ in the last bits, compare the
	 * parts without it: the quantiles */
	assert_int_equal(ab_c.count, 3000);
	assert_int_equal(ab_c.lo, a_bc.lo);
	assert_int_equal(ab_c.n, a_bc.n);
	assert_memory_equal(ab_c.bins, a_bc.bins, ab_c.n * sizeof(uint32_t));
	assert_int_equal(all.lo, a_bc.lo);
	assert_int_equal(all.n, a_bc.n);
	assert_memory_equal(all.bins, a_bc.bins, all.n * sizeof(uint32_t));
	assert_int_equal(n1, n2);
	assert_int_equal(n1, n3);
	for (double q = 0.05; q < 1; q += 0.05)
		assert_true(sketch_quantile(&ab_c, q) == sketch_quantile(&a_bc, q));
	sketch_free(&a);
	sketch_free(&b);
	sketch_free(&c);
	sketch_free(&ab);
	sketch_free(&ab_c);
	sketch_free(&bc);
	sketch_free(&a_bc);
	sketch_free(&all);
	gsl_rng_free(rng);
}

static void bytes_round_trip(void **state)
{
	(void)state;
	struct sketch s, t;
	sketch_init(&s);
	sketch_init(&t);
	double vals[] = {0.2, 2510, 2490, 2500, 2600, 14000, 6e6};
	for (size_t i = 0; i < sizeof(vals) / sizeof(*vals); i++)
		sketch_add(&s, vals[i], i + 1);
	uint8_t buf[4096];
	size_t n = sketch_serialize(&s, buf, sizeof(buf));
	assert_true(n < 200); /* compact: varints */
	assert_int_equal(sketch_serialize(&s, NULL, 0), n);
	assert_int_equal(sketch_deserialize(&t, buf, n), 0);
	assert_int_equal(t.count, s.count);
	assert_int_equal(t.zeros, 1);
	/* min, max and sum are not on the wire: estimated within the sketch's accuracy until
	 * the record's exact summary is put back */
	assert_true(t.min == 0 && fabs(t.max - s.max) <= 0.01 * s.max && fabs(t.sum - s.sum) <= 0.01 * s.sum);
	sketch_set_summary(&t, s.min, s.max, s.sum);
	assert_true(t.min == s.min && t.max == s.max && t.sum == s.sum);
	for (double q = 0; q <= 1; q += 0.1)
		assert_true(sketch_quantile(&t, q) == sketch_quantile(&s, q));
	/* every truncation and a corrupted magic are rejected */
	for (size_t k = 0; k < n; k++)
		assert_int_equal(sketch_deserialize(&t, buf, k), -1);
	buf[0] ^= 1;
	assert_int_equal(sketch_deserialize(&t, buf, n), -1);
	buf[0] ^= 1;
	buf[1] = 1; /* the old version, which carried count, min, max and sum */
	assert_int_equal(sketch_deserialize(&t, buf, n), -1);
	buf[1] = 2;
	assert_int_equal(sketch_deserialize(&t, buf, n), 0);
	uint8_t twice[] = {0xD5, 2, 0, 20, 2, 0, 0}; /* the same bucket twice */
	assert_int_equal(sketch_deserialize(&t, twice, sizeof(twice)), -1);
	uint8_t one[] = {0xD5, 2, 0, 20, 1, 1, 3}; /* one bucket of 5 values at index 10 */
	assert_int_equal(sketch_deserialize(&t, one, sizeof(one)), 0);
	assert_int_equal(t.count, 5);
	assert_int_equal(t.lo, 10);
	sketch_free(&s);
	sketch_free(&t);
}

static void ks_statistic(void **state)
{
	(void)state;
	struct sketch a, b, c;
	sketch_init(&a);
	sketch_init(&b);
	sketch_init(&c);
	for (int i = 0; i < 1000; i++) {
		sketch_add(&a, 100 + i % 10, 1);
		sketch_add(&b, 100 + i % 10, 1);
		sketch_add(&c, 570 + i % 50, 1);
	}
	assert_true(sketch_ks(&a, &b) < 1e-12);
	assert_true(fabs(sketch_ks(&a, &c) - 1) < 1e-12);
	/* one huge value in eight: the median holds, KS stays small */
	struct sketch d;
	sketch_init(&d);
	for (int i = 0; i < 1000; i++)
		sketch_add(&d, i % 8 ? 100 + i % 10 : 6e6, 1);
	assert_true(sketch_ks(&a, &d) < 0.2);
	assert_true(sketch_quantile(&d, 0.5) < 115);
	assert_true(sketch_cdf(&a, 1e9) == 1);
	sketch_free(&a);
	sketch_free(&b);
	sketch_free(&c);
	sketch_free(&d);
}

static void wide_range_collapses(void **state)
{
	(void)state;
	struct sketch s;
	sketch_init(&s);
	for (double v = 1; v < 1e18; v *= 1.5)
		assert_int_equal(sketch_add(&s, v, 1), 0);
	assert_true(s.n <= SKETCH_MAX_BINS);
	/* high quantiles keep their accuracy */
	double top = sketch_quantile(&s, 0.99);
	assert_true(top > 1e16);
	sketch_free(&s);
}

/* The bucket of a value is ceil(log v / log gamma), gamma = (1 + a) / (1 - a): for every
 * integer under 65,536 (read from a table made once) and for values past it or between
 * integers (the formula itself). */
static void buckets_by_the_formula(void **state)
{
	(void)state;
	double lg = log1p(2 * SKETCH_ALPHA / (1 - SKETCH_ALPHA));
	struct sketch s;
	sketch_init(&s);
	for (double v = 1; v < 70000; v += v < 65536 ? 1 : 0.37) {
		sketch_reset(&s);
		assert_int_equal(sketch_add(&s, v, 1), 0);
		int32_t want = (int32_t)ceil(log(v) / lg);
		if (s.lo != want)
			fail_msg("%.2f: bucket %d, want %d", v, s.lo, want);
	}
	sketch_free(&s);
}

static void same_buckets(const struct sketch *a, const struct sketch *b)
{
	assert_int_equal(a->lo, b->lo);
	assert_int_equal(a->n, b->n);
	assert_int_equal(a->count, b->count);
	assert_memory_equal(a->bins, b->bins, a->n * sizeof(uint32_t));
}

/* Lent buckets (a store's arena): the same buckets as a sketch of its own at every step, the
 * lent array used in place while it fits (a lower bucket shifts within it), left alone (never
 * freed: it is on the stack here) once the sketch moves to an array of its own. */
static void lent_buckets(void **state)
{
	(void)state;
	uint32_t mem[2 + 16 + 2];
	for (size_t i = 0; i < sizeof(mem) / sizeof(*mem); i++)
		mem[i] = 0xdeadbeef;
	struct sketch own, lent;
	sketch_init(&own);
	sketch_init(&lent);
	sketch_lend(&lent, mem + 2, 16);
	const double v[] = {1000, 1010, 990, 950, 1050, 900, 1100}; /* down, up, down: 11 buckets */
	for (size_t i = 0; i < sizeof(v) / sizeof(*v); i++) {
		assert_int_equal(sketch_add(&own, v[i], 3), 0);
		assert_int_equal(sketch_add(&lent, v[i], 3), 0);
		same_buckets(&own, &lent);
		assert_ptr_equal(lent.bins, mem + 2);
	}
	assert_int_equal(mem[0], 0xdeadbeef);
	assert_int_equal(mem[1], 0xdeadbeef);
	assert_int_equal(mem[18], 0xdeadbeef);
	assert_int_equal(mem[19], 0xdeadbeef);
	/* reset keeps the lent array; a sketch that outgrows it takes one of its own */
	sketch_reset(&lent);
	assert_ptr_equal(lent.bins, mem + 2);
	sketch_reset(&own);
	for (double x = 500; x < 2000; x *= 1.01) {
		assert_int_equal(sketch_add(&own, x, 1), 0);
		assert_int_equal(sketch_add(&lent, x, 1), 0);
		same_buckets(&own, &lent);
	}
	assert_true(lent.bins != mem + 2 && !lent.lent);
	assert_int_equal(mem[19], 0xdeadbeef);
	sketch_free(&lent);
	/* a range past SKETCH_MAX_BINS collapses a lent array's lowest buckets the same way */
	uint32_t *big = malloc(SKETCH_MAX_BINS * sizeof(*big));
	assert_non_null(big);
	sketch_free(&own);
	sketch_lend(&lent, big, SKETCH_MAX_BINS);
	for (double x = 2; x < 1e15; x *= 1.02) {
		assert_int_equal(sketch_add(&own, x, 1), 0);
		assert_int_equal(sketch_add(&lent, x, 1), 0);
	}
	assert_int_equal(sketch_add(&own, 1e19, 1), 0);
	assert_int_equal(sketch_add(&lent, 1e19, 1), 0);
	same_buckets(&own, &lent);
	assert_int_equal(lent.n, SKETCH_MAX_BINS);
	sketch_free(&lent);
	sketch_free(&own);
	free(big);
}

/* sketch_add_ints is sketch_add of each value in turn: the same buckets, zeros, sum, minimum and
 * maximum, in batches across the 64 it takes at a time, below 1 us, past the integer table
 * and across a range that collapses the lowest buckets, into a sketch with values already
 * and into a lent array. */
static void add_ints_as_one_by_one(void **state)
{
	(void)state;
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 11);
	int64_t v[300];
	uint32_t mem[16];
	for (int round = 0; round < 400; round++) {
		struct sketch one, many;
		sketch_init(&one);
		sketch_init(&many);
		if (round % 2)
			sketch_lend(&many, mem, 16);
		double top = round % 5 == 0 ? 1e18 : round % 5 == 1 ? 100 : 1e6;
		for (int batch = 0; batch < 3; batch++) {
			size_t n = gsl_rng_uniform_int(rng, 300);
			for (size_t i = 0; i < n; i++) {
				double u = gsl_rng_uniform(rng);
				v[i] = u < 0.05 ? -(int64_t)gsl_rng_uniform_int(rng, 5) : (int64_t)pow(top, u);
				assert_int_equal(sketch_add(&one, (double)v[i], 1), 0);
			}
			assert_int_equal(sketch_add_ints(&many, v, n), 0);
			same_buckets(&one, &many);
			assert_int_equal(one.zeros, many.zeros);
			assert_true(one.sum == many.sum);
			assert_true(one.min == many.min && one.max == many.max);
		}
		sketch_free(&one);
		sketch_free(&many);
	}
	gsl_rng_free(rng);
}

/* A sketch that outgrew its lent buckets, moved onto new lent ones (a store's slabs): the
 * same buckets as a sketch of its own before and after more values, its own array freed
 * (ASan's leak check) and the new array used in place. */
static void move_keeps_buckets(void **state)
{
	(void)state;
	uint32_t first[16], second[4096];
	struct sketch own, lent;
	sketch_init(&own);
	sketch_init(&lent);
	sketch_lend(&lent, first, 16);
	for (double x = 100; x < 1000; x *= 1.03) {
		assert_int_equal(sketch_add(&own, x, 1), 0);
		assert_int_equal(sketch_add(&lent, x, 1), 0);
	}
	assert_false(lent.lent); /* outgrown: an array of its own */
	sketch_move(&lent, second, lent.cap);
	assert_true(lent.lent && lent.bins == second);
	same_buckets(&own, &lent);
	for (double x = 90; x < 2000; x *= 1.01) {
		assert_int_equal(sketch_add(&own, x, 2), 0);
		assert_int_equal(sketch_add(&lent, x, 2), 0);
		same_buckets(&own, &lent);
	}
	sketch_free(&lent);
	sketch_free(&own);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(quantiles_within_error), cmocka_unit_test(merge_associative),
		cmocka_unit_test(bytes_round_trip),       cmocka_unit_test(ks_statistic),
		cmocka_unit_test(wide_range_collapses),   cmocka_unit_test(lent_buckets),
		cmocka_unit_test(buckets_by_the_formula), cmocka_unit_test(add_ints_as_one_by_one),
		cmocka_unit_test(move_keeps_buckets),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
