/* fleet.h: a fleet of node agents (agent/agent.h) streaming a synthetic job to a real
 * culpritd, and the check that PostgreSQL holds exactly what they sent. Shared by the
 * ingest integration tests. */
#ifndef CULPRIT_FLEET_H
#define CULPRIT_FLEET_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"

#define FLEET_PHASES 4 /* per rank and iteration, plus 1 iteration record and 1 kernel */

struct fleet_sum {
	uint64_t iters, phases, kernels;
	int64_t iter_dur, phase_dur, kernel_sum; /* sums of the durations sent */
};

struct fleet;

/* n_nodes node agents of 8 ranks each (job world = 8 * n_nodes, PP=9, EP=32) on a few shared
 * network threads, pointed at 127.0.0.1:port. */
struct fleet *fleet_new(const char *job, uint32_t n_nodes, int port);
/* Appends iterations [first, first + n) for every rank; blocks while buffers are full. */
void fleet_stream(struct fleet *f, uint32_t first, uint32_t n);
/* Waits until everything is acknowledged; 0, or -1 when timeout_ms passed first. */
int fleet_flush(struct fleet *f, int timeout_ms);
/* Summed agent counters (connected left false); returns how many agents are connected. */
uint32_t fleet_stats(struct fleet *f, struct agent_stats *sum);
/* Counters of node agent i (agent id "node-<i>"). */
void fleet_agent_stats(struct fleet *f, uint32_t i, struct agent_stats *st);
const struct fleet_sum *fleet_sent(const struct fleet *f);
void fleet_free(struct fleet *f);

/* What the database holds for job (counts, duration sums, duplicate keys); compares with
 * sent. Prints both and returns 0 when they are equal, -1 otherwise. */
int fleet_check_db(const char *dsn, const char *job, const struct fleet_sum *sent);

#endif
