/* diagnose.h: one diagnosis over a window store — L2, L3, attribution, event verdicts,
 * the report. Pure: reads the store (see store.h for what must not change meanwhile),
 * allocates its own scratch memory, never reads a clock (now_us is an argument).
 *
 * Online, per job: after each batch, while (store_next_complete(st, &it, &ms)) feed
 * l1_update(&l1, it, ms); on L1_OPENED wait until the window has a few iterations (the
 * server's choice; 8 is good) or L1_CLOSED, then diagnose_run() with the window from the
 * l1 struct. diagnose_hung() is the periodic hang check (cheap: one pass over the ranks). */
#ifndef CULPRIT_DIAGNOSE_H
#define CULPRIT_DIAGNOSE_H

#include <stddef.h>
#include <stdint.h>

#include "l1.h"
#include "l2.h"
#include "report.h"
#include "store.h"

struct diagnose_config {
	struct l2_config l2;
	uint32_t max_window;   /* iterations analysed, the last ones of the window (32) */
	uint32_t max_baseline; /* baseline iterations before the window (8) */
	uint32_t max_listed;   /* suspects listed in the report (32; counts stay exact) */
	uint32_t l3_suspects;  /* suspects that get an L3 kernel comparison (64) */
	uint32_t l3_peers;     /* peers pooled per role group (64) */
	double hang_factor;    /* overdue by this many baseline iterations = hung (3) */
	double stage_ratio;    /* a stage's compute over the other stages' median (1.25) */
	double few_fraction;   /* "a few": this fraction of the nodes (at least 2) or of the ranks (0.05) */
};

struct diagnose_input {
	int has_window;
	uint32_t first_iter, last_iter;
	uint32_t before_iter;          /* the baseline is the iterations before this one (a window
					* opened on top of another: before the first of them);
					* 0: before first_iter */
	double baseline_ms, window_ms; /* from L1; baseline also serves the hang check */
	int64_t now_us;                /* for the hang check; 0 skips it */
	const char *onset;             /* "sudden", "intermittent", "gradual"; NULL: unknown */
	uint32_t detected_iter;        /* the iteration at which L1 opened it; 0: unknown */
	const char *server;            /* culpritd's REST address for the actions' command lines
					 * (NULL: actions.h's default) */
	struct l2 *l2_keep;            /* a job's L2 memory, kept between its diagnoses (zeroed
					 * at first; l2_free() it with the job); NULL: fresh each run */
};

void diagnose_config_default(struct diagnose_config *c);
/* Fill in from an l1 detector (its current or last window). */
void diagnose_input_from_l1(struct diagnose_input *in, const struct l1 *l, int64_t now_us);
/* Ranks whose next iteration is overdue: last end + factor * baseline < now. Writes up to
 * cap ranks to out and returns how many there are. Ranks never seen are not counted. */
size_t diagnose_hung(const struct store *s, int64_t now_us, double baseline_ms, double factor, uint32_t *out,
		     size_t cap);
/* Run the diagnosis into *out (report_init'ed here; report_free() it). cfg may be NULL.
 * Returns 0, -1 when out of memory. */
int diagnose_run(const struct store *s, const struct diagnose_input *in, const struct diagnose_config *cfg,
		 struct report *out);

#endif
