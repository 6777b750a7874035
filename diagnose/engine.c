/* engine.c: store + L1 + diagnosis for one job. */
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct engine {
	struct engine_config cfg;
	struct store *store;
	struct l1 l1;
	int have_last;
	struct report last;
	int due_sent;
	struct report_window *windows; /* diagnose_on_close: the windows before the last */
	size_t nwindows;
	uint32_t lo_iter, hi_iter; /* iterations seen, for a whole-input analysis */
	double sum_ms;
	uint64_t n_iter;
};

struct engine *engine_create(const struct topo *t, const struct engine_config *cfg)
{
	struct engine *e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	if (cfg)
		e->cfg = *cfg;
	if (!e->cfg.diag.max_window)
		diagnose_config_default(&e->cfg.diag);
	if (!e->cfg.due_iters)
		e->cfg.due_iters = 8;
	e->store = store_create(t, &e->cfg.store);
	if (!e->store) {
		free(e);
		return NULL;
	}
	l1_init(&e->l1, &e->cfg.l1);
	report_init(&e->last);
	return e;
}

void engine_destroy(struct engine *e)
{
	if (!e)
		return;
	store_destroy(e->store);
	report_free(&e->last);
	free(e->windows);
	free(e);
}

struct store *engine_store(struct engine *e) { return e->store; }

const struct l1 *engine_l1(const struct engine *e) { return &e->l1; }

uint32_t engine_windows(const struct engine *e) { return e->l1.windows; }

void engine_resume_window(struct engine *e, uint32_t first_iter, uint32_t detected_iter, double baseline_ms)
{
	l1_resume(&e->l1, first_iter, detected_iter, baseline_ms);
	e->due_sent = 0;
}

int engine_diagnose(struct engine *e, int64_t now_us, struct report *out)
{
	struct diagnose_input in;
	diagnose_input_from_l1(&in, &e->l1, now_us);
	return diagnose_run(e->store, &in, &e->cfg.diag, out);
}

/* The last report's window joins the earlier ones (the latest REPORT_MAX_WINDOWS). */
static void push_last(struct engine *e)
{
	if (!e->have_last)
		return;
	if (!e->windows)
		e->windows = calloc(REPORT_MAX_WINDOWS, sizeof(*e->windows));
	if (e->windows) {
		if (e->nwindows == REPORT_MAX_WINDOWS)
			memmove(e->windows, e->windows + 1, (REPORT_MAX_WINDOWS - 1) * sizeof(*e->windows));
		else
			e->nwindows++;
		report_window_of(&e->last, &e->windows[e->nwindows - 1]);
	}
	report_free(&e->last);
	e->have_last = 0;
}

/* r becomes the last report; the one before joins the earlier windows. */
static void keep_report(struct engine *e, struct report *r)
{
	push_last(e);
	e->last = *r;
	e->have_last = 1;
}

/* Offline: the window a new one replaced on top of it (was: L1 before the update), up to
 * the iteration before the new one's first. */
static void diagnose_replaced(struct engine *e, const struct l1 *was)
{
	struct diagnose_input in;
	struct report r;
	diagnose_input_from_l1(&in, was, 0);
	in.last_iter = e->l1.first_iter > was->first_iter ? e->l1.first_iter - 1 : was->first_iter;
	if (diagnose_run(e->store, &in, &e->cfg.diag, &r) == 0)
		keep_report(e, &r);
}

/* The step the job takes: the iteration's wall-clock span over its ranks (latest end -
 * earliest start), which a slow node stretches far more than the mean of the ranks' own
 * durations (pipeline stages start and end their iterations at different times). When the
 * span is over 3 times the mean duration the ranks' clocks do not agree (traces of
 * unsynchronized hosts) and the mean is kept. */
static double step_ms(const struct store *s, uint32_t it, double mean_ms)
{
	int64_t a, b;
	if (!store_iter_span(s, it, &a, &b) || b <= a)
		return mean_ms;
	double span = (double)(b - a) / 1000.0;
	return span >= mean_ms && span <= 3 * mean_ms ? span : mean_ms;
}

