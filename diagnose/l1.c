/* l1.c: robust baseline and k-of-m persistent-regression windows. */
#include "l1.h"

#include <math.h>
#include <string.h>

#include "stats.h"

void l1_init(struct l1 *l, const struct l1_config *cfg)
{
	memset(l, 0, sizeof(*l));
	if (cfg)
		l->cfg = *cfg;
	struct l1_config *c = &l->cfg;
	if (!c->history || c->history > L1_HISTORY_MAX)
		c->history = 32;
	if (!c->min_history)
		c->min_history = 3;
	if (!c->open_m || c->open_m > L1_HISTORY_MAX)
		c->open_m = 4;
	if (!c->open_k || c->open_k > c->open_m)
		c->open_k = 3;
	if (!c->close_k)
		c->close_k = 5;
	if (!(c->rel_threshold > 0))
		c->rel_threshold = 0.15;
	if (!(c->mad_k > 0))
		c->mad_k = 5;
	if (!c->spread_m || c->spread_m > L1_HISTORY_MAX / 4)
		c->spread_m = 16;
	if (!c->spread_k || c->spread_k > c->spread_m)
		c->spread_k = 4;
	l->baseline_ms = NAN;
}

static void baseline_stats(const struct l1 *l, double *med, double *mad)
{
	double tmp[L1_HISTORY_MAX];
	memcpy(tmp, l->hist, l->nhist * sizeof(double));
	*med = stats_median_inplace(tmp, l->nhist);
	*mad = stats_mad_inplace(tmp, l->nhist, *med);
}

double l1_baseline(const struct l1 *l)
{
	if (l->open)
		return l->baseline_ms;
	if (!l->nhist)
		return NAN;
	double med, mad;
	baseline_stats(l, &med, &mad);
	return med;
}

double l1_window_ms(const struct l1 *l) { return l->window_n ? l->window_sum_ms / l->window_n : NAN; }

/* drift allowance per iteration and alarm level of the CUSUM (in log units), and the
 * largest step one iteration may add. A step over L1_DRIFT_SPIKE x the reference is a
 * spike (a checkpoint save, an eval pass), not a drift, which never jumps 50% in one
 * iteration: it does not count, else spikes before a fault would date its start back. */
#define L1_DRIFT_K 0.03
#define L1_DRIFT_H 0.5
#define L1_DRIFT_CAP 0.15
#define L1_DRIFT_SPIKE 1.5
#define L1_DRIFT_RECENT 8
/* a small shift: the share above the baseline, the iterations it looks at (shifted()) */
#define L1_SHIFT_MIN 0.03
#define L1_SHIFT_N 8

/* The last window closed shortly before first with its trailing iterations, and the normal
 * ones since (into the history), above the level from before it by a small shift's margin:
 * the fault it saw goes on, and a window opening now compares with that level. */
static int still_above(const struct l1 *l, uint32_t first)
{
	if (!l->closed_above || first <= l->closed_iter || first - l->closed_iter > l->cfg.history)
		return 0;
	double since[L1_HISTORY_MAX];
	uint32_t n = 0, want = first - l->closed_iter - 1;
	for (uint32_t k = 0; k < want && k < l->nhist; k++)
		since[n++] = l->hist[(l->hpos + l->cfg.history - 1 - k) % l->cfg.history];
	return !n || stats_median_inplace(since, n) > l->closed_before_ms * (1 + L1_SHIFT_MIN);
}

