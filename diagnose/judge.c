/* judge.c: the replay judges the faults the rules found (docs/method.md, "The replay
 * judges"). Each kind of fault, and the heavy stage, is put back in a replay of the
 * window's steps (replay.h): a compute or host culprit at its peers' pace, a link at its
 * own transfers before the window, a stage at its own compute before the window (or, with
 * no baseline, the layers spread evenly), work imbalance spread evenly. What it recovers is
 * what the fault costs a step over the window: the finding's time lost. A fault stands when
 * it recovers a step in JUDGE_ITERS iterations or more of the last JUDGE_SPAN held (the
 * window and what came before it: a window may hold a few of an intermittent fault's slow
 * steps only): a cause that lasts or comes back. A rank that paused once or twice
 * recovers those iterations only; a rank slower than its peers whose work the step does not
 * wait for recovers none. Both are dropped; the second, slower in every part of the window,
 * is a hidden straggler: an advisory, no page. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "replay.h"
#include "stats.h"
#include "work.h"

/* the iterations a fault must recover a step in, at least, of the last JUDGE_SPAN held */
#define JUDGE_ITERS 2
#define JUDGE_SPAN REPLAY_MAX_ITERS

/* Whether rank r's compute phase p is high and apart from its peers' median by
 * subtle_ratio (not only against its own past, which a pause of some iterations is too):
 * its role group's, or with fewer than small_group there its stage's */
static int apart(const struct work *w, uint32_t r, uint32_t p)
{
	size_t i = (size_t)r * w->P + p;
	if (w->kind[p] != RECORD_KIND_COMPUTE || !(w->l2.flag[i] & L2_HIGH))
		return 0;
	uint32_t members[64];
	size_t n = topo_role_members(w->t, r, members, 64), m = 0;
	double x[64];
	if (n < w->cfg->l2.small_group) {
		uint32_t pp = topo_coords(w->t, r).pp;
		n = 0;
		for (uint32_t q = 0; q < w->W && n < 64; q++)
			if (topo_coords(w->t, q).pp == pp)
				members[n++] = q;
	}
	for (size_t k = 0; k < n && k < 64; k++) {
		double v = w->l2.val[(size_t)members[k] * w->P + p];
		if (members[k] != r && isfinite(v))
			x[m++] = v;
	}
	double med = m ? stats_median_inplace(x, m) : NAN;
	return med > 0 && w->l2.val[i] > med * w->cfg->l2.subtle_ratio;
}

/* whether rank r is slower than its peers in most of the window, in some compute phase */
static int slow_throughout(const struct work *w, uint32_t r)
{
	for (uint32_t p = 0; p < w->P; p++)
		if (apart(w, r, p))
			return 1;
	return 0;
}

/* a rank whose fault recovers nothing, as an advisory (at most REPORT_MAX_ADVISORIES) */
static void hidden_advisory(struct work *w, uint32_t r)
{
	struct report *rep = w->rep;
	if (rep->nadvisories == REPORT_MAX_ADVISORIES)
		return;
	uint32_t top = UINT32_MAX;
	double ratio = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		if (w->kind[p] == RECORD_KIND_COMPUTE && (w->l2.flag[i] & L2_HIGH) && w->l2.ratio[i] > ratio)
			ratio = w->l2.ratio[i], top = p;
	}
	if (top == UINT32_MAX)
		return;
	struct report_advisory *a = &rep->advisories[rep->nadvisories++];
	memset(a, 0, sizeof(*a));
	a->kind = "hidden_straggler";
	a->stage = -1;
	a->rank = r;
	store_host(w->s, r, a->host, sizeof(a->host));
	a->ratio = ratio;
	a->cost_ms = 0;
	char host[REPORT_NAME_MAX];
	snprintf(host, sizeof(host), "%s", a->host);
	snprintf(a->summary, sizeof(a->summary),
		 "rank %u on %.63s computes %.48s %.2fx its peers, yet the step does not wait for it (its "
		 "collectives have slack): nothing is lost now, and it will cost when the slack goes",
		 r, host, store_name(w->s, store_phase_name(w->s, top)), ratio);
}

