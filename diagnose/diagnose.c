/* diagnose.c: attribution of an anomalous window to culprits, late arrivers and victims,
 * the verdict category and the time lost per iteration; the events are judged in events.c. */
#include "diagnose.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "actions.h"
#include "events.h"
#include "cmp.h"
#include "l3.h"
#include "record.h"
#include "stats.h"
#include "work.h"

void diagnose_config_default(struct diagnose_config *c)
{
	memset(c, 0, sizeof(*c));
	l2_config_default(&c->l2);
	c->max_window = 32;
	c->max_baseline = 8;
	c->max_listed = 32;
	c->l3_suspects = 64;
	c->l3_peers = 64;
	c->hang_factor = 3;
	c->stage_ratio = 1.25;
	c->few_fraction = 0.05;
}

void diagnose_input_from_l1(struct diagnose_input *in, const struct l1 *l, int64_t now_us)
{
	memset(in, 0, sizeof(*in));
	in->has_window = l->windows > 0;
	in->first_iter = l->first_iter;
	in->last_iter = l->last_iter;
	in->before_iter = l->windows ? l->before_iter : 0;
	in->baseline_ms = l->windows ? l->before_ms : l1_baseline(l);
	if (!l->windows)
		in->baseline_ms = l1_baseline(l);
	in->window_ms = l1_window_ms(l);
	in->now_us = now_us;
	static const char *const onset[] = {
		[L1_STEP] = "sudden", [L1_INTERMITTENT] = "intermittent", [L1_GRADUAL] = "gradual"};
	in->onset = l->windows ? onset[l->mode] : NULL;
	in->detected_iter = l->windows ? l->detected_iter : 0;
}

size_t diagnose_hung(const struct store *s, int64_t now_us, double baseline_ms, double factor, uint32_t *out,
		     size_t cap)
{
	if (!(baseline_ms > 0) || now_us <= 0)
		return 0;
	int64_t late = (int64_t)(factor * baseline_ms * 1000.0);
	size_t n = 0;
	uint32_t W = store_topo(s)->world;
	for (uint32_t r = 0; r < W; r++) {
		uint32_t it;
		int64_t end;
		if (!store_rank_last(s, r, &it, &end))
			continue;
		if (now_us - end > late) {
			if (n < cap)
				out[n] = r;
			n++;
		}
	}
	return n;
}

/* a suspect's identity, role and level */
static void fill_identity(const struct work *w, struct report_suspect *su, uint32_t r, enum report_role role,
			  const char *level)
{
	su->rank = r;
	store_host(w->s, r, su->host, sizeof(su->host));
	su->host_known = store_host_known(w->s, r);
	su->coords = topo_coords(w->t, r);
	su->role = role;
	su->level = level;
}

/* evidence: phases of kinds in mask with flag, largest |z| first */
static double fill_evidence(const struct work *w, struct report_suspect *su, uint32_t r, int mask, int flag,
			    double *excess_ms)
{
	double best = 0;
	su->nev = 0;
	*excess_ms = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t c = (size_t)r * w->P + p;
		if (!((mask >> store_phase_kind(w->s, p)) & 1) || !(w->l2.flag[c] & flag))
			continue;
		struct report_evidence e;
		memset(&e, 0, sizeof(e));
		snprintf(e.phase, sizeof(e.phase), "%s", store_name(w->s, store_phase_name(w->s, p)));
		e.kind = store_phase_kind(w->s, p);
		e.ratio = w->l2.ratio[c];
		e.z = w->l2.z[c];
		e.group_cv = w->l2.group_cv[(size_t)w->l2.role[r] * w->P + p];
		e.value_ms = w->l2.val[c];
		e.peer_ms = e.ratio > 0 ? e.value_ms / e.ratio : NAN;
		e.fallback = (w->l2.flag[c] & L2_FALLBACK) != 0;
		e.by_stage = (w->l2.flag[c] & L2_BY_STAGE) != 0;
		e.own_ratio = w->l2.base[c] > 0 ? e.value_ms / w->l2.base[c] : NAN;
		if (isfinite(e.peer_ms))
			*excess_ms += e.value_ms - e.peer_ms;
		double key = fabs(e.z);
		size_t pos = su->nev < REPORT_MAX_EVIDENCE ? su->nev : REPORT_MAX_EVIDENCE;
		while (pos > 0 && fabs(su->ev[pos - 1].z) < key)
			pos--;
		if (pos >= REPORT_MAX_EVIDENCE)
			continue;
		size_t end = su->nev < REPORT_MAX_EVIDENCE ? su->nev : REPORT_MAX_EVIDENCE - 1;
		for (size_t j = end; j > pos; j--)
			su->ev[j] = su->ev[j - 1];
		su->ev[pos] = e;
		if (su->nev < REPORT_MAX_EVIDENCE)
			su->nev++;
	}
	for (size_t i = 0; i < su->nev; i++) {
		double sc = flag == L2_LOW ? (su->ev[i].ratio > 0 ? 1 / su->ev[i].ratio : 0) : su->ev[i].ratio;
		if (sc > best)
			best = sc;
	}
	return best;
}