/* reopened: on top of an open window, which keeps its level from before (before_iter) */
static void open_window(struct l1 *l, enum l1_mode mode, uint32_t first, uint32_t iter, double baseline_ms,
			int reopened)
{
	l->open = 1;
	l->open_rel = l->cfg.rel_threshold;
	l->mode = mode;
	l->windows++;
	l->baseline_ms = baseline_ms;
	if (!reopened) {
		l->before_iter = first;
		l->before_ms = baseline_ms;
		if (still_above(l, first)) {
			l->before_iter = l->closed_before_iter;
			l->before_ms = l->closed_before_ms;
		}
	}
	l->first_iter = first;
	l->last_iter = iter;
	l->detected_iter = iter;
	l->normal_run = 0;
	l->prev_high = 1;
	l->window_sum_ms = 0;
	l->window_n = 0;
	l->pending_sum_ms = 0;
	l->pending_n = 0;
	l->pending_high = 0;
	for (uint32_t i = 0; i < l->nall; i++)
		if (l->all_iter[i] >= first && l->all_iter[i] <= iter) {
			l->window_sum_ms += l->all_ms[i];
			l->window_n++;
		}
}

/* the k-th most recent entry of the ring of every iteration (k = 0 is the newest) */
static uint32_t all_at(const struct l1 *l, uint32_t k) { return (l->apos + L1_HISTORY_MAX - 1 - k) % L1_HISTORY_MAX; }

/* Periodic: this iteration is high, and so is every d-th one before it, L1_PERIODIC_N
 * beats or more (L1_PERIODIC_MIN <= d <= L1_PERIODIC_MAX), after two beats held that were
 * not: a rank slow in every 6th step only raises the mean step too little for the other
 * rules, yet the same slow step comes back on the same beat. Other high iterations between
 * the beats (a checkpoint) do not matter. Checkpoints and evals on a beat from the job's
 * start have no such quiet beats before them, and open nothing. Returns the first beat, or
 * UINT32_MAX. */
#define L1_PERIODIC_N 4
#define L1_PERIODIC_MIN 3
#define L1_PERIODIC_MAX 10
static uint32_t periodic(const struct l1 *l)
{
	if (!l->nall || !l->all_high[all_at(l, 0)])
		return UINT32_MAX;
	for (uint32_t d = L1_PERIODIC_MIN; d <= L1_PERIODIC_MAX; d++) {
		uint32_t m = 0;
		while (m * d < l->nall && l->all_high[all_at(l, m * d)])
			m++;
		if (m >= L1_PERIODIC_N && (m + 1) * d < l->nall && !l->all_high[all_at(l, (m + 1) * d)])
			return l->all_iter[all_at(l, (m - 1) * d)];
	}
	return UINT32_MAX;
}

/* Intermittent: spread_k or more of the last spread_m iterations are high, their share is
 * at least three times the share before them (so a job whose eval steps are always high
 * opens nothing), and their mean is above the mean before them by rel_threshold. Returns
 * the first high iteration among them, or UINT32_MAX. */
static uint32_t intermittent(const struct l1 *l)
{
	const struct l1_config *c = &l->cfg;
	uint32_t m = c->spread_m;
	if (l->nall < m + 8)
		return UINT32_MAX;
	uint32_t hi_now = 0, hi_before = 0, first = UINT32_MAX;
	double sum_now = 0, sum_before = 0;
	for (uint32_t k = 0; k < l->nall; k++) {
		uint32_t j = all_at(l, k);
		if (k < m) {
			hi_now += l->all_high[j];
			sum_now += l->all_ms[j];
			if (l->all_high[j])
				first = l->all_iter[j];
		} else {
			hi_before += l->all_high[j];
			sum_before += l->all_ms[j];
		}
	}
	uint32_t n_before = l->nall - m;
	if (hi_now < c->spread_k || (double)hi_now / m < 3.0 * hi_before / n_before)
		return UINT32_MAX;
	if (!(sum_now / m > sum_before / n_before * (1 + c->rel_threshold)))
		return UINT32_MAX;
	return first;
}

/* iter, or the oldest iteration still held when that is later */
static uint32_t oldest_since(const struct l1 *l, uint32_t iter)
{
	uint32_t oldest = l->all_iter[all_at(l, l->nall - 1)];
	return iter > oldest ? iter : oldest;
}