/* One part of the faults put back: a kind of fault on one rank, on one host, or on all of
 * its hosts (the finest that fits in a what-if), the load or the stage */
struct part {
	int kind;      /* enum fault_kind, or -1 for the stage */
	uint32_t rank; /* the rank, or UINT32_MAX */
	uint32_t host; /* store_host_id, or UINT32_MAX: every host of the kind */
	double gain;
	uint32_t gained;
};

/* whether rank r belongs to part p */
static int in_part(const struct work *w, const struct faults *f, const struct part *p, uint32_t r)
{
	if (p->kind == FK_LOAD)
		return 1; /* spread evenly: every rank at the mean */
	return f->kind[r] == p->kind && (p->rank == UINT32_MAX || r == p->rank) &&
	       (p->host == UINT32_MAX || store_host_id(w->s, r) == p->host);
}

/* Whether rank r's flagged host phases stand above its role group's median by subtle_ratio
 * and by step_share of the step (the least excess L2 counts) in half the window's
 * iterations or more, and in JUDGE_LASTS or more: a delay that lasts, not a pause of a few
 * (nor one pause in a window of two). */
#define JUDGE_LASTS 3
static int host_sustained(const struct work *w, uint32_t r)
{
	const struct l2_config *c = &w->cfg->l2;
	double floor = c->step_ms > 0 && c->step_share * c->step_ms > c->min_delta_ms ? c->step_share * c->step_ms
										     : c->min_delta_ms;
	uint32_t n = w->last - w->first + 1, flagged = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		if (w->kind[p] != RECORD_KIND_HOST || !(w->l2.flag[i] & L2_HIGH))
			continue;
		double med = w->l2.group_med[(size_t)w->l2.role[r] * w->P + p];
		if (!(med > 0))
			return 0;
		uint32_t above = 0;
		for (uint32_t it = w->first; it <= w->last; it++) {
			uint32_t d = store_phase_dur(w->s, r, it, p);
			above += d != STORE_ABSENT && d / 1000.0 > med * c->subtle_ratio && d / 1000.0 - med > floor;
		}
		if (above * 2 < n || above < JUDGE_LASTS)
			return 0;
		flagged++;
	}
	return flagged > 0;
}

/* whether every rank of part p is a host delay that lasts (host_sustained) */
static int part_sustained(const struct work *w, const struct faults *f, const struct part *p)
{
	int any = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (!in_part(w, f, p, r))
			continue;
		if (!host_sustained(w, r))
			return 0;
		any = 1;
	}
	return any;
}

/* The parts of f into p (at most REPLAY_MAX_FIXES), their marks into marks: each kind by
 * host, and a host's one or two culprits each a part of its own (a fault recurs on the same
 * rank: two ranks of a host that paused once each are two pauses, not a fault), when that
 * fits; else each kind whole. A link's (communication) always by host, the NIC's: its ranks
 * share their collectives, and one of them put back while the others are changes nothing;
 * a host of three compute culprits or more is a node's fault, put back whole. */
#define JUDGE_RANKS_SPLIT 2
/* a host delay (a loader stall, a pause) is a rank's own: each of a host's ranks is judged
 * alone, up to a node's worth; one that paused once recovers one iteration whoever else on
 * the host paused in another */