static int cmp_suspect(const void *a, const void *b)
{
	const struct report_suspect *x = a, *y = b;
	if (x->role != y->role)
		return x->role == REPORT_CULPRIT ? -1 : 1;
	if (x->score != y->score)
		return x->score > y->score ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* L3 for the culprits with a pooled-peer cache per role group */
struct pool_entry {
	uint32_t group;
	struct sketch *pools;
};

/* The peers whose kernels rank r's are compared with, into peers (W entries), sampled to
 * at most cfg->l3_peers: the other ranks of its role group that are no culprit; with fewer
 * than 2 of them (data parallel 1-2) those of its pipeline stage, and with fewer still
 * those of the job. *key names the pool for the cache: the role group, or W + stage, or
 * 2W. Returns the number of peers. */
static size_t l3_peers(const struct work *w, uint32_t r, uint32_t *peers, uint32_t *key)
{
	size_t np = topo_role_members(w->t, r, peers, w->W), k = 0;
	*key = w->l2.role[r];
	for (size_t j = 0; j < np; j++)
		if (w->role[peers[j]] != 1)
			peers[k++] = peers[j];
	np = k;
	for (int wide = 0; np < 2 && wide < 2; wide++) {
		uint32_t pp = topo_coords(w->t, r).pp;
		*key = wide ? 2 * w->W : w->W + pp;
		np = 0;
		for (uint32_t q = 0; q < w->W; q++)
			if (w->role[q] != 1 && (wide || topo_coords(w->t, q).pp == pp))
				peers[np++] = q;
	}
	size_t step = np > w->cfg->l3_peers ? np / w->cfg->l3_peers : 1;
	k = 0;
	for (size_t j = 0; j < np; j += step)
		peers[k++] = peers[j];
	return k;
}

static int run_l3(struct work *w, struct report_suspect *sus, size_t n, int *any_degraded_compute, int *any_stall,
		  size_t *n_stall_only)
{
	uint32_t K = store_kernel_count(w->s);
	*any_degraded_compute = *any_stall = 0;
	*n_stall_only = 0;
	if (!K)
		return 0;
	struct pool_entry cache[16];
	size_t ncache = 0;
	uint32_t *peers = malloc(w->W * sizeof(uint32_t));
	struct l3_result res[REPORT_MAX_KERNELS];
	int rc = -1;
	if (!peers)
		goto out;
	for (size_t i = 0; i < n && i < w->cfg->l3_suspects; i++) {
		struct report_suspect *su = &sus[i];
		if (su->role != REPORT_CULPRIT)
			continue;
		uint32_t g;
		size_t k = l3_peers(w, su->rank, peers, &g);
		struct sketch *pools = NULL;
		for (size_t c = 0; c < ncache; c++)
			if (cache[c].group == g)
				pools = cache[c].pools;
		if (!pools) {
			pools = calloc(K, sizeof(*pools));
			if (!pools)
				goto out;
			for (uint32_t q = 0; q < K; q++)
				sketch_init(&pools[q]);
			if (ncache == sizeof(cache) / sizeof(*cache)) {
				for (uint32_t q = 0; q < K; q++)
					sketch_free(&cache[0].pools[q]);
				free(cache[0].pools);
				memmove(cache, cache + 1, (ncache - 1) * sizeof(*cache));
				ncache--;
			}
			cache[ncache].group = g;
			cache[ncache].pools = pools;
			ncache++;
			if (l3_pool(w->s, peers, k, w->kfirst, w->last, pools) < 0)
				goto out;
		}
		int nr = l3_compare(w->s, su->rank, pools, w->kfirst, w->last, res, REPORT_MAX_KERNELS);
		if (nr < 0)
			goto out;
		int degraded = 0, stall = 0;
		su->nk = 0;
		for (int j = 0; j < nr; j++) {
			struct report_kernel *k = &su->k[su->nk++];
			snprintf(k->name, sizeof(k->name), "%s",
				 store_name(w->s, store_kernel_name(w->s, res[j].kslot)));
			k->kind = store_kernel_kind(w->s, res[j].kslot);
			k->ratio = res[j].ratio;
			k->ks = res[j].ks;
			k->max_ratio = res[j].max_ratio;
			if (res[j].degraded && k->kind == RECORD_KIND_COMPUTE)
				degraded = 1;
			if (res[j].stall)
				stall = 1;
		}
		if (nr > 0)
			su->level = "L3";
		*any_degraded_compute |= degraded;
		*any_stall |= stall;
		if (stall && !degraded)
			(*n_stall_only)++;
	}
	rc = 0;
out:
	for (size_t c = 0; c < ncache; c++) {
		for (uint32_t q = 0; q < K; q++)
			sketch_free(&cache[c].pools[q]);
		free(cache[c].pools);
	}
	free(peers);
	return rc;
}

/* Rank r's compute per iteration: the sum of its compute phases (window medians) into
 * *win, and of their baselines into *base (NaN without a baseline) */
static void compute_sums(const struct work *w, uint32_t r, double *win, double *base)
{
	uint32_t P = w->P;
	double a = 0, b = 0;
	for (uint32_t p = 0; p < P; p++) {
		if (w->kind[p] != RECORD_KIND_COMPUTE)
			continue;
		/* a phase of some iterations only (an eval step) weighs by its share */
		double f = w->l2.presence[p];
		double v = w->l2.val[(size_t)r * P + p], u = w->l2.base[(size_t)r * P + p];
		/* with a baseline, the phases it holds (a pass new to the window is in
		 * neither sum: the two compare like with like) */
		if (w->l2.has_base && !isfinite(u))
			continue;
		a += isfinite(v) ? f * v : 0;
		b += isfinite(u) ? f * u : 0;
	}
	*win = a;
	*base = w->l2.has_base ? b : NAN;
}

/* The stage whose compute is heavier than the other stages' (and was not before), or -1.
 * Per rank: the sum of its compute phases (window medians); per stage: the median over its
 * ranks. A stage is heavy when its median exceeds the median of the other stages by
 * cfg.stage_ratio, by 15% more than in the baseline, and when every rank of it is
 * individually heavy: a stage's layers weigh on all its ranks alike, so one of them at the
 * other stages' pace says the slow ones are slow on their own (they stay culprits). */
static int find_stage(struct work *w, double *excess_ms, double *ratio_out)
{
	const struct topo *t = w->t;
	if (t->pp < 2)
		return -1;
	uint32_t W = w->W, S = t->pp;
	double *cw = malloc(W * sizeof(double)), *cb = malloc(W * sizeof(double));
	double *sw = malloc(S * sizeof(double)), *sb = malloc(S * sizeof(double));
	double *tmp = malloc((W + S) * sizeof(double));
	uint32_t *stage = malloc(W * sizeof(uint32_t));
	int best = -1;
	if (!cw || !cb || !sw || !sb || !tmp || !stage)
		goto out;
	for (uint32_t r = 0; r < W; r++) {
		compute_sums(w, r, &cw[r], &cb[r]);
		stage[r] = topo_coords(t, r).pp;
	}
	for (uint32_t pp = 0; pp < S; pp++) {
		size_t nw = 0, nb = 0;
		for (uint32_t r = 0; r < W; r++)
			if (stage[r] == pp)
				tmp[nw++] = cw[r];
		sw[pp] = nw ? stats_median_inplace(tmp, nw) : NAN;
		for (uint32_t r = 0; r < W; r++)
			if (stage[r] == pp && isfinite(cb[r]))
				tmp[nb++] = cb[r];
		sb[pp] = nb ? stats_median_inplace(tmp, nb) : NAN;
	}
	double best_ratio = 0;
	for (uint32_t pp = 0; pp < S; pp++) {
		size_t n = 0, nb = 0;
		for (uint32_t q = 0; q < S; q++)
			if (q != pp && isfinite(sw[q]))
				tmp[n++] = sw[q];
		if (!n || !isfinite(sw[pp]))
			continue;
		double others = stats_median_inplace(tmp, n);
		if (!(others > 0))
			continue;
		double rw = sw[pp] / others, rb = NAN, ob = NAN;
		for (uint32_t q = 0; q < S; q++)
			if (q != pp && isfinite(sb[q]))
				tmp[nb++] = sb[q];
		if (nb && isfinite(sb[pp])) {
			ob = stats_median_inplace(tmp, nb);
			if (ob > 0)
				rb = sb[pp] / ob;
		}
		/* heavier than the others past stage_ratio; or, with a baseline, grown past
		 * stage_ratio against them and now heavier past subtle_ratio (a stage 1.2x heavier
		 * that was 0.95x before: its own history shows the change); or grown past
		 * subtle_ratio only, on several hosts and four ranks or more (below: a stage's
		 * median over many ranks shows a 1.15x growth that each rank's noise hides) */
		double sub = w->cfg->l2.subtle_ratio;
		int grown = !(rw > w->cfg->stage_ratio) && isfinite(rb) && rw / rb > w->cfg->stage_ratio && rw > sub;
		int little = !(rw > w->cfg->stage_ratio) && !grown && isfinite(rb) && rw / rb > sub && rw > sub;
		if (!(rw > w->cfg->stage_ratio || grown || little) || (isfinite(rb) && rw / rb <= (little ? sub : 1.15)) ||
		    rw <= best_ratio)
			continue;
		/* every member heavy (halfway to the stage's median) and, with a baseline, grown
		 * against the other stages halfway to the stage's growth (the median of a stage of
		 * two is their mean: one slow rank beside a peer that was always slow is not a
		 * stage that grew); a grown stage's noise may leave a tenth of them under that */
		size_t members = 0, heavy = 0;
		double cut = others * (1 + ((grown || little ? rw : w->cfg->stage_ratio) - 1) / 2);
		double grew = isfinite(rb) ? 1 + (rw / rb - 1) / 2 : NAN;
		uint32_t host0 = UINT32_MAX;
		int spread = 0; /* on more than one host */
		for (uint32_t r = 0; r < W; r++)
			if (stage[r] == pp && cw[r] > 0) {
				members++;
				heavy += cw[r] > cut &&
					 !(isfinite(grew) && cb[r] > 0 && cw[r] / cb[r] < grew * others / ob);
				uint32_t h = store_host_id(w->s, r);
				if (host0 == UINT32_MAX)
					host0 = h;
				spread |= h != host0;
			}
		if (grown || little ? heavy * 10 < members * 9 : heavy < members)
			continue;
		/* a grown stage on one host (one rank, one node) is as much that host's fault,
		 * and a subtle one: the ranks' own findings say it. A stage of one rank that
		 * regressed is that rank (a layer split does not change mid-run; a GPU or a
		 * kernel does): its own findings, L3's stalls among them, say what it is */
		if (((grown || little) && !spread) || (isfinite(rb) && members == 1) || (little && members < 4))
			continue;
		best_ratio = rw;
		best = (int)pp;
		*excess_ms = sw[pp] - others;
		*ratio_out = rw;
	}
out:
	free(cw);
	free(cb);
	free(sw);
	free(sb);
	free(tmp);
	free(stage);
	return best;
}

/* Rank r's own growth: its compute in the window over its baseline, minus 1, over the
 * compute phases with both (a phase without a baseline, an eval step that fell in the
 * window only, says nothing of a change); NaN when none has both */
static double own_growth(const struct work *w, uint32_t r)
{
	double a = 0, b = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		double v = w->l2.val[i], u = w->l2.base[i];
		if (w->kind[p] != RECORD_KIND_COMPUTE || !isfinite(v) || !(u > 0))
			continue;
		a += w->l2.presence[p] * v;
		b += w->l2.presence[p] * u;
	}
	return w->l2.has_base && b > 0 ? a / b - 1 : NAN;
}

/* The median own growth of the ranks on host h that are in stage (in_stage 1) or not
 * (0), into *growth. Returns how many ranks it is over, 0 when none had a baseline. */
static size_t node_growth(const struct work *w, uint32_t h, int stage, int in_stage, double *tmp, double *growth)
{
	size_t n = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (store_host_id(w->s, r) != h || (topo_coords(w->t, r).pp == (uint32_t)stage) != in_stage)
			continue;
		double g = own_growth(w, r);
		if (isfinite(g))
			tmp[n++] = g;
	}
	if (n)
		*growth = stats_median_inplace(tmp, n);
	return n;
}

/* A slow node read as a heavy stage (docs/method.md, "A slow node is not a stage"): when
 * a node holds several stages (a stage is fewer ranks than a node), a slow node makes every
 * stage on it heavy, and find_stage names one of them. A stage's layers weigh on its own
 * ranks only; a node's fault on every rank of the node. So when every rank of the heavy
 * stage is on one host and the other ranks of that host grew (window compute over
 * baseline) by half the stage's growth or more, it is the node: returns 1 and its host id
 * in *host; 0 when not, -1 when out of memory. A stage on more than one host is never
 * concentrated on one: find_stage calls a stage heavy only when every rank of it is. */
static int node_not_stage(const struct work *w, int stage, uint32_t *host)
{
	uint32_t h = 0;
	int found = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (topo_coords(w->t, r).pp != (uint32_t)stage)
			continue;
		uint32_t hr = store_host_id(w->s, r);
		if (found && hr != h)
			return 0;
		h = hr;
		found = 1;
	}
	if (!found)
		return 0;
	double *tmp = malloc(w->W * sizeof(double)), in = NAN, out = NAN;
	if (!tmp)
		return -1;
	/* the stage grew by the 15% find_stage asks of a regression (a standing stage did not) */
	int node = node_growth(w, h, stage, 1, tmp, &in) && node_growth(w, h, stage, 0, tmp, &out) && in > 0.15 &&
		   out >= in / 2;
	free(tmp);
	*host = h;
	return node;
}

/* Ranks with a hint (one comparison past the subtle cut) in a compute phase where strong
 * compute culprits are high, at half their smallest excess or more, join them: the same
 * fault on more ranks, whose z fell under the threshold (four ranks of eight slowed 1.18x:
 * the role groups and stages are half slow, only the own change says it, and not always by
 * the full z). A hint alone, with no culprit it resembles, stays a hint. */