/* Whether the steps from first on climb rather than sit at one level: the least-squares
 * slope of log(step / ref) over them (spikes left out) is past L1_DRIFT_SLOPE an iteration
 * and three of its standard errors, over L1_DRIFT_FIT of them or more. A step's level has a
 * slope of 0 within noise (its standard error is 0.003 for 8 steps of 2% jitter); a GPU
 * throttling 1% a step has 0.01. */
#define L1_DRIFT_SLOPE 0.006
#define L1_DRIFT_FIT 6
static int climbing(const struct l1 *l, uint32_t first, double ref)
{
	double x[L1_HISTORY_MAX], y[L1_HISTORY_MAX], mx = 0, my = 0;
	uint32_t n = 0;
	for (uint32_t k = 0; k < l->nall; k++) {
		uint32_t j = all_at(l, k);
		if (l->all_iter[j] < first)
			break;
		double v = l->all_ms[j] / ref;
		if (!(v > 0) || v > L1_DRIFT_SPIKE)
			continue;
		x[n] = (double)(l->all_iter[j] - first);
		y[n] = log(v);
		mx += x[n];
		my += y[n];
		n++;
	}
	if (n < L1_DRIFT_FIT)
		return 0;
	mx /= n;
	my /= n;
	double sxx = 0, sxy = 0;
	for (uint32_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
	}
	if (!(sxx > 0))
		return 0;
	double b = sxy / sxx, ssr = 0;
	for (uint32_t i = 0; i < n; i++) {
		double e = y[i] - my - b * (x[i] - mx);
		ssr += e * e;
	}
	/* and three standard errors: a real job's steps swing by 5-10%, whose slope over 8 of
	 * them is 0.01 by chance */
	double se = sqrt(ssr / (n - 2) / sxx);
	return b > L1_DRIFT_SLOPE && b > 3 * se;
}

/* A window from a rise that is there now: sudden, unless the steps climb (climbing) or a
 * drift whose sum passed its alarm level began well before the high iterations (it left
 * zero more than open_m iterations before the first of them; a sum merely above zero is
 * the noise of a real job); then it is gradual, from where the sum left zero, against the
 * reference. */
static void open_step(struct l1 *l, uint32_t first, uint32_t iter, double med)
{
	int early = l->cusum >= L1_DRIFT_H && l->cusum_start + l->cfg.open_m < first;
	if (l->ref_ms > 0 && (early || climbing(l, first, l->ref_ms))) {
		uint32_t from = l->cusum > 0 && l->cusum_start < first ? l->cusum_start : first;
		open_window(l, L1_GRADUAL, oldest_since(l, from), iter, l->ref_ms, 0);
	} else {
		open_window(l, L1_STEP, first, iter, med, 0);
	}
}

/* A small shift: at least 7 of the last 8 iterations above the baseline by
 * max(L1_SHIFT_MIN, 2 x the baseline's robust sigma), too little for the rel_threshold of a
 * page but persistent, as a GPU 1.2x slower in a quarter of the step is. The window is
 * diagnosed like any other; it pages only when the diagnosis names a cause. Returns the
 * first of the high ones, or UINT32_MAX. */
static double shift_rel(double med, double mad)
{
	double rel = 2 * STATS_MAD_SCALE * mad / med;
	return rel > L1_SHIFT_MIN ? rel : L1_SHIFT_MIN;
}

static uint32_t shifted(const struct l1 *l, double med, double mad, double *relp)
{
	if (l->nall < L1_SHIFT_N || !(med > 0))
		return UINT32_MAX;
	double rel = shift_rel(med, mad);
	*relp = rel;
	uint32_t above = 0, first = UINT32_MAX;
	for (uint32_t k = 0; k < L1_SHIFT_N; k++) {
		uint32_t j = all_at(l, k);
		if (l->all_ms[j] > med * (1 + rel)) {
			above++;
			first = l->all_iter[j];
		}
	}
	return above >= L1_SHIFT_N - 1 ? first : UINT32_MAX;
}

