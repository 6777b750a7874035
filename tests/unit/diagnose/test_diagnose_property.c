/* test_diagnose_property.c: 1,000 random jobs from a fixed seed — random topologies (tp,
 * cp, pp, dp, ep, rank order, GPUs per node; up to 256 ranks), 1 to 200 kernel names per
 * rank, and a random fault (a slow rank, a slow node, a slow communication phase on one
 * node, a heavy pipeline stage, or none) — each diagnosed as `culprit diagnose` does, and
 * as culpritd does on the window in place whenever a diagnosis comes due. Every report must
 * pass report_check (JSON that parses back, no NaN or inf in it). Where the fault is a
 * clear single slow rank (2x to 4x in compute, 8 ranks or more, data-parallel groups of 4
 * or more), the verdict must be
 * compute_degradation naming that rank on its host. Also on its own: a
 * 64-rank data-parallel job, one slow rank, 6 compute kernel names and one NCCL kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "report_check.h"

#define CASES 1000
#define ITERS 20
#define ONSET 8
#define MAX_KERNELS 200

enum fault { F_NONE, F_SLOW_RANK, F_SLOW_NODE, F_SLOW_COMM, F_HEAVY_STAGE, F_COUNT };
static const char *const fault_names[] = {"none", "slow rank", "slow node", "slow comm phase", "heavy stage"};

enum { P_ATTN, P_MLP, P_TP_AR, P_DP_RS, P_PP_SR, P_LOADER, P_COUNT };
static const struct {
	const char *name;
	uint8_t kind, group;
	double ms;
} phases[P_COUNT] = {
	{"attn", RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 20},
	{"mlp", RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 30},
	{"tp_all_reduce", RECORD_KIND_COMM, RECORD_GROUP_TP, 8},
	{"dp_reduce_scatter", RECORD_KIND_COMM, RECORD_GROUP_DP, 12},
	{"pp_send_recv", RECORD_KIND_COMM, RECORD_GROUP_PP, 10},
	{"data_loader", RECORD_KIND_HOST, RECORD_GROUP_NONE, 5},
};

struct rng {
	unsigned s;
};

static uint32_t below(struct rng *r, uint32_t n) { return (uint32_t)rand_r(&r->s) % n; }

/* 1 + uniform in [-a, a] */
static double jit(struct rng *r, double a) { return 1 + a * (2.0 * rand_r(&r->s) / RAND_MAX - 1); }

struct job {
	struct topo t;
	uint32_t nk, kid[MAX_KERNELS], pid[P_COUNT];
	enum fault fault;
	uint32_t target, ntarget; /* ranks [target, target + ntarget) */
	int stage;
	double factor;
	int diagnose_every_due;
};

static const char *const orders[] = {"tp-cp-ep-dp-pp", "tp-cp-dp-pp", "tp-pp-cp-dp", "pp-dp-cp-tp"};

static void random_topology(struct rng *r, struct topo *t)
{
	for (;;) {
		uint32_t tp = 1u << below(r, 4), cp = below(r, 8) ? 1 : 2, pp = 1u << below(r, 4);
		uint32_t ep = 1u << below(r, 3), per = tp * cp * pp * ep;
		if (per > 256)
			continue;
		/* world spread over 1..256 on a log scale */
		uint32_t want = 1u << below(r, 9), dp = ep * (want / per ? want / per : 1);
		uint32_t gpn = 1u << below(r, 4);
		char err[128];
		if (topo_init(t, tp * cp * pp * dp, tp, cp, pp, dp, ep, orders[below(r, 4)], gpn, err, sizeof(err)) ==
		    0)
			return;
	}
}

static int in_target(const struct job *j, uint32_t rank)
{
	if (j->fault == F_HEAVY_STAGE)
		return (int)topo_coords(&j->t, rank).pp == j->stage;
	return rank >= j->target && rank < j->target + j->ntarget;
}