static int join_hints(const struct work *w, uint8_t *kind, uint8_t *weak, size_t *count)
{
	uint32_t P = w->P;
	double *least = malloc(P * sizeof(double));
	if (!least)
		return -1;
	for (uint32_t p = 0; p < P; p++)
		least[p] = NAN;
	for (uint32_t r = 0; r < w->W; r++)
		for (uint32_t p = 0; p < P && kind[r] == FK_COMPUTE && !weak[r]; p++) {
			size_t i = (size_t)r * P + p;
			if (w->kind[p] == RECORD_KIND_COMPUTE && (w->l2.flag[i] & L2_HIGH) &&
			    !(w->l2.ratio[i] >= least[p]))
				least[p] = w->l2.ratio[i];
		}
	for (uint32_t r = 0; r < w->W; r++)
		for (uint32_t p = 0; p < P && kind[r] == FK_NONE; p++) {
			size_t i = (size_t)r * P + p;
			if ((w->l2.flag[i] & L2_HINT) && least[p] > 1 && w->l2.ratio[i] >= 1 + (least[p] - 1) / 2) {
				kind[r] = FK_COMPUTE;
				weak[r] = 0;
				count[FK_NONE]--;
				count[FK_COMPUTE]++;
			}
		}
	free(least);
	return 0;
}

/* When no phase of anyone stands out: ranks whose compute as a whole (the sum of their
 * compute phases, own_growth) grew against the job's, past subtle_z and subtle_ratio and
 * by step_share of the step. A 1.2x fault spread over a rank's phases may pass the subtle
 * cut in one or two of them only (a hint, not a finding), while their sum, whose noise
 * averages out, stands clear (a sum of 8 ranks' lower half is a rough spread: 1.18x
 * stood at z 5.3 on an 8-rank job, its healthy ranks under 1.5). The job's reference is the lower quartile of the ranks'
 * growths and its spread that of the lower half (as for a phase, l2.c), so a job-wide
 * change names nobody; at most a quarter of the ranks. Each is shown by its compute phase
 * that grew most. Returns -1 when out of memory. */
static int own_compute_shift(struct work *w, uint8_t *kind, size_t *count)
{
	uint32_t W = w->W, P = w->P;
	if (!w->l2.has_base || W < 4)
		return 0;
	double *g = malloc(2 * (size_t)W * sizeof(double));
	if (!g)
		return -1;
	double *x = g + W;
	size_t n = 0;
	for (uint32_t r = 0; r < W; r++) {
		g[r] = 1 + own_growth(w, r);
		if (isfinite(g[r]))
			x[n++] = g[r];
	}
	size_t h = n / 2, named = 0;
	double ref = NAN, spread = NAN;
	if (h >= 2) {
		stats_median_inplace(x, n); /* partitions: the lower half first */
		ref = stats_median_inplace(x, h);
		spread = 2 * stats_mad_inplace(x, h, ref);
	}
	const struct l2_config *cf = &w->cfg->l2;
	double floor = cf->step_ms > 0 ? cf->step_share * cf->step_ms : cf->min_delta_ms;
	double sd = STATS_MAD_SCALE * fmax(spread, cf->mad_floor_rel * ref);
	for (uint32_t r = 0; r < W && ref > 0; r++) {
		double win, base;
		compute_sums(w, r, &win, &base);
		x[r] = 0;
		if (kind[r] == FK_NONE && g[r] / ref > cf->subtle_ratio && (g[r] - ref) / sd > cf->subtle_z &&
		    win - base * ref > floor)
			x[r] = 1, named++;
	}
	for (uint32_t r = 0; r < W && named && named * 4 <= W; r++) {
		if (!(x[r] > 0))
			continue;
		uint32_t top = UINT32_MAX;
		double most = 0;
		for (uint32_t p = 0; p < P; p++) {
			size_t i = (size_t)r * P + p;
			double q = w->l2.val[i] / w->l2.base[i];
			if (w->kind[p] == RECORD_KIND_COMPUTE && q > most)
				most = q, top = p;
		}
		if (top == UINT32_MAX)
			continue;
		size_t i = (size_t)r * P + top;
		w->l2.flag[i] |= L2_HIGH | L2_FALLBACK;
		w->l2.ratio[i] = (float)(most / ref);
		kind[r] = FK_COMPUTE;
		count[FK_NONE]--;
		count[FK_COMPUTE]++;
	}
	free(g);
	return 0;
}

/* A heavy stage that is not the finding: a rank of another stage on a host of the stage's
 * ranks computes slower on its own (a strong compute culprit: kind and not weak). Half the
 * ranks of a small job's node slowed, a whole stage among them, is those ranks' fault, not
 * the stage's layers, which weigh on the stage's own ranks only. */
static int slowed_beside_stage(const struct work *w, const uint8_t *kind, const uint8_t *weak, int stage)
{
	for (uint32_t r = 0; r < w->W; r++) {
		if (kind[r] != FK_COMPUTE || weak[r] || topo_coords(w->t, r).pp == (uint32_t)stage)
			continue;
		uint32_t h = store_host_id(w->s, r);
		for (uint32_t q = 0; q < w->W; q++)
			if (topo_coords(w->t, q).pp == (uint32_t)stage && store_host_id(w->s, q) == h)
				return 1;
	}
	return 0;
}

static int explained_by(const struct work *w, uint32_t r, const uint32_t *culprits, size_t nc)
{
	struct topo_coords c = topo_coords(w->t, r);
	for (size_t i = 0; i < nc; i++) {
		struct topo_coords k = topo_coords(w->t, culprits[i]);
		/* same EP block of dp indexes: the culprit's EP group, the TP/CP peers of those
		 * ranks, and their pipeline chains through every stage */
		if (c.dp / w->t->ep == k.dp / w->t->ep)
			return 1;
	}
	return 0;
}

/* the verdicts on the job's events for this pass (events.c) */
static void judge_events(struct work *w, const uint32_t *culprits, size_t nc, double comm_kernel_ratio)
{
	struct events_window win = {w->has_span, w->span_start, w->span_end};
	events_judge(w->rep, w->s, w->role, w->W, &win, culprits, nc, comm_kernel_ratio);
}

static void summarize_hosts(const struct work *w, const uint32_t *ranks, size_t n, char *buf, size_t len)
{
	char h[REPORT_NAME_MAX], prev[REPORT_NAME_MAX] = "";
	size_t used = 0, shown = 0;
	buf[0] = 0;
	for (size_t i = 0; i < n && shown < 4; i++) {
		store_host(w->s, ranks[i], h, sizeof(h));
		if (strcmp(h, prev) == 0)
			continue;
		int k = snprintf(buf + used, len - used, "%s%s", shown ? ", " : "", h);
		if (k < 0 || (size_t)k >= len - used)
			break;
		used += (size_t)k;
		shown++;
		snprintf(prev, sizeof(prev), "%s", h);
	}
}

static int report_hang(struct work *w, const struct diagnose_input *in, uint32_t *hung, size_t nh)
{
	struct report *rep = w->rep;
	uint32_t W = w->W, maxlast = 0, minlast = UINT32_MAX, reporting = 0;
	for (uint32_t r = 0; r < W; r++) {
		uint32_t it;
		int64_t end;
		if (store_rank_last(w->s, r, &it, &end))
			reporting++;
	}
	for (size_t i = 0; i < nh; i++) {
		uint32_t it;
		int64_t end;
		store_rank_last(w->s, hung[i], &it, &end);
		if (it > maxlast)
			maxlast = it;
		if (it < minlast)
			minlast = it;
	}
	size_t nc = nh;
	if (nh * 2 > reporting) {
		/* the whole job stopped: the culprits are the ranks that stopped first */
		nc = 0;
		if (minlast < maxlast)
			for (size_t i = 0; i < nh; i++) {
				uint32_t it;
				int64_t end;
				store_rank_last(w->s, hung[i], &it, &end);
				if (it == minlast)
					hung[nc++] = hung[i];
			}
	}
	rep->category = "hang";
	rep->suspects = calloc(nc ? nc : 1, sizeof(*rep->suspects));
	if (!rep->suspects)
		return -1;
	for (size_t i = 0; i < nc; i++) {
		struct report_suspect *su = &rep->suspects[i];
		fill_identity(w, su, hung[i], REPORT_CULPRIT, "L1");
		uint32_t it;
		int64_t end;
		store_rank_last(w->s, hung[i], &it, &end);
		su->score = in->baseline_ms > 0 ? (double)(in->now_us - end) / 1000.0 / in->baseline_ms : 0;
	}
	rep->nsuspects = nc < w->cfg->max_listed ? nc : w->cfg->max_listed;
	rep->culprits_total = nc;
	for (size_t i = 0; i < nc; i++)
		w->role[hung[i]] = 1;
	char hosts[200];
	summarize_hosts(w, hung, nc, hosts, sizeof(hosts));
	if (nc)
		snprintf(rep->summary, sizeof(rep->summary),
			 "%zu rank%s stopped reporting (last iteration %u, overdue by more than %.0f "
			 "baseline iterations) on %s",
			 nc, nc == 1 ? "" : "s", minlast, w->cfg->hang_factor, hosts);
	else
		snprintf(rep->summary, sizeof(rep->summary),
			 "the whole job stopped reporting at iteration %u; no rank stopped first", maxlast);
	rep->lost_ms = 0;
	judge_events(w, hung, nc, NAN);
	return 0;
}

/* --- findings --- */

/* A rank-phase of a collective (its group's number g) with the values now and before */
struct member {
	uint32_t g, r;
	double v, b;
};

static int member_cmp(const void *a, const void *b)
{
	const struct member *x = a, *y = b;
	return x->g < y->g ? -1 : x->g > y->g;
}

/* Clears L2_HIGH and L2_HINT of the collectives whose excess over their members stood
 * before: a rank long against its collective's members now (excess: its value less their
 * median) that was long by half of that excess or more in the baseline did not slow down; it
 * was so (the slow half of a bimodal fleet in its pipeline transfers), and the window's rise
 * is elsewhere. So for L2_LOW and a shortfall under the members: a rank that arrived last
 * by as much before (a standing slow rank) is not a late arrival this window holds. Without
 * a baseline nothing is cleared. Returns -1 when out of memory. */