#define JUDGE_HOST_SPLIT 8
static int split_by_rank(enum fault_kind k, uint32_t n)
{
	return k != FK_COMM && n <= (k == FK_HOST ? JUDGE_HOST_SPLIT : JUDGE_RANKS_SPLIT);
}
static size_t parts_of(const struct work *w, const struct faults *f, struct part *p, uint8_t *marks, int *split_all)
{
	static const enum fault_kind kinds[] = {FK_COMPUTE, FK_HOST, FK_COMM, FK_LOAD, FK_LATE};
	enum { K = sizeof(kinds) / sizeof(*kinds), M = REPLAY_MAX_FIXES };
	uint32_t hosts[K][M + 1], count[K][M + 1];
	size_t nh[K] = {0}, split = 0, by_host = 0;
	for (size_t i = 0; i < K; i++) {
		if (!f->count[kinds[i]])
			continue;
		for (uint32_t r = 0; r < w->W && kinds[i] != FK_LOAD && nh[i] <= M; r++) {
			if (f->kind[r] != kinds[i])
				continue;
			uint32_t h = store_host_id(w->s, r);
			size_t j = 0;
			while (j < nh[i] && hosts[i][j] != h)
				j++;
			if (j == nh[i]) {
				hosts[i][nh[i]] = h;
				count[i][nh[i]++] = 0;
			}
			count[i][j]++;
		}
		if (kinds[i] == FK_LOAD || nh[i] > M) {
			split++, by_host++;
			continue;
		}
		by_host += nh[i];
		for (size_t j = 0; j < nh[i]; j++)
			split += split_by_rank(kinds[i], count[i][j]) ? count[i][j] : 1;
	}
	size_t room = M - (f->stage >= 0), n = 0;
	int mode = split <= room ? 2 : by_host <= room ? 1 : 0; /* 2: split, 1: by host, 0: whole */
	*split_all = mode == 2;
	for (size_t i = 0; i < K && n < room; i++) {
		if (!f->count[kinds[i]])
			continue;
		if (kinds[i] == FK_LOAD || nh[i] > M || mode == 0) {
			p[n++] = (struct part){.kind = (int)kinds[i], .rank = UINT32_MAX, .host = UINT32_MAX};
			continue;
		}
		for (size_t j = 0; j < nh[i] && n < room; j++) {
			if (mode == 2 && split_by_rank(kinds[i], count[i][j])) {
				for (uint32_t r = 0; r < w->W && n < room; r++)
					if (f->kind[r] == kinds[i] && store_host_id(w->s, r) == hosts[i][j])
						p[n++] = (struct part){.kind = (int)kinds[i], .rank = r, .host = UINT32_MAX};
				continue;
			}
			p[n++] = (struct part){.kind = (int)kinds[i], .rank = UINT32_MAX, .host = hosts[i][j]};
		}
	}
	for (size_t j = 0; j < n; j++)
		for (uint32_t r = 0; r < w->W; r++)
			marks[j * w->W + r] = (uint8_t)in_part(w, f, &p[j], r);
	if (f->stage >= 0) {
		uint8_t *m = marks + n * w->W;
		/* a stage that grew: its compute as it was; without a baseline its layers spread
		 * evenly over the stages, every stage at the mean */
		for (uint32_t r = 0; r < w->W; r++)
			m[r] = !w->l2.has_base || topo_coords(w->t, r).pp == (uint32_t)f->stage;
		p[n++] = (struct part){.kind = -1, .rank = UINT32_MAX, .host = UINT32_MAX};
	}
	return n;
}

/* The what-if of part p: a link's transfers, the load spread, a stage's compute at its
 * baseline, a rank's at its peers'; a host delay's host phases only (host_phases), so that
 * what its compute's noise recovers does not make a pause a fault. */
static struct replay_fix fix_of(const struct work *w, const struct part *p, const uint8_t *marks,
				const uint8_t *host_phases)
{
	enum replay_how how = p->kind == FK_COMM   ? REPLAY_TRANSFER
			      : p->kind == FK_LOAD ? REPLAY_MEAN
			      : p->kind < 0	   ? (w->l2.has_base ? REPLAY_BASE : REPLAY_MEAN)
						   : REPLAY_PEERS;
	return (struct replay_fix){.how = how, .ranks = marks, .phases = p->kind == FK_HOST ? host_phases : NULL};
}

/* Without a window (the step did not rise): ranks that grew past ratio_high against their own
 * past (the iterations held before the last JUDGE_RECENT) in the last JUDGE_RECENT iterations
 * and stand apart from their peers there are stragglers the step hides: advisories, at most
 * JUDGE_HIDDEN_MAX of them (more is no straggler but a change of the whole job). Runs L2 on
 * those ranges, w->l2 afterwards holds them. Returns 0, -1 when out of memory. */
