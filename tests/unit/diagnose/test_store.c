/* test_store.c: out-of-order adds, completion quorum, ring replacement, names, snapshot
 * (also of a sketch of zeros only), many kernel sketches read back as made. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "store.h"

static struct store *make(uint32_t world, uint32_t ring)
{
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, world, 1, 1, 1, world, 1, NULL, 8, err, sizeof(err)), 0);
	struct store_config cfg = {.ring_iters = ring};
	struct store *s = store_create(&t, &cfg);
	assert_non_null(s);
	return s;
}

static void add_iter(struct store *s, uint32_t rank, uint32_t iter, int64_t dur)
{
	struct record_iter r = {rank, iter, (int64_t)iter * 1000000, dur};
	assert_int_equal(store_add_iter(s, &r), 0);
}

static void completion_in_order(void **state)
{
	(void)state;
	struct store *s = make(20, 8);
	uint32_t it;
	double ms;
	/* iteration 11 arrives on 18 ranks before iteration 10 does */
	for (uint32_t r = 0; r < 18; r++)
		add_iter(s, r, 11, 2000);
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	for (uint32_t r = 18; r > 0; r--)
		add_iter(s, r - 1, 10, 1000);
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	add_iter(s, 19, 10, 1000);
	/* 19 of 20 = 95%: complete */
	assert_int_equal(store_next_complete(s, &it, &ms), 1);
	assert_int_equal(it, 10);
	assert_true(ms == 1.0);
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	add_iter(s, 19, 11, 2000);
	assert_int_equal(store_next_complete(s, &it, &ms), 1);
	assert_int_equal(it, 11);
	assert_true(ms == 2.0);
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	/* a duplicate report does not count twice */
	add_iter(s, 0, 12, 1000);
	for (int k = 0; k < 30; k++)
		add_iter(s, 1, 12, 1000);
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	store_flush(s);
	assert_int_equal(store_next_complete(s, &it, &ms), 1);
	assert_int_equal(it, 12);
	store_destroy(s);

	/* iteration numbers with gaps (every 10th iteration sampled) complete without waiting
	 * for the ring to move past the missing ones */
	s = make(20, 64);
	for (uint32_t k = 0; k < 3; k++)
		for (uint32_t r = 0; r < 20; r++)
			add_iter(s, r, 100 + 10 * k, 1000);
	for (uint32_t k = 0; k < 3; k++) {
		assert_int_equal(store_next_complete(s, &it, &ms), 1);
		assert_int_equal(it, 100 + 10 * k);
	}
	assert_int_equal(store_next_complete(s, &it, &ms), 0);
	store_destroy(s);
}

/* after a server restart: iteration 5 was stored for half the ranks before it and is resent
 * by the other half only; iteration 6 then completes. A live store skips 5 and hands out 6; a
 * store fed from files (any order) waits. */
static void partial_iteration_after_restart(void **state)
{
	(void)state;
	for (int live = 0; live <= 1; live++) {
		struct topo t;
		char err[64];
		assert_int_equal(topo_init(&t, 8, 1, 1, 1, 8, 1, NULL, 8, err, sizeof(err)), 0);
		struct store_config cfg = {.ring_iters = 16, .live = live};
		struct store *s = store_create(&t, &cfg);
		uint32_t it;
		double ms;
		assert_non_null(s);
		for (uint32_t r = 4; r < 8; r++)
			add_iter(s, r, 5, 30000000);
		assert_int_equal(store_next_complete(s, &it, &ms), 0);
		for (uint32_t r = 0; r < 8; r++)
			add_iter(s, r, 6, 31000000);
		if (live) {
			assert_int_equal(store_next_complete(s, &it, &ms), 1);
			assert_int_equal(it, 6);
		} else {
			assert_int_equal(store_next_complete(s, &it, &ms), 0);
		}
		store_destroy(s);
	}
}