static int clear_standing_comm(struct work *w)
{
	uint32_t W = w->W, P = w->P;
	if (!w->l2.has_base)
		return 0;
	uint8_t *gm = malloc(W);
	struct member *m = malloc((size_t)W * sizeof(*m));
	double *x = malloc(2 * (size_t)W * sizeof(double));
	if (!gm || !m || !x) {
		free(gm);
		free(m);
		free(x);
		return -1;
	}
	for (uint32_t p = 0; p < P; p++) {
		if (w->kind[p] != RECORD_KIND_COMM)
			continue;
		enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
		memset(gm, 0, W);
		int any = 0;
		for (uint32_t r = 0; r < W; r++)
			if (w->l2.flag[(size_t)r * P + p] & (L2_HIGH | L2_HINT | L2_LOW)) {
				gm[topo_collective_group(w->t, r, dim) % W] = 1;
				any = 1;
			}
		if (!any)
			continue;
		size_t n = 0;
		for (uint32_t r = 0; r < W; r++) {
			uint32_t g = topo_collective_group(w->t, r, dim);
			size_t i = (size_t)r * P + p;
			if (gm[g % W])
				m[n++] = (struct member){g, r, w->l2.val[i], w->l2.base[i]};
		}
		qsort(m, n, sizeof(*m), member_cmp);
		for (size_t a = 0, e; a < n; a = e) {
			size_t nv = 0, nb = 0;
			for (e = a; e < n && m[e].g == m[a].g; e++) {
				if (isfinite(m[e].v))
					x[nv++] = m[e].v;
				if (isfinite(m[e].b))
					x[W + nb++] = m[e].b;
			}
			if (nv < 3 || nb < 3)
				continue;
			double mv = stats_median_inplace(x, nv), mb = stats_median_inplace(x + W, nb);
			for (size_t k = a; k < e; k++) {
				size_t i = (size_t)m[k].r * P + p;
				double now = m[k].v - mv, before = m[k].b - mb;
				if ((w->l2.flag[i] & (L2_HIGH | L2_HINT)) && isfinite(before) && before * 2 >= now)
					w->l2.flag[i] &= (uint8_t) ~(L2_HIGH | L2_HINT);
				if ((w->l2.flag[i] & L2_LOW) && isfinite(before) && before * 2 <= now)
					w->l2.flag[i] &= (uint8_t)~L2_LOW;
			}
		}
	}
	free(gm);
	free(m);
	free(x);
	return 0;
}

/* A rank's own fault. Compute or host: a phase high against its peers (L2_HIGH), or a hint
 * of it (one comparison past the subtle thresholds) on a rank that also arrives last at a
 * collective, which is what a slower rank does. Communication: a collective it takes
 * longer in than the collective's other members, with its own work normal. */
static enum fault_kind rank_fault(const struct work *w, uint32_t r, int *weak)
{
	int late = phase_flag_any(w, r, KM_COMM, L2_LOW);
	*weak = 0;
	if (phase_flag_any(w, r, KM_COMPUTE, L2_HIGH))
		return FK_COMPUTE;
	if (phase_flag_any(w, r, KM_HOST, L2_HIGH))
		return FK_HOST;
	*weak = 1;
	if (late && phase_flag_any(w, r, KM_COMPUTE, L2_HINT))
		return FK_COMPUTE;
	if (late && phase_flag_any(w, r, KM_HOST, L2_HINT))
		return FK_HOST;
	*weak = 0;
	if (phase_flag_any(w, r, KM_COMM, L2_HIGH) && !comm_is_wait(w, r))
		return FK_COMM;
	return FK_NONE;
}

/* Communication culprits long in their collectives, when another node leaves those
 * collectives later than its co-members (node_leaves_late): the long ones came early and
 * waited for it (a slow NIC on the node that holds most of a collective's members makes
 * the others long against the members' median), and that node is the culprit instead.
 * Nothing changes when it names none or a node of theirs. Returns -1 when out of memory. */
static int prefer_leaving_node(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes)
{
	size_t cells = (size_t)w->W * w->P;
	uint8_t *k2 = calloc(w->W, 1), *flag = malloc(cells);
	float *ratio = malloc(cells * sizeof(float));
	size_t c2[FK_COUNT] = {0};
	int rc = -1;
	if (!k2 || !flag || !ratio)
		goto out;
	memcpy(flag, w->l2.flag, cells); /* node_leaves_late marks the node's phase */
	memcpy(ratio, w->l2.ratio, cells * sizeof(float));
	c2[FK_NONE] = w->W;
	if (node_leaves_late(w, k2, c2, nodes, few_nodes) < 0)
		goto out;
	int other = c2[FK_COMM] > 0;
	for (uint32_t r = 0; r < w->W && other; r++)
		for (uint32_t q = 0; q < w->W && kind[r] == FK_COMM; q++)
			if (k2[q] == FK_COMM && store_host_id(w->s, q) == store_host_id(w->s, r)) {
				other = 0;
				break;
			}
	if (other) {
		memcpy(kind, k2, w->W);
		memcpy(count, c2, sizeof(c2));
	} else {
		memcpy(w->l2.flag, flag, cells);
		memcpy(w->l2.ratio, ratio, cells * sizeof(float));
	}
	rc = 0;
out:
	free(k2);
	free(flag);
	free(ratio);
	return rc;
}

/* Drops the weak compute and host candidates (a hint and a late arrival) whose lateness a
 * strong one explains: they share its tensor-parallel group (the group's collective makes
 * every member as late as its slowest) or its block of dp indexes (its EP group, their
 * peers and their pipeline chains wait for it and arrive late after: explained_by). */
static int drop_late_by_peer(const struct work *w, uint8_t *kind, const uint8_t *weak, size_t *count)
{
	uint32_t G = topo_collective_group_count(w->t, TOPO_TP);
	uint32_t ep = w->t->ep ? w->t->ep : 1, B = w->t->dp / ep + 1;
	uint8_t *strong = calloc(G ? G : 1, 1), *block = calloc(B, 1);
	if (!strong || !block) {
		free(strong);
		free(block);
		return -1;
	}
	for (uint32_t r = 0; r < w->W; r++)
		if ((kind[r] == FK_COMPUTE || kind[r] == FK_HOST) && !weak[r]) {
			strong[topo_collective_group(w->t, r, TOPO_TP)] = 1;
			block[topo_coords(w->t, r).dp / ep] = 1;
		}
	for (uint32_t r = 0; r < w->W; r++)
		if (weak[r] &&
		    (strong[topo_collective_group(w->t, r, TOPO_TP)] || block[topo_coords(w->t, r).dp / ep])) {
			count[kind[r]]--;
			kind[r] = FK_NONE;
			count[FK_NONE]++;
		}
	free(strong);
	free(block);
	return 0;
}

/* Drops the communication candidates that only wait: every communication phase where
 * they are long has compute or host culprits for a third or more of the collective's
 * members (one, for a pipeline chain). One late member makes every other member wait alike (none stands out); when a
 * third or more are late, the median member is one of them and the ones on time look long.
 * A member long beyond the others' wait moves its data slower: it stays. */
static int drop_waiting(const struct work *w, uint8_t *kind, size_t *count, int stage)
{
	uint32_t P = w->P, W = w->W;
	/* [phase][collective group]: members, and culprits among them */
	uint32_t *members = calloc((size_t)P * W, sizeof(uint32_t));
	uint32_t *late = calloc((size_t)P * W, sizeof(uint32_t));
	uint32_t G = topo_collective_group_count(w->t, TOPO_TP);
	uint8_t *tp_late = calloc(G ? G : 1, 1);
	if (!members || !late || !tp_late) {
		free(members);
		free(late);
		free(tp_late);
		return -1;
	}
	/* a tensor-parallel group waits for its slowest member at its own collective: every
	 * member of a culprit's group arrives late at the next one */
	for (uint32_t q = 0; q < W; q++)
		if (kind[q] == FK_COMPUTE || kind[q] == FK_HOST ||
		    (stage >= 0 && topo_coords(w->t, q).pp == (uint32_t)stage))
			tp_late[topo_collective_group(w->t, q, TOPO_TP)] = 1;
	for (uint32_t p = 0; p < P; p++) {
		if (w->kind[p] != RECORD_KIND_COMM)
			continue;
		enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
		for (uint32_t q = 0; q < W; q++) {
			size_t g = (size_t)p * W + topo_collective_group(w->t, q, dim);
			members[g]++;
			late[g] += tp_late[topo_collective_group(w->t, q, TOPO_TP)];
		}
	}
	for (uint32_t r = 0; r < W; r++) {
		if (kind[r] != FK_COMM)
			continue;
		int waits = 1;
		for (uint32_t p = 0; p < P && waits; p++)
			if (w->kind[p] == RECORD_KIND_COMM && (w->l2.flag[(size_t)r * P + p] & L2_HIGH)) {
				enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
				size_t g = (size_t)p * W + topo_collective_group(w->t, r, dim);
				/* a pipeline chain passes one late stage's delay on to every stage after it */
				waits = dim == TOPO_PP ? late[g] > 0 : late[g] * 3 >= members[g];
			}
		if (waits) {
			kind[r] = FK_NONE;
			count[FK_COMM]--;
		}
	}
	free(members);
	free(late);
	free(tp_late);
	return 0;
}