/* A window opened from normal: the iterations before it, its baseline, kept past the ring
 * (a fault that outlasts the ring is still compared with them). Without room for them the
 * ring's are all there is. */
static void keep_baseline(struct engine *e)
{
	uint32_t first = e->l1.first_iter, n = e->cfg.diag.max_baseline;
	if (!first)
		return;
	n = n < STORE_KEEP_ITERS ? n : STORE_KEEP_ITERS;
	(void)store_keep(e->store, first >= n ? first - n : 0, first - 1);
}

int engine_poll(struct engine *e)
{
	int ev = 0;
	uint32_t it;
	double ms;
	while (store_next_complete(e->store, &it, &ms)) {
		ms = step_ms(e->store, it, ms);
		struct l1 was;
		int was_open = e->cfg.diagnose_on_close && e->l1.open;
		if (was_open)
			was = e->l1;
		enum l1_event x = l1_update(&e->l1, it, ms);
		if (x == L1_REOPENED && was_open)
			diagnose_replaced(e, &was);
		if (!e->n_iter || it < e->lo_iter)
			e->lo_iter = it;
		if (!e->n_iter || it > e->hi_iter)
			e->hi_iter = it;
		e->sum_ms += ms;
		e->n_iter++;
		if (x == L1_REOPENED) /* the window before it ends where the new one begins */
			ev |= ENGINE_CLOSED;
		if (x == L1_OPENED || x == L1_REOPENED) {
			ev |= ENGINE_OPENED;
			e->due_sent = 0;
		}
		if (x == L1_OPENED && e->l1.before_iter == e->l1.first_iter)
			keep_baseline(e);
		if (e->l1.open && !e->due_sent && it + 1 - e->l1.first_iter >= e->cfg.due_iters) {
			ev |= ENGINE_DUE;
			e->due_sent = 1;
		}
		if (x == L1_CLOSED) {
			ev |= ENGINE_CLOSED | ENGINE_DUE;
			if (e->cfg.diagnose_on_close) {
				struct report r;
				if (engine_diagnose(e, 0, &r) == 0)
					keep_report(e, &r);
			}
		}
	}
	return ev;
}

size_t engine_hung(const struct engine *e, int64_t now_us, uint32_t *out, size_t cap)
{
	return diagnose_hung(e->store, now_us, l1_baseline(&e->l1), e->cfg.diag.hang_factor, out, cap);
}

/* The final report of engine_finish, before the earlier windows join it */
static int finish_report(struct engine *e, struct report *out)
{
	int64_t now = store_latest_us(e->store);
	if (!e->l1.windows && e->n_iter && (e->n_iter < ENGINE_SHORT_INPUT || e->cfg.whole_input) &&
	    !engine_hung(e, now, NULL, 0)) {
		/* input too short for a baseline worth the name (one profiled step per rank, a
		 * trace of a few steps recorded to be looked at), or a whole-input analysis: L2
		 * and attribution over all of it as one window, without a baseline
		 * (docs/method.md) */
		struct diagnose_input in;
		diagnose_input_from_l1(&in, &e->l1, 0);
		in.has_window = 1;
		in.first_iter = e->lo_iter;
		in.last_iter = e->hi_iter;
		in.window_ms = e->sum_ms / (double)e->n_iter;
		in.baseline_ms = NAN;
		return diagnose_run(e->store, &in, &e->cfg.diag, out);
	}
	if (engine_hung(e, now, NULL, 0) || e->l1.open || !e->have_last) {
		push_last(e); /* the last closed window is an earlier one now */
		return engine_diagnose(e, now, out);
	}
	*out = e->last;
	report_init(&e->last);
	e->have_last = 0;
	return 0;
}

int engine_finish(struct engine *e, struct report *out)
{
	store_flush(e->store);
	engine_poll(e);
	if (finish_report(e, out) < 0)
		return -1;
	out->windows = e->windows;
	out->nwindows = e->nwindows;
	e->windows = NULL;
	e->nwindows = 0;
	return 0;
}
