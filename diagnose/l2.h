/* l2.h: L2, cross-rank comparison of phase durations (docs/method.md, "L2").
 *
 * For the window [first, last] every rank's phase duration is a robust value over the
 * window's iterations: the median of 8 block means (the plain median under 8 iterations),
 * so a checkpoint stall or an eval step inside it does not count; likewise over the
 * baseline iterations [bfirst, blast] before it. A compute or host phase is compared three
 * ways, each a robust z-score (x - median) / (1.4826 MAD), the MAD floored at
 * cfg.mad_floor_rel of the median, and a ratio: with its role group (same pp, tp, cp; from
 * cfg.small_group ranks), with its pipeline stage, and its own change (window / baseline)
 * with the job's lower quartile of changes. A communication phase is compared only with
 * the members of its own collective (l2_collective_dim). Per role group and phase the
 * group's coefficient of variation and median are kept for the report. */
#ifndef CULPRIT_L2_H
#define CULPRIT_L2_H

#include <stdint.h>

#include "store.h"

enum {
	L2_HIGH = 1,      /* longer than its group (z and ratio past the thresholds) */
	L2_LOW = 2,       /* shorter than its group */
	L2_SELF_HIGH = 4, /* longer than its own baseline */
	L2_FALLBACK = 8,  /* scored by its own change against the job's (own history) */
	L2_BY_STAGE = 16, /* scored against its pipeline stage, not its role group */
	L2_HINT = 32,     /* one comparison past subtle_z and subtle_ratio: not enough alone */
};

struct l2_config {
	double z_threshold;   /* default 6 */
	double ratio_high;    /* default 1.3 */
	double ratio_low;     /* default 0.8 */
	double min_delta_ms;  /* default 1 */
	double mad_floor_rel; /* default 0.02 */
	uint32_t small_group; /* default 4 */
	double subtle_z;      /* two comparisons past this z ... (default 4) */
	double subtle_ratio;  /* ... and this ratio flag a fault under ratio_high (default 1.1) */
	double comm_share;    /* a collective's member off its median by this share of the step (0.05) */
	double step_share;    /* a phase's excess under this share of the step is no fault (0.01) */
	double step_ms;       /* the job's step in the window (set by the diagnosis; NaN: unknown) */
	int window_mean;      /* the window's value is the mean of its block means, not their
			       * median: an intermittent fault is slow in a minority of iterations */
};

struct l2 {
	uint32_t world, nphase, ngroups;
	double *val;       /* [rank * nphase + p] window median (ms), NaN when absent */
	double *base;      /* same over the baseline, NaN when absent */
	float *z, *ratio;  /* [rank * nphase + p] */
	uint8_t *flag;     /* [rank * nphase + p] L2_* bits */
	double *group_cv;  /* [group * nphase + p], NaN for small groups */
	double *group_med; /* [group * nphase + p] */
	double *presence;  /* [p] share of the window's (rank, iteration) cells holding phase p */
	uint32_t *role;    /* [rank] role group */
	int has_base;
	void *mem; /* every array above and l2_run's scratch: kept between runs */
	size_t mem_size;
	/* the ranks sorted by role group, stage and collective group in mem are those of this
	 * topology, phase count and collective dimensions (topo_colls: the dimensions built)
	 * when topo_kept: the next run on them does not sort again, whatever its ranges (a
	 * diagnosis runs L2 on its window and on the standing costs') */
	int topo_kept;
	struct topo topo;
	uint32_t topo_P, topo_dims, topo_colls;
};

void l2_config_default(struct l2_config *c);
/* blast < bfirst means no baseline. *out is zeroed before the first run or holds an earlier
 * run's results, whose memory this run reuses (a job's diagnoses keep one struct l2: fresh
 * arrays cost a page fault per 4 KiB each pass). Returns 0, -1 when out of memory (*out is
 * then freed). l2_free() frees it. */
int l2_run(struct l2 *out, const struct store *s, uint32_t first, uint32_t last, uint32_t bfirst, uint32_t blast,
	   const struct l2_config *cfg);
void l2_free(struct l2 *l);
/* The dimension a communication phase's collective runs along, from its record group
 * (enum record_group; a phase without one: the role group, TOPO_DP). */
enum topo_dim l2_collective_dim(uint8_t group);

#endif