/* where the waiting happens: victims and late arrivers (who wait too, elsewhere) */
static void victim_phases(struct work *w)
{
	struct report *rep = w->rep;
	uint32_t counts[64] = {0};
	for (uint32_t r = 0; r < w->W; r++)
		if (w->role[r] == 3 || w->role[r] == 2)
			for (uint32_t p = 0; p < w->P && p < 64; p++)
				if (w->kind[p] == RECORD_KIND_COMM &&
				    (w->l2.flag[(size_t)r * w->P + p] & (L2_HIGH | L2_SELF_HIGH)))
					counts[p]++;
	for (size_t k = 0; k < REPORT_MAX_VICTIM_PHASES; k++) {
		uint32_t best = 0, bp = 0;
		for (uint32_t p = 0; p < w->P && p < 64; p++)
			if (counts[p] > best) {
				best = counts[p];
				bp = p;
			}
		if (!best)
			break;
		snprintf(rep->victim_phases[rep->nvictim_phases++], REPORT_NAME_MAX, "%s",
			 store_name(w->s, store_phase_name(w->s, bp)));
		counts[bp] = 0;
	}
}

/* what the top evidence compares with, for a summary */
static const char *basis_words(const struct report_evidence *e)
{
	return e->fallback                   ? "its own baseline against the job's"
	       : e->by_stage                 ? "their pipeline stage"
	       : e->kind == RECORD_KIND_COMM ? "the other members of the collective"
					     : "their role group";
}

/* The finding of the ranks of kind k: culprits with evidence and kernels (L3), the
 * category, what it costs and its summary. */
static int make_finding(struct work *w, struct report_finding *f, const uint8_t *kind, enum fault_kind k,
			uint32_t *list, size_t nlate, size_t nvict)
{
	static const struct {
		const char *category, *what;
		int mask, flag;
	} def[FK_COUNT] = {
		[FK_COMPUTE] = {"compute_degradation", "compute slowdown", KM_COMPUTE, L2_HIGH | L2_HINT},
		[FK_HOST] = {"host_delay", "host-side delay", KM_HOST, L2_HIGH | L2_HINT},
		[FK_COMM] = {"communication_degradation", "communication slowdown", KM_COMM, L2_HIGH},
		[FK_LATE] = {"host_delay", "late arrival", KM_COMM, L2_LOW},
		[FK_LOAD] = {"load_imbalance", "load imbalance", KM_COMPUTE, L2_HIGH | L2_HINT},
	};
	f->category = def[k].category;
	f->stage = -1;
	size_t nc = 0;
	for (uint32_t r = 0; r < w->W; r++)
		if (kind[r] == k)
			list[nc++] = r;
	f->suspects = calloc(nc ? nc : 1, sizeof(*f->suspects));
	if (!f->suspects)
		return -1;
	f->culprits_total = nc;
	double lost = 0;
	for (size_t i = 0; i < nc; i++) {
		struct report_suspect *su = &f->suspects[i];
		fill_identity(w, su, list[i], REPORT_CULPRIT, "L2");
		double ex;
		su->score = fill_evidence(w, su, list[i], def[k].mask, def[k].flag, &ex);
		if (k != FK_LATE && ex > lost)
			lost = ex;
	}
	qsort(f->suspects, nc, sizeof(*f->suspects), cmp_suspect);
	f->nsuspects = nc < w->cfg->max_listed ? nc : w->cfg->max_listed;
	int degraded = 0, stall = 0;
	size_t stall_only = 0;
	if (run_l3(w, f->suspects, f->nsuspects, &degraded, &stall, &stall_only) < 0)
		return -1;
	const char *what = def[k].what;
	if (k == FK_COMPUTE && stall && stall_only * 2 >= nc) {
		f->category = "kernel_stall";
		what = "kernel stall";
	}
	double gap = w->rep->window_ms - w->rep->baseline_ms;
	if (k == FK_LATE)
		lost = isfinite(gap) && gap > 0 ? gap : 0;
	f->lost_ms = lost;

	qsort(list, nc, sizeof(*list), cmp_u32);
	char hosts[200], kern[160] = "";
	summarize_hosts(w, list, nc, hosts, sizeof(hosts));
	const struct report_suspect *top = f->nsuspects ? &f->suspects[0] : NULL;
	const struct report_evidence *e = top && top->nev ? &top->ev[0] : NULL;
	if (top && top->nk) {
		const struct report_kernel *kk = &top->k[0];
		if (strcmp(f->category, "kernel_stall") == 0)
			snprintf(kern, sizeof(kern), " (kernel %s: isolated calls %.0fx the peers' p99, median normal)",
				 kk->name, kk->max_ratio);
		else if (kk->ratio > 1.3)
			snprintf(kern, sizeof(kern), " (%s kernel %s %.2fx the peers' median)",
				 record_kind_name(kk->kind), kk->name, kk->ratio);
	}
	char ev[200] = "";
	if (e && k == FK_LATE)
		snprintf(ev, sizeof(ev), "%.48s %.2fx %s (shorter: they arrive last and wait least)", e->phase,
			 e->ratio, basis_words(e));
	else if (e)
		snprintf(ev, sizeof(ev), "%.48s %.2fx %s", e->phase, e->ratio, basis_words(e));
	snprintf(f->summary, sizeof(f->summary),
		 "%s on %zu rank%s (%u%s) on %.100s: %s%.120s; %zu ranks wait as victims, %zu arrive late", what, nc,
		 nc == 1 ? "" : "s", nc ? list[0] : 0, nc > 1 ? ", ..." : "", hosts, ev, kern, nvict, nlate);
	size_t len = strlen(f->summary);
	if (k == FK_LOAD && nc)
		snprintf(f->summary + len, sizeof(f->summary) - len,
			 "; they are expert index %u of every expert-parallel group: more tokens, not slower hardware",
			 topo_coords(w->t, list[0]).ep);
	return 0;
}

/* the highest median ratio of a communication kernel on the finding's culprits (their
 * peers' as 1), for the verdict on a network event; NaN without one */
static double culprit_comm_ratio(const struct work *w, const struct report_finding *f)
{
	double ratio = NAN;
	if (!f || !f->nsuspects)
		return ratio;
	for (size_t i = 0; i < f->nsuspects; i++)
		for (size_t k = 0; k < f->suspects[i].nk; k++)
			if (f->suspects[i].k[k].kind == RECORD_KIND_COMM &&
			    (!isfinite(ratio) || f->suspects[i].k[k].ratio > ratio))
				ratio = f->suspects[i].k[k].ratio;
	if (isfinite(ratio))
		return ratio;
	/* the culprits' comm kernels may be outside their top REPORT_MAX_KERNELS: look again */
	uint32_t K = store_kernel_count(w->s), r0 = f->suspects[0].rank;
	for (uint32_t k = 0; k < K; k++) {
		if (store_kernel_kind(w->s, k) != RECORD_KIND_COMM)
			continue;
		struct sketch a, b;
		sketch_init(&a);
		sketch_init(&b);
		uint32_t members[64];
		size_t m = topo_role_members(w->t, r0, members, 64), np = 0;
		for (size_t j = 0; j < m && j < 64; j++)
			if (w->role[members[j]] != 1)
				members[np++] = members[j];
		store_kernel_pool(w->s, r0, k, w->kfirst, w->last, &a);
		/* one kernel: pool the peers' sketches of k alone */
		for (size_t j = 0; j < np; j++)
			store_kernel_pool(w->s, members[j], k, w->kfirst, w->last, &b);
		if (a.count && b.count) {
			double rr = sketch_quantile(&a, 0.5) / sketch_quantile(&b, 0.5);
			if (!isfinite(ratio) || rr > ratio)
				ratio = rr;
		}
		sketch_free(&a);
		sketch_free(&b);
	}
	return ratio;
}

/* Standing costs, when nothing regressed: over the last iterations held, a pipeline stage
 * heavier than the others and ranks slower than their peers all along. Nothing pages for
 * them; the report's advisories say what each costs a step. */
/* A rank slower than its peers all along: a compute phase high against them, or past
 * z_threshold at a ratio over subtle_ratio (an advisory pages nobody, so a 1.1-1.3x rank
 * is worth listing when it is that clearly apart) */
static int standing_slow(const struct work *w, uint32_t r)
{
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		if (w->kind[p] == RECORD_KIND_COMPUTE &&
		    (w->l2.flag[i] & L2_HIGH || (w->l2.flag[i] & L2_HINT && w->l2.z[i] > w->cfg->l2.z_threshold)))
			return 1;
	}
	return 0;
}

/* A rank of a pipeline stage too small for a median (2 or 3 ranks: its tensor- or
 * data-parallel peers) slower than each of its peers all along: in a compute phase, the median over the
 * iterations of its own time over the peer's is past subtle_ratio and z_threshold robust
 * deviations of that ratio's log from step to step (a pair's medians alone say nothing of
 * which is off; a ratio that holds in every step does). Returns the phase with the largest
 * such ratio against every peer, its ratio in *ratio and the ms a step it adds in *cost, or
 * UINT32_MAX. */
