/* test_replay.c: the replay of a window's steps through their waits (replay.h). Small jobs
 * whose timelines the test builds itself, collective by collective (each member leaves at
 * the last arrival plus its transfer), so the step a what-if would have had is known:
 * a slow rank put back, a pause of one iteration, a collective recorded as the role group's
 * that spans the whole job, a wait a simulator put in the wrong collective, a slow link
 * put back against its own past when every instance holds it, and work spread evenly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"

#define MAXW 16
#define ITERS 12

/* A job of phases in a row: compute "fwd", a collective "sync" along group, compute
 * "bwd". Per rank and iteration: fwd and bwd durations, the sync's transfer. */
struct job {
	struct topo t;
	struct store *s;
	uint32_t fwd, sync, bwd;
	uint8_t group;
	int job_wide; /* the sync spans every rank, whatever group it is recorded with */
};

static void job_init(struct job *j, uint32_t world, uint32_t tp, uint32_t pp, uint32_t dp, uint32_t gpn, uint8_t group)
{
	char err[64];
	assert_int_equal(topo_init(&j->t, world, tp, 1, pp, dp, 1, NULL, gpn, err, sizeof(err)), 0);
	j->s = store_create(&j->t, NULL);
	assert_non_null(j->s);
	j->fwd = (uint32_t)store_intern_name(j->s, "fwd");
	j->sync = (uint32_t)store_intern_name(j->s, "sync");
	j->bwd = (uint32_t)store_intern_name(j->s, "bwd");
	j->group = group;
	j->job_wide = 0;
}

/* One iteration: fwd[r] then the sync (members of a group leave at their last arrival plus
 * xfer[r]) then bwd[r]; the recorded stay is the wait plus the transfer. */
static void add_iter(struct job *j, uint32_t it, const double *fwd, const double *xfer, const double *bwd)
{
	uint32_t W = j->t.world;
	double last[MAXW];
	enum topo_dim dim = j->group == RECORD_GROUP_TP ? TOPO_TP : j->group == RECORD_GROUP_PP ? TOPO_PP : TOPO_DP;
	for (uint32_t r = 0; r < W; r++)
		last[r] = 0;
	for (uint32_t r = 0; r < W; r++) {
		uint32_t g = j->job_wide ? 0 : topo_collective_group(&j->t, r, dim);
		for (uint32_t q = 0; q < W; q++) {
			uint32_t h = j->job_wide ? 0 : topo_collective_group(&j->t, q, dim);
			if (h == g && fwd[q] > last[r])
				last[r] = fwd[q];
		}
	}
	for (uint32_t r = 0; r < W; r++) {
		double stay = last[r] - fwd[r] + xfer[r];
		struct record_iter ri = {r, it, 1000000000LL + (int64_t)it * 100000000,
					 (int64_t)((fwd[r] + stay + bwd[r]) * 1000)};
		struct record_phase a = {r, it, j->fwd, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, (int64_t)(fwd[r] * 1000)};
		struct record_phase b = {r, it, j->sync, RECORD_KIND_COMM, j->group, (int64_t)(fwd[r] * 1000),
					 (int64_t)(stay * 1000)};
		struct record_phase c = {r, it, j->bwd, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE,
					 (int64_t)((fwd[r] + stay) * 1000), (int64_t)(bwd[r] * 1000)};
		assert_int_equal(store_add_iter(j->s, &ri), 0);
		assert_int_equal(store_add_phase(j->s, &a), 0);
		assert_int_equal(store_add_phase(j->s, &b), 0);
		assert_int_equal(store_add_phase(j->s, &c), 0);
	}
}

static void fill(double *x, uint32_t n, double v)
{
	for (uint32_t i = 0; i < n; i++)
		x[i] = v;
}

static struct replay_whatif run1(struct job *j, uint32_t first, uint32_t last, enum replay_how how,
				 const uint8_t *mark, double *step)
{
	struct replay_whatif w = {.fix = {{.how = how, .ranks = mark}}, .nfix = 1};
	struct replay_input in = {j->s, first, last, 1, 0, NULL};
	assert_int_equal(replay_run(&in, &w, 1, step, NULL), 0);
	return w;
}

/* 8 ranks in one data-parallel group; rank 3's fwd 3x from iteration 4 on, and its bwd:
 * put back at its peers' pace, the step loses what its compute adds, 200 + 400 ms */