static void ring_and_phases(void **state)
{
	(void)state;
	struct store *s = make(4, 8);
	int mlp = store_intern_name(s, "mlp"), rs = store_intern_name(s, "dp_reduce_scatter");
	assert_int_equal(store_intern_name(s, "mlp"), mlp);
	assert_string_equal(store_name(s, (uint32_t)rs), "dp_reduce_scatter");
	struct record_phase p = {2, 5, (uint32_t)mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, 250000};
	/* a phase before its iteration record */
	assert_int_equal(store_add_phase(s, &p), 0);
	add_iter(s, 2, 5, 900000);
	assert_int_equal(store_phase_dur(s, 2, 5, 0), 250000);
	assert_int_equal(store_phase_kind(s, 0), RECORD_KIND_COMPUTE);
	/* the same phase again in the same iteration adds up (micro-batches) */
	assert_int_equal(store_add_phase(s, &p), 0);
	assert_int_equal(store_phase_dur(s, 2, 5, 0), 500000);
	/* iteration 13 takes the slot of 5; 5 is then too old */
	add_iter(s, 2, 13, 1);
	assert_false(store_has_iter(s, 2, 5));
	assert_int_equal(store_phase_dur(s, 2, 5, 0), STORE_ABSENT);
	assert_int_equal(store_phase_dur(s, 2, 13, 0), STORE_ABSENT);
	struct record_iter old = {2, 5, 0, 1};
	assert_int_equal(store_add_iter(s, &old), 1);
	assert_int_equal(store_dropped(s), 1);
	/* out of range rank */
	struct record_iter bad = {4, 1, 0, 1};
	assert_int_equal(store_add_iter(s, &bad), 1);
	/* hosts */
	char h[32];
	assert_string_equal(store_host(s, 3, h, sizeof(h)), "node-0");
	assert_int_equal(store_set_host(s, 3, "gpu-a"), 0);
	assert_string_equal(store_host(s, 3, h, sizeof(h)), "gpu-a");
	store_destroy(s);
}

/* the phase slot of name id (the store makes a slot of its own for the time before the first
 * phase when phases start after their iteration) */
static uint32_t slot_of(const struct store *s, int id)
{
	for (uint32_t k = 0; k < store_phase_count(s); k++)
		if (store_phase_name(s, k) == (uint32_t)id)
			return k;
	fail_msg("no slot for name %d", id);
	return STORE_NO_SLOT;
}

/* Each phase slot keeps its typical start within the step, whatever order its slots were
 * made in: the diagnosis orders collectives by it (a slow NIC shows in the first one, the
 * others wait in the next) */
static void phase_starts(void **state)
{
	(void)state;
	struct store *s = make(4, 8);
	int gn = store_intern_name(s, "global_norm"), rs = store_intern_name(s, "dp_reduce_scatter");
	int nostart = store_intern_name(s, "untimed");
	/* the later collective is seen first: slot 0 */
	for (uint32_t r = 0; r < 4; r++) {
		struct record_phase a = {r, 1, (uint32_t)gn, RECORD_KIND_COMM, RECORD_GROUP_DP, 9000 + r * 100, 500};
		struct record_phase b = {r, 1, (uint32_t)rs, RECORD_KIND_COMM, RECORD_GROUP_DP, 4000 - r * 100, 800};
		assert_int_equal(store_add_phase(s, &a), 0);
		assert_int_equal(store_add_phase(s, &b), 0);
	}
	assert_int_equal(store_phase_name(s, 0), (uint32_t)gn);
	assert_true(store_phase_start(s, 0) == 9150);
	assert_true(store_phase_start(s, slot_of(s, rs)) == 3850);
	/* the store's own phase before the first one starts the step: no start of its own */
	assert_true(store_phase_start(s, slot_of(s, store_find_name(s, STORE_LEAD_PHASE))) == -1);
	/* a phase without starts has none; a negative start is not counted */
	struct record_phase u = {0, 1, (uint32_t)nostart, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, RECORD_NO_START, 10};
	assert_int_equal(store_add_phase(s, &u), 0);
	assert_true(store_phase_start(s, slot_of(s, nostart)) == -1);
	u.start_us = -5;
	assert_int_equal(store_add_phase(s, &u), 0);
	assert_true(store_phase_start(s, slot_of(s, nostart)) == -1);
	assert_true(store_phase_start(s, 9) == -1); /* no such slot */
	/* a snapshot keeps them */
	struct store *c = store_snapshot(s);
	assert_non_null(c);
	assert_true(store_phase_start(c, 0) == 9150);
	assert_true(store_phase_start(c, slot_of(c, rs)) == 3850);
	store_destroy(c);
	/* constant memory over a long run: past 2^20 starts the older half is halved away, so a
	 * phase that moved follows (2^20 at 1000, then 2^20 at 3000: 2500, exact) */
	int mv = store_intern_name(s, "moved");
	struct record_phase m = {1, 2, (uint32_t)mv, RECORD_KIND_COMM, RECORD_GROUP_DP, 1000, 1};
	for (uint32_t k = 0; k < (1u << 20); k++)
		store_add_phase(s, &m);
	assert_true(store_phase_start(s, slot_of(s, mv)) == 1000);
	m.start_us = 3000;
	for (uint32_t k = 0; k < (1u << 20); k++)
		store_add_phase(s, &m);
	assert_true(store_phase_start(s, slot_of(s, mv)) == 2500);
	store_destroy(s);
}

