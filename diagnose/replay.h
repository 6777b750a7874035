/* replay.h: a window's steps replayed through their waits, and what-ifs on them
 * (docs/method.md, "Time lost, by replay").
 *
 * Each iteration is replayed on its own. Every rank runs its phases in step order (the
 * typical start of each phase, store_phase_start; the order the names came in when phases
 * carry no start): a compute or host phase takes its duration; a communication phase is a
 * collective of the members of its group (l2_collective_dim) that hold it that iteration,
 * which each member leaves at the last arrival plus its own transfer. A member's transfer
 * is what its recorded stay holds beyond its wait for the last arrival, the arrivals taken
 * from the recorded durations (the last arriver's transfer is its whole stay). The step is
 * the latest end over the ranks: the recorded step less what no phase covers.
 *
 * A what-if puts some cells at a reference and replays the same iteration; what it
 * recovers is the replayed step less the what-if's. Its gain is the mean over the
 * iterations replayed, so a pause of one iteration in ten recovers a tenth of itself. */
#ifndef CULPRIT_REPLAY_H
#define CULPRIT_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* iterations replayed at most (evenly spaced over the range): REPLAY_MAX_ITERS, fewer as a
 * job's ranks times phases grow, REPLAY_CELL_ITERS cells over all of them, REPLAY_MIN_ITERS
 * at least: the cost is ranks x phases x iterations a what-if (up to 2,048 ranks of 16
 * phases get 32, case5's 12,960 ranks 5) */
#define REPLAY_MAX_ITERS 32
#define REPLAY_MIN_ITERS 4
#define REPLAY_CELL_ITERS (1u << 20)

enum replay_how {
	REPLAY_PEERS,    /* the marked ranks' compute and host phases at the median of the
			  * unmarked ranks of their role group that iteration (of their stage,
			  * then of the job, with fewer than 2 there; with none, at the rank's
			  * own before the window): ranks put back at their peers' pace, as a
			  * repair does */
	REPLAY_MEAN,     /* the marked ranks' compute phases at the mean over every rank that
			  * holds the phase that iteration: work spread evenly, as a rebalance
			  * does (a stage's layers, an expert's tokens, sequence lengths) */
	REPLAY_BASE,     /* the marked ranks' compute phases at their own before the window
			  * (replay_input.base): a regression taken back */
	REPLAY_TRANSFER, /* every collective instance with a marked member: its members'
			  * transfers at the instance's own median before the window, or without
			  * a baseline at the median instance's of the phase that iteration (the
			  * instances without a marked member): a link put back */
};

/* Cells put at a reference: the marked ranks' phases of the kinds how touches */
struct replay_fix {
	enum replay_how how;
	const uint8_t *ranks;  /* [world] nonzero: marked */
	const uint8_t *phases; /* [phase slot] nonzero: the phases it touches; NULL: all of its kinds */
};

/* A what-if: its fixes put back together (a cell two fixes touch takes the first's; a
 * peer's median is taken over the ranks no fix marks) */
#define REPLAY_MAX_FIXES 8
struct replay_whatif {
	struct replay_fix fix[REPLAY_MAX_FIXES];
	size_t nfix;
	/* out */
	double gain_ms;         /* the mean over the iterations of what it recovers */
	double gain_max_ms;     /* the most it recovers in one iteration */
	uint32_t iters;         /* iterations replayed */
	uint32_t iters_gained;  /* those where it recovers REPLAY_GAIN_SHARE of the step or more */
	double step[REPLAY_MAX_ITERS]; /* the step it replays in each of those iterations */
	uint32_t iter[REPLAY_MAX_ITERS]; /* and which iterations they are */
};

/* a what-if recovers an iteration when it gains this share of its replayed step */
#define REPLAY_GAIN_SHARE 0.0025

struct replay_input {
	const struct store *s;
	uint32_t first, last;   /* the iterations replayed */
	uint32_t bfirst, blast; /* the baseline before them (empty: blast < bfirst) */
	const double *base;     /* [rank * phases + slot] a rank's phase before the window (ms,
				 * NaN: none; l2.base), or NULL */
};

/* Replays in->first .. in->last as recorded and with each what-if w[0..n). *step_ms (may
 * be NULL): the mean replayed step; base (may be NULL, REPLAY_MAX_ITERS entries): the
 * replayed step of each iteration, as w[i].step. Returns 0, -1 when out of memory. */
int replay_run(const struct replay_input *in, struct replay_whatif *w, size_t n, double *step_ms, double *base);

/* Each rank's transfer in each communication phase, as the replay takes it (its stay beyond
 * the last arrival), the mean over in->first .. in->last into out[rank * phases + slot] (ms,
 * NaN: not a communication phase, or never held); the collectives' groups as the replay
 * takes them into dim[slot] (a topo_dim, or REPLAY_JOB_DIM for one over the whole job).
 * Returns 0, -1 when out of memory. */
#define REPLAY_JOB_DIM 5
int replay_transfers(const struct replay_input *in, float *out, uint8_t *dim);

#endif
