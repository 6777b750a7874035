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

double l1_window_ms(const struct l1 *l)
{
	return l->window_n ? l->window_sum_ms / l->window_n : NAN;
}

enum l1_event l1_update(struct l1 *l, uint32_t iter, double ms)
{
	const struct l1_config *c = &l->cfg;
	int high = 0;
	l->updates++;
	double med = NAN, mad = 0;
	if (l->open) {
		med = l->baseline_ms;
		high = ms > med * (1 + c->rel_threshold);
	} else if (l->nhist >= c->min_history) {
		baseline_stats(l, &med, &mad);
		double rel = c->mad_k * STATS_MAD_SCALE * mad / med;
		if (rel < c->rel_threshold)
			rel = c->rel_threshold;
		high = ms > med * (1 + rel);
	}
	/* recent ring for k of m */
	l->recent_iter[l->rpos] = iter;
	l->recent_high[l->rpos] = (uint8_t)high;
	l->recent_ms[l->rpos] = ms;
	l->rpos = (l->rpos + 1) % c->open_m;
	if (l->nrecent < c->open_m)
		l->nrecent++;

	if (l->open) {
		/* a high iteration extends the window only when its predecessor was high too: a
		 * checkpoint stall just after recovery must not stretch the window over it */
		if (high && l->prev_high) {
			l->last_iter = iter;
			l->window_sum_ms += l->pending_sum_ms + ms;
			l->window_n += l->pending_n + 1;
			l->pending_sum_ms = 0;
			l->pending_n = 0;
			l->normal_run = 0;
		} else {
			l->pending_sum_ms += ms;
			l->pending_n++;
			l->normal_run++;
		}
		l->prev_high = high;
		if (l->normal_run >= c->close_k && !high) {
			/* the trailing iterations are not part of the window */
			l->open = 0;
			l->pending_sum_ms = 0;
			l->pending_n = 0;
			l->nrecent = 0;
			l->rpos = 0;
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
	for (uint32_t i = 0; i < l->nrecent; i++)
		if (l->recent_high[i]) {
			nhigh++;
			if (l->recent_iter[i] < first)
				first = l->recent_iter[i];
		}
	if (nhigh >= c->open_k) {
		l->open = 1;
		l->windows++;
		l->baseline_ms = med;
		l->first_iter = first;
		l->last_iter = iter;
		l->normal_run = 0;
		l->prev_high = 1;
		l->window_sum_ms = 0;
		l->window_n = 0;
		l->pending_sum_ms = 0;
		l->pending_n = 0;
		for (uint32_t i = 0; i < l->nrecent; i++)
			if (l->recent_iter[i] >= first) {
				l->window_sum_ms += l->recent_ms[i];
				l->window_n++;
			}
		return L1_OPENED;
	}
	return L1_NONE;
}

void l1_resume(struct l1 *l, uint32_t first_iter, double baseline_ms)
{
	const struct l1_config *c = &l->cfg;

	for (uint32_t i = 0; i < c->min_history; i++) {
		l->hist[l->hpos] = baseline_ms;
		l->hpos = (l->hpos + 1) % c->history;
		if (l->nhist < c->history)
			l->nhist++;
	}
	l->open = 1;
	l->windows++;
	l->baseline_ms = baseline_ms;
	l->first_iter = l->last_iter = first_iter;
	l->normal_run = 0;
	l->prev_high = 1;
	l->window_sum_ms = l->pending_sum_ms = 0;
	l->window_n = l->pending_n = 0;
	l->nrecent = l->rpos = 0;
}
