/* sim_capture.h: `culprit sim --server` answering on-demand captures (Command CAPTURE).
 *
 * At every iteration boundary the simulator reads its agents' latest Command; a capture not
 * seen before starts, for each of its ranks, at the iteration being generated and lasts
 * `iterations` iterations. For a captured rank-iteration it sends plausible raw kernels laid
 * out inside the phases: 4 kernels per compute phase on stream 7 (flash_attn_fwd in attn,
 * sm90_gemm in mlp, multi_tensor_apply in optimizer), one NCCL kernel per communication
 * phase on stream 13, none for host phases — so a rank whose mlp is slow (case5's
 * 10352-10359) shows long GEMM kernels. Each rank gets at most max_events / (ranks of the
 * agent's command) kernels, so an agent stays within max_events. */
#ifndef CULPRIT_SIM_CAPTURE_H
#define CULPRIT_SIM_CAPTURE_H

#include <stdint.h>

#include "fanout.h"
#include "sim.h"
#include "attrs.h"

struct sim_capture;

struct sim_capture *sim_capture_new(uint32_t world);
void sim_capture_free(struct sim_capture *c);
/* For each rank-iteration, after its records went to f (names: the simulator's). 0, or -1
 * with *why. */
MUST_CHECK int sim_capture_rank_iter(struct sim_capture *c, struct fanout *f, const struct sim_rank_iter *ri,
			  const char *const *names, const char **why);
/* Raw kernels sent so far. */
uint64_t sim_capture_sent(const struct sim_capture *c);

#endif
