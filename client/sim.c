/* sim.c: synthetic jobs with known faults (see sim.h for the scenarios). */
#include "sim.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
	N_ATTN,
	N_MLP,
	N_EP_DISPATCH,
	N_EP_COMBINE,
	N_TP_ALL_REDUCE,
	N_DP_RS,
	N_PP_SEND_RECV,
	N_OPTIMIZER,
	N_DATA_LOADER,
	N_GEMM,
	N_FLASH,
	N_NCCL_A2A,
	N_NCCL_AR,
	N_EXTRA,
	N_COUNT = N_EXTRA + SIM_MAX_KERNELS - 3
};

/* the extra compute kernels of opt.kernels: "kernel_000" ... "kernel_196" */
#define K10(p) p "0", p "1", p "2", p "3", p "4", p "5", p "6", p "7", p "8", p "9"
#define K100(p)                                                                                                     \
	K10(p "0"), K10(p "1"), K10(p "2"), K10(p "3"), K10(p "4"), K10(p "5"), K10(p "6"), K10(p "7"), K10(p "8"), \
		K10(p "9")

static const char *const names[] = {
	"attn",
	"mlp",
	"ep_dispatch",
	"ep_combine",
	"tp_all_reduce",
	"dp_reduce_scatter",
	"pp_send_recv",
	"optimizer",
	"data_loader",
	"sm90_gemm",
	"flash_attn_fwd",
	"nccl_all_to_all",
	"nccl_all_reduce",
	K100("kernel_0"),
	K10("kernel_10"),
	K10("kernel_11"),
	K10("kernel_12"),
	K10("kernel_13"),
	K10("kernel_14"),
	K10("kernel_15"),
	K10("kernel_16"),
	K10("kernel_17"),
	K10("kernel_18"),
	"kernel_190",
	"kernel_191",
	"kernel_192",
	"kernel_193",
	"kernel_194",
	"kernel_195",
	"kernel_196",
};
_Static_assert(sizeof(names) / sizeof(*names) == N_COUNT && N_COUNT == SIM_NAMES, "sim names");

static const char *const scenario_names[] = {
	"healthy", "case5", "compute_straggler", "link_degradation", "stage_imbalance", "kernel_stall", "host_delay",
	"hang",    NULL,
};

const char *const *sim_names(size_t *n)
{
	if (n)
		*n = N_COUNT;
	return names;
}

const char *const *sim_scenarios(void) { return scenario_names; }

struct phase_model {
	uint32_t name;
	uint8_t kind, group;
	double ms;
};

static const struct phase_model moe_phases[] = {
	{N_ATTN, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 6000},
	{N_MLP, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 12800},
	{N_EP_DISPATCH, RECORD_KIND_COMM, RECORD_GROUP_EP, 2000},
	{N_EP_COMBINE, RECORD_KIND_COMM, RECORD_GROUP_EP, 1500},
	{N_DP_RS, RECORD_KIND_COMM, RECORD_GROUP_DP, 3000},
	{N_PP_SEND_RECV, RECORD_KIND_COMM, RECORD_GROUP_PP, 2500},
	{N_OPTIMIZER, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 1200},
	{N_DATA_LOADER, RECORD_KIND_HOST, RECORD_GROUP_NONE, 1000},
};

static const struct phase_model dense_phases[] = {
	{N_ATTN, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 2000},
	{N_MLP, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 3000},
	{N_TP_ALL_REDUCE, RECORD_KIND_COMM, RECORD_GROUP_TP, 800},
	{N_DP_RS, RECORD_KIND_COMM, RECORD_GROUP_DP, 1200},
	{N_PP_SEND_RECV, RECORD_KIND_COMM, RECORD_GROUP_PP, 1000},
	{N_OPTIMIZER, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, 500},
	{N_DATA_LOADER, RECORD_KIND_HOST, RECORD_GROUP_NONE, 500},
};

struct kernel_model {
	uint32_t name;
	uint8_t kind;
	uint32_t count;
	double us;
};

#define NSAMPLES 8
#define MAX_PHASES 8

/* A run of ranks: the first and how many. */
struct span {
	uint32_t lo, n;
};

