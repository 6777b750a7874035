/* test_engine.c: the online path as culpritd drives it — records in shuffled order across
 * ranks and iterations, engine_poll after each batch, ENGINE_OPENED / ENGINE_DUE /
 * ENGINE_CLOSED once each, a diagnosis of a snapshot equal to the live one, and the hang
 * check against a caller's clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "engine.h"

#define WORLD 64 /* tp 2, pp 4, dp 8 */
#define ITERS 60
#define SLOW 21 /* stage 1 (ranks 16-31), slow from 20 to 39 */

struct rec {
	uint32_t rank, iter;
};

static void add_rank_iter(struct store *s, uint32_t mlp, uint32_t rs, uint32_t r, uint32_t it, uint32_t *seed)
{
	*seed = *seed * 1103515245u + 12345u;
	double j = 1 + ((*seed >> 16) % 1000) / 1000.0 * 0.06 - 0.03;
	int bad = it >= 20 && it < 40;
	int64_t m = (int64_t)(1000000 * j * (bad && r == SLOW ? 3 : 1));
	int64_t c = (int64_t)(500000 * j + (bad && r != SLOW ? 2000000 : 0));
	struct record_phase p1 = {r, it, mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, m};
	struct record_phase p2 = {r, it, rs, RECORD_KIND_COMM, RECORD_GROUP_DP, m, c};
	struct record_iter ri = {r, it, 1000000000LL + (int64_t)it * 4000000, 1600000 + (bad ? 2000000 : 0)};
	assert_int_equal(store_add_iter(s, &ri), 0);
	assert_int_equal(store_add_phase(s, &p2), 0);
	assert_int_equal(store_add_phase(s, &p1), 0);
}

static void online_shuffled(void **state)
{
	(void)state;
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, WORLD, 2, 1, 4, 8, 1, NULL, 8, err, sizeof(err)), 0);
	struct engine *e = engine_create(&t, NULL);
	assert_non_null(e);
	struct store *s = engine_store(e);
	uint32_t mlp = (uint32_t)store_intern_name(s, "mlp");
	uint32_t rs = (uint32_t)store_intern_name(s, "dp_reduce_scatter");
	/* every (rank, iter), shuffled inside bands of 3 iterations: ranks run a little apart */
	struct rec *all = malloc(WORLD * ITERS * sizeof(*all));
	size_t n = 0;
	for (uint32_t it = 0; it < ITERS; it++)
		for (uint32_t r = 0; r < WORLD; r++)
			all[n++] = (struct rec){r, it};
	uint32_t seed = 5;
	for (size_t band = 0; band < n; band += 3 * WORLD) {
		size_t len = band + 3 * WORLD <= n ? 3 * WORLD : n - band;
		for (size_t i = len; i > 1; i--) {
			seed = seed * 1103515245u + 12345u;
			size_t k = (seed >> 8) % i;
			struct rec tmp = all[band + i - 1];
			all[band + i - 1] = all[band + k];
			all[band + k] = tmp;
		}
	}
	int opened = 0, due = 0, closed = 0;
	struct report live;
	int have_live = 0;
	for (size_t i = 0; i < n; i++) {
		if (all[i].rank == 9 && all[i].iter >= ITERS - 2)
			continue; /* rank 9 gets stuck after iteration 57 */
		add_rank_iter(s, mlp, rs, all[i].rank, all[i].iter, &seed);
		if (i % 16 != 15) /* a batch */
			continue;
		int ev = engine_poll(e);
		opened += (ev & ENGINE_OPENED) != 0;
		closed += (ev & ENGINE_CLOSED) != 0;
		if ((ev & ENGINE_DUE) && !have_live) {
			due++;
			/* a server diagnoses a snapshot off its loop; the live store keeps going */
			struct store *snap = store_snapshot(s);
			assert_non_null(snap);
			struct diagnose_input in;
			diagnose_input_from_l1(&in, engine_l1(e), 0);
			struct report a;
			assert_int_equal(diagnose_run(snap, &in, NULL, &a), 0);
			assert_int_equal(engine_diagnose(e, 0, &live), 0);
			have_live = 1;
			assert_string_equal(a.category, "compute_degradation");
			assert_string_equal(live.category, a.category);
			assert_int_equal(a.culprits_total, 1);
			assert_int_equal(a.suspects[0].rank, SLOW);
			assert_int_equal(live.suspects[0].rank, SLOW);
			assert_true(a.first_iter >= 20 && a.first_iter <= 21);
			report_free(&a);
			store_destroy(snap);
		}
	}
	engine_poll(e);
	assert_int_equal(opened, 1);
	assert_int_equal(due, 1);
	assert_int_equal(closed, 1);
	assert_int_equal(engine_l1(e)->last_iter, 39);
	report_free(&live);

	/* hang check with the caller's clock: 1 s after the end of iteration 59, rank 9 (last
	 * seen at 57) is overdue by more than 3 baseline iterations (1.6 s each), nobody else */
	int64_t end = 1000000000LL + (int64_t)(ITERS - 1) * 4000000 + 1600000;
	uint32_t hung[8];
	assert_int_equal(engine_hung(e, end + 1000000, hung, 8), 1);
	assert_int_equal(hung[0], 9);
	struct report r;
	assert_int_equal(engine_diagnose(e, end + 1000000, &r), 0);
	assert_string_equal(r.category, "hang");
	assert_int_equal(r.culprits_total, 1);
	assert_int_equal(r.suspects[0].rank, 9);
	report_free(&r);
	/* later the whole job waits for it: everybody is overdue, the culprit is still the
	 * rank that stopped first */
	assert_int_equal(engine_hung(e, end + 6000000, hung, 8), WORLD);
	assert_int_equal(engine_diagnose(e, end + 6000000, &r), 0);
	assert_string_equal(r.category, "hang");
	assert_int_equal(r.culprits_total, 1);
	assert_int_equal(r.suspects[0].rank, 9);
	assert_string_equal(r.suspects[0].host, "node-1");
	report_free(&r);
	free(all);
	engine_destroy(e);
}