/* one rank-iteration: phases, kernels, the iteration record */
static void add_rank_iter(struct store *s, struct rng *r, const struct job *j, uint32_t rank, uint32_t it, int64_t t0,
			  double *dur_ms)
{
	int faulty = it >= ONSET && j->fault != F_NONE, hit = faulty && in_target(j, rank);
	double compute = phases[P_ATTN].ms + phases[P_MLP].ms, wait = 0;
	if (faulty && !hit && j->fault != F_SLOW_COMM)
		wait = compute * (j->factor - 1); /* the others wait for the slow ones */
	if (faulty && !hit && j->fault == F_SLOW_COMM)
		wait = 2 * phases[P_DP_RS].ms;
	int64_t off = 0;
	for (uint32_t p = 0; p < P_COUNT; p++) {
		if ((p == P_TP_AR && j->t.tp == 1) || (p == P_PP_SR && j->t.pp == 1))
			continue;
		double ms = phases[p].ms * jit(r, 0.03);
		if (hit && phases[p].kind == RECORD_KIND_COMPUTE && j->fault != F_SLOW_COMM)
			ms *= j->factor;
		if (hit && phases[p].kind == RECORD_KIND_COMM && j->fault == F_SLOW_COMM)
			ms *= j->factor;
		if (p == (j->fault == F_HEAVY_STAGE ? P_PP_SR : P_DP_RS))
			ms += wait;
		struct record_phase ph = {
			rank, it, j->pid[p], phases[p].kind, phases[p].group, off, (int64_t)(ms * 1000)};
		assert_true(store_add_phase(s, &ph) >= 0);
		off += ph.dur_us;
	}
	for (uint32_t k = 0; k < j->nk; k++) {
		/* kernel 0 is the GEMM, 1 the NCCL kernel, the rest small compute kernels */
		int comm = k == 1;
		double us = k == 0 ? 2500 : comm ? 900 : 40 + 13.0 * (k % 37);
		if (hit && ((k == 0 && j->fault != F_SLOW_COMM) || (comm && j->fault == F_SLOW_COMM)))
			us *= j->factor;
		if (faulty && !hit && comm)
			us *= 1.5; /* NCCL kernels of waiting ranks include the wait */
		struct record_kernel kr = {.rank = rank,
					   .iter = it,
					   .name = j->kid[k],
					   .kind = comm ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE,
					   .count = 4 + k % 13};
		int64_t durs[4];
		for (int i = 0; i < 4; i++)
			durs[i] = (int64_t)(us * jit(r, 0.03));
		kr.min_us = durs[0] < durs[1] ? durs[0] : durs[1];
		kr.max_us = durs[2] > durs[3] ? durs[2] : durs[3];
		kr.sum_us = (int64_t)us * kr.count;
		kr.p50_us = durs[1];
		kr.p99_us = kr.max_us;
		/* the first kernels with samples, the many others as summaries only */
		assert_true(store_add_kernel(s, &kr, k < 3 ? durs : NULL, k < 3 ? 4 : 0) >= 0);
	}
	struct record_iter ri = {rank, it, t0 + (int64_t)(1000 * jit(r, 1)), off + 1000};
	assert_true(store_add_iter(s, &ri) >= 0);
	*dur_ms = (double)ri.dur_us / 1000;
}

static int names_rank(const struct report *rep, const struct job *j, uint32_t rank)
{
	char host[64];
	snprintf(host, sizeof(host), "node-%u", topo_node(&j->t, rank));
	for (size_t i = 0; i < rep->nsuspects; i++)
		if (rep->suspects[i].role == REPORT_CULPRIT && rep->suspects[i].rank == rank)
			return strcmp(rep->suspects[i].host, host) == 0;
	return 0;
}

/* Runs one job; returns its final report in *rep. */
static void run_job(struct rng *r, struct job *j, struct report *rep)
{
	struct engine_config cfg;
	memset(&cfg, 0, sizeof(cfg));
	cfg.diagnose_on_close = 1;
	if (below(r, 4) == 0)
		cfg.store.max_kernels = 256;
	struct engine *e = engine_create(&j->t, &cfg);
	assert_non_null(e);
	struct store *s = engine_store(e);
	store_set_job(s, "property");
	for (uint32_t p = 0; p < P_COUNT; p++)
		j->pid[p] = (uint32_t)store_intern_name(s, phases[p].name);
	for (uint32_t k = 0; k < j->nk; k++) {
		char name[32];
		snprintf(name, sizeof(name), k == 0 ? "sm90_gemm" : k == 1 ? "nccl_all_reduce" : "kernel_%03u", k);
		j->kid[k] = (uint32_t)store_intern_name(s, name);
	}
	int64_t t = 1767225600000000LL;
	for (uint32_t it = 0; it < ITERS; it++) {
		double longest = 0, d;
		for (uint32_t rank = 0; rank < j->t.world; rank++) {
			add_rank_iter(s, r, j, rank, it, t, &d);
			longest = d > longest ? d : longest;
		}
		t += (int64_t)(longest * 1000) + 2000;
		if ((engine_poll(e) & ENGINE_DUE) && j->diagnose_every_due) {
			/* as culpritd: diagnose the window in place with L1's window */
			struct diagnose_input in;
			struct report mid;
			diagnose_input_from_l1(&in, engine_l1(e), t);
			assert_int_equal(diagnose_run(s, &in, NULL, &mid), 0);
			const char *why = report_check(&mid, j->t.world);
			if (why)
				fail_msg("mid-run report: %s", why);
			report_free(&mid);
		}
	}
	assert_int_equal(engine_finish(e, rep), 0);
	engine_destroy(e);
}