static void kernels_and_snapshot(void **state)
{
	(void)state;
	struct store *s = make(4, 16);
	int g = store_intern_name(s, "sm90_gemm");
	for (uint32_t it = 0; it < 16; it++) {
		struct record_kernel k;
		memset(&k, 0, sizeof(k));
		k.rank = 1;
		k.iter = it;
		k.name = (uint32_t)g;
		k.kind = RECORD_KIND_COMPUTE;
		k.count = 3;
		int64_t d[3] = {2500, 2510, 2490};
		assert_int_equal(store_add_kernel(s, &k, d, 3), 0);
		add_iter(s, 1, it, 1000);
	}
	/* a serialized sketch as the wire carries it */
	struct sketch sk, out;
	sketch_init(&sk);
	sketch_add(&sk, 9000, 5);
	uint8_t buf[256];
	size_t n = sketch_serialize(&sk, buf, sizeof(buf));
	struct record_kernel k;
	memset(&k, 0, sizeof(k));
	k.rank = 2;
	k.iter = 3;
	k.name = (uint32_t)g;
	k.sketch = buf;
	k.sketch_len = (uint32_t)n;
	assert_int_equal(store_add_kernel(s, &k, NULL, 0), 0);
	sketch_init(&out);
	assert_true(store_kernel_pool(s, 1, 0, 0, 15, &out) >= 2);
	assert_int_equal(out.count, 48);
	sketch_reset(&out);
	store_kernel_pool(s, 2, 0, 0, 15, &out);
	assert_int_equal(out.count, 5);
	/* the snapshot is a deep copy */
	struct store *c = store_snapshot(s);
	assert_non_null(c);
	/* it is read-only for kernels */
	assert_int_equal(store_add_kernel(c, &k, NULL, 0), 1);
	store_destroy(s);
	sketch_reset(&out);
	assert_true(store_kernel_pool(c, 1, 0, 8, 15, &out) >= 1);
	assert_int_equal(out.count, 24);
	assert_int_equal(store_iter_dur(c, 1, 15), 1000);
	assert_string_equal(store_name(c, (uint32_t)g), "sm90_gemm");
	store_destroy(c);
	sketch_free(&sk);
	sketch_free(&out);
}

/* One rank jumps from iteration 1 to 2^31 while the others stay near 1: every call costs
 * O(ring), not O(jump) (stepping one iteration at a time took seconds per call), the
 * iterations the ring cannot hold are skipped, and the jumped-to one completes as usual. */