#define JUDGE_RECENT 8
#define JUDGE_HIDDEN_MAX 4
int judge_hidden(struct work *w, uint32_t last)
{
	uint32_t R = store_config(w->s)->ring_iters, held = store_max_iter(w->s);
	uint32_t lo = held + 1 >= R ? held + 1 - R : 0;
	if (last < lo + 2 * JUDGE_RECENT - 1)
		return 0;
	struct l2_config c = w->cfg->l2;
	c.step_ms = NAN;
	uint32_t bfirst = last + 1 >= JUDGE_RECENT + w->cfg->max_window ? last + 1 - JUDGE_RECENT - w->cfg->max_window : 0;
	if (l2_run(&w->l2, w->s, last - JUDGE_RECENT + 1, last, bfirst > lo ? bfirst : lo, last - JUDGE_RECENT, &c) < 0)
		return -1;
	w->P = w->l2.nphase;
	for (uint32_t p = 0; p < w->P && p < 256; p++)
		w->kind[p] = store_phase_kind(w->s, p);
	uint32_t found[JUDGE_HIDDEN_MAX + 1], n = 0;
	for (uint32_t r = 0; r < w->W && n <= JUDGE_HIDDEN_MAX; r++)
		for (uint32_t p = 0; p < w->P; p++)
			if (apart(w, r, p) && (w->l2.flag[(size_t)r * w->P + p] & L2_SELF_HIGH)) {
				found[n++] = r;
				break;
			}
	for (uint32_t i = 0; i < n && n <= JUDGE_HIDDEN_MAX; i++)
		hidden_advisory(w, found[i]);
	return 0;
}

/* The what-ifs after the parts' (wi + n + 1): every part put back but those of one kind of
 * fault that has two parts or more, the what-if of that kind's finding as a whole (its
 * parts' own gains add up wrong: two culprits of one collective each hold the step alone
 * once the other is put back). Their kinds into kinds[]; returns how many. */
static size_t kind_whatifs(const struct work *w, const struct part *p, size_t n, const uint8_t *marks,
			   const uint8_t *host_phases, struct replay_whatif *wi, int *kinds)
{
	size_t m = 0;
	for (int k = FK_COMPUTE; k < FK_COUNT; k++) {
		size_t of = 0;
		for (size_t i = 0; i < n; i++)
			of += p[i].kind == k;
		if (of < 2)
			continue;
		struct replay_whatif *x = &wi[n + 1 + m];
		for (size_t i = 0; i < n; i++)
			if (p[i].kind != k)
				x->fix[x->nfix++] = fix_of(w, &p[i], marks + i * w->W, host_phases);
		kinds[m++] = k;
	}
	return m;
}

/* what what-if x recovers over all (every part put back), the mean over the window's
 * iterations */
static double window_gain(const struct work *w, const struct replay_whatif *x, const struct replay_whatif *all)
{
	double sum = 0;
	uint32_t in_window = 0;
	for (uint32_t i = 0; i < all->iters; i++)
		if (all->iter[i] >= w->first) {
			sum += x->step[i] - all->step[i];
			in_window++;
		}
	return in_window && sum > 0 ? sum / in_window : 0;
}

