/* imbalance.c: work spread unevenly, which no hardware repair mends (docs/method.md,
 * "Imbalance is not hardware"): a stage that grew on all of its ranks across hosts, one
 * expert of every expert-parallel group given more tokens than the others. Their ranks are
 * slower than their peers as a slow GPU's are; what tells them apart is where the slow
 * ranks sit: every rank of one stage, one expert index in every group, on several hosts,
 * which no fault of a node or a link lines up with. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "replay.h"
#include "stats.h"
#include "work.h"

/* rank r's compute per iteration: its compute phases (window values), each weighed by its
 * presence */
static double compute_of(const struct work *w, uint32_t r)
{
	double a = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		double v = w->l2.val[(size_t)r * w->P + p];
		if (w->kind[p] == RECORD_KIND_COMPUTE && isfinite(v))
			a += w->l2.presence[p] * v;
	}
	return a;
}

/* A stage that grew a little on every one of its ranks, on two hosts or more, is one stage
 * finding and not a compute culprit per rank. find_stage names a stage heavier than the
 * others past stage_ratio or grown past it against them; one grown 1.12-1.24x is under
 * both, while its ranks pass the subtle cut against their own past one by one. When the
 * compute culprits are nine in ten of one stage's ranks or more, and nobody else, the stage
 * it is (on one host the stage is that host's, a finding of its own). Returns 0, -1 when out
 * of memory. */
int imbalance_wide_stage(struct work *w, struct faults *f)
{
	if (f->stage >= 0 || w->t->pp < 2 || f->count[FK_COMPUTE] < 4 || f->count[FK_HOST] || f->count[FK_COMM])
		return 0;
	int stage = -1;
	for (uint32_t r = 0; r < w->W; r++) {
		if (f->kind[r] != FK_COMPUTE)
			continue;
		int s = (int)topo_coords(w->t, r).pp;
		if (stage >= 0 && s != stage)
			return 0;
		stage = s;
	}
	uint32_t members = 0, slow = 0, host0 = UINT32_MAX;
	int spread = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (topo_coords(w->t, r).pp != (uint32_t)stage)
			continue;
		members++;
		slow += f->kind[r] == FK_COMPUTE;
		uint32_t h = store_host_id(w->s, r);
		host0 = host0 == UINT32_MAX ? h : host0;
		spread |= h != host0;
	}
	if (slow * 10 < members * 9 || !spread)
		return 0;
	double *in = malloc(2 * (size_t)w->W * sizeof(double));
	if (!in)
		return -1;
	double *out = in + w->W;
	size_t ni = 0, no = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		double c = compute_of(w, r);
		if (topo_coords(w->t, r).pp == (uint32_t)stage)
			in[ni++] = c;
		else
			out[no++] = c;
		if (f->kind[r] == FK_COMPUTE) {
			f->kind[r] = FK_NONE;
			f->count[FK_COMPUTE]--;
			f->count[FK_NONE]++;
		}
	}
	double a = stats_median_inplace(in, ni), b = stats_median_inplace(out, no);
	free(in);
	f->stage = stage;
	f->stage_ratio = b > 0 ? a / b : NAN;
	f->stage_excess = a - b;
	return 0;
}

/* One expert of every expert-parallel group given more tokens than the others (a router
 * that favours it): the ranks of one expert index, in two EP groups or more on two hosts or
 * more, are the compute culprits, and nobody else is; with a baseline, the other members of
 * their groups got faster in that phase (the tokens the hot expert takes, the others lack).
 * Their fault becomes FK_LOAD, and the ranks of that index whose phase grew half as much or
 * more join them. Returns 0, -1 when out of memory. */