/* L1 judges the step the job takes, not the mean of the ranks' durations: from iteration
 * 20 the later pipeline stages start their iterations 40% of a step later than stage 0
 * (a slow node holds the chain back), each rank's own duration unchanged. The mean
 * duration stays flat; the wall-clock step (latest end - earliest start) grows 40%. */
static void step_not_mean(void **state)
{
	(void)state;
	struct topo t;
	char err[64];
	assert_int_equal(topo_init(&t, 16, 1, 1, 4, 4, 1, NULL, 8, err, sizeof(err)), 0);
	struct engine *e = engine_create(&t, NULL);
	assert_non_null(e);
	struct store *s = engine_store(e);
	uint32_t mlp = (uint32_t)store_intern_name(s, "mlp");
	int opened = 0;
	int64_t t0 = 1000000000LL;
	for (uint32_t it = 0; it < 40; it++) {
		int64_t step = it >= 20 ? 1400000 : 1000000;
		for (uint32_t r = 0; r < 16; r++) {
			uint32_t pp = r / 4; /* order tp-cp-ep-dp-pp: dp fastest here */
			int64_t off = it >= 20 ? (int64_t)pp * 400000 / 3 : 0;
			struct record_iter ri = {r, it, t0 + off, 1000000};
			struct record_phase p = {r, it, mlp, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, 900000};
			assert_int_equal(store_add_iter(s, &ri), 0);
			assert_int_equal(store_add_phase(s, &p), 0);
		}
		t0 += step;
		opened += (engine_poll(e) & ENGINE_OPENED) != 0;
	}
	assert_int_equal(opened, 1);
	assert_int_equal(engine_l1(e)->first_iter, 20);
	engine_destroy(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(online_shuffled),
		cmocka_unit_test(step_not_mean),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