static void iteration_jump_is_cheap(void **state)
{
	(void)state;
	const uint32_t far = 1u << 31;
	uint32_t it;
	double ms;
	struct timespec t0, t1;

	for (int handed_first = 0; handed_first < 2; handed_first++) {
		struct store *s = make(2, 8);

		clock_gettime(CLOCK_MONOTONIC, &t0);
		add_iter(s, 0, 1, 1000);
		if (handed_first) {
			add_iter(s, 1, 1, 1000);
			assert_int_equal(store_next_complete(s, &it, &ms), 1);
			assert_int_equal(it, 1);
		}
		add_iter(s, 0, far, 1000);
		assert_int_equal(store_next_complete(s, &it, &ms), 0);
		/* the honest rank's batches after the jump: each call is cheap again */
		for (uint32_t k = 2; k < 102; k++) {
			add_iter(s, 1, k, 1000);
			assert_int_equal(store_next_complete(s, &it, &ms), 0);
		}
		add_iter(s, 1, far, 3000);
		assert_int_equal(store_next_complete(s, &it, &ms), 1);
		assert_int_equal(it, far);
		assert_true(ms == 2.0);
		assert_int_equal(store_next_complete(s, &it, &ms), 0);
		store_flush(s);
		assert_int_equal(store_next_complete(s, &it, &ms), 0);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* O(jump) took over 10 s here (2^31 steps); O(ring) is microseconds */
		assert_true((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9 < 1.0);
		store_destroy(s);
	}
}

/* a kernel of sub-microsecond calls has a sketch of zeros only, without buckets: the
 * snapshot copies it (it once passed memcpy a NULL source, undefined behaviour) */
static void snapshot_of_zero_sketch(void **state)
{
	(void)state;
	struct store *s = make(2, 8);
	struct record_kernel k;
	memset(&k, 0, sizeof(k));
	k.name = (uint32_t)store_intern_name(s, "tiny");
	k.count = 2;
	int64_t d[2] = {0, 0};
	assert_int_equal(store_add_kernel(s, &k, d, 2), 0);
	struct store *c = store_snapshot(s);
	assert_non_null(c);
	struct sketch out;
	sketch_init(&out);
	assert_int_equal(store_kernel_pool(c, 0, 0, 0, 0, &out), 1);
	assert_int_equal(out.count, 2);
	assert_int_equal(out.zeros, 2);
	sketch_free(&out);
	store_destroy(c);
	store_destroy(s);
}

/* the durations of (rank, kernel, iter) in many_sketches: some sketches fit the 8 buckets
 * the store lends, those of every fifth rank span far more */
static void many_durs(uint32_t r, uint32_t k, uint32_t it, int64_t d[4])
{
	for (uint32_t j = 0; j < 4; j++)
		d[j] = r % 5 ? 1000 + (r % 97) * 10 + k * 300 + j * 7 + it : 100 + (int64_t)(r % 7 + j) * 9000 + it;
}

static void fill_kernels(struct store *s, uint32_t world, const uint32_t name[2], uint32_t from, uint32_t to)
{
	for (uint32_t it = from; it < to; it++)
		for (uint32_t r = 0; r < world; r++)
			for (uint32_t k = 0; k < 2; k++) {
				struct record_kernel rec;
				memset(&rec, 0, sizeof(rec));
				rec.rank = r;
				rec.iter = it;
				rec.name = name[k];
				rec.count = 4;
				int64_t d[4];
				many_durs(r, k, it, d);
				assert_int_equal(store_add_kernel(s, &rec, d, 4), 0);
			}
}

/* each pooled block of s equals a sketch made from the same durations */
static void check_blocks(const struct store *s, uint32_t world, uint32_t first_block, uint32_t nblocks)
{
	struct sketch want, got;
	sketch_init(&want);
	sketch_init(&got);
	for (uint32_t r = 0; r < world; r += r < 100 || r > world - 100 ? 1 : 331)
		for (uint32_t k = 0; k < 2; k++)
			for (uint32_t b = first_block; b < first_block + nblocks; b++) {
				sketch_reset(&want);
				sketch_reset(&got);
				for (uint32_t it = b * 8; it < b * 8 + 8; it++) {
					int64_t d[4];
					many_durs(r, k, it, d);
					for (int j = 0; j < 4; j++)
						sketch_add(&want, (double)d[j], 1);
				}
				assert_int_equal(store_kernel_pool(s, r, k, b * 8, b * 8 + 7, &got), 1);
				assert_int_equal(got.count, want.count);
				assert_int_equal(got.lo, want.lo);
				assert_int_equal(got.n, want.n);
				assert_memory_equal(got.bins, want.bins, want.n * sizeof(uint32_t));
			}
	sketch_free(&want);
	sketch_free(&got);
}

/* 80,000 sketches, past the store's first array of 65,536, some outgrowing their lent
 * buckets: every block reads back as made, after the ring reuses the cells (sketch_reset
 * keeps lent and own buckets alike) and in a snapshot (its buckets exactly sized). */
static void many_sketches(void **state)
{
	(void)state;
	const uint32_t world = 20000;
	struct store *s = make(world, 16);
	uint32_t name[2] = {(uint32_t)store_intern_name(s, "gemm"), (uint32_t)store_intern_name(s, "attn")};
	fill_kernels(s, world, name, 0, 16);
	check_blocks(s, world, 0, 2);
	size_t mem = store_memory(s);
	/* 3 cells a kernel: block 3 takes the cell of block 0, which fell out of the ring */
	fill_kernels(s, world, name, 16, 32);
	check_blocks(s, world, 2, 2);
	assert_true(store_memory(s) >= mem);
	struct store *c = store_snapshot(s);
	assert_non_null(c);
	store_destroy(s);
	check_blocks(c, world, 2, 2);
	store_destroy(c);
}

/* Names interned in a repeating order (the store guesses the one after the last) and out
 * of it: each keeps its number. */
static void names_in_any_order(void **state)
{
	(void)state;
	struct store *s = make(8, 8);
	static const char *const names[] = {"attn", "mlp", "ep_dispatch", "optimizer"};
	static const int order[] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 2, 1, 3, 3, 0, 1, 1, 2, 0, 3, 2};
	int id[4];
	for (int i = 0; i < 4; i++)
		id[i] = store_intern_name(s, names[i]);
	for (size_t k = 0; k < sizeof(order) / sizeof(*order); k++) {
		int n = order[k];
		assert_int_equal(store_intern_name(s, names[n]), id[n]);
		assert_string_equal(store_name(s, (uint32_t)id[n]), names[n]);
	}
	assert_int_equal(store_name_count(s), 4);
	store_destroy(s);
}

