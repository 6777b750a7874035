/* test_stats.c: median, MAD, CV and robust z against GSL on random data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <gsl/gsl_randist.h>
#include <gsl/gsl_rng.h>
#include <gsl/gsl_sort.h>
#include <gsl/gsl_statistics_double.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stats.h"

static void assert_close(double a, double b, double tol)
{
	if (isnan(a) || isnan(b)) {
		assert_true(isnan(a) && isnan(b));
		return;
	}
	if (fabs(a - b) > tol * (1 + fabs(b)))
		fail_msg("%.17g != %.17g (tol %g)", a, b, tol);
}

static void against_gsl(void **state)
{
	(void)state;
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 42);
	size_t sizes[] = {1, 2, 3, 4, 5, 8, 31, 32, 100, 1440, 4097};
	for (size_t si = 0; si < sizeof(sizes) / sizeof(*sizes); si++) {
		for (int rep = 0; rep < 20; rep++) {
			size_t n = sizes[si];
			double *x = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
			double *s = malloc(n * sizeof(double)), *w = malloc(n * sizeof(double));
			for (size_t i = 0; i < n; i++)
				x[i] = rep % 2 ? gsl_ran_lognormal(rng, 3, 0.5) : 100 + gsl_ran_gaussian(rng, 5);
			if (rep % 5 == 4 && n > 8) /* outliers and ties */
				for (size_t i = 0; i < n / 8; i++)
					x[i] = x[n - 1 - i] = 1000;
			memcpy(y, x, n * sizeof(double));
			memcpy(w, x, n * sizeof(double));
			struct stats_group g;
			stats_group(x, n, s, &g);
			double gmed = gsl_stats_median(w, 1, n);
			memcpy(w, x, n * sizeof(double));
			double gmad = gsl_stats_mad0(w, 1, n, s); /* unscaled MAD */
			assert_close(g.median, gmed, 1e-12);
			assert_close(g.mad, gmad, 1e-12);
			assert_close(g.mean, gsl_stats_mean(x, 1, n), 1e-12);
			if (n >= 2) {
				double sd = gsl_stats_sd(x, 1, n);
				assert_close(g.sd, sd, 1e-9);
				assert_close(g.cv, sd / gsl_stats_mean(x, 1, n), 1e-9);
				assert_close(stats_cv(x, n), g.cv, 1e-12);
			} else {
				assert_true(isnan(g.cv));
			}
			/* robust z: (x - median) / (1.4826 MAD) like gsl_stats_mad (scaled) */
			memcpy(w, x, n * sizeof(double));
			double smad = gsl_stats_mad(w, 1, n, s);
			for (size_t i = 0; i < n; i++)
				if (smad > 0)
					assert_close(stats_robust_z(x[i], g.median, g.mad, 0), (x[i] - gmed) / smad,
						     1e-6);
			/* x was not modified by stats_group */
			assert_memory_equal(x, y, n * sizeof(double));
			/* median_inplace agrees for every size */
			assert_close(stats_median_inplace(y, n), gmed, 1e-12);
			free(x);
			free(y);
			free(s);
			free(w);
		}
	}
	gsl_rng_free(rng);
}

static void edge_cases(void **state)
{
	(void)state;
	double x[4] = {5, 5, 5, 5};
	assert_true(isnan(stats_median_inplace(x, 0)));
	assert_close(stats_median_inplace(x, 4), 5, 0);
	assert_close(stats_mad_inplace(x, 4, 5), 0, 0);
	/* MAD 0: the floor decides, and no floor gives 0 instead of infinity */
	assert_close(stats_robust_z(6, 5, 0, 0), 0, 0);
	assert_close(stats_robust_z(6, 5, 0, 0.5), 1 / (STATS_MAD_SCALE * 0.5), 1e-12);
	/* eight outliers in 1440 do not hide in the MAD */
	double *g = malloc(1440 * sizeof(double)), *s = malloc(1440 * sizeof(double));
	for (int i = 0; i < 1440; i++)
		g[i] = 40 + (i % 7) * 0.5;
	for (int i = 272; i < 280; i++)
		g[i] = 228;
	struct stats_group st;
	stats_group(g, 1440, s, &st);
	assert_true(stats_robust_z(228, st.median, st.mad, 0) > 50);
	assert_true((228 - st.mean) / st.sd < 15); /* the classic z is much weaker */
	free(g);
	free(s);
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* the median against a sort, and the order callers rely on (the lower half first), on
 * arrays large enough for the sampled pivot, in shapes a sample could be fooled by */
static void median_shapes(void **state)
{
	(void)state;
	gsl_rng *rng = gsl_rng_alloc(gsl_rng_mt19937);
	gsl_rng_set(rng, 7);
	size_t sizes[] = {1025, 1026, 5000, 100001};
	for (size_t si = 0; si < sizeof(sizes) / sizeof(*sizes); si++) {
		size_t n = sizes[si];
		double *x = malloc(n * sizeof(double)), *y = malloc(n * sizeof(double));
		for (int shape = 0; shape < 8; shape++) {
			for (size_t i = 0; i < n; i++) {
				switch (shape) {
				case 0: x[i] = gsl_rng_uniform(rng); break;                     /* random */
				case 1: x[i] = (double)i; break;                                /* sorted */
				case 2: x[i] = (double)(n - i); break;                          /* reversed */
				case 3: x[i] = (double)(i < n / 2 ? i : n - i); break;          /* organ pipe */
				case 4: x[i] = 7; break;                                        /* all equal */
				case 5: x[i] = (double)(gsl_rng_uniform_int(rng, 3)); break;    /* three values */
				case 6: x[i] = (double)(i % 97); break;                         /* sawtooth */
				default: x[i] = i % 2 ? 1e9 : gsl_ran_gaussian(rng, 1); break; /* half outliers */
				}
			}
			memcpy(y, x, n * sizeof(double));
			qsort(y, n, sizeof(double), cmp_d);
			double want = n % 2 ? y[n / 2] : (y[n / 2 - 1] + y[n / 2]) / 2;
			double med = stats_median_inplace(x, n);
			if (med != want)
				fail_msg("n %zu shape %d: median %.17g, sorted %.17g", n, shape, med, want);
			for (size_t i = 0; i < n / 2; i++)
				if (x[i] > y[n / 2])
					fail_msg("n %zu shape %d: x[%zu] above the middle", n, shape, i);
			for (size_t i = n / 2; i < n; i++)
				if (x[i] < y[n / 2])
					fail_msg("n %zu shape %d: x[%zu] below the middle", n, shape, i);
			/* the same multiset */
			qsort(x, n, sizeof(double), cmp_d);
			assert_memory_equal(x, y, n * sizeof(double));
		}
		free(x);
		free(y);
	}
	gsl_rng_free(rng);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(against_gsl),
		cmocka_unit_test(edge_cases),
		cmocka_unit_test(median_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
