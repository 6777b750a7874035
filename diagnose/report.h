/* report.h: the diagnosis report (docs/report.md), its JSON and text renderings. */
#ifndef CULPRIT_REPORT_H
#define CULPRIT_REPORT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "topo.h"

#define REPORT_NAME_MAX 64
#define REPORT_MAX_EVIDENCE 4
#define REPORT_MAX_KERNELS 4
#define REPORT_MAX_VICTIM_PHASES 8

enum report_role { REPORT_CULPRIT = 0, REPORT_LATE_ARRIVER = 1 };

struct report_evidence {
	char phase[REPORT_NAME_MAX];
	uint8_t kind;    /* enum record_kind */
	double ratio;    /* to the group median (or the fallback's pooled ratio) */
	double z;        /* robust z */
	double group_cv; /* NaN when the group was too small */
	double value_ms, peer_ms;
	int fallback;     /* scored by its own change against the job's (own history) */
	int by_stage;     /* scored against its pipeline stage */
	double own_ratio; /* to the rank's own baseline (its individual score), NaN without one */
};

struct report_kernel {
	char name[REPORT_NAME_MAX];
	uint8_t kind;
	double ratio;     /* median ratio suspect / pooled peers */
	double ks;        /* two-sample Kolmogorov-Smirnov statistic */
	double max_ratio; /* suspect max / peers' p99 */
};

struct report_suspect {
	uint32_t rank;
	char host[REPORT_NAME_MAX];
	int host_known; /* a host record named it (else host is the rank order's node-N) */
	struct topo_coords coords;
	enum report_role role;
	double score;
	const char *level; /* "L2", "L3", "L1" (hang) */
	int consistent;    /* late arriver explained by the culprits */
	struct report_evidence ev[REPORT_MAX_EVIDENCE];
	size_t nev;
	struct report_kernel k[REPORT_MAX_KERNELS];
	size_t nk;
};

/* What on-call should do about a finding (diagnose/actions.h): one object to act on (a node,
 * a host, a stage, a rank's kernel, hung ranks), or what not to do and the evidence that
 * rules it out (kind "avoid"). */
#define REPORT_MAX_ACTIONS 6
#define REPORT_ACTION_RANKS 16

struct report_action {
	const char *kind;             /* "drain_node", "check_network", "rebalance_stage", "inspect_host",
			      * "inspect_kernel", "investigate_hang", "avoid" */
	char target[REPORT_NAME_MAX]; /* the node or host, "pp 2", the kernel's name */
	int stage;                    /* rebalance_stage: the stage, else -1 */
	uint32_t ranks[REPORT_ACTION_RANKS];
	size_t nranks; /* the ranks it concerns (the first REPORT_ACTION_RANKS) */
	char text[480];
	char command[640]; /* a command line to paste, or "" */
	double gain_ms;    /* expected gain per iteration; NaN: not in ms per iteration */
};

/* One independent fault: its category, its culprits (with their evidence and kernels)
 * and what it costs. A report holds each fault it finds; the largest is also the report's
 * verdict and suspects. */
struct report_finding {
	const char *category;
	char summary[512];
	int stage;                       /* stage_imbalance: the heavier stage, else -1 */
	struct report_suspect *suspects; /* culprits only */
	size_t nsuspects, culprits_total;
	double lost_ms;
	double ratio; /* stage_imbalance: the stage over the others' median */
	/* A node that is exactly one pipeline stage (all of its ranks and no other): a slow node
	 * and a heavy stage read the same in the timings, and the finding says both */
	int ambiguous_stage; /* that stage, else -1 */
	char ambiguous_host[REPORT_NAME_MAX];
	struct report_action actions[REPORT_MAX_ACTIONS];
	size_t nactions;
};

/* A standing cost that needs no page: nothing regressed, yet it costs every step. */
struct report_advisory {
	const char *kind; /* "stage_imbalance", "slow_rank" */
	char summary[400];
	int stage;    /* or -1 */
	int64_t rank; /* or -1 */
	char host[REPORT_NAME_MAX];
	double ratio, cost_ms;
};

#define REPORT_MAX_FINDINGS 4
#define REPORT_MAX_ADVISORIES 4

struct report_event {
	char host[REPORT_NAME_MAX];
	char kind[REPORT_NAME_MAX];
	int64_t ts_us;
	const char *verdict; /* "consistent", "contradicted", "unrelated" */
	char reason[256];
};

/* A window the same input met before the report's own (culprit diagnose of a file reports
 * each; culpritd pages each as an incident of its own) */
#define REPORT_WINDOW_RANKS 16
#define REPORT_MAX_WINDOWS 32
struct report_window {
	uint32_t first_iter, last_iter;
	double baseline_ms, window_ms, lost_ms;
	const char *onset, *category; /* static strings */
	char summary[512];
	uint32_t ranks[REPORT_WINDOW_RANKS]; /* its first culprits */
	size_t nranks, culprits_total;
};

struct report {
	char job[128];
	int has_window;
	uint32_t first_iter, last_iter;
	double baseline_ms, window_ms;
	const char *category; /* a verdict category (docs/report.md) */
	char summary[512];
	int stage; /* stage_imbalance: the heavier pp stage, else -1 */
	struct report_suspect *suspects;
	size_t nsuspects;
	size_t culprits_total, late_total;
	int late_consistent; /* every late arriver is explained by the culprits */
	size_t victims;
	char victim_phases[REPORT_MAX_VICTIM_PHASES][REPORT_NAME_MAX];
	size_t nvictim_phases;
	struct report_event *events;
	size_t nevents;
	double lost_ms;
	const char *onset;      /* how the window opened: "sudden", "intermittent", "gradual" */
	uint32_t detected_iter; /* the iteration at which it opened (with onset) */
	struct report_finding findings[REPORT_MAX_FINDINGS]; /* [0] is the verdict above */
	size_t nfindings;
	struct report_advisory advisories[REPORT_MAX_ADVISORIES];
	size_t nadvisories;
	/* the earlier windows, oldest first (at most REPORT_MAX_WINDOWS: the latest of them) */
	struct report_window *windows;
	size_t nwindows;
};

void report_init(struct report *r);
void report_free(struct report *r);
/* The window summary of r (its window, verdict, cost and first culprits). */
void report_window_of(const struct report *r, struct report_window *w);
/* The JSON object (a new reference), NULL when out of memory. */
json_t *report_to_json(const struct report *r);
/* A readable rendering (malloc'd, NUL-terminated), NULL when out of memory. */
char *report_to_text(const struct report *r);

#endif
