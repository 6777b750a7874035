/* test_l2.c: per-rank robust values (a spike or missing iterations do not move them), robust
 * z, ratio and flags within a role group, plain medians for short windows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2.h"

/* 16 ranks, 48 iterations of "mlp" and "dp_reduce_scatter"; with slow, rank 5's mlp runs
 * 3x from iteration 16 and rank 6 arrives late at the reduce-scatter */
static struct store *make_topo(int slow, uint32_t tp, uint32_t pp, const char *order)
{
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 16, tp, 1, pp, 16 / tp / pp, 1, order, 8, err, sizeof(err)), 0);
	struct store *s = store_create(&t, NULL);
	assert_non_null(s);
	uint32_t a = (uint32_t)store_intern_name(s, "mlp");
	uint32_t b = (uint32_t)store_intern_name(s, "dp_reduce_scatter");
	for (uint32_t it = 0; it < 48; it++)
		for (uint32_t r = 0; r < 16; r++) {
			int64_t v = 100000 + 1000 * (int64_t)((r * 7 + it * 3) % 5); /* 100-104 ms */
			if (r == 3 && it == 40)
				v = 10000000; /* one 10 s spike in the window */
			if (r == 4 && it >= 16 && it % 3 == 0)
				continue; /* missing iterations */
			if (slow && r == 5 && it >= 16)
				v *= 3;
			struct record_phase p = {r, it, a, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, RECORD_NO_START, v};
			struct record_phase q = {r,
						 it,
						 b,
						 RECORD_KIND_COMM,
						 RECORD_GROUP_DP,
						 RECORD_NO_START,
						 slow && r == 6 && it >= 16 ? 20000 : 50000};
			struct record_iter ri = {r, it, 0, 1000000};
			assert_int_equal(store_add_iter(s, &ri), 0);
			assert_int_equal(store_add_phase(s, &p), 0);
			assert_int_equal(store_add_phase(s, &q), 0);
		}
	return s;
}

static struct store *make_with(int slow) { return make_topo(slow, 1, 1, NULL); }

static struct store *make(void) { return make_with(1); }

static void robust_values_and_flags(void **state)
{
	(void)state;
	struct store *s = make();
	struct l2 l = {0};
	assert_int_equal(l2_run(&l, s, 16, 47, 0, 15, NULL), 0);
	assert_int_equal(l.nphase, 2);
	for (uint32_t r = 0; r < 16; r++) {
		double v = l.val[r * 2 + 0];
		if (r == 5) {
			assert_true(v > 300 && v < 313);
			assert_true(l.flag[r * 2] & L2_HIGH);
			assert_true(l.flag[r * 2] & L2_SELF_HIGH);
			assert_true(l.z[r * 2] > 6);
			assert_true(fabs(l.ratio[r * 2] - 3) < 0.2);
		} else {
			/* the spike of rank 3 and the gaps of rank 4 change nothing */
			assert_true(v >= 100 && v <= 104);
			assert_false(l.flag[r * 2] & (L2_HIGH | L2_LOW | L2_SELF_HIGH));
		}
		assert_true(fabs(l.base[r * 2] - 102) <= 2.01);
	}
	/* rank 6 arrives late: its dp_reduce_scatter is short */
	assert_true(l.flag[6 * 2 + 1] & L2_LOW);
	assert_true(l.z[6 * 2 + 1] < -6);
	assert_false(l.flag[7 * 2 + 1] & L2_LOW);
	assert_true(l.group_cv[1] > 0);
	assert_true(fabs(l.group_med[0] - 102) <= 2.01);
	l2_free(&l);

	/* a 5-iteration window: plain medians */
	assert_int_equal(l2_run(&l, s, 43, 47, 1, 0, NULL), 0);
	assert_false(l.has_base);
	assert_true(isnan(l.base[0]));
	assert_true(l.val[5 * 2] > 300);
	assert_true(l.val[3 * 2] <= 104);
	assert_true(l.flag[5 * 2] & L2_HIGH);
	assert_false(l.flag[5 * 2] & L2_SELF_HIGH); /* no baseline */
	l2_free(&l);
	store_destroy(s);
}

/* A struct l2 kept between runs (as culpritd keeps one per job) reuses its memory, and a
 * run leaves nothing of the run before it: the same results as a fresh struct. */
