/* sim.c: synthetic jobs with known faults (see sim.h for the scenarios). */
#include "sim.h"

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

static const char *const scenarios[] = {
	"healthy", "case5", "compute_straggler", "link_degradation", "stage_imbalance", "kernel_stall", "host_delay",
	"hang",    NULL,
};

const char *const *sim_names(size_t *n)
{
	if (n)
		*n = N_COUNT;
	return names;
}

const char *const *sim_scenarios(void) { return scenarios; }

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

enum scen { S_HEALTHY, S_CASE5, S_STRAGGLER, S_LINK, S_STAGE, S_STALL, S_HOST, S_HANG };

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

int sim_run(const struct sim_options *opt, const struct sim_sink *sink, char *err, size_t errlen)
{
	int sc = -1;
	for (int i = 0; scenarios[i]; i++)
		if (opt->scenario && strcmp(opt->scenario, scenarios[i]) == 0)
			sc = i;
	if (sc < 0) {
		snprintf(err, errlen, "unknown scenario \"%s\"", opt->scenario ? opt->scenario : "");
		return -1;
	}
	int moe = sc == S_HEALTHY || sc == S_CASE5;
	char jobname[256];
	if (opt->job)
		snprintf(jobname, sizeof(jobname), "%s", opt->job);
	else
		snprintf(jobname, sizeof(jobname), "sim-%s", scenarios[sc]);
	struct jsonl_job job = {.job = jobname, .world = 12960, .tp = 1, .cp = 1, .pp = 9, .dp = 1440, .ep = 32,
				.gpus_per_node = 8, .order = "tp-cp-ep-dp-pp", .device = "gpu"};
	if (!moe)
		job = (struct jsonl_job){.job = jobname, .world = 1024, .tp = 8, .cp = 1, .pp = 4, .dp = 32, .ep = 1,
					 .gpus_per_node = 8, .order = "tp-cp-dp-pp", .device = "gpu"};
	uint32_t nk = opt->kernels ? opt->kernels : 3;
	if (nk < 3 || nk > SIM_MAX_KERNELS) {
		snprintf(err, errlen, "kernels must be 3 to %d", SIM_MAX_KERNELS);
		return -1;
	}
	uint32_t iters = opt->iters ? opt->iters : (moe ? 20 : 60);
	uint32_t onset = iters / 3;
	const struct phase_model *pm = moe ? moe_phases : dense_phases;
	size_t np = moe ? sizeof(moe_phases) / sizeof(*pm) : sizeof(dense_phases) / sizeof(*pm);
	struct kernel_model km[SIM_MAX_KERNELS] = {
		{N_GEMM, RECORD_KIND_COMPUTE, 96, 2500},
		{N_FLASH, RECORD_KIND_COMPUTE, 48, 1800},
		{moe ? N_NCCL_A2A : N_NCCL_AR, RECORD_KIND_COMM, 64, 900},
	};
	/* the small elementwise, norm and copy kernels of a real job: healthy on every rank */
	for (uint32_t k = 3; k < nk; k++)
		km[k] = (struct kernel_model){N_EXTRA + k - 3, RECORD_KIND_COMPUTE, 4 + k % 29, 40 + 13.0 * (k % 37)};
	double base_ms = 0;
	for (size_t p = 0; p < np; p++)
		base_ms += pm[p].ms;
	if (!moe)
		base_ms += 1000; /* time outside the traced phases */

	/* which ranks are what, and the fault's extra time per iteration */
	uint32_t W = job.world, per_stage = W / job.pp;
	uint8_t *cls = malloc(W);
	if (!cls) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memset(cls, C_NORMAL, W);
	double extra = 0;
	int fault_phase = -1;
	uint32_t culprit_lo = 0, culprit_n = 0;
	switch (sc) {
	case S_CASE5: culprit_lo = 10352, culprit_n = 8, fault_phase = N_MLP, extra = 12800 * 4.7; break;
	case S_STRAGGLER: culprit_lo = 517, culprit_n = 1, fault_phase = N_MLP, extra = 3000 * 2; break;
	case S_STALL: culprit_lo = 300, culprit_n = 2, fault_phase = N_ATTN, extra = 6000; break;
	case S_HOST: culprit_lo = 600, culprit_n = 1, fault_phase = N_DATA_LOADER, extra = 6000; break;
	case S_LINK:
		for (uint32_t r = 336; r < 344; r++)
			cls[r] = C_LINK;
		extra = (800 + 1000) * 2;
		break;
	case S_STAGE:
		for (uint32_t r = 2 * per_stage; r < 3 * per_stage; r++)
			cls[r] = C_STAGE;
		extra = (2000 + 3000 + 500) * 0.6;
		break;
	case S_HANG: cls[777] = C_HUNG; break;
	default: break;
	}
	if (culprit_n) {
		/* the dp block (EP group, or for dense jobs the dp index) of the culprits waits
		 * at their stage and, through the pipeline, at every other stage */
		uint32_t c0 = culprit_lo;
		uint32_t block = moe ? job.ep : 1;
		uint32_t stage0 = c0 / per_stage;
		uint32_t dp0 = moe ? (c0 % per_stage) : (c0 % per_stage) / job.tp;
		uint32_t blo = dp0 - dp0 % block;
		for (uint32_t r = 0; r < W; r++) {
			uint32_t st = r / per_stage;
			uint32_t dp = moe ? r % per_stage : (r % per_stage) / job.tp;
			if (dp >= blo && dp < blo + block)
				cls[r] = st == stage0 ? C_BLOCK_PEER : C_BLOCK_CHAIN;
		}
		for (uint32_t r = culprit_lo; r < culprit_lo + culprit_n; r++)
			cls[r] = C_CULPRIT;
	}

	struct rng rng = {opt->seed * 0x2545f4914f6cdd1dull + 12345 + (uint64_t)sc};
	if (sink->job && sink->job(sink->ctx, &job) < 0) {
		free(cls);
		snprintf(err, errlen, "sink refused the job");
		return -1;
	}
	for (uint32_t r = 0; sink->host && r < W; r++) {
		char host[32];
		snprintf(host, sizeof(host), "node-%u", r / job.gpus_per_node);
		if (sink->host(sink->ctx, r, host) < 0) {
			free(cls);
			snprintf(err, errlen, "sink refused a host");
			return -1;
		}
	}
	int64_t t = opt->start_us ? opt->start_us : 1767225600000000LL; /* 2026-01-01 */
	struct record_phase ph[MAX_PHASES];
	struct record_kernel kr[SIM_MAX_KERNELS];
	int64_t durs[SIM_MAX_KERNELS][NSAMPLES];
	const int64_t *dptr[SIM_MAX_KERNELS];
	size_t nd[SIM_MAX_KERNELS];
	for (uint32_t k = 0; k < SIM_MAX_KERNELS; k++) {
		dptr[k] = durs[k];
		nd[k] = NSAMPLES;
	}
	uint32_t hang_after = iters / 2 - 1;
	for (uint32_t it = 0; it < iters; it++) {
		int faulty = it >= onset && (!opt->recover_at || it < opt->recover_at);
		double extra_now = faulty ? extra : 0;
		double housekeeping = 0;
		if (it % 50 == 49)
			housekeeping += 2.5 * base_ms; /* checkpoint on every rank */
		else if (it % 25 == 12)
			housekeeping += 0.4 * base_ms; /* eval step */
		double T = base_ms * (1 + 0.05 * unit(&rng)) + housekeeping + extra_now;
		if (faulty && it == onset) {
			if (sc == S_CASE5 && sink->event &&
			    sink->event(sink->ctx, "node-1294", "port_down", t - 10000000, "oob", "eth3") < 0)
				goto sink_failed;
			if (sc == S_LINK && sink->event &&
			    sink->event(sink->ctx, "node-42", "port_down", t - 10000000, "oob", "ib0") < 0)
				goto sink_failed;
		}
		for (uint32_t r = 0; r < W; r++) {
			uint8_t c = cls[r];
			if (c == C_HUNG && it > hang_after)
				continue;
			struct sim_rank_iter ri;
			memset(&ri, 0, sizeof(ri));
			ri.iter.rank = r;
			ri.iter.iter = it;
			ri.iter.start_us = t + (int64_t)(1000 + 1000 * unit(&rng));
			ri.iter.dur_us = (int64_t)(T * 1000 * (1 + 0.001 * unit(&rng)));
			if (!opt->iters_only) {
				int64_t off = 0;
				for (size_t p = 0; p < np; p++) {
					double ms = pm[p].ms * (1 + 0.03 * unit(&rng));
					uint32_t n = pm[p].name;
					if (n == N_DATA_LOADER)
						ms += housekeeping;
					if (faulty) {
						switch (c) {
						case C_CULPRIT:
							if ((int)n == fault_phase)
								ms += extra_now;
							if (n == N_DP_RS)
								ms *= 0.5;
							break;
						case C_BLOCK_PEER:
							if (moe && n == N_EP_DISPATCH)
								ms += extra_now * 2 / 3;
							if (moe && n == N_EP_COMBINE)
								ms += extra_now / 3;
							if (!moe && n == N_TP_ALL_REDUCE)
								ms += extra_now;
							if (n == N_DP_RS)
								ms *= 0.5;
							break;
						case C_BLOCK_CHAIN:
							if (n == N_PP_SEND_RECV)
								ms += extra_now;
							if (n == N_DP_RS)
								ms *= 0.5;
							break;
						case C_LINK:
							if (n == N_TP_ALL_REDUCE || n == N_PP_SEND_RECV)
								ms *= 3;
							break;
						case C_STAGE:
							if (pm[p].kind == RECORD_KIND_COMPUTE)
								ms *= 1.6;
							break;
						default:
							/* the stage's sends, or the other classes' reduce-scatter */
							if ((sc == S_STAGE && n == N_PP_SEND_RECV) ||
							    (sc != S_STAGE && n == N_DP_RS))
								ms += extra_now;
							break;
						}
					}
					ph[p].rank = r;
					ph[p].iter = it;
					ph[p].name = n;
					ph[p].kind = pm[p].kind;
					ph[p].group = pm[p].group;
					ph[p].start_us = off;
					ph[p].dur_us = (int64_t)(ms * 1000);
					off += ph[p].dur_us;
				}
				for (size_t k = 0; k < nk; k++) {
					double f = 1;
					if (faulty && c == C_CULPRIT && km[k].name == N_GEMM && fault_phase == N_MLP)
						f = sc == S_CASE5 ? 5.6 : 3;
					if (faulty && c == C_LINK && km[k].kind == RECORD_KIND_COMM)
						f = 3;
					if (faulty && km[k].kind == RECORD_KIND_COMM && c != C_CULPRIT && c != C_LINK &&
					    extra > 0)
						f = 1.5; /* NCCL kernels of waiting ranks include the wait */
					int64_t mn = INT64_MAX, mx = 0, sum = 0;
					for (size_t s = 0; s < NSAMPLES; s++) {
						int64_t d = (int64_t)(km[k].us * f * (1 + 0.03 * unit(&rng)));
						if (s == 0 && faulty && c == C_CULPRIT && sc == S_STALL &&
						    km[k].name == N_FLASH)
							d = 6000000; /* JIT compilation at the first call */
						durs[k][s] = d;
						sum += d;
						mn = d < mn ? d : mn;
						mx = d > mx ? d : mx;
					}
					memset(&kr[k], 0, sizeof(kr[k]));
					kr[k].rank = r;
					kr[k].iter = it;
					kr[k].name = km[k].name;
					kr[k].kind = km[k].kind;
					kr[k].count = km[k].count;
					kr[k].sum_us = sum * km[k].count / NSAMPLES;
					kr[k].min_us = mn;
					kr[k].max_us = mx;
					kr[k].p50_us = durs[k][NSAMPLES / 2];
					kr[k].p99_us = mx;
				}
				ri.phases = ph;
				ri.nphases = np;
				ri.kernels = kr;
				ri.nkernels = nk;
				ri.kernel_durs = dptr;
				ri.kernel_ndurs = nd;
			}
			if (sink->rank_iter(sink->ctx, &ri) < 0)
				goto sink_failed;
		}
		t += (int64_t)(T * 1000);
	}
	free(cls);
	return 0;
sink_failed:
	free(cls);
	snprintf(err, errlen, "sink failed");
	return -1;
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