/* One round of judge_faults; *split_all: its parts were as fine as parts_of makes them. */
static int judge_round(struct work *w, struct faults *f, int *split_all)
{
	struct part p[REPLAY_MAX_FIXES];
	uint8_t *marks = calloc((size_t)w->W * REPLAY_MAX_FIXES, 1);
	/* all, then all but each part, then all but each kind (kind_whatifs) */
	struct replay_whatif *wi = calloc(REPLAY_MAX_FIXES + 1 + FK_COUNT, sizeof(*wi));
	int rc = -1;
	if (!marks || !wi)
		goto out;
	*split_all = 1;
	uint8_t host_phases[256];
	for (uint32_t q = 0; q < w->P && q < 256; q++)
		host_phases[q] = w->kind[q] == RECORD_KIND_HOST;
	size_t n = parts_of(w, f, p, marks, split_all);
	rc = 0;
	if (!n)
		goto out;
	/* each part is what is left once every other one is put back: two faults at once,
	 * each hiding the other's cost while it holds the step, each get theirs */
	for (size_t j = 0; j <= n; j++)
		for (size_t i = 0; i < n; i++)
			if (i + 1 != j)
				wi[j].fix[wi[j].nfix++] = fix_of(w, &p[i], marks + i * w->W, host_phases);
	uint32_t R = store_config(w->s)->ring_iters, maxit = store_max_iter(w->s);
	uint32_t lo = maxit + 1 >= R ? maxit + 1 - R : 0, from = w->last + 1 >= JUDGE_SPAN ? w->last + 1 - JUDGE_SPAN : 0;
	struct replay_input in = {w->s, from > lo ? from : lo, w->last, w->bfirst, w->blast,
				  w->l2.has_base ? w->l2.base : NULL};
	double base[REPLAY_MAX_ITERS];
	int kinds[FK_COUNT];
	size_t nk = kind_whatifs(w, p, n, marks, host_phases, wi, kinds);
	if ((rc = replay_run(&in, wi, n + 1 + nk, NULL, base)) < 0)
		goto out;
	uint32_t iters = wi[0].iters;
	for (size_t j = 0; j < n; j++) {
		/* what it recovers each iteration; an iteration counts when it recovers a share of
		 * the step and a quarter of its most (the noise beside a pause does not) */
		double g[REPLAY_MAX_ITERS], most = 0;
		uint32_t in_window = 0;
		for (uint32_t i = 0; i < iters; i++) {
			g[i] = wi[j + 1].step[i] - wi[0].step[i];
			most = g[i] > most ? g[i] : most;
		}
		for (uint32_t i = 0; i < iters; i++) {
			p[j].gained += g[i] >= REPLAY_GAIN_SHARE * base[i] && g[i] >= most / 4;
			if (wi[0].iter[i] >= w->first) {
				p[j].gain += g[i];
				in_window++;
			}
		}
		p[j].gain = in_window && p[j].gain > 0 ? p[j].gain / in_window : 0;
	}
	for (size_t j = 0; j < n; j++) {
		if (p[j].kind < 0) {
			f->stage_gain = p[j].gain;
			continue; /* a stage's finding is its layers' evidence */
		}
		enum fault_kind k = (enum fault_kind)p[j].kind;
		/* a late arrival the replay recovers no step of started its steps late (the replay
		 * starts every rank's step together), and a host delay that lasts delays the step
		 * after it too (a loader at the end of the step makes the others wait in the next
		 * one), which the replay does not see: kept as the rules found them */
		int unseen = (k == FK_LATE && p[j].gained == 0) || (k == FK_HOST && part_sustained(w, f, &p[j]));
		if (p[j].gained >= (iters < JUDGE_ITERS ? iters : JUDGE_ITERS) || unseen) {
			f->gain[k] += p[j].gain;
			f->unseen[k] |= unseen;
			continue;
		}
		for (uint32_t r = 0; r < w->W; r++) {
			if (k == FK_LOAD ? f->kind[r] != k : !in_part(w, f, &p[j], r))
				continue;
			if (k == FK_COMPUTE && p[j].gained == 0 && slow_throughout(w, r))
				hidden_advisory(w, r);
			f->kind[r] = FK_NONE;
			f->count[k]--;
			f->count[FK_NONE]++;
		}
	}
	for (size_t m = 0; m < nk; m++)
		if (f->count[kinds[m]] && !f->unseen[kinds[m]])
			f->gain[kinds[m]] = window_gain(w, &wi[n + 1 + m], &wi[0]);
out:
	free(marks);
	free(wi);
	return rc;
}

/* Rounds until the parts are split as finely as they go: a round that judged by host (too
 * many parts) drops what recovers nothing, and the next judges the rest more finely (a host
 * of two ranks that each paused once stands as a host, falls as two ranks). */
#define JUDGE_ROUNDS 3
int judge_faults(struct work *w, struct faults *f)
{
	for (int round = 0; round < JUDGE_ROUNDS; round++) {
		size_t before = f->count[FK_NONE];
		int split_all = 1;
		memset(f->gain, 0, sizeof(f->gain));
		memset(f->unseen, 0, sizeof(f->unseen));
		f->stage_gain = 0;
		if (judge_round(w, f, &split_all) < 0)
			return -1;
		if (split_all || f->count[FK_NONE] == before)
			break;
	}
	return 0;
}