/* A one-shot store starts with a quarter of its ring and doubles it as iterations need, and
 * with STORE_PHASES_FIRST phases a cell, widened as more are named: fed the same records in
 * the same order (iterations out of order, gaps, a rank far ahead, ones old enough to fall
 * out of the full ring, phase names first met late), it holds and hands out exactly what a
 * store with the full ring and phases from the start does, grown or not, and so does its
 * snapshot. */
static void one_shot_ring_grows(void **state)
{
	(void)state;
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 24, 1, 1, 1, 24, 1, NULL, 8, err, sizeof(err)), 0);
	unsigned seed = 7;
	for (int trial = 0; trial < 40; trial++) {
		struct store_config full = {.ring_iters = trial % 2 ? 64 : 48}, grown = full;
		grown.one_shot = 1;
		struct store *a = store_create(&t, &full), *b = store_create(&t, &grown);
		assert_non_null(a);
		assert_non_null(b);
		/* up to 13 names (and the lead phase the starts make), the k-th first met at
		 * record k * k * 20 (the last ones when many cells are held) */
		enum { NPH = 13 };
		uint32_t nph = trial % 4 == 3 ? 2 : NPH;
		int ph[NPH];
		for (uint32_t k = 0; k < nph; k++) {
			char name[16];
			snprintf(name, sizeof(name), "phase%u", k);
			ph[k] = store_intern_name(a, name);
			assert_int_equal(store_intern_name(b, name), ph[k]);
		}
		uint32_t span = trial < 10 ? 12 : trial < 30 ? 40 : 200; /* within a quarter, the ring, past it */
		uint32_t named = 0, used = 0;
		for (int n = 0; n < 3000; n++) {
			seed = seed * 1103515245u + 12345u;
			uint32_t rank = (seed >> 8) % 24, iter = (seed >> 16) % span;
			if (trial % 5 == 4 && span > 12 && n % 97 == 0)
				iter += 1000; /* a jump */
			int64_t dur = 1000 + (int64_t)(seed % 5000);
			struct record_iter r = {rank, iter, (int64_t)iter * 1000000, dur};
			while (named < nph && (int)(named * named * 20) <= n)
				named++;
			uint32_t k = n % 3 == 0 && used < named ? used++ : (seed >> 4) % named; /* each name met */
			struct record_phase p = {rank, iter, (uint32_t)ph[k], RECORD_KIND_COMPUTE, 0, 10, dur / 2};
			if (n % 3) {
				assert_int_equal(store_add_iter(a, &r), store_add_iter(b, &r));
			} else {
				assert_int_equal(store_add_phase(a, &p), store_add_phase(b, &p));
			}
			uint32_t ia, ib;
			double ma, mb;
			int ca = store_next_complete(a, &ia, &ma), cb = store_next_complete(b, &ib, &mb);
			assert_int_equal(ca, cb);
			if (ca) {
				assert_int_equal(ia, ib);
				assert_true(ma == mb);
			}
		}
		assert_int_equal(store_max_iter(a), store_max_iter(b));
		assert_int_equal(store_dropped(a), store_dropped(b));
		uint32_t top = store_max_iter(a), P = store_phase_count(a);
		assert_int_equal(store_phase_count(b), P);
		assert_true(P == nph + 1); /* and the lead phase */
		struct store *c = store_snapshot(b);
		assert_non_null(c);
		for (uint32_t rank = 0; rank < 24; rank++)
			for (uint32_t it = top > 300 ? top - 300 : 0; it <= top; it++) {
				assert_int_equal(store_has_iter(a, rank, it), store_has_iter(b, rank, it));
				assert_int_equal(store_iter_dur(a, rank, it), store_iter_dur(b, rank, it));
				const uint32_t *ra = store_slot_phases(a, rank, it), *rb = store_slot_phases(b, rank, it),
					       *rc = store_slot_phases(c, rank, it);
				assert_true(!ra == !rb && !rb == !rc);
				for (uint32_t slot = 0; slot < P; slot++) {
					uint32_t d = store_phase_dur(a, rank, it, slot);
					assert_int_equal(store_phase_dur(b, rank, it, slot), d);
					assert_int_equal(store_phase_dur(c, rank, it, slot), d);
					if (ra) {
						assert_int_equal(ra[slot], d);
						assert_int_equal(rb[slot], d);
						assert_int_equal(rc[slot], d);
					}
				}
			}
		struct store_ring ra, rb;
		store_ring_view(a, &ra);
		store_ring_view(b, &rb);
		if (span <= 12)
			assert_true(rb.ring < ra.ring); /* a short fill left the ring small */
		assert_int_equal(ra.phases, 16);
		assert_int_equal(rb.phases, nph < STORE_PHASES_FIRST ? STORE_PHASES_FIRST : P); /* as many as named */
		store_destroy(c);
		store_destroy(a);
		store_destroy(b);
	}
}