/* A scenario's fault (sim.h); a field left out is no such fault. */
struct scenario {
	bool moe;             /* case5's MoE job; else the 1,024-rank dense one */
	struct span culprits; /* ranks whose fault_phase takes extra_ms more */
	uint32_t fault_phase;
	double extra_ms;                       /* the fault's cost to the step, per iteration */
	double gemm_slow;                      /* the culprits' sm90_gemm, this many times slower */
	int64_t first_call_us;                 /* the culprits' first flash_attn_fwd of an iteration (a JIT stall) */
	struct span links;                     /* ranks whose communication is 3x slower */
	struct span stages;                    /* pipeline stages computing 1.6x longer */
	struct span hung;                      /* ranks that stop reporting half way */
	const char *event_host, *event_detail; /* a port_down seen out of band at the onset */
};

/* In the order of scenario_names (the index seeds the run's random numbers). */
static const struct scenario scenarios[] = {
	{.moe = true},
	{.moe = true,
	 .culprits = {10352, 8},
	 .fault_phase = N_MLP,
	 .extra_ms = 12800 * 4.7,
	 .gemm_slow = 5.6,
	 .event_host = "node-1294",
	 .event_detail = "eth3"},
	{.culprits = {517, 1}, .fault_phase = N_MLP, .extra_ms = 3000 * 2, .gemm_slow = 3},
	{.links = {336, 8}, .extra_ms = (800 + 1000) * 2, .event_host = "node-42", .event_detail = "ib0"},
	{.stages = {2, 1}, .extra_ms = (2000 + 3000 + 500) * 0.6},
	{.culprits = {300, 2}, .fault_phase = N_ATTN, .extra_ms = 6000, .first_call_us = 6000000},
	{.culprits = {600, 1}, .fault_phase = N_DATA_LOADER, .extra_ms = 6000},
	{.hung = {777, 1}},
};
_Static_assert(sizeof(scenarios) / sizeof(*scenarios) + 1 == sizeof(scenario_names) / sizeof(*scenario_names),
	       "one scenario a name");

/* rank classes */
enum { C_NORMAL, C_CULPRIT, C_BLOCK_PEER, C_BLOCK_CHAIN, C_LINK, C_STAGE, C_HUNG };

struct rng {
	uint64_t s;
};