/* Gradual: the CUSUM passed its alarm level and the median of the last few iterations is
 * past the reference by rel_threshold. */
static int drifted(const struct l1 *l)
{
	if (l->cusum < L1_DRIFT_H || l->nall < L1_DRIFT_RECENT || !(l->ref_ms > 0))
		return 0;
	double tmp[L1_DRIFT_RECENT];
	for (uint32_t k = 0; k < L1_DRIFT_RECENT; k++)
		tmp[k] = l->all_ms[all_at(l, k)];
	return stats_median_inplace(tmp, L1_DRIFT_RECENT) > l->ref_ms * (1 + l->cfg.rel_threshold);
}

/* In an open step or gradual window: open_k of the last open_m iterations above the level
 * just before them (the median of up to 8 of the window's iterations before them, 4 or
 * more) by rel_threshold, twice that in a gradual window (a drift of 3% a step climbs 25%
 * over the span). Returns the first of those high ones and sets l->rise_level, or
 * UINT32_MAX. */
static uint32_t risen(struct l1 *l)
{
	const struct l1_config *c = &l->cfg;
	double older[8];
	uint32_t n = 0;
	for (uint32_t k = c->open_m; k < l->nall && n < 8; k++) {
		uint32_t j = all_at(l, k);
		if (l->all_iter[j] < l->first_iter)
			break;
		older[n++] = l->all_ms[j];
	}
	if (n < 4)
		return UINT32_MAX;
	double level = stats_median_inplace(older, n);
	double rel = l->mode == L1_GRADUAL ? 2 * c->rel_threshold : c->rel_threshold;
	uint32_t high = 0, first = UINT32_MAX, spikes = 0;
	for (uint32_t k = 0; k < c->open_m && k < l->nall; k++)
		spikes += l->all_ms[all_at(l, k)] > level * L1_DRIFT_SPIKE;
	double last[L1_HISTORY_MAX];
	uint32_t m = 0;
	for (uint32_t k = 0; k < c->open_m && k < l->nall; k++) {
		uint32_t j = all_at(l, k);
		last[m++] = l->all_ms[j];
		/* spikes fewer than open_k (a checkpoint save, an eval pass, two of them close)
		 * are no rise; a rise past them comes in runs */
		if (l->all_ms[j] > level * (1 + rel) &&
		    !(spikes < c->open_k && l->all_ms[j] > level * L1_DRIFT_SPIKE)) {
			high++;
			first = l->all_iter[j];
		}
	}
	if (high < c->open_k)
		return UINT32_MAX;
	/* a fault of its own rises by more than the window's excess over its baseline: a
	 * 2.8x loader stall that settles 15% higher is the same fault, a 1.5x fault on top of
	 * a 1.1x shift is another */
	if (isfinite(l->baseline_ms) && stats_median_inplace(last, m) - level <= level - l->baseline_ms)
		return UINT32_MAX;
	l->rise_level = level;
	return first;
}

/* The window's trailing normal iterations lie above its level from before by a small
 * shift's margin. */
static int trailing_above(const struct l1 *l)
{
	if (!(l->before_ms > 0) || l->normal_run > l->nall)
		return 0;
	double tail[L1_HISTORY_MAX];
	uint32_t n = 0;
	for (uint32_t k = 0; k < l->normal_run && k < L1_HISTORY_MAX; k++)
		tail[n++] = l->all_ms[all_at(l, k)];
	return n && stats_median_inplace(tail, n) > l->before_ms * (1 + L1_SHIFT_MIN);
}

/* A window opened on top of another (before_ms under its baseline) whose trailing normal
 * iterations still lie above the level before both by a small shift's margin. */
static int back_to_below(const struct l1 *l)
{
	return l->before_ms < l->baseline_ms && trailing_above(l);
}