static uint32_t pair_slow(const struct work *w, uint32_t r, uint32_t first, uint32_t last, double *ratio, double *cost)
{
	uint32_t members[4], bestp = UINT32_MAX, pp = topo_coords(w->t, r).pp;
	size_t m = 0;
	if (w->W / (w->t->pp ? w->t->pp : 1) >= (uint32_t)w->cfg->l2.small_group)
		return UINT32_MAX;
	for (uint32_t q = 0; q < w->W && m < 4; q++)
		if (topo_coords(w->t, q).pp == pp)
			members[m++] = q;
	if (m < 2 || m >= (size_t)w->cfg->l2.small_group)
		return UINT32_MAX;
	double x[L1_HISTORY_MAX], dev[L1_HISTORY_MAX];
	for (uint32_t p = 0; p < w->P; p++) {
		if (w->kind[p] != RECORD_KIND_COMPUTE)
			continue;
		double least = INFINITY, add = INFINITY;
		for (size_t j = 0; j < m && least > 0; j++) {
			uint32_t q = members[j];
			if (q == r)
				continue;
			size_t n = 0;
			for (uint32_t it = first; it <= last && n < L1_HISTORY_MAX; it++) {
				if (!store_has_iter(w->s, r, it) || !store_has_iter(w->s, q, it))
					continue;
				uint32_t a = store_slot_phases(w->s, r, it)[p], b = store_slot_phases(w->s, q, it)[p];
				if (a != STORE_ABSENT && b != STORE_ABSENT && a > 0 && b > 0)
					x[n++] = log((double)a / b);
			}
			double med = n >= 8 ? stats_median_inplace(x, n) : NAN;
			for (size_t i = 0; i < n; i++)
				dev[i] = fabs(x[i] - med);
			double mad = n >= 8 ? STATS_MAD_SCALE * stats_median_inplace(dev, n) : NAN;
			if (!(med > log(w->cfg->l2.subtle_ratio)) || !(med > w->cfg->l2.z_threshold * mad)) {
				least = 0;
				break;
			}
			if (med < least)
				least = med;
			double d = w->l2.val[(size_t)r * w->P + p] - w->l2.val[(size_t)q * w->P + p];
			if (d < add)
				add = d;
		}
		if (least > 0 && isfinite(least) && (bestp == UINT32_MAX || exp(least) > *ratio)) {
			bestp = p;
			*ratio = exp(least);
			*cost = add;
		}
	}
	return bestp;
}

#define ADVISE_STAGE_RATIO 1.15

/* over the iterations held up to last */
static int advise(struct work *w, const struct diagnose_config *cfg, uint32_t last)
{
	struct report *rep = w->rep;
	uint32_t R = store_config(w->s)->ring_iters, held = store_max_iter(w->s);
	uint32_t first = held + 1 >= R ? held + 1 - R : 0;
	if (last < first + 2)
		return 0; /* under 3 iterations: no standing anything */
	if (last - first + 1 > cfg->max_window)
		first = last - cfg->max_window + 1;
	struct l2_config l2c = cfg->l2;
	l2c.step_ms = NAN;
	if (l2_run(&w->l2, w->s, first, last, 1, 0, &l2c) < 0)
		return -1;
	w->P = w->l2.nphase;
	for (uint32_t p = 0; p < w->P && p < 256; p++)
		w->kind[p] = store_phase_kind(w->s, p);
	/* a standing stage is listed from ADVISE_STAGE_RATIO: an advisory pages nobody, and a
	 * stage whose layers are 1.3x heavier spends part of its step in phases the layers do
	 * not touch (1.22x over its compute as a whole) */
	struct diagnose_config acfg = *w->cfg;
	const struct diagnose_config *was = w->cfg;
	acfg.stage_ratio = ADVISE_STAGE_RATIO;
	w->cfg = &acfg;
	double excess = 0, ratio = 0;
	int stage = find_stage(w, &excess, &ratio);
	w->cfg = was;
	if (stage >= 0) {
		struct report_advisory *a = &rep->advisories[rep->nadvisories++];
		a->kind = "stage_imbalance";
		a->stage = stage;
		a->rank = -1;
		a->ratio = ratio;
		a->cost_ms = excess;
		snprintf(a->summary, sizeof(a->summary),
			 "pipeline stage pp %d computes %.2fx the median of the other stages in every step "
			 "(no regression: it was so from the start); balancing the stages would save up to "
			 "%.0f ms a step",
			 stage, ratio, excess);
	}
	for (uint32_t r = 0; r < w->W && rep->nadvisories < REPORT_MAX_ADVISORIES; r++) {
		if (stage >= 0 && topo_coords(w->t, r).pp == (uint32_t)stage)
			continue;
		double pr = NAN, pc = NAN;
		uint32_t pp = standing_slow(w, r) ? UINT32_MAX : pair_slow(w, r, first, last, &pr, &pc);
		if (pp != UINT32_MAX) {
			struct report_advisory *a = &rep->advisories[rep->nadvisories++];
			a->kind = "slow_rank";
			a->stage = -1;
			a->rank = r;
			store_host(w->s, r, a->host, sizeof(a->host));
			a->ratio = pr;
			a->cost_ms = pc;
			char host[REPORT_NAME_MAX];
			snprintf(host, sizeof(host), "%s", a->host);
			snprintf(a->summary, sizeof(a->summary),
				 "rank %u on %.63s computes %.48s %.2fx the other ranks of its pipeline stage in "
				 "every step (no regression: it was so from the start); it holds its collectives "
				 "back by about %.0f ms a step",
				 r, host, store_name(w->s, store_phase_name(w->s, pp)), pr, pc);
			continue;
		}
		if (!standing_slow(w, r))
			continue;
		struct report_suspect su;
		double ex;
		memset(&su, 0, sizeof(su));
		fill_evidence(w, &su, r, KM_COMPUTE, L2_HIGH | L2_HINT, &ex);
		struct report_advisory *a = &rep->advisories[rep->nadvisories++];
		a->kind = "slow_rank";
		a->stage = -1;
		a->rank = r;
		store_host(w->s, r, a->host, sizeof(a->host));
		a->ratio = su.nev ? su.ev[0].ratio : NAN;
		a->cost_ms = ex;
		char host[REPORT_NAME_MAX];
		snprintf(host, sizeof(host), "%s", a->host);
		snprintf(a->summary, sizeof(a->summary),
			 "rank %u on %.63s computes %.48s %.2fx %s in every step (no regression: it was so "
			 "from the start); it holds its collectives back by about %.0f ms a step",
			 r, host, su.nev ? su.ev[0].phase : "?", a->ratio,
			 su.nev ? basis_words(&su.ev[0]) : "its peers", ex);
	}
	l2_free(&w->l2);
	return 0;
}

/* The analysed part of the window and its baseline, within the ring: w->first, w->last,
 * w->kfirst, the wall-clock span; the baseline into *bfirst..*blast (empty: blast < bfirst) */
static void window_bounds(struct work *w, const struct diagnose_input *in, uint32_t *bfirst, uint32_t *blast)
{
	const struct store *s = w->s;
	uint32_t R = store_config(s)->ring_iters, maxit = store_max_iter(s);
	uint32_t lo = maxit + 1 >= R ? maxit + 1 - R : 0;
	uint32_t last = in->last_iter < maxit ? in->last_iter : maxit;
	uint32_t first = in->first_iter > lo ? in->first_iter : lo;
	if (first > last)
		first = last;
	if (last - first + 1 > w->cfg->max_window)
		first = last - w->cfg->max_window + 1;
	*blast = 0;
	*bfirst = 1;
	uint32_t before = in->before_iter && in->before_iter < in->first_iter ? in->before_iter : in->first_iter;
	uint32_t kf, kl;
	if (before > 0) {
		*blast = before - 1;
		*bfirst = *blast + 1 >= w->cfg->max_baseline ? *blast + 1 - w->cfg->max_baseline : 0;
		/* the ring has dropped the baseline's start: the store kept it (store_keep), or
		 * what the ring holds of it is all there is */
		if (*bfirst < lo && store_kept(s, &kf, &kl) && kl == *blast)
			*bfirst = kf > *bfirst ? kf : *bfirst;
		else if (*bfirst < lo)
			*bfirst = lo;
	}
	w->first = first;
	w->last = last;
	/* kernel sketches pool blocks of B iterations: skip a first block that straddles the
	 * window's start (it mixes healthy iterations in) when a whole one remains */
	uint32_t B = store_config(s)->kernel_block_iters;
	uint32_t up = (first + B - 1) / B * B;
	w->kfirst = up + B - 1 <= last ? up : first;
	int64_t a, b, c, d;
	if (store_iter_span(s, in->first_iter > lo ? in->first_iter : first, &a, &b) &&
	    store_iter_span(s, last, &c, &d)) {
		w->has_span = 1;
		w->span_start = a;
		w->span_end = d;
	}
}

/* Each rank's own fault (kind[], count[]), the heavy stage, and the rules that take back
 * what only waits (docs/method.md, "Attribution"). Returns 0, -1 when out of memory. */
