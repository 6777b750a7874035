/* l1.h: L1, anomalous windows in the job's iteration time.
 *
 * Fed one completed iteration at a time (store_next_complete), in order. The baseline is
 * the median of the last cfg.history normal iterations (iterations inside a window never
 * enter it); an iteration is "high" when it exceeds the baseline by more than
 * max(cfg.rel_threshold, cfg.mad_k * 1.4826 * MAD / baseline). A window opens when
 * cfg.open_k of the last cfg.open_m iterations are high (so one checkpoint stall or a
 * periodic eval step opens nothing) and its first iteration is the earliest high one among
 * them; it closes after cfg.close_k iterations without a run of two high ones (a single
 * spike, a checkpoint just after recovery, neither extends nor holds the window open). */
#ifndef CULPRIT_L1_H
#define CULPRIT_L1_H

#include <stdint.h>

#define L1_HISTORY_MAX 64

/* how the current or last window was opened */
enum l1_mode {
	L1_STEP = 0,         /* open_k of the last open_m iterations high */
	L1_INTERMITTENT = 1, /* a rising share of high iterations: some high, not in a row */
	L1_GRADUAL = 2,      /* a drift past the reference the baseline could not hold */
};

struct l1_config {
	uint32_t history;        /* baseline length (default 32) */
	uint32_t min_history;    /* iterations needed before anything opens (default 3) */
	uint32_t open_k, open_m; /* default 3 of 4 */
	uint32_t close_k;        /* default 5 */
	double rel_threshold;    /* default 0.15 */
	double mad_k;            /* default 5 */
	uint32_t spread_m;       /* intermittent: the last spread_m iterations (default 16) ... */
	uint32_t spread_k;       /* ... hold at least spread_k high ones (default 4) */
};

/* L1_REOPENED: a sudden rise on top of an open step or gradual window ended it and opened
 * a new one (first_iter on), as a close and an open */
enum l1_event { L1_NONE = 0, L1_OPENED, L1_CLOSED, L1_REOPENED };

struct l1 {
	struct l1_config cfg;
	double hist[L1_HISTORY_MAX]; /* ring of normal iterations (ms) */
	uint32_t nhist, hpos;
	int open;
	uint32_t first_iter, last_iter; /* of the current or last window */
	uint32_t detected_iter;         /* the iteration at which it opened */
	double rise_level;              /* the level a rise inside the window is measured from */
	uint32_t normal_run;            /* iterations since the window's last high one */
	int prev_high;                  /* the previous iteration was high */
	double baseline_ms;             /* frozen when a window opens */
	/* A window opened on top of another (L1_REOPENED) keeps the level from before the first
	 * of them: its iteration and baseline (the window's own when it opened from normal) */
	uint32_t before_iter;
	double before_ms;
	/* the last window closed at closed_iter with its trailing iterations still above its
	 * level from before (closed_above): a window opening soon after keeps that level */
	uint32_t closed_iter, closed_before_iter;
	double closed_before_ms;
	int closed_above;
	double window_sum_ms;           /* iterations first_iter .. last_iter */
	uint32_t window_n;
	double pending_sum_ms; /* normal iterations after last_iter */
	uint32_t pending_n;
	uint32_t pending_high; /* high ones among them (each alone, after a normal one) */
	uint32_t windows;      /* windows opened so far */
	enum l1_mode mode;     /* of the current or last window */
	double open_rel;       /* while open: high = above baseline * (1 + open_rel) */
	/* every iteration (high ones too): the k-of-m rule, the share of high ones before and now */
	uint8_t all_high[L1_HISTORY_MAX];
	double all_ms[L1_HISTORY_MAX];
	uint32_t all_iter[L1_HISTORY_MAX];
	uint32_t nall, apos;
	/* drift: a one-sided CUSUM of log(iteration / ref) against a reference that moves
	 * only while the sum is at zero, so a slow drift cannot drag it along */
	double ref_ms, cusum;
	uint32_t cusum_start; /* the iteration where the sum last left zero */
	uint64_t updates;     /* iterations fed so far */
};

/* cfg may be NULL (defaults). */
void l1_init(struct l1 *l, const struct l1_config *cfg);
/* One completed iteration. Returns L1_OPENED when a window opened with this iteration,
 * L1_CLOSED when it closed (last_iter is then the last high iteration). */
enum l1_event l1_update(struct l1 *l, uint32_t iter, double iter_ms);
/* Continues a window a previous process had open (its first iteration, the iteration at
 * which it was detected (0: unknown) and its frozen baseline, e.g. from the stored report
 * after a restart): the window is open as if L1 had opened it, and it closes, as any window,
 * after cfg.close_k iterations back at the baseline. The history is seeded with the baseline
 * so that a later window can open. Call before any iteration of the window is fed (those
 * before it may be); baseline_ms must be > 0. */
void l1_resume(struct l1 *l, uint32_t first_iter, uint32_t detected_iter, double baseline_ms);
/* Current baseline (median of the history), NaN before any history. */
double l1_baseline(const struct l1 *l);
/* Mean iteration time inside the current / last window. */
double l1_window_ms(const struct l1 *l);

#endif