static void kept_memory(void **state)
{
	(void)state;
	struct store *slow = make_with(1), *healthy = make_with(0);
	struct l2 kept = {0}, fresh = {0};
	assert_int_equal(l2_run(&kept, slow, 16, 47, 0, 15, NULL), 0);
	assert_true(kept.flag[5 * 2] & L2_HIGH);
	assert_true(kept.flag[6 * 2 + 1] & L2_LOW);
	void *mem = kept.mem;
	assert_non_null(mem);
	assert_int_equal(l2_run(&kept, healthy, 16, 47, 0, 15, NULL), 0);
	assert_ptr_equal(kept.mem, mem); /* no new allocation */
	assert_int_equal(l2_run(&fresh, healthy, 16, 47, 0, 15, NULL), 0);
	size_t cells = (size_t)kept.world * kept.nphase;
	assert_int_equal(kept.nphase, fresh.nphase);
	for (size_t c = 0; c < cells; c++) {
		assert_int_equal(kept.flag[c], fresh.flag[c]);
		assert_int_equal(kept.flag[c] & (L2_HIGH | L2_LOW | L2_SELF_HIGH), 0);
	}
	assert_memory_equal(kept.val, fresh.val, cells * sizeof(double));
	assert_memory_equal(kept.base, fresh.base, cells * sizeof(double));
	assert_memory_equal(kept.z, fresh.z, cells * sizeof(float));
	assert_memory_equal(kept.ratio, fresh.ratio, cells * sizeof(float));
	assert_memory_equal(kept.group_med, fresh.group_med, kept.ngroups * kept.nphase * sizeof(double));
	/* the short-window path (plain medians) on kept memory */
	assert_int_equal(l2_run(&kept, slow, 43, 47, 1, 0, NULL), 0);
	assert_true(kept.flag[5 * 2] & L2_HIGH);
	/* another rank order of the same grid (as many groups, stages and phases: the same
	 * layout): the ranks are sorted into its role groups, not those of the run before */
	struct store *grid = make_topo(1, 2, 2, "pp-dp-tp"), *other = make_topo(1, 2, 2, NULL);
	assert_int_equal(l2_run(&kept, other, 16, 47, 0, 15, NULL), 0);
	assert_int_equal(l2_run(&kept, grid, 16, 47, 0, 15, NULL), 0);
	struct l2 first = {0}; /* never run: `fresh` has kept the sorted ranks of its run */
	assert_int_equal(l2_run(&first, grid, 16, 47, 0, 15, NULL), 0);
	assert_int_equal(kept.ngroups, first.ngroups);
	assert_memory_equal(kept.role, first.role, kept.world * sizeof(uint32_t));
	assert_memory_equal(kept.group_med, first.group_med, kept.ngroups * kept.nphase * sizeof(double));
	assert_memory_equal(kept.flag, first.flag, cells);
	l2_free(&kept);
	l2_free(&fresh);
	l2_free(&first);
	assert_null(kept.mem);
	store_destroy(slow);
	store_destroy(healthy);
	store_destroy(grid);
	store_destroy(other);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return (x > y) - (x < y);
}

/* The median of 8 block means is exact: over an 8-iteration window (blocks of one
 * iteration) each rank's value is the mean of its 4th and 5th smallest durations, for every
 * 0/1 pattern of 8 (a network of compare-exchanges right on those is right on all inputs)
 * and for 1,792 ranks of 8 distinct durations in a random order; with P phases in rows of
 * max_phases slots (the block sums take four phases to a vector, the rest one at a time; the
 * network runs over the phases in vectors, with a remainder). */
static void check_median8(uint32_t max_phases, uint32_t P)
{
	enum { W = 2048, PMAX = 20 };
	struct topo t;
	char err[64];
	assert_true(P <= PMAX && P <= max_phases);
	assert_int_equal(topo_init(&t, W, 1, 1, 1, W, 1, NULL, 8, err, sizeof(err)), 0);
	struct store_config cfg = {.max_phases = max_phases};
	struct store *s = store_create(&t, &cfg);
	assert_non_null(s);
	uint32_t name[PMAX];
	for (uint32_t p = 0; p < P; p++) {
		char nm[24];
		snprintf(nm, sizeof(nm), "phase_%u", p);
		name[p] = (uint32_t)store_intern_name(s, nm);
	}
	static uint32_t dur[W][PMAX][8];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (uint32_t r = 0; r < W; r++)
		for (uint32_t p = 0; p < P; p++) {
			for (uint32_t it = 0; it < 8; it++)
				dur[r][p][it] =
					r < 256 ? 100000 + 50000 * ((r + p) % 256 >> it & 1) : 100000 + 1000 * it + p;
			for (int i = 7; i > 0 && r >= 256; i--) { /* a random order */
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				int j = (int)(x % (uint64_t)(i + 1));
				uint32_t tmp = dur[r][p][i];
				dur[r][p][i] = dur[r][p][j];
				dur[r][p][j] = tmp;
			}
		}
	for (uint32_t it = 0; it < 8; it++)
		for (uint32_t r = 0; r < W; r++) {
			struct record_iter ri = {r, it, 0, 1000000};
			assert_int_equal(store_add_iter(s, &ri), 0);
			for (uint32_t p = 0; p < P; p++) {
				struct record_phase ph = {
					r, it, name[p], RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, RECORD_NO_START, dur[r][p][it]};
				assert_int_equal(store_add_phase(s, &ph), 0);
			}
		}
	struct l2 l = {0};
	assert_int_equal(l2_run(&l, s, 0, 7, 1, 0, NULL), 0);
	assert_int_equal(l.nphase, P);
	for (uint32_t r = 0; r < W; r++)
		for (uint32_t p = 0; p < P; p++) {
			uint32_t v[8];
			memcpy(v, dur[r][p], sizeof(v));
			qsort(v, 8, sizeof(*v), cmp_u32);
			double want = ((double)v[3] + v[4]) / 2 / 1000.0;
			if (l.val[r * P + p] != want)
				fail_msg("max_phases %u, %u phases: rank %u phase %u: %.17g, want %.17g", max_phases, P,
					 r, p, l.val[r * P + p], want);
		}
	l2_free(&l);
	store_destroy(s);
}