static void random_jobs(void **state)
{
	(void)state;
	struct rng r = {20261203};
	uint32_t asserted = 0, named = 0;
	for (uint32_t c = 0; c < CASES; c++) {
		struct job j;
		memset(&j, 0, sizeof(j));
		random_topology(&r, &j.t);
		/* kernel names 1..200, small counts more often (they decide the cost) */
		j.nk = below(&r, 2) ? 1 + below(&r, 20) : 1 + below(&r, MAX_KERNELS);
		j.fault = (enum fault)below(&r, F_COUNT);
		j.factor = 2 + jit(&r, 1); /* 2x to 4x */
		j.diagnose_every_due = below(&r, 4) == 0;
		uint32_t gpn = j.t.gpus_per_node;
		switch (j.fault) {
		case F_SLOW_RANK: j.target = below(&r, j.t.world), j.ntarget = 1; break;
		case F_SLOW_NODE:
		case F_SLOW_COMM: j.target = below(&r, (j.t.world + gpn - 1) / gpn) * gpn, j.ntarget = gpn; break;
		case F_HEAVY_STAGE:
			j.factor = 1.6;
			j.stage = (int)below(&r, j.t.pp);
			break;
		default: break;
		}
		struct report rep;
		run_job(&r, &j, &rep);
		const char *why = report_check(&rep, j.t.world);
		/* clear: peers to compare with (a data-parallel group of 4 or more; with one rank
		 * per stage a slow rank is a heavy stage) */
		int clear = j.fault == F_SLOW_RANK && j.t.world >= 8 && j.t.dp >= 4;
		if (!why && clear) {
			asserted++;
			if (strcmp(rep.category, "compute_degradation") == 0 && names_rank(&rep, &j, j.target))
				named++;
			else
				why = "the verdict does not name the slow rank on its host";
		}
		if (why) {
			char *txt = report_to_text(&rep);
			print_error("case %u: world %u (tp %u cp %u pp %u dp %u ep %u, %u per node), %u "
				    "kernels, %s x%.2f at rank %u: %s\n%s\n",
				    c, j.t.world, j.t.tp, j.t.cp, j.t.pp, j.t.dp, j.t.ep, gpn, j.nk,
				    fault_names[j.fault], j.factor, j.target, why, txt ? txt : "");
			free(txt);
			fail();
		}
		report_free(&rep);
	}
	print_message("%u random jobs, %u with a clear slow rank, named in %u\n", CASES, asserted, named);
	/* the clear cases were many, and each named its rank */
	assert_true(asserted > CASES / 10);
	assert_int_equal(named, asserted);
}

/* 64-rank data parallel, rank 17 twice as slow, 6 compute kernels and one NCCL kernel */
static void dp64_one_slow_rank(void **state)
{
	(void)state;
	struct rng r = {64};
	struct job j;
	memset(&j, 0, sizeof(j));
	char err[64];
	assert_int_equal(topo_init(&j.t, 64, 1, 1, 1, 64, 1, "tp-cp-dp-pp", 8, err, sizeof(err)), 0);
	j.nk = 7;
	j.fault = F_SLOW_RANK;
	j.target = 17, j.ntarget = 1, j.factor = 2;
	struct report rep;
	run_job(&r, &j, &rep);
	assert_null(report_check(&rep, 64));
	assert_string_equal(rep.category, "compute_degradation");
	assert_int_equal(rep.culprits_total, 1);
	assert_int_equal(rep.suspects[0].rank, 17);
	assert_string_equal(rep.suspects[0].host, "node-2");
	report_free(&rep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dp64_one_slow_rank),
		cmocka_unit_test(random_jobs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