/* The first of the run of high iterations that ends now when it holds the last open_m or
 * more, or open_k or more of which none is a spike (over L1_DRIFT_SPIKE x their median: a
 * checkpoint between two slow steps of the intermittent fault), else UINT32_MAX. A step
 * inside an intermittent window is then seen at its open_k-th iteration, as outside one. */
static uint32_t high_run(const struct l1 *l)
{
	uint32_t k = 0;
	while (k < l->nall && l->all_high[all_at(l, k)])
		k++;
	if (k < l->cfg.open_k)
		return UINT32_MAX;
	uint32_t first = l->all_iter[all_at(l, k - 1)];
	if (k >= l->cfg.open_m)
		return first;
	double run[L1_HISTORY_MAX];
	for (uint32_t i = 0; i < k; i++)
		run[i] = l->all_ms[all_at(l, i)];
	double med = stats_median_inplace(run, k);
	for (uint32_t i = 0; i < k; i++)
		if (l->all_ms[all_at(l, i)] > med * L1_DRIFT_SPIKE)
			return UINT32_MAX;
	return first;
}

/* Where the step that high_run found began: iterations above the midpoint between the
 * baseline and the run's median belong to it, though noise put some under the high bar (a
 * step of 1.16x inside 2% noise), back to the window's first. A spike at its front (an eval
 * or a checkpoint just before the step) is not the step's. */
static uint32_t step_start(const struct l1 *l, uint32_t run_first)
{
	double run[L1_HISTORY_MAX];
	uint32_t n = 0;
	while (n < l->nall && l->all_iter[all_at(l, n)] >= run_first)
		run[n] = l->all_ms[all_at(l, n)], n++;
	double level = stats_median_inplace(run, n), mid = (l->baseline_ms + level) / 2;
	uint32_t k = n;
	while (k < l->nall && l->all_iter[all_at(l, k)] >= l->first_iter && l->all_ms[all_at(l, k)] > mid)
		k++;
	while (k > n && l->all_ms[all_at(l, k - 1)] > level * L1_DRIFT_SPIKE)
		k--;
	return l->all_iter[all_at(l, k - 1)];
}

/* The first of a step that opens on open_k of the last open_m high (first: the oldest
 * high one). When a normal one follows it, the high ones before that normal one belong to
 * the step only when the normal one is nearer the step than the baseline (past the
 * midpoint between the baseline and the median of the high ones after it: a subtle step
 * whose noise dipped under the bar). Else the step had not begun: they were a checkpoint
 * or an eval just before the fault, and the step begins after the normal one (a window that
 * began at the checkpoint held a normal iteration, and its level, pulled down, made the
 * step's own iterations look like a rise on top of it 4 iterations later). With one high
 * one only after the normal one, the slow steps may come and go (an intermittent fault:
 * the window goes on as intermittent), and the first stays. */
static uint32_t step_front(const struct l1 *l, uint32_t first, double med)
{
	uint32_t m = l->cfg.open_m < l->nall ? l->cfg.open_m : l->nall, k = 0;
	while (k < m && l->all_high[all_at(l, k)])
		k++; /* k: the newest normal one, if any */
	if (k >= m || !isfinite(med))
		return first;
	double after[L1_HISTORY_MAX];
	for (uint32_t i = 0; i < k; i++)
		after[i] = l->all_ms[all_at(l, i)];
	if (k < 2)
		return first; /* one high one after it: no step yet (steps that come and go) */
	double mid = (med + stats_median_inplace(after, k)) / 2;
	return l->all_ms[all_at(l, k)] >= mid ? first : l->all_iter[all_at(l, k - 1)];
}

/* Iteration iter of ms added to the drift sum, against a reference that follows the
 * baseline med only at zero (cusum_start: where the sum last left zero). */