int imbalance_expert(struct work *w, struct faults *f)
{
	uint32_t EP = w->t->ep;
	if (EP < 2 || !f->count[FK_COMPUTE] || f->count[FK_HOST] || f->count[FK_COMM] || f->stage >= 0)
		return 0;
	int expert = -1;
	uint32_t g0 = UINT32_MAX, h0 = UINT32_MAX, top = UINT32_MAX;
	int groups = 0, hosts = 0;
	double most = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (f->kind[r] != FK_COMPUTE)
			continue;
		int e = (int)topo_coords(w->t, r).ep;
		if (expert >= 0 && e != expert)
			return 0;
		expert = e;
		uint32_t g = topo_ep_group(w->t, r), h = store_host_id(w->s, r);
		g0 = g0 == UINT32_MAX ? g : g0;
		h0 = h0 == UINT32_MAX ? h : h0;
		groups |= g != g0;
		hosts |= h != h0;
		for (uint32_t p = 0; p < w->P; p++) { /* the phase the culprits are slowest in */
			size_t i = (size_t)r * w->P + p;
			if (w->kind[p] == RECORD_KIND_COMPUTE && (w->l2.flag[i] & (L2_HIGH | L2_HINT)) &&
			    w->l2.ratio[i] > most)
				most = w->l2.ratio[i], top = p;
		}
	}
	if (expert < 0 || top == UINT32_MAX)
		return 0;
	double *x = malloc(2 * (size_t)w->W * sizeof(double));
	if (!x)
		return -1;
	double *y = x + w->W;
	/* the others of their groups: their change in that phase, and their value now */
	size_t n = 0, m = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		size_t i = (size_t)r * w->P + top;
		if (topo_coords(w->t, r).ep == (uint32_t)expert || !isfinite(w->l2.val[i]))
			continue;
		y[m++] = w->l2.val[i];
		if (w->l2.base[i] > 0)
			x[n++] = w->l2.val[i] / w->l2.base[i];
	}
	double change = n ? stats_median_inplace(x, n) : NAN, others = m ? stats_median_inplace(y, m) : NAN;
	n = 0;
	for (uint32_t r = 0; r < w->W; r++)
		if (f->kind[r] == FK_COMPUTE && isfinite(w->l2.val[(size_t)r * w->P + top]))
			x[n++] = w->l2.val[(size_t)r * w->P + top];
	double hot = n ? stats_median_inplace(x, n) : NAN;
	free(x);
	/* the others did not get faster: the tokens did not move, something else slowed. In
	 * one group on one host, that is all that tells a hot expert from a slow node: the
	 * others must have got faster by a tenth */
	if (w->l2.has_base ? !(change < (groups && hosts ? 0.97 : 0.9)) : !(groups && hosts))
		return 0;
	double cut = (hot + others) / 2;
	for (uint32_t r = 0; r < w->W; r++) {
		double v = w->l2.val[(size_t)r * w->P + top];
		int join = f->kind[r] == FK_NONE && topo_coords(w->t, r).ep == (uint32_t)expert && v > cut;
		if (f->kind[r] != FK_COMPUTE && !join)
			continue;
		f->count[f->kind[r]]--;
		f->kind[r] = FK_LOAD;
		f->count[FK_LOAD]++;
	}
	return 0;
}

/* The work of each step spread unevenly in a way no rank keeps: sequence lengths, a
 * data-dependent batch, whichever replica drew the long ones is the slowest this step and
 * another the next. When nothing else stands in the window: the compute phases of every
 * rank at their mean (replay.h, REPLAY_MEAN) recover more in the window than in the
 * baseline by a quarter of the step's rise or more, in most iterations (the unevenness grew:
 * some is always there; the rise as replayed, without what no phase covers, a checkpoint's
 * save), and the rank each role group waits for (its most compute) changes
 * from step to step: no rank is it in half of the window or more (a slow GPU is it in every
 * one). Compute culprits and late arrivers found beside it (a replica that drew long
 * sequences in more steps than the others) give way when the work spread evenly recovers
 * twice what they do. Sets f->data_imbalance and f->gain[FK_LOAD]. Returns 0, -1 when out
 * of memory. */
#define IMBALANCE_RISE_SHARE 0.25
#define IMBALANCE_SAME_RANK 0.5
/* a window of fewer steps is a pause, not the data's way (a stall of every rank, spread
 * unevenly) */
#define IMBALANCE_MIN_ITERS 8

/* the share of the window's iterations in which the rank that most often has its role
 * group's most compute has it; NaN without iterations */