static int assign_faults(struct work *w, struct faults *f)
{
	uint32_t nodes = (w->W + w->t->gpus_per_node - 1) / (w->t->gpus_per_node ? w->t->gpus_per_node : 8);
	size_t few_nodes = (size_t)ceil(w->cfg->few_fraction * nodes);
	if (few_nodes < 2)
		few_nodes = 2;
	uint8_t *kind = f->kind;
	size_t *count = f->count;
	if (clear_standing_comm(w) < 0)
		return -1;
	f->stage = find_stage(w, &f->stage_excess, &f->stage_ratio);
	uint32_t slow_host = 0;
	int slow_node = f->stage >= 0 ? node_not_stage(w, f->stage, &slow_host) : 0;
	if (slow_node < 0)
		return -1;
	if (slow_node)
		f->stage = -1;
	for (uint32_t r = 0; r < w->W; r++) {
		int wk;
		kind[r] = (uint8_t)rank_fault(w, r, &wk);
		f->weak[r] = (uint8_t)wk;
		if (slow_node && store_host_id(w->s, r) == slow_host) {
			kind[r] = FK_COMPUTE; /* every rank of the slow node, the node's finding */
			f->weak[r] = 0;
		}
	}
	if (f->stage >= 0 && slowed_beside_stage(w, kind, f->weak, f->stage))
		f->stage = -1;
	for (uint32_t r = 0; r < w->W; r++) {
		if (f->stage >= 0 && kind[r] == FK_COMPUTE && topo_coords(w->t, r).pp == (uint32_t)f->stage)
			kind[r] = FK_NONE; /* the stage's ranks are the stage's finding */
		count[kind[r]]++;
	}
	if (count[FK_COMPUTE] && join_hints(w, kind, f->weak, count) < 0)
		return -1;
	if (drop_late_by_peer(w, kind, f->weak, count) < 0)
		return -1;
	node_comm(w, kind, count, nodes, few_nodes);
	if (f->stage < 0 && !count[FK_COMPUTE] && !count[FK_HOST] && !count[FK_COMM]) {
		size_t n = node_shift(w, kind, nodes, few_nodes);
		count[FK_COMPUTE] += n;
		count[FK_NONE] -= n;
	}
	if (f->stage < 0 && !count[FK_COMPUTE] && !count[FK_HOST] && !count[FK_COMM] &&
	    own_compute_shift(w, kind, count) < 0)
		return -1;
	if (f->stage < 0 && count[FK_COMM] && !count[FK_COMPUTE] && !count[FK_HOST] &&
	    prefer_leaving_node(w, kind, count, nodes, few_nodes) < 0)
		return -1;
	/* a long collective with a compute or host culprit among its members is a wait */
	if (count[FK_COMM] && (count[FK_COMPUTE] || count[FK_HOST] || f->stage >= 0) &&
	    drop_waiting(w, kind, count, f->stage) < 0)
		return -1;
	/* a communication fault is a node's or a link's: more nodes than a few with long
	 * collectives of their own is not one (they wait for something else) */
	if (count[FK_COMM] && !on_few_nodes(w, kind, FK_COMM, count[FK_COMM], nodes, few_nodes)) {
		for (uint32_t r = 0; r < w->W; r++)
			if (kind[r] == FK_COMM)
				kind[r] = FK_NONE;
		count[FK_COMM] = 0;
	}
	/* nobody's own work longer: a node that leaves its collectives later than their other
	 * members has slow transfers of its own (a NIC), and its partners, whose collectives
	 * with it grow as long, only wait for it (before comm_cover, which weighs their long
	 * instances alike) */
	if (f->stage < 0 && !count[FK_COMM] && !count[FK_HOST] && !count[FK_COMPUTE] &&
	    node_leaves_late(w, kind, count, nodes, few_nodes) < 0)
		return -1;
	if (f->stage < 0 && !count[FK_COMM] && !count[FK_HOST] && !count[FK_COMPUTE] &&
	    comm_cover(w, kind, count, nodes, few_nodes) < 0)
		return -1;
	if (f->stage < 0 && !count[FK_COMPUTE] && !count[FK_HOST] && !count[FK_COMM] &&
	    node_first_long(w, kind, count, nodes, few_nodes) < 0)
		return -1;
	if (f->stage < 0 && count[FK_COMPUTE] && !count[FK_HOST] && !count[FK_COMM] &&
	    node_leaves_late(w, kind, count, nodes, few_nodes) < 0)
		return -1;
	/* a slow link, whatever else the window holds: the node common to the collectives whose
	 * transfers slowed; the ranks other rules found long in their collectives on other
	 * nodes waited for it */
	if (links_locate(w, f, few_nodes) < 0)
		return -1;
	if (f->stage < 0 && !count[FK_COMPUTE] && !count[FK_HOST] && !count[FK_COMM]) {
		/* nobody's own work is longer: the ranks that arrive last at collectives */
		size_t waiting = 0;
		for (uint32_t r = 0; r < w->W; r++)
			if (phase_flag_any(w, r, KM_COMM, L2_LOW)) {
				kind[r] = FK_LATE;
				count[FK_LATE]++;
			} else
				waiting += phase_flag_any(w, r, KM_COMM, L2_HIGH | L2_SELF_HIGH);
		/* a late arrival delays its peers: when nobody waits longer than the members or
		 * than before, the ranks came last before too (a standing imbalance) and the
		 * window's rise is elsewhere (job-wide pauses: checkpoints, evals). Without a
		 * baseline (a whole trace offline) nobody can wait longer than before: who
		 * comes last is all there is to say */
		if (count[FK_LATE] && !waiting && w->l2.has_base) {
			for (uint32_t r = 0; r < w->W; r++)
				if (kind[r] == FK_LATE)
					kind[r] = FK_NONE;
			count[FK_LATE] = 0;
		}
		if (count[FK_LATE] && !on_few_nodes(w, kind, FK_LATE, count[FK_LATE], nodes, few_nodes)) {
			/* more than a few nodes, still a minority: they stay late arrivers, no
			 * culprit (docs/method.md) */
			f->late_only = count[FK_LATE] * 2 <= w->W;
			for (uint32_t r = 0; r < w->W; r++)
				if (kind[r] == FK_LATE)
					kind[r] = FK_NONE;
			count[FK_LATE] = 0;
		}
	}
	/* the slow ranks where no hardware fault lines up: a whole stage on several hosts, one
	 * expert of every expert-parallel group */
	if (imbalance_wide_stage(w, f) < 0 || imbalance_expert(w, f) < 0)
		return -1;
	return 0;
}

/* Roles: culprits (any fault), then late arrivers and victims among the others */
static void mark_roles(struct work *w, const struct faults *f, size_t *nlate, size_t *nvict)
{
	*nlate = *nvict = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (f->kind[r])
			w->role[r] = 1;
		else if (phase_flag_any(w, r, KM_COMM, L2_LOW)) {
			w->role[r] = 2;
			(*nlate)++;
		} else if (phase_flag_any(w, r, KM_COMM, L2_HIGH | L2_SELF_HIGH)) {
			w->role[r] = 3;
			(*nvict)++;
		}
	}
	victim_phases(w);
}

/* The host whose ranks are exactly those of stage s (all of them, and no other rank), or
 * UINT32_MAX */
static uint32_t node_of_stage(const struct work *w, uint32_t s)
{
	uint32_t h = UINT32_MAX;
	for (uint32_t r = 0; r < w->W; r++)
		if (topo_coords(w->t, r).pp == s) {
			if (h != UINT32_MAX && store_host_id(w->s, r) != h)
				return UINT32_MAX;
			h = store_host_id(w->s, r);
		}
	for (uint32_t r = 0; r < w->W && h != UINT32_MAX; r++)
		if (store_host_id(w->s, r) == h && topo_coords(w->t, r).pp != s)
			return UINT32_MAX;
	return h;
}

/* A node that is exactly one pipeline stage: its slowdown is a slow node's or a heavy
 * stage's, and the timings cannot tell which (every rank of the node is every rank of the
 * stage; nothing else runs on it to compare with). A stage finding on such a node, or a
 * compute finding whose culprits are such a node, names both readings; its actions say how
 * to tell them apart. */
static void mark_ambiguous(struct work *w, const struct faults *f)
{
	for (size_t i = 0; i < w->rep->nfindings; i++) {
		struct report_finding *fi = &w->rep->findings[i];
		int stage = fi->stage;
		if (strcmp(fi->category, "compute_degradation") == 0 && fi->nsuspects) {
			stage = (int)topo_coords(w->t, fi->suspects[0].rank).pp;
			for (uint32_t r = 0; r < w->W && stage >= 0; r++)
				if ((f->kind[r] == FK_COMPUTE) != (topo_coords(w->t, r).pp == (uint32_t)stage))
					stage = -1;
		} else if (strcmp(fi->category, "stage_imbalance") != 0) {
			continue;
		}
		if (stage < 0 || w->t->pp < 2)
			continue;
		uint32_t h = node_of_stage(w, (uint32_t)stage);
		if (h == UINT32_MAX)
			continue;
		for (uint32_t r = 0; r < w->W; r++)
			if (store_host_id(w->s, r) == h) {
				store_host(w->s, r, fi->ambiguous_host, sizeof(fi->ambiguous_host));
				break;
			}
		fi->ambiguous_stage = stage;
		char host[REPORT_NAME_MAX];
		snprintf(host, sizeof(host), "%s", fi->ambiguous_host);
		size_t len = strlen(fi->summary);
		snprintf(fi->summary + len, sizeof(fi->summary) - len,
			 "; %s is exactly pipeline stage pp %d: a slow node and a heavy stage read alike", host, stage);
	}
}

/* One finding per kind of fault (and the heavy stage), the largest first */
static int build_findings(struct work *w, const struct faults *f, uint32_t *list, size_t nlate, size_t nvict)
{
	struct report *rep = w->rep;
	if (f->stage >= 0) {
		struct report_finding *fi = &rep->findings[rep->nfindings++];
		fi->category = "stage_imbalance";
		fi->stage = f->stage;
		fi->lost_ms = f->stage_excess;
		fi->ratio = f->stage_ratio;
		snprintf(fi->summary, sizeof(fi->summary),
			 "pipeline stage pp %d computes %.2fx the median of the other stages; the other "
			 "stages wait for it",
			 f->stage, f->stage_ratio);
	}
	for (int k = FK_COMPUTE; k < FK_COUNT; k++) {
		if (!f->count[k])
			continue;
		struct report_finding *fi = &rep->findings[rep->nfindings++];
		if (make_finding(w, fi, f->kind, (enum fault_kind)k, list, nlate, nvict) < 0)
			return -1;
	}
	if (f->data_imbalance) {
		struct report_finding *fi = &rep->findings[rep->nfindings++];
		fi->category = "load_imbalance";
		fi->lost_ms = f->gain[FK_LOAD];
		snprintf(fi->summary, sizeof(fi->summary),
			 "load imbalance of the data: the slowest data-parallel replica changes from step to step "
			 "(no rank is slowest in more than a third of them), and the work spread evenly would "
			 "save about %.0f ms of the %.0f ms the step rose",
			 fi->lost_ms, rep->window_ms - rep->baseline_ms);
	}
	/* what each finding costs a step: its replay's (judge.c), or, for one the replay cannot
	 * see, its excess over its peers (make_finding) */
	for (size_t i = 0; i < rep->nfindings; i++) {
		struct report_finding *fi = &rep->findings[i];
		int k = -1;
		for (uint32_t r = 0; r < w->W && k < 0 && fi->nsuspects; r++)
			if (r == fi->suspects[0].rank)
				k = f->kind[r];
		if (strcmp(fi->category, "stage_imbalance") == 0)
			fi->lost_ms = f->stage_gain;
		else if (k > FK_NONE && k != FK_LATE && !f->unseen[k])
			fi->lost_ms = f->gain[k];
	}
	mark_ambiguous(w, f);
	for (size_t a = 1; a < rep->nfindings; a++)
		for (size_t b = a; b > 0 && rep->findings[b].lost_ms > rep->findings[b - 1].lost_ms; b--) {
			struct report_finding t = rep->findings[b];
			rep->findings[b] = rep->findings[b - 1];
			rep->findings[b - 1] = t;
		}
	return 0;
}

