/* engine.h: one job's diagnosis state — its window store, its L1 detector and the last
 * report — with the calls in the order a server or the offline CLI makes them.
 *
 *   e = engine_create(&topo, NULL, NULL, NULL);
 *   id = store_intern_name(engine_store(e), "mlp");      (per batch dictionary entry)
 *   store_add_iter/phase/kernel(engine_store(e), ...);   (hot path, O(1))
 *   ev = engine_poll(e);                                 (after each batch; cheap)
 *   if (ev & ENGINE_DUE) engine_diagnose(e, now_us, &report);  (may run off the loop:
 *        see store.h on what must not change while it runs, or use store_snapshot())
 *   engine_hung(e, now_us, ranks, cap)                   (periodic hang check)
 *
 * engine_poll never runs a diagnosis itself unless created with diagnose_on_close (the
 * offline CLI), which diagnoses every window as it closes (or another opens on top of it),
 * while the ring still holds it, and keeps the report of the most recent one and a summary
 * of each before it. */
#ifndef CULPRIT_ENGINE_H
#define CULPRIT_ENGINE_H

#include <stdint.h>

#include "diagnose.h"
#include "l1.h"
#include "report.h"
#include "store.h"

enum {
	ENGINE_OPENED = 1, /* an anomalous window opened */
	ENGINE_CLOSED = 2, /* it closed */
	ENGINE_DUE = 4,    /* a diagnosis is due: the open window reached due_iters, or closed */
};

/* An input of fewer iterations that opened no window is analysed whole (engine_finish): a
 * trace of a few steps has no past to regress from; what it shows is who is slower. */
#define ENGINE_SHORT_INPUT 16

struct engine_config {
	struct store_config store;
	struct l1_config l1;
	struct diagnose_config diag; /* zeroed: defaults */
	uint32_t due_iters;          /* window length that makes a diagnosis due (8) */
	int diagnose_on_close;       /* offline: diagnose inside engine_poll when a window closes */
	int whole_input;             /* offline: when no window opened, engine_finish analyses
					all iterations as one window (steady stage imbalance in a
					timeline that was imbalanced from its first step) */
};

struct engine;

struct engine *engine_create(const struct topo *t, const struct engine_config *cfg);
void engine_destroy(struct engine *e);
struct store *engine_store(struct engine *e);
const struct l1 *engine_l1(const struct engine *e);
/* Drains newly completed iterations into L1. Returns ENGINE_* bits. */
int engine_poll(struct engine *e);
/* Diagnose the current (or last) window; hang check against now_us (0: none). */
int engine_diagnose(struct engine *e, int64_t now_us, struct report *out);
size_t engine_hung(const struct engine *e, int64_t now_us, uint32_t *out, size_t cap);
/* Offline end of input: flush the last iterations, and produce the final report: a hang
 * when ranks stopped reporting before the end (now = the latest end time in the data),
 * else the open window, else the most recent closed window, else category none; with
 * diagnose_on_close, the windows before it in out->windows. An input
 * of fewer than ENGINE_SHORT_INPUT iterations without a window, or any input without a
 * window when whole_input is set, is analysed as one window without a baseline. */
int engine_finish(struct engine *e, struct report *out);
/* Continues a window left open by a previous process (l1_resume); a diagnosis is due once
 * the window has grown by due_iters. */
void engine_resume_window(struct engine *e, uint32_t first_iter, uint32_t detected_iter, double baseline_ms);
/* Number of windows opened so far. */
uint32_t engine_windows(const struct engine *e);

#endif
