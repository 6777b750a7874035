/* sim_capture.c: see sim_capture.h. */
#include "sim_capture.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define KERNELS_PER_COMPUTE 4
#define COMPUTE_STREAM 7
#define COMM_STREAM 13
#define MAX_RAW 64 /* per rank-iteration */

struct rank_capture {
	uint64_t id;       /* capture id applied (0: none) */
	uint32_t from, to; /* iterations [from, to) */
	uint32_t budget;   /* kernels left */
};

struct sim_capture {
	uint32_t world;
	struct rank_capture *ranks;
	bool polled;
	uint32_t polled_iter;
	uint32_t cur_iter;
	uint64_t sent;
};

struct sim_capture *sim_capture_new(uint32_t world)
{
	struct sim_capture *c = calloc(1, sizeof(*c));

	if (!c || !(c->ranks = calloc(world ? world : 1, sizeof(*c->ranks)))) {
		free(c);
		return NULL;
	}
	c->world = world;
	return c;
}

void sim_capture_free(struct sim_capture *c)
{
	if (c)
		free(c->ranks);
	free(c);
}

uint64_t sim_capture_sent(const struct sim_capture *c) { return c->sent; }

static void on_command(void *arg, const struct agent_command *cmd)
{
	struct sim_capture *c = arg;

	if (cmd->kind != 1 || cmd->iterations == 0 || cmd->n_ranks == 0)
		return;
	for (size_t i = 0; i < cmd->n_ranks; i++) {
		struct rank_capture *rc;

		if (cmd->ranks[i] >= c->world)
			continue;
		rc = &c->ranks[cmd->ranks[i]];
		if (rc->id == cmd->id)
			continue; /* already applied (the latest command stays until the next) */
		rc->id = cmd->id;
		rc->from = c->cur_iter;
		rc->to = c->cur_iter + cmd->iterations;
		rc->budget = cmd->max_events / (uint32_t)cmd->n_ranks;
		if (rc->budget == 0)
			rc->budget = 1;
	}
}

/* The kernel a phase runs, by the phase's name and kind; NULL: none (host phases). */
static const char *kernel_of(const char *phase, uint8_t kind, uint32_t *stream, int *count)
{
	*stream = COMPUTE_STREAM;
	*count = KERNELS_PER_COMPUTE;
	if (kind == RECORD_KIND_COMM || kind == RECORD_KIND_MIXED) {
		*stream = COMM_STREAM;
		*count = 1;
		return strncmp(phase, "ep_", 3) == 0 ? "nccl_all_to_all" : "nccl_all_reduce";
	}
	if (kind != RECORD_KIND_COMPUTE)
		return NULL;
	if (strcmp(phase, "attn") == 0)
		return "flash_attn_fwd";
	if (strcmp(phase, "mlp") == 0)
		return "sm90_gemm";
	return "multi_tensor_apply";
}

int sim_capture_rank_iter(struct sim_capture *c, struct fanout *f, const struct sim_rank_iter *ri,
			  const char *const *names, const char **why)
{
	struct record_raw_kernel raw[MAX_RAW];
	const char *rn[MAX_RAW];
	struct rank_capture *rc;
	size_t n = 0;

	c->cur_iter = ri->iter.iter;
	if (!c->polled || ri->iter.iter != c->polled_iter) {
		/* once per iteration: commands that arrived meanwhile */
		c->polled = true;
		c->polled_iter = ri->iter.iter;
		fanout_each_command(f, on_command, c);
	}
	if (ri->iter.rank >= c->world)
		return 0;
	rc = &c->ranks[ri->iter.rank];
	if (!rc->id || ri->iter.iter < rc->from || ri->iter.iter >= rc->to || rc->budget == 0)
		return 0;
	for (size_t p = 0; p < ri->nphases && n < MAX_RAW; p++) {
		const struct record_phase *ph = &ri->phases[p];
		uint32_t stream;
		int count;
		const char *k = kernel_of(names[ph->name], ph->kind, &stream, &count);
		int64_t start, slot;

		if (!k || ph->start_us == RECORD_NO_START || ph->dur_us <= 0)
			continue;
		start = ri->iter.start_us + ph->start_us;
		slot = ph->dur_us / count;
		for (int i = 0; i < count && n < MAX_RAW && n < rc->budget; i++) {
			raw[n].rank = ri->iter.rank;
			raw[n].iter = ri->iter.iter;
			raw[n].name = 0; /* fanout interns rn[n] */
			raw[n].kind = ph->kind == RECORD_KIND_COMPUTE ? RECORD_KIND_COMPUTE : RECORD_KIND_COMM;
			raw[n].stream = stream;
			/* a kernel fills 90% of its slot, launched after a 5% gap */
			raw[n].start_us = start + slot * i + slot / 20;
			raw[n].dur_us = slot * 9 / 10;
			rn[n] = k;
			n++;
		}
	}
	if (n == 0)
		return 0;
	rc->budget -= (uint32_t)n;
	c->sent += n;
	return fanout_raw_kernels(f, raw, rn, n, why);
}