static void drift_add(struct l1 *l, uint32_t iter, double ms, double med)
{
	if (l->cusum <= 0)
		l->ref_ms = med;
	if (l->ref_ms > 0 && ms > 0 && ms < l->ref_ms * L1_DRIFT_SPIKE) {
		double x = log(ms / l->ref_ms);
		if (x > L1_DRIFT_CAP)
			x = L1_DRIFT_CAP;
		double was = l->cusum;
		l->cusum += x - L1_DRIFT_K;
		if (l->cusum < 0)
			l->cusum = 0;
		if (l->cusum > 20 * L1_DRIFT_H)
			l->cusum = 20 * L1_DRIFT_H;
		if (was <= 0 && l->cusum > 0)
			l->cusum_start = iter;
	}
}

enum l1_event l1_update(struct l1 *l, uint32_t iter, double ms)
{
	const struct l1_config *c = &l->cfg;
	int high = 0;
	l->updates++;
	double med = NAN, mad = 0;
	if (l->open) {
		med = l->baseline_ms;
		high = ms > med * (1 + l->open_rel);
	} else if (l->nhist >= c->min_history) {
		baseline_stats(l, &med, &mad);
		double rel = c->mad_k * STATS_MAD_SCALE * mad / med;
		if (rel < c->rel_threshold)
			rel = c->rel_threshold;
		high = ms > med * (1 + rel);
		drift_add(l, iter, ms, med);
	}
	/* every iteration */
	l->all_iter[l->apos] = iter;
	l->all_high[l->apos] = (uint8_t)high;
	l->all_ms[l->apos] = ms;
	l->apos = (l->apos + 1) % L1_HISTORY_MAX;
	if (l->nall < L1_HISTORY_MAX)
		l->nall++;