static void slow_rank_put_back(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 1, 1, 8, 8, RECORD_GROUP_DP);
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < ITERS; it++) {
		fill(fwd, 8, 100);
		fill(xfer, 8, 20);
		fill(bwd, 8, 200);
		if (it >= 4)
			fwd[3] = 300, bwd[3] = 600;
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t mark[MAXW] = {0};
	mark[3] = 1;
	double step;
	struct replay_whatif w = run1(&j, 4, ITERS - 1, REPLAY_PEERS, mark, &step);
	assert_true(fabs(step - 920) < 1);
	assert_true(fabs(w.gain_ms - 600) < 1);
	assert_int_equal(w.iters, ITERS - 4);
	assert_int_equal(w.iters_gained, ITERS - 4);
	/* a healthy rank put back recovers nothing */
	mark[3] = 0;
	mark[5] = 1;
	w = run1(&j, 4, ITERS - 1, REPLAY_PEERS, mark, &step);
	assert_true(fabs(w.gain_ms) < 1);
	assert_int_equal(w.iters_gained, 0);
	store_destroy(j.s);
}

/* a pause of 500 ms in one iteration of ten on rank 1: a tenth of it, in one iteration */
static void pause_once(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 1, 1, 8, 8, RECORD_GROUP_DP);
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < 10; it++) {
		fill(fwd, 8, 100);
		fill(xfer, 8, 20);
		fill(bwd, 8, 200);
		if (it == 6)
			fwd[1] += 500;
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t mark[MAXW] = {0};
	mark[1] = 1;
	struct replay_whatif w = run1(&j, 0, 9, REPLAY_PEERS, mark, NULL);
	assert_true(fabs(w.gain_ms - 50) < 1);
	assert_true(fabs(w.gain_max_ms - 500) < 1);
	assert_int_equal(w.iters_gained, 1);
	store_destroy(j.s);
}

/* tp 8: every role group is one rank, yet the sync recorded with the dp group makes every
 * rank wait for the slowest: the replay sees that the members leave together and takes it
 * for the job's collective, so rank 2 put back recovers its fwd's excess */
static void job_wide_collective(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 8, 1, 1, 8, RECORD_GROUP_DP);
	j.job_wide = 1;
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < ITERS; it++) {
		fill(fwd, 8, 100 + it % 3);
		fill(xfer, 8, 10);
		fill(bwd, 8, 200);
		fwd[2] = 250;
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t mark[MAXW] = {0};
	mark[2] = 1;
	struct replay_whatif w = run1(&j, 0, ITERS - 1, REPLAY_PEERS, mark, NULL);
	assert_true(w.gain_ms > 140 && w.gain_ms < 151);
	store_destroy(j.s);
}

/* A simulator's wait in the wrong collective: rank 0's ranks leave the sync 400 ms after
 * everyone came, though nobody of their group came late (their wait is for a rank of
 * another group, recorded here). Taken as a transfer, putting the slow rank back would
 * recover nothing; at most twice the shortest stay, the wait goes back to its cause. */
static void misplaced_wait(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 2, 1, 4, 8, RECORD_GROUP_TP); /* syncs of pairs: (0,1) (2,3) ... */
	uint32_t W = 8;
	for (uint32_t it = 0; it < ITERS; it++) {
		/* rank 5 computes 500 ms instead of 100; every other pair waits for it, as recorded
		 * in their own sync (an earlier collective with rank 5 not modelled) */
		for (uint32_t r = 0; r < W; r++) {
			/* the odd ranks of the other pairs leave at once: they "came last" elsewhere */
			double f = r == 5 ? 500 : 100, stay = r == 5 || (r % 2 && r != 5) ? 10 : 410;
			struct record_iter ri = {r, it, 1000000000LL + (int64_t)it * 100000000, 0};
			struct record_phase a = {r, it, j.fwd, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 0, (int64_t)(f * 1000)};
			struct record_phase b = {r, it, j.sync, RECORD_KIND_COMM, RECORD_GROUP_TP, (int64_t)(f * 1000),
						 (int64_t)(stay * 1000)};
			ri.dur_us = (int64_t)((f + stay + 100) * 1000);
			struct record_phase c = {r, it, j.bwd, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE,
						 (int64_t)((f + stay) * 1000), 100000};
			assert_int_equal(store_add_iter(j.s, &ri), 0);
			assert_int_equal(store_add_phase(j.s, &a), 0);
			assert_int_equal(store_add_phase(j.s, &b), 0);
			assert_int_equal(store_add_phase(j.s, &c), 0);
		}
	}
	uint8_t mark[MAXW] = {0};
	mark[5] = 1;
	double step;
	struct replay_whatif w = run1(&j, 0, ITERS - 1, REPLAY_PEERS, mark, &step);
	/* recorded: the other pairs' 400 ms waits are no transfers; the step is rank 5's pair */
	assert_true(step < 700);
	assert_true(w.gain_ms > 350);
	store_destroy(j.s);
}

/* 16 ranks on two nodes (pp 2, dp 8: the pipeline chains hold a rank of each node): node
 * 1's NIC makes every chain's transfer 3x from iteration 6 on. Every instance holds the
 * node, so there is no other instance to compare with; the baseline before the window is
 * the reference, and the link put back recovers the extra 40 ms */