/* The report's verdict, summary and suspects: the main finding's culprits (their ranks
 * into list, *nc of them), then the late arrivers */
static int fill_verdict(struct work *w, int late_only, size_t nlate, size_t nvict, uint32_t *list, size_t *nc)
{
	struct report *rep = w->rep;
	double gap = rep->window_ms - rep->baseline_ms;
	*nc = 0;
	if (rep->nfindings) {
		struct report_finding *m = &rep->findings[0];
		rep->category = m->category;
		rep->stage = m->stage;
		snprintf(rep->summary, sizeof(rep->summary), "%s", m->summary);
		*nc = m->nsuspects;
		rep->culprits_total = m->culprits_total;
		rep->lost_ms = m->lost_ms;
		for (size_t i = 0; i < m->nsuspects; i++)
			list[i] = m->suspects[i].rank;
	} else if (late_only && nlate) {
		rep->category = "host_delay";
		snprintf(rep->summary, sizeof(rep->summary),
			 "host-side delay: %zu ranks arrive late at collectives (their communication is "
			 "the shortest of their group) while no rank computes slower; %zu ranks wait as "
			 "victims",
			 nlate, nvict);
		rep->lost_ms = isfinite(gap) && gap > 0 ? gap : 0;
	} else {
		rep->category = "none";
		if (isfinite(rep->baseline_ms) && rep->onset && strcmp(rep->onset, "intermittent") == 0)
			snprintf(rep->summary, sizeof(rep->summary),
				 "iteration time rose from %.0f to %.0f ms in some iterations, but no rank, "
				 "stage or phase stands out in them (as when every rank pauses alike: a "
				 "checkpoint, an eval pass)",
				 rep->baseline_ms, rep->window_ms);
		else if (isfinite(rep->baseline_ms))
			snprintf(rep->summary, sizeof(rep->summary),
				 "iteration time rose from %.0f to %.0f ms but no rank, stage or phase stands out",
				 rep->baseline_ms, rep->window_ms);
		else
			snprintf(rep->summary, sizeof(rep->summary),
				 "no rank, stage or phase stands out (%.0f ms per iteration; no baseline "
				 "before it to compare with)",
				 rep->window_ms);
		rep->lost_ms = 0;
	}
	if (isfinite(gap) && gap > 0 && rep->lost_ms > gap)
		rep->lost_ms = gap;
	size_t late_expl = 0;
	for (uint32_t r = 0; r < w->W; r++)
		if (w->role[r] == 2 && *nc && explained_by(w, r, list, *nc))
			late_expl++;
	rep->late_total = nlate;
	rep->late_consistent = nlate > 0 && late_expl == nlate;
	rep->victims = nvict;
	rep->suspects = calloc(*nc + nlate + 1, sizeof(*rep->suspects));
	if (!rep->suspects)
		return -1;
	size_t ns = 0;
	if (rep->nfindings)
		for (size_t i = 0; i < rep->findings[0].nsuspects; i++)
			rep->suspects[ns++] = rep->findings[0].suspects[i];
	for (uint32_t r = 0; r < w->W; r++) {
		if (w->role[r] != 2)
			continue;
		struct report_suspect *su = &rep->suspects[ns++];
		fill_identity(w, su, r, REPORT_LATE_ARRIVER, "L2");
		su->consistent = *nc && explained_by(w, r, list, *nc);
		double ex;
		su->score = fill_evidence(w, su, r, KM_COMM, L2_LOW, &ex);
	}
	qsort(rep->suspects, ns, sizeof(*rep->suspects), cmp_suspect);
	rep->nsuspects = ns < w->cfg->max_listed ? ns : w->cfg->max_listed;
	if (rep->nfindings && rep->onset && strcmp(rep->onset, "sudden") != 0) {
		/* how it came: a drift or now and then, not a step */
		char tmp[sizeof(rep->summary)];
		snprintf(tmp, sizeof(tmp), "%s", rep->summary);
		snprintf(rep->summary, sizeof(rep->summary), "%s, from iteration %u: %.440s", rep->onset,
			 rep->first_iter, tmp);
	}
	if (rep->nfindings && rep->late_consistent && rep->findings[0].nsuspects) {
		/* say it in the verdict: the late arrivers come from the culprits */
		size_t len = strlen(rep->summary);
		snprintf(rep->summary + len, sizeof(rep->summary) - len, " because of them");
	}
	return 0;
}

int diagnose_run(const struct store *s, const struct diagnose_input *in, const struct diagnose_config *cfgp,
		 struct report *rep)
{
	struct diagnose_config cfg;
	if (cfgp)
		cfg = *cfgp;
	else
		diagnose_config_default(&cfg);
	report_init(rep);
	snprintf(rep->job, sizeof(rep->job), "%s", store_job(s));
	struct work w;
	memset(&w, 0, sizeof(w));
	w.s = s;
	w.t = store_topo(s);
	w.cfg = &cfg;
	w.W = w.t->world;
	w.rep = rep;
	if (in->l2_keep) /* its memory and the ranks sorted in it; l2_run sets every result */
		w.l2 = *in->l2_keep;
	w.role = calloc(w.W, 1);
	uint32_t *list = malloc((w.W + 1) * sizeof(uint32_t));
	struct faults f;
	memset(&f, 0, sizeof(f));
	int rc = -1;
	if (!w.role || !list)
		goto out;

	rep->has_window = in->has_window;
	rep->onset = in->onset;
	rep->detected_iter = in->onset ? in->detected_iter : 0;
	rep->first_iter = in->first_iter;
	rep->last_iter = in->last_iter;
	rep->baseline_ms = in->baseline_ms;
	rep->window_ms = in->window_ms;

	/* hang first: it needs no window */
	if (in->now_us > 0) {
		size_t nh = diagnose_hung(s, in->now_us, in->baseline_ms, cfg.hang_factor, list, w.W);
		if (nh) {
			rc = report_hang(&w, in, list, nh);
			goto out;
		}
	}
	if (!in->has_window || !store_any(s)) {
		rep->category = "none";
		snprintf(rep->summary, sizeof(rep->summary),
			 "no anomalous window: iteration time stays at its baseline%s",
			 store_any(s) ? "" : " (no data yet)");
		if (store_any(s) && (advise(&w, &cfg, store_max_iter(s)) < 0 || judge_hidden(&w, store_max_iter(s)) < 0))
			goto out;
		judge_events(&w, NULL, 0, NAN);
		rc = 0;
		goto out;
	}

	uint32_t bfirst, blast;
	window_bounds(&w, in, &bfirst, &blast);
	w.bfirst = bfirst;
	w.blast = blast;
	/* the step before the window: another fault in it must not hide a link's cost */
	cfg.l2.step_ms = isfinite(in->baseline_ms) && in->baseline_ms > 0 ? in->baseline_ms : in->window_ms;
	/* an intermittent window, or one too short for block medians (under 8 iterations: a
	 * rank slow in 2 of 5 has a normal median), is judged by its mean */
	cfg.l2.window_mean = (in->onset && strcmp(in->onset, "intermittent") == 0) || w.last - w.first + 1 < 8;
	if (l2_run(&w.l2, s, w.first, w.last, bfirst, blast, &cfg.l2) < 0)
		goto out;
	w.P = w.l2.nphase;
	for (uint32_t p = 0; p < w.P && p < 256; p++)
		w.kind[p] = store_phase_kind(s, p);

	f.kind = calloc(w.W, 1);
	f.weak = calloc(w.W, 1);
	if (!f.kind || !f.weak || assign_faults(&w, &f) < 0 || judge_faults(&w, &f) < 0 ||
	    imbalance_data(&w, &f) < 0)
		goto out;
	size_t nlate, nvict, nc;
	mark_roles(&w, &f, &nlate, &nvict);
	if (build_findings(&w, &f, list, nlate, nvict) < 0 ||
	    fill_verdict(&w, f.late_only, nlate, nvict, list, &nc) < 0)
		goto out;
	judge_events(&w, list, nc, culprit_comm_ratio(&w, rep->nfindings ? &rep->findings[0] : NULL));
	/* a window where nothing stands out (job-wide pauses: checkpoints, evals) still has
	 * the standing costs a window-less report lists: those before the window (in it, an
	 * intermittent fault too subtle to name would read as one "from the start") */
	if (strcmp(rep->category, "none") == 0 && !rep->nfindings && in->first_iter > 0 &&
	    advise(&w, &cfg, in->first_iter - 1) < 0)
		goto out;
	rc = 0;
out:
	if (!rc)
		rc = actions_build(rep, s, in->server);
	if (rc)
		report_free(rep);
	if (in->l2_keep)
		*in->l2_keep = w.l2;
	else
		l2_free(&w.l2);
	free(w.role);
	free(list);
	free(f.kind);
	free(f.weak);
	return rc;
}