	uint32_t rise;
	if (l->open && l->mode == L1_INTERMITTENT && (rise = high_run(l)) != UINT32_MAX && rise > l->first_iter) {
		/* a run of high ones (high_run): a step inside the intermittent window (spikes
		 * had opened it before the fault). The same window, so the same incident (one fault,
		 * one page), now a step from the run's first against the same baseline: the
		 * iterations between stay out of it. Its detection stays when the intermittent
		 * window opened within the run (it saw the fault first, at its 2nd slow step). */
		uint32_t det = l->detected_iter, n = l->windows;
		rise = step_start(l, rise);
		open_window(l, L1_STEP, rise, iter, l->baseline_ms, 1);
		l->windows = n;
		if (det >= rise)
			l->detected_iter = det;
		return L1_NONE;
	}
	if (l->open && l->mode != L1_INTERMITTENT && (rise = risen(l)) != UINT32_MAX) {
		/* a sudden rise on top of the window's own level (a fault inside a small shift
		 * or a drift that noise or load opened): a window of its own, against that level */
		double level = l->rise_level;
		open_window(l, L1_STEP, rise, iter, level, 1);
		l->open_rel = l->cfg.rel_threshold;
		return L1_REOPENED;
	}
	if (l->open) {
		/* a high iteration extends the window only when its predecessor was high too: a
		 * checkpoint stall just after recovery must not stretch the window over it. An
		 * intermittent window is extended by any high iteration (its high ones do not
		 * come in runs) and closes after 2/3 of spread_m normal ones in a row. */
		int intermittent_win = l->mode == L1_INTERMITTENT;
		/* A second lone high one before the window closes: the slow steps now come
		 * every other one or so (a straggler slow on every 2nd step from the start, or
		 * after a run of slow ones). The window goes on as intermittent, so that the
		 * iterations before it stay the baseline; closing would leave the next window
		 * a baseline that holds the fault. */
		if (high && !l->prev_high && l->mode == L1_STEP && ++l->pending_high >= 2) {
			l->mode = L1_INTERMITTENT;
			intermittent_win = 1;
		}
		uint32_t close_after = intermittent_win ? c->spread_m * 2 / 3 : c->close_k;
		if (high && (l->prev_high || intermittent_win)) {
			l->last_iter = iter;
			l->window_sum_ms += l->pending_sum_ms + ms;
			l->window_n += l->pending_n + 1;
			l->pending_sum_ms = 0;
			l->pending_n = 0;
			l->pending_high = 0;
			l->normal_run = 0;
		} else {
			l->pending_sum_ms += ms;
			l->pending_n++;
			l->normal_run++;
		}
		l->prev_high = high;
		if (l->normal_run >= close_after && !high && back_to_below(l)) {
			/* a window on top of another ended, the one below goes on: a window of its
			 * own from here, against the level before both */
			open_window(l, L1_STEP, l->last_iter + 1, iter, l->before_ms, 1);
			l->open_rel = L1_SHIFT_MIN;
			return L1_REOPENED;
		}
		if (l->normal_run >= close_after && !high) {
			/* the trailing iterations are not part of the window */
			l->closed_above = trailing_above(l);
			l->closed_iter = iter;
			l->closed_before_iter = l->before_iter;
			l->closed_before_ms = l->before_ms;
			l->open = 0;
			l->pending_sum_ms = 0;
			l->pending_n = 0;
			l->nall = 0;
			l->apos = 0;
			l->cusum = 0;
			return L1_CLOSED;
		}
		return L1_NONE;
	}
	if (!high) {
		l->hist[l->hpos] = ms;
		l->hpos = (l->hpos + 1) % c->history;
		if (l->nhist < c->history)
			l->nhist++;
	}
	uint32_t nhigh = 0, first = iter;
	for (uint32_t k = 0; k < c->open_m && k < l->nall; k++) {
		uint32_t j = all_at(l, k);
		if (l->all_high[j]) {
			nhigh++;
			first = l->all_iter[j]; /* the older, the later in k */
		}
	}
	if (nhigh >= c->open_k) {
		first = step_front(l, first, med);
		open_step(l, first, iter, med);
		/* it lasts while the steps stay above the baseline by a small shift's margin:
		 * a rise that settles a little lower is still the fault */
		if (l->mode == L1_STEP && isfinite(med) && med > 0)
			l->open_rel = shift_rel(med, mad);
		return L1_OPENED;
	}
	if (!isfinite(med))
		return L1_NONE;
	if ((first = intermittent(l)) != UINT32_MAX || (first = periodic(l)) != UINT32_MAX) {
		open_window(l, L1_INTERMITTENT, first, iter, med, 0);
		return L1_OPENED;
	}
	double rel;
	if ((first = shifted(l, med, mad, &rel)) != UINT32_MAX) {
		open_step(l, first, iter, med);
		/* it lasts as long as the shift; a drift too, which opened under the bar (a
		 * GPU slowing 1% a step is 1.09x when its climb shows) */
		l->open_rel = rel;
		return L1_OPENED;
	}
	if (drifted(l)) {
		open_window(l, L1_GRADUAL, oldest_since(l, l->cusum_start), iter, l->ref_ms, 0);
		return L1_OPENED;
	}
	return L1_NONE;
}

void l1_resume(struct l1 *l, uint32_t first_iter, uint32_t detected_iter, double baseline_ms)
{
	const struct l1_config *c = &l->cfg;

	for (uint32_t i = 0; i < c->min_history; i++) {
		l->hist[l->hpos] = baseline_ms;
		l->hpos = (l->hpos + 1) % c->history;
		if (l->nhist < c->history)
			l->nhist++;
	}
	l->open = 1;
	l->open_rel = c->rel_threshold;
	l->mode = L1_STEP;
	l->windows++;
	l->baseline_ms = l->before_ms = baseline_ms;
	l->first_iter = l->last_iter = l->before_iter = first_iter;
	l->detected_iter = detected_iter;
	l->normal_run = 0;
	l->prev_high = 1;
	l->window_sum_ms = l->pending_sum_ms = 0;
	l->window_n = l->pending_n = l->pending_high = 0;
	l->nall = l->apos = 0;
}