/* A baseline kept (store_keep) is read back once the ring has dropped it, by every reader
 * and by a snapshot; a later keep replaces it; a range over STORE_KEEP_ITERS is refused. */
static void baseline_kept_past_ring(void **state)
{
	(void)state;
	struct store *s = make(3, 8);
	int mlp = store_intern_name(s, "mlp");
	for (uint32_t it = 0; it < 40; it++)
		for (uint32_t r = 0; r < 3; r++) {
			add_iter(s, r, it, 1000 + it);
			struct record_phase p = {r, it, (uint32_t)mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0,
						 100 * (int64_t)it + r};
			assert_int_equal(store_add_phase(s, &p), 0);
			if (it == 9)
				assert_int_equal(store_keep(s, 2, 9), 0);
		}
	uint32_t it, f, l;
	double ms;
	while (store_next_complete(s, &it, &ms))
		;
	assert_int_equal(store_kept(s, &f, &l), 1);
	assert_int_equal(f, 2);
	assert_int_equal(l, 9);
	/* the ring holds 32..39; 2..9 are kept, 1 and 10 are gone */
	assert_true(store_has_iter(s, 1, 5));
	assert_int_equal(store_iter_dur(s, 1, 5), 1005);
	assert_int_equal(store_phase_dur(s, 2, 9, 0), 902);
	assert_int_equal(store_slot_phases(s, 0, 2)[0], 200);
	assert_false(store_has_iter(s, 0, 1));
	assert_false(store_has_iter(s, 0, 10));
	assert_int_equal(store_phase_dur(s, 0, 10, 0), STORE_ABSENT);
	assert_int_equal(store_iter_dur(s, 0, 35), 1035); /* the ring's own */
	int64_t a, b;
	assert_int_equal(store_iter_span(s, 7, &a, &b), 1);
	assert_true(a == 7000000 && b == 7001007);
	assert_int_equal(store_iter_ranks(s, 7), 3);
	struct store *c = store_snapshot(s);
	assert_non_null(c);
	assert_int_equal(store_phase_dur(c, 1, 3, 0), 301);
	store_destroy(c);
	/* a later keep replaces it */
	assert_int_equal(store_keep(s, 33, 35), 0);
	assert_false(store_has_iter(s, 1, 5));
	assert_int_equal(store_iter_span(s, 5, &a, &b), 0);
	assert_int_equal(store_keep(s, 20, 20 + STORE_KEEP_ITERS), -1);
	store_destroy(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(completion_in_order),     cmocka_unit_test(partial_iteration_after_restart),
		cmocka_unit_test(ring_and_phases),         cmocka_unit_test(phase_starts),
		cmocka_unit_test(kernels_and_snapshot),    cmocka_unit_test(iteration_jump_is_cheap),
		cmocka_unit_test(snapshot_of_zero_sketch), cmocka_unit_test(many_sketches),
		cmocka_unit_test(one_shot_ring_grows),     cmocka_unit_test(names_in_any_order),
		cmocka_unit_test(baseline_kept_past_ring),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
