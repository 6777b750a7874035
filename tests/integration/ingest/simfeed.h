/* simfeed.h: a `culprit sim` scenario streamed from inside the test process by real agents
 * (client/fanout.h over the agent library), so that a fault test can see what the agents
 * see (acknowledged, unacknowledged, dropped) and knows exactly what they sent (counts and
 * duration sums, for fleet_check_db). The scenario runs on a thread of its own. */
#ifndef CULPRIT_TEST_SIMFEED_H
#define CULPRIT_TEST_SIMFEED_H

#include <stddef.h>
#include <stdint.h>

#include "fanout.h"
#include "fleet.h"

struct simfeed_config {
	const char *scenario;
	uint32_t iters, recover_at; /* as culprit sim --iters, --recover-at (0: the fault lasts) */
	int port;                   /* culpritd's agent port on 127.0.0.1 */
	/* pacing: > 0, one iteration every ms_per_iter of wall time; 0, near lockstep: an
	 * iteration starts when every batch of the one before the previous is acknowledged */
	int ms_per_iter;
	uint32_t hold_at;         /* > 0: wait for simfeed_release() before this iteration */
	size_t max_unacked_bytes; /* per agent (0: the fanout's default) */
	/* > 0: the ranks of node lag_host (its gpus_per_node ranks) are fed lag_iters iterations
	 * after the others, from iteration lag_from on: an agent whose records arrive late */
	uint32_t lag_iters, lag_from;
	int lag_host;
};

struct simfeed;

/* Starts streaming; exits the test on failure. */
struct simfeed *simfeed_start(const struct simfeed_config *cfg);
/* The iteration being fed (the sim goes iteration by iteration over all ranks). */
uint32_t simfeed_iter(struct simfeed *sf);
/* 1 once the scenario has been fed entirely. */
int simfeed_fed(struct simfeed *sf);
/* 1 while the feeder waits at hold_at. */
int simfeed_holding(struct simfeed *sf);
void simfeed_release(struct simfeed *sf);
/* Summed agent counters (zeros until every agent exists, after the first iteration). */
void simfeed_stats(struct simfeed *sf, struct fanout_stats *st);
/* Waits for the feeder, then for every record to be acknowledged (timeout_ms); closes the
 * agents. Final counters in *st. 0 when everything was acknowledged. */
int simfeed_finish(struct simfeed *sf, int timeout_ms, struct fanout_stats *st);
/* What was sent (valid after simfeed_finish). */
const struct fleet_sum *simfeed_sent(const struct simfeed *sf);
const char *simfeed_job(const struct simfeed *sf);
void simfeed_free(struct simfeed *sf);

#endif