static void slow_link_against_its_past(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 16, 1, 2, 8, 8, RECORD_GROUP_PP);
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < ITERS; it++) {
		fill(fwd, 16, 100);
		fill(xfer, 16, it >= 6 ? 60 : 20);
		fill(bwd, 16, 200);
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t mark[MAXW] = {0};
	for (uint32_t r = 8; r < 16; r++)
		mark[r] = 1;
	struct replay_whatif w = {.fix = {{.how = REPLAY_TRANSFER, .ranks = mark}}, .nfix = 1};
	struct replay_input in = {j.s, 6, ITERS - 1, 0, 5, NULL};
	assert_int_equal(replay_run(&in, &w, 1, NULL, NULL), 0);
	assert_true(fabs(w.gain_ms - 40) < 1);
	/* without a baseline there is nothing to put it back to */
	in.blast = 0, in.bfirst = 1;
	assert_int_equal(replay_run(&in, &w, 1, NULL, NULL), 0);
	assert_true(fabs(w.gain_ms) < 1);
	store_destroy(j.s);
}

/* pp 4, one stage's compute 1.6x the others' (a stage imbalance): spread evenly, every stage
 * computes the mean (1.15x), and the step loses 0.45x of a stage's compute */
static void work_spread_evenly(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 1, 4, 2, 8, RECORD_GROUP_PP);
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < ITERS; it++) {
		for (uint32_t r = 0; r < 8; r++) {
			int heavy = topo_coords(&j.t, r).pp == 3;
			fwd[r] = heavy ? 160 : 100;
			bwd[r] = heavy ? 320 : 200;
			xfer[r] = 5;
		}
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t mark[MAXW];
	memset(mark, 1, sizeof(mark));
	struct replay_whatif w = run1(&j, 0, ITERS - 1, REPLAY_MEAN, mark, NULL);
	/* fwd 160 -> 115, bwd 320 -> 230 */
	assert_true(fabs(w.gain_ms - 135) < 1);
	store_destroy(j.s);
}

/* Two faults at once: rank 2's fwd 200 ms longer, rank 6's bwd 120 ms longer, each in a
 * data-parallel group of its own (tp 2: ranks 0, 2, 4, 6 and 1, 3, 5, 7 sync apart). Put
 * back alone, rank 6 recovers nothing: rank 2's group still ends later. With rank 2 put
 * back first, rank 6's 120 ms show: a what-if of both, against one of rank 2 alone. */
static void two_faults_each_hides_the_other(void **state)
{
	(void)state;
	struct job j;
	job_init(&j, 8, 2, 1, 4, 8, RECORD_GROUP_DP);
	double fwd[MAXW], xfer[MAXW], bwd[MAXW];
	for (uint32_t it = 0; it < ITERS; it++) {
		fill(fwd, 8, 100);
		fill(xfer, 8, 10);
		fill(bwd, 8, 200);
		fwd[2] = 300;
		bwd[7] = 320;
		add_iter(&j, it, fwd, xfer, bwd);
	}
	uint8_t a[MAXW] = {0}, b[MAXW] = {0};
	a[2] = 1;
	b[7] = 1;
	struct replay_whatif w[3] = {
		{.fix = {{.how = REPLAY_PEERS, .ranks = b}}, .nfix = 1},
		{.fix = {{.how = REPLAY_PEERS, .ranks = a}}, .nfix = 1},
		{.fix = {{.how = REPLAY_PEERS, .ranks = a}, {.how = REPLAY_PEERS, .ranks = b}}, .nfix = 2},
	};
	struct replay_input in = {j.s, 0, ITERS - 1, 1, 0, NULL};
	double base[REPLAY_MAX_ITERS];
	assert_int_equal(replay_run(&in, w, 3, NULL, base), 0);
	assert_true(fabs(base[0] - 510) < 1); /* rank 2's group: 300 + 10 + 200 */
	assert_true(fabs(w[0].gain_ms) < 1);   /* rank 7 alone: its group ends at 430 anyway */
	assert_true(fabs(w[1].gain_ms - 80) < 1); /* rank 2 alone: down to rank 7's 430 */
	assert_true(fabs(w[1].step[0] - w[2].step[0] - 120) < 1); /* rank 7 after rank 2 */
	store_destroy(j.s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(slow_rank_put_back),     cmocka_unit_test(pause_once),
		cmocka_unit_test(job_wide_collective),    cmocka_unit_test(misplaced_wait),
		cmocka_unit_test(slow_link_against_its_past), cmocka_unit_test(work_spread_evenly),
		cmocka_unit_test(two_faults_each_hides_the_other),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