static void median_of_8_exact(void **state)
{
	(void)state;
	check_median8(16, 5); /* a vector and one phase */
	check_median8(16, 16);
	check_median8(6, 5);   /* rows of 6 slots: one vector, then one at a time */
	check_median8(24, 18); /* over 16 phases */
}

/* 2,048 ranks of 8 phases, 24 iterations with values drawn from seed, rank 77 slow from
 * iteration 12, some values missing: in a one-shot store or a live one */
static struct store *make_wide(int one_shot, uint64_t seed)
{
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 2048, 8, 1, 4, 64, 1, NULL, 8, err, sizeof(err)), 0);
	struct store_config cfg = {0};
	cfg.one_shot = one_shot;
	struct store *s = store_create(&t, &cfg);
	assert_non_null(s);
	uint32_t name[8];
	for (int p = 0; p < 8; p++) {
		char n[16];
		snprintf(n, sizeof(n), "phase_%d", p);
		name[p] = (uint32_t)store_intern_name(s, n);
	}
	for (uint32_t it = 0; it < 24; it++)
		for (uint32_t r = 0; r < 2048; r++) {
			struct record_iter ri = {r, it, 0, 1000000};
			assert_int_equal(store_add_iter(s, &ri), 0);
			for (uint32_t p = 0; p < 8; p++) {
				seed ^= seed << 13;
				seed ^= seed >> 7;
				seed ^= seed << 17;
				if (seed % 50 == 0)
					continue;
				int64_t v = 20000 + (int64_t)(seed % 3000);
				if (r == 77 && it >= 12 && p == 2)
					v *= 3;
				struct record_phase ph = {r,
							  it,
							  name[p],
							  p % 2 ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE,
							  p % 2 ? RECORD_GROUP_DP : RECORD_GROUP_NONE,
							  RECORD_NO_START,
							  v};
				assert_int_equal(store_add_phase(s, &ph), 0);
			}
		}
	return s;
}

/* A one-shot store takes the baseline's medians on a second thread (l2.c): the same values,
 * statistics and flags as one thread, for a window and a baseline of 12 iterations (the
 * block sums) and of 4 (the plain medians, each thread with its rows). */
static void one_shot_same_as_live(void **state)
{
	(void)state;
	struct store *one = make_wide(1, 7), *live = make_wide(0, 7);
	for (uint32_t first = 12; first <= 20; first += 8) {
		struct l2 a = {0}, b = {0};
		uint32_t bfirst = first == 12 ? 0 : 8;
		assert_int_equal(l2_run(&a, one, first, 23, bfirst, 11, NULL), 0);
		assert_int_equal(l2_run(&b, live, first, 23, bfirst, 11, NULL), 0);
		size_t cells = (size_t)a.world * a.nphase;
		assert_int_equal(cells, 2048 * 8);
		assert_memory_equal(a.val, b.val, cells * sizeof(double));
		assert_memory_equal(a.base, b.base, cells * sizeof(double));
		assert_memory_equal(a.z, b.z, cells * sizeof(float));
		assert_memory_equal(a.flag, b.flag, cells);
		assert_memory_equal(a.presence, b.presence, a.nphase * sizeof(double));
		assert_true(a.has_base && b.has_base);
		assert_true(a.flag[77 * 8 + 2] & L2_HIGH);
		l2_free(&a);
		l2_free(&b);
	}
	store_destroy(one);
	store_destroy(live);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(robust_values_and_flags),
		cmocka_unit_test(kept_memory),
		cmocka_unit_test(median_of_8_exact),
		cmocka_unit_test(one_shot_same_as_live),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
