/* sim.h: scenario generator for `culprit sim` and the scenario tests.
 *
 * Records go to a sink callback, one call per rank per iteration with the iteration record,
 * its phases and its kernel summaries (names are indexes into sim_names()), so the same
 * generator feeds a JSONL file, the agent library or a window store directly.
 *
 * Scenarios (faults start at iteration iters / 3; every scenario has ±5% jitter of the job's
 * iteration time, per-rank phase jitter, a checkpoint stall on all ranks every 50
 * iterations and an eval step every 25):
 *   healthy            MoE job of case5's shape, nothing wrong.
 *   case5              TP=1 PP=9 DP=1440 EP=32, 12,960 ranks: ranks 10352-10359 (node-1294)
 *                      run mlp 5.7x slower; EP group 10336-10367 waits in ep_dispatch /
 *                      ep_combine, DP=256-287 of the other stages wait in pp_send_recv, all
 *                      of DP=256-287 have a shorter dp_reduce_scatter, everyone else a longer
 *                      one; a port_down event on node-1294. 30 s -> ~91 s per iteration.
 *   compute_straggler  dense TP=8 PP=4 DP=32 (1,024 ranks, order tp-cp-dp-pp): rank 517
 *                      (node-64) runs mlp 3x slower.
 *   link_degradation   dense: the 8 ranks of node-42 (336-343) have communication phases and
 *                      NCCL kernels 3x slower, compute normal; port_down event on node-42.
 *   stage_imbalance    dense: pipeline stage 2 computes 1.6x longer on every rank.
 *   kernel_stall       dense: ranks 300 and 301 (node-37) recompile flash_attn_fwd at its
 *                      first call of every iteration (6 s) — a JIT stall.
 *   host_delay         dense: rank 600 (node-75) spends 6 s more in its data_loader (host)
 *                      phase, GPU compute normal; it arrives late to the collectives.
 *   hang               dense: rank 777 (node-97) stops reporting after iteration iters / 2 - 1
 *                      while the rest of the job goes on.
 * Kernels: every rank reports sm90_gemm, flash_attn_fwd and one NCCL kernel (slowed by the
 * scenario's fault as above), plus opt.kernels - 3 healthy compute kernels "kernel_NNN" (a
 * real PyTorch job has dozens of kernel names). */
#ifndef CULPRIT_SIM_H
#define CULPRIT_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"
#include "record.h"
#include "store.h"
#include "attrs.h"

struct sim_rank_iter {
	struct record_iter iter;
	const struct record_phase *phases;
	size_t nphases;
	const struct record_kernel *kernels; /* summaries; sketch NULL */
	size_t nkernels;
	const int64_t *const *kernel_durs; /* sampled durations of kernel i */
	const size_t *kernel_ndurs;
};

struct sim_sink {
	void *ctx;
	int (*job)(void *ctx, const struct jsonl_job *job);
	int (*rank_iter)(void *ctx, const struct sim_rank_iter *ri);
	/* the host of each rank, once, after the job (NULL: not wanted): the simulated cluster's
	 * nodes are node-<rank / gpus_per_node> */
	int (*host)(void *ctx, uint32_t rank, const char *host);
	int (*event)(void *ctx, const char *host, const char *kind, int64_t ts_us, const char *source,
		     const char *detail);
};

struct sim_options {
	const char *scenario;
	uint64_t seed;
	uint32_t iters;      /* 0: the scenario's default (case5 and healthy 20, others 60) */
	int iters_only;      /* emit only iteration records (fast large runs) */
	int64_t start_us;    /* the job's first iteration, us since the epoch (0: 2026-01-01, fixed
	                   * so that files are reproducible; streaming uses now) */
	uint32_t recover_at; /* 0: the fault lasts to the end; else it ends at this iteration */
	uint32_t kernels;    /* kernel names per rank, 3 to SIM_MAX_KERNELS (0: 3) */
	const char *job;     /* the job's name (NULL: "sim-<scenario>") */
};

#define SIM_MAX_KERNELS 200
#define SIM_NAMES (13 + SIM_MAX_KERNELS - 3) /* names in sim_names() */

/* The name dictionary the records index into. */
const char *const *sim_names(size_t *n);
/* NULL-terminated list of scenario names. */
const char *const *sim_scenarios(void);
/* Runs a scenario into sink. Returns 0, -1 with a message in err (unknown scenario, or a
 * sink callback failed: its return value is passed through as -1). */
MUST_CHECK int sim_run(const struct sim_options *opt, const struct sim_sink *sink, char *err, size_t err_size);

/* Feeding a window store directly: intern every sim name (ids must hold the count returned
 * by sim_names), then add each rank-iteration. Both return 0, or -1 when out of memory. */
MUST_CHECK int sim_intern_names(struct store *s, uint32_t *ids);
MUST_CHECK int sim_add_to_store(struct store *s, const uint32_t *ids, const struct sim_rank_iter *ri);

#endif