static uint64_t next_u64(struct rng *r)
{
	uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static double unit(struct rng *r) { return (double)(next_u64(r) >> 11) * (2.0 / 9007199254740992.0) - 1.0; }

/* One run: the job, its models and the state that goes from iteration to iteration. */
struct sim {
	const struct sim_options *opt;
	const struct sim_sink *sink;
	const struct scenario *sc;
	char jobname[256];
	struct jsonl_job job;
	uint32_t nk, iters, onset;
	const struct phase_model *pm;
	size_t np;
	struct kernel_model km[SIM_MAX_KERNELS];
	double base_ms;
	uint8_t *cls; /* each rank's class */
	struct rng rng;
	int64_t t; /* the iteration's start */
	struct record_phase ph[MAX_PHASES];
	struct record_kernel kr[SIM_MAX_KERNELS];
	int64_t durs[SIM_MAX_KERNELS][NSAMPLES];
	const int64_t *dptr[SIM_MAX_KERNELS];
	size_t nd[SIM_MAX_KERNELS];
};

/* The scenario's job and models; -1 with err set. */
static int sim_setup(struct sim *m, char *err, size_t err_size)
{
	const struct sim_options *opt = m->opt;
	int sc = -1;

	for (int i = 0; scenario_names[i]; i++)
		if (opt->scenario && strcmp(opt->scenario, scenario_names[i]) == 0)
			sc = i;
	if (sc < 0) {
		snprintf(err, err_size, "unknown scenario \"%s\"", opt->scenario ? opt->scenario : "");
		return -1;
	}
	m->sc = &scenarios[sc];
	if (opt->job)
		snprintf(m->jobname, sizeof(m->jobname), "%s", opt->job);
	else
		snprintf(m->jobname, sizeof(m->jobname), "sim-%s", scenario_names[sc]);
	if (m->sc->moe)
		m->job = (struct jsonl_job){.job = m->jobname,
					    .world = 12960,
					    .tp = 1,
					    .cp = 1,
					    .pp = 9,
					    .dp = 1440,
					    .ep = 32,
					    .gpus_per_node = 8,
					    .order = "tp-cp-ep-dp-pp",
					    .device = "gpu"};
	else
		m->job = (struct jsonl_job){.job = m->jobname,
					    .world = 1024,
					    .tp = 8,
					    .cp = 1,
					    .pp = 4,
					    .dp = 32,
					    .ep = 1,
					    .gpus_per_node = 8,
					    .order = "tp-cp-dp-pp",
					    .device = "gpu"};
	m->nk = opt->kernels ? opt->kernels : 3;
	if (m->nk < 3 || m->nk > SIM_MAX_KERNELS) {
		snprintf(err, err_size, "kernels must be 3 to %d", SIM_MAX_KERNELS);
		return -1;
	}
	m->iters = opt->iters ? opt->iters : (m->sc->moe ? 20 : 60);
	m->onset = m->iters / 3;
	m->pm = m->sc->moe ? moe_phases : dense_phases;
	m->np = m->sc->moe ? sizeof(moe_phases) / sizeof(*m->pm) : sizeof(dense_phases) / sizeof(*m->pm);
	m->km[0] = (struct kernel_model){.name = N_GEMM, .kind = RECORD_KIND_COMPUTE, .count = 96, .us = 2500};
	m->km[1] = (struct kernel_model){.name = N_FLASH, .kind = RECORD_KIND_COMPUTE, .count = 48, .us = 1800};
	m->km[2] = (struct kernel_model){
		.name = m->sc->moe ? N_NCCL_A2A : N_NCCL_AR, .kind = RECORD_KIND_COMM, .count = 64, .us = 900};
	/* the small elementwise, norm and copy kernels of a real job: healthy on every rank */
	for (uint32_t k = 3; k < m->nk; k++)
		m->km[k] = (struct kernel_model){.name = N_EXTRA + k - 3,
						 .kind = RECORD_KIND_COMPUTE,
						 .count = 4 + k % 29,
						 .us = 40 + 13.0 * (k % 37)};
	for (size_t p = 0; p < m->np; p++)
		m->base_ms += m->pm[p].ms;
	if (!m->sc->moe)
		m->base_ms += 1000; /* time outside the traced phases */
	for (uint32_t k = 0; k < SIM_MAX_KERNELS; k++) {
		m->dptr[k] = m->durs[k];
		m->nd[k] = NSAMPLES;
	}
	m->rng.s = opt->seed * 0x2545f4914f6cdd1dull + 12345 + (uint64_t)sc;
	m->t = opt->start_us ? opt->start_us : 1767225600000000LL; /* 2026-01-01 */
	return 0;
}

/* Which ranks are what: the faulty ones and those that wait for them. */
static void classify(struct sim *m)
{
	const struct scenario *sc = m->sc;
	uint32_t W = m->job.world, per_stage = W / m->job.pp;

	memset(m->cls, C_NORMAL, W);
	for (uint32_t r = sc->links.lo; r < sc->links.lo + sc->links.n; r++)
		m->cls[r] = C_LINK;
	for (uint32_t r = sc->stages.lo * per_stage; r < (sc->stages.lo + sc->stages.n) * per_stage; r++)
		m->cls[r] = C_STAGE;
	for (uint32_t r = sc->hung.lo; r < sc->hung.lo + sc->hung.n; r++)
		m->cls[r] = C_HUNG;
	if (sc->culprits.n) {
		/* the dp block (EP group, or for dense jobs the dp index) of the culprits waits
		 * at their stage and, through the pipeline, at every other stage */
		uint32_t c0 = sc->culprits.lo;
		uint32_t block = sc->moe ? m->job.ep : 1;
		uint32_t stage0 = c0 / per_stage;
		uint32_t dp0 = sc->moe ? (c0 % per_stage) : (c0 % per_stage) / m->job.tp;
		uint32_t blo = dp0 - dp0 % block;
		for (uint32_t r = 0; r < W; r++) {
			uint32_t st = r / per_stage;
			uint32_t dp = sc->moe ? r % per_stage : (r % per_stage) / m->job.tp;
			if (dp >= blo && dp < blo + block)
				m->cls[r] = st == stage0 ? C_BLOCK_PEER : C_BLOCK_CHAIN;
		}
		for (uint32_t r = sc->culprits.lo; r < sc->culprits.lo + sc->culprits.n; r++)
			m->cls[r] = C_CULPRIT;
	}
}

/* A phase of a rank of class c in a faulty iteration: its time, ms. */
static double faulty_phase_ms(const struct sim *m, uint8_t c, const struct phase_model *p, double ms, double extra)
{
	const struct scenario *sc = m->sc;
	uint32_t n = p->name;

	switch (c) {
	case C_CULPRIT:
		if (n == sc->fault_phase)
			ms += extra;
		if (n == N_DP_RS)
			ms *= 0.5;
		break;
	case C_BLOCK_PEER:
		if (sc->moe && n == N_EP_DISPATCH)
			ms += extra * 2 / 3;
		if (sc->moe && n == N_EP_COMBINE)
			ms += extra / 3;
		if (!sc->moe && n == N_TP_ALL_REDUCE)
			ms += extra;
		if (n == N_DP_RS)
			ms *= 0.5;
		break;
	case C_BLOCK_CHAIN:
		if (n == N_PP_SEND_RECV)
			ms += extra;
		if (n == N_DP_RS)
			ms *= 0.5;
		break;
	case C_LINK:
		if (n == N_TP_ALL_REDUCE || n == N_PP_SEND_RECV)
			ms *= 3;
		break;
	case C_STAGE:
		if (p->kind == RECORD_KIND_COMPUTE)
			ms *= 1.6;
		break;
	default:
		/* the stage's sends, or the other classes' reduce-scatter */
		if ((sc->stages.n && n == N_PP_SEND_RECV) || (!sc->stages.n && n == N_DP_RS))
			ms += extra;
		break;
	}
	return ms;
}

/* Rank r's phases of iteration it into m->ph, one after the other from its start. */
static void rank_phases(struct sim *m, uint32_t r, uint32_t it, int faulty, double extra, double housekeeping)
{
	int64_t off = 0;

	for (size_t p = 0; p < m->np; p++) {
		double ms = m->pm[p].ms * (1 + 0.03 * unit(&m->rng));
		uint32_t n = m->pm[p].name;
		if (n == N_DATA_LOADER)
			ms += housekeeping;
		if (faulty)
			ms = faulty_phase_ms(m, m->cls[r], &m->pm[p], ms, extra);
		m->ph[p] = (struct record_phase){.rank = r,
						 .iter = it,
						 .name = n,
						 .kind = m->pm[p].kind,
						 .group = m->pm[p].group,
						 .start_us = off,
						 .dur_us = (int64_t)(ms * 1000)};
		off += m->ph[p].dur_us;
	}
}

/* Rank r's kernel summaries of iteration it into m->kr, from NSAMPLES sampled durations each. */
static void rank_kernels(struct sim *m, uint32_t r, uint32_t it, int faulty)
{
	const struct scenario *sc = m->sc;
	uint8_t c = m->cls[r];

	for (size_t k = 0; k < m->nk; k++) {
		const struct kernel_model *km = &m->km[k];
		double f = 1;
		if (faulty && c == C_CULPRIT && km->name == N_GEMM && sc->gemm_slow)
			f = sc->gemm_slow;
		if (faulty && c == C_LINK && km->kind == RECORD_KIND_COMM)
			f = 3;
		if (faulty && km->kind == RECORD_KIND_COMM && c != C_CULPRIT && c != C_LINK && sc->extra_ms > 0)
			f = 1.5; /* NCCL kernels of waiting ranks include the wait */
		int64_t mn = INT64_MAX, mx = 0, sum = 0;
		for (size_t s = 0; s < NSAMPLES; s++) {
			int64_t d = (int64_t)(km->us * f * (1 + 0.03 * unit(&m->rng)));
			if (s == 0 && faulty && c == C_CULPRIT && sc->first_call_us && km->name == N_FLASH)
				d = sc->first_call_us;
			m->durs[k][s] = d;
			sum += d;
			mn = d < mn ? d : mn;
			mx = d > mx ? d : mx;
		}
		m->kr[k] = (struct record_kernel){.rank = r,
						  .iter = it,
						  .name = km->name,
						  .kind = km->kind,
						  .count = km->count,
						  .sum_us = sum * km->count / NSAMPLES,
						  .min_us = mn,
						  .max_us = mx,
						  .p50_us = m->durs[k][NSAMPLES / 2],
						  .p99_us = mx};
	}
}

/* Iteration it of every rank to the sink; -1 when the sink failed. */
static int sim_iteration(struct sim *m, uint32_t it)
{
	const struct sim_options *opt = m->opt;
	const struct sim_sink *sink = m->sink;
	int faulty = it >= m->onset && (!opt->recover_at || it < opt->recover_at);
	double extra = faulty ? m->sc->extra_ms : 0;
	double housekeeping = 0;
	uint32_t hang_after = m->iters / 2 - 1;

	if (it % 50 == 49)
		housekeeping += 2.5 * m->base_ms; /* checkpoint on every rank */
	else if (it % 25 == 12)
		housekeeping += 0.4 * m->base_ms; /* eval step */
	double T = m->base_ms * (1 + 0.05 * unit(&m->rng)) + housekeeping + extra;
	if (faulty && it == m->onset && m->sc->event_host && sink->event &&
	    sink->event(sink->ctx, m->sc->event_host, "port_down", m->t - 10000000, "oob", m->sc->event_detail) < 0)
		return -1;
	for (uint32_t r = 0; r < m->job.world; r++) {
		if (m->cls[r] == C_HUNG && it > hang_after)
			continue;
		struct sim_rank_iter ri = {.iter = {.rank = r, .iter = it}};
		ri.iter.start_us = m->t + (int64_t)(1000 + 1000 * unit(&m->rng));
		ri.iter.dur_us = (int64_t)(T * 1000 * (1 + 0.001 * unit(&m->rng)));
		if (!opt->iters_only) {
			rank_phases(m, r, it, faulty, extra, housekeeping);
			rank_kernels(m, r, it, faulty);
			ri.phases = m->ph;
			ri.nphases = m->np;
			ri.kernels = m->kr;
			ri.nkernels = m->nk;
			ri.kernel_durs = m->dptr;
			ri.kernel_ndurs = m->nd;
		}
		if (sink->rank_iter(sink->ctx, &ri) < 0)
			return -1;
	}
	m->t += (int64_t)(T * 1000);
	return 0;
}

int sim_run(const struct sim_options *opt, const struct sim_sink *sink, char *err, size_t err_size)
{
	struct sim *m = calloc(1, sizeof(*m));
	int rc = -1;

	if (!m) {
		snprintf(err, err_size, "out of memory");
		return -1;
	}
	m->opt = opt;
	m->sink = sink;
	if (sim_setup(m, err, err_size) < 0)
		goto out;
	if (!(m->cls = malloc(m->job.world))) {
		snprintf(err, err_size, "out of memory");
		goto out;
	}
	classify(m);
	if (sink->job && sink->job(sink->ctx, &m->job) < 0) {
		snprintf(err, err_size, "sink refused the job");
		goto out;
	}
	for (uint32_t r = 0; sink->host && r < m->job.world; r++) {
		char host[32];
		snprintf(host, sizeof(host), "node-%u", r / m->job.gpus_per_node);
		if (sink->host(sink->ctx, r, host) < 0) {
			snprintf(err, err_size, "sink refused a host");
			goto out;
		}
	}
	for (uint32_t it = 0; it < m->iters; it++)
		if (sim_iteration(m, it) < 0) {
			snprintf(err, err_size, "sink failed");
			goto out;
		}
	rc = 0;
out:
	free(m->cls);
	free(m);
	return rc;
}

int sim_intern_names(struct store *s, uint32_t *ids)
{
	for (uint32_t i = 0; i < N_COUNT; i++) {
		int id = store_intern_name(s, names[i]);
		if (id < 0)
			return -1;
		ids[i] = (uint32_t)id;
	}
	return 0;
}

int sim_add_to_store(struct store *s, const uint32_t *ids, const struct sim_rank_iter *ri)
{
	int rc = store_add_iter(s, &ri->iter) < 0 ? -1 : 0;
	for (size_t p = 0; p < ri->nphases && !rc; p++) {
		struct record_phase ph = ri->phases[p];
		ph.name = ids[ph.name];
		rc = store_add_phase(s, &ph) < 0 ? -1 : 0;
	}
	for (size_t k = 0; k < ri->nkernels && !rc; k++) {
		struct record_kernel kr = ri->kernels[k];
		kr.name = ids[kr.name];
		rc = store_add_kernel(s, &kr, ri->kernel_durs[k], ri->kernel_ndurs[k]) < 0 ? -1 : 0;
	}
	return rc;
}