static double slowest_repeats(const struct work *w)
{
	uint32_t G = topo_role_group_count(w->t);
	uint32_t *count = calloc(w->W, sizeof(uint32_t)), *arg = malloc(G * sizeof(uint32_t));
	double *most = malloc(G * sizeof(double));
	double share = NAN;
	if (!count || !arg || !most)
		goto out;
	uint32_t iters = 0;
	for (uint32_t it = w->first; it <= w->last; it++) {
		for (uint32_t g = 0; g < G; g++)
			most[g] = -1, arg[g] = UINT32_MAX;
		int any = 0;
		for (uint32_t r = 0; r < w->W; r++) {
			const uint32_t *c = store_slot_phases(w->s, r, it);
			if (!c)
				continue;
			double sum = 0;
			for (uint32_t p = 0; p < w->P; p++)
				if (w->kind[p] == RECORD_KIND_COMPUTE && c[p] != STORE_ABSENT)
					sum += c[p];
			uint32_t g = w->l2.role[r];
			if (sum > most[g])
				most[g] = sum, arg[g] = r;
			any = 1;
		}
		if (!any)
			continue;
		iters++;
		for (uint32_t g = 0; g < G; g++)
			if (arg[g] != UINT32_MAX)
				count[arg[g]]++;
	}
	/* per role group its most repeated; the worst over the groups */
	uint32_t top = 0;
	for (uint32_t r = 0; r < w->W; r++)
		top = count[r] > top ? count[r] : top;
	share = iters ? (double)top / iters : NAN;
out:
	free(count);
	free(arg);
	free(most);
	return share;
}

int imbalance_data(struct work *w, struct faults *f)
{
	double rise = w->rep->window_ms - w->rep->baseline_ms;
	if (f->stage >= 0 || f->count[FK_HOST] || f->count[FK_COMM] || f->count[FK_LOAD] || !(rise > 0) ||
	    w->t->dp < 3 || !w->l2.has_base || w->last - w->first + 1 < IMBALANCE_MIN_ITERS)
		return 0;
	double same = slowest_repeats(w);
	if (!(same < IMBALANCE_SAME_RANK))
		return 0;
	uint8_t *all = malloc(w->W);
	if (!all)
		return -1;
	memset(all, 1, w->W);
	struct replay_whatif wi = {.fix = {{.how = REPLAY_MEAN, .ranks = all}}, .nfix = 1}, was = wi;
	struct replay_input in = {w->s, w->first, w->last, w->bfirst, w->blast, NULL};
	struct replay_input before = {w->s, w->bfirst, w->blast, 1, 0, NULL};
	double now = NAN, then = NAN, asis[REPLAY_MAX_ITERS];
	int rc = replay_run(&in, &wi, 1, &now, asis);
	if (!rc)
		rc = replay_run(&before, &was, 1, &then, NULL);
	free(all);
	if (rc < 0)
		return -1;
	if (now - then < rise) /* the rise the phases show */
		rise = now - then;
	/* in most steps, not on average: pauses of a few steps on one rank or another, spread evenly,
	 * recover as much on average as the uneven data does in every step */
	double gains[REPLAY_MAX_ITERS];
	uint32_t n = wi.iters < REPLAY_MAX_ITERS ? wi.iters : REPLAY_MAX_ITERS;
	for (uint32_t i = 0; i < n; i++)
		gains[i] = asis[i] - wi.step[i];
	double typical = n ? stats_median_inplace(gains, n) : 0;
	if (rise > 0 && wi.gain_ms - was.gain_ms >= IMBALANCE_RISE_SHARE * rise &&
	    typical - was.gain_ms >= IMBALANCE_RISE_SHARE * rise && wi.iters_gained * 2 > wi.iters &&
	    wi.gain_ms >= 2 * f->gain[FK_COMPUTE]) {
		f->data_imbalance = 1;
		f->gain[FK_LOAD] = wi.gain_ms;
		for (uint32_t r = 0; r < w->W; r++)
			if (f->kind[r] == FK_COMPUTE || f->kind[r] == FK_LATE) {
				f->count[f->kind[r]]--;
				f->kind[r] = FK_NONE;
				f->count[FK_NONE]++;
			}
		f->gain[FK_COMPUTE] = 0;
	}
	return 0;
}
