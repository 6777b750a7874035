/* replay.c: see replay.h. */
#include "replay.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "l2.h"
#include "record.h"
#include "stats.h"
#include "topo.h"

/* The groups of a collective that spans the whole job, whatever its record says: a
 * dimension after topo.h's */
#define RP_JOB TOPO_DIM_COUNT
_Static_assert(RP_JOB == REPLAY_JOB_DIM, "replay.h names the whole job's dimension");
#define RP_DIMS (TOPO_DIM_COUNT + 1)

/* The layout of one replay: phases in step order, each rank's groups, and the scratch of an
 * iteration. Cells are [rank * P + slot]. */
struct rp {
	const struct store *s;
	const struct topo *t;
	uint32_t W, P;
	uint32_t *order;          /* [P] phase slots in step order */
	uint8_t *kind, *dim;      /* [P] record kind; for a communication phase its dimension */
	uint32_t *grp[RP_DIMS], gcount[RP_DIMS];
	uint32_t *gord[RP_DIMS], *gstart[RP_DIMS]; /* ranks by group */
	uint32_t *stage, S;
	uint32_t *sord, *sstart;  /* ranks by stage */
	float *d, *tr;            /* [W * P] durations (NaN: absent) and transfers, in ms */
	double *clock, *raw, *gmax, *x; /* [W] */
	double *mean;             /* [P] the phase's mean over the ranks that hold it */
	float *imed;              /* [P * W] each instance's median transfer */
	float *bimed;             /* [P * W] the same before the window (a mean), NaN: none */
	const double *base;       /* [W * P] each rank's phases before the window, or NULL */
	double *cache;            /* [(groups + stages + 1) * P] peer medians, NaN: not yet */
	uint8_t *gmark;           /* [W] an instance with a marked member, one dimension at a time */
	uint8_t *who, *marked;    /* [n * W] each what-if's fix of each rank (rp_who) */
	int want_imed;            /* a what-if puts a link back: the instances' transfers are wanted */
};

static int by_start(const void *a, const void *b, void *arg)
{
	const double *st = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	double p = st[x] < 0 ? INFINITY : st[x], q = st[y] < 0 ? INFINITY : st[y];
	if (p != q)
		return p < q ? -1 : 1;
	return x < y ? -1 : x > y;
}

static void rp_free(struct rp *r)
{
	free(r->order);
	free(r->kind);
	free(r->dim);
	for (int d = 0; d < RP_DIMS; d++) {
		free(r->grp[d]);
		free(r->gord[d]);
		free(r->gstart[d]);
	}
	free(r->stage);
	free(r->sord);
	free(r->sstart);
	free(r->d);
	free(r->tr);
	free(r->clock);
	free(r->raw);
	free(r->gmax);
	free(r->x);
	free(r->mean);
	free(r->imed);
	free(r->bimed);
	free(r->cache);
	free(r->gmark);
	free(r->who);
	free(r->marked);
}

/* ranks bucketed by their group along dim (counting sort) */
static int rp_groups(struct rp *r, int dim)
{
	if (r->grp[dim])
		return 0;
	uint32_t W = r->W, G = dim == RP_JOB ? 1 : topo_collective_group_count(r->t, (enum topo_dim)dim);
	if (dim == TOPO_DP)
		G = topo_role_group_count(r->t);
	r->grp[dim] = malloc(W * sizeof(uint32_t));
	r->gord[dim] = malloc(W * sizeof(uint32_t));
	r->gstart[dim] = calloc((size_t)G + 2, sizeof(uint32_t));
	if (!r->grp[dim] || !r->gord[dim] || !r->gstart[dim])
		return -1;
	r->gcount[dim] = G;
	uint32_t *g = r->grp[dim], *st = r->gstart[dim];
	for (uint32_t q = 0; q < W; q++) {
		g[q] = dim == RP_JOB   ? 0
		       : dim == TOPO_DP ? topo_role_group(r->t, q)
					: topo_collective_group(r->t, q, (enum topo_dim)dim);
		st[g[q] + 2]++;
	}
	for (uint32_t k = 0; k < G; k++)
		st[k + 2] += st[k + 1];
	for (uint32_t q = 0; q < W; q++)
		r->gord[dim][st[g[q] + 1]++] = q;
	return 0;
}

static int rp_init(struct rp *r, const struct store *s)
{
	memset(r, 0, sizeof(*r));
	r->s = s;
	r->t = store_topo(s);
	r->W = r->t->world;
	r->P = store_phase_count(s);
	uint32_t W = r->W, P = r->P ? r->P : 1;
	r->S = r->t->pp ? r->t->pp : 1;
	r->order = malloc(P * sizeof(uint32_t));
	r->kind = malloc(P);
	r->dim = malloc(P);
	r->stage = malloc(W * sizeof(uint32_t));
	r->d = malloc((size_t)W * P * sizeof(float));
	r->tr = malloc((size_t)W * P * sizeof(float));
	r->clock = malloc(W * sizeof(double));
	r->raw = malloc(W * sizeof(double));
	r->gmax = malloc((W + 1) * sizeof(double));
	r->x = malloc((W + 1) * sizeof(double));
	r->mean = malloc(P * sizeof(double));
	r->imed = malloc((size_t)P * W * sizeof(float));
	r->gmark = malloc(W + 1);

	double *st = malloc(P * sizeof(double));
	if (!r->order || !r->kind || !r->dim || !r->stage || !r->d || !r->tr || !r->clock || !r->raw || !r->gmax || !r->x ||
	    !r->mean || !r->imed || !r->gmark || !st) {
		free(st);
		return -1;
	}
	for (uint32_t p = 0; p < r->P; p++) {
		r->order[p] = p;
		r->kind[p] = store_phase_kind(s, p);
		r->dim[p] = (uint8_t)l2_collective_dim(store_phase_group(s, p));
		st[p] = store_phase_start(s, p);
		if (r->kind[p] == RECORD_KIND_COMM && rp_groups(r, r->dim[p]) < 0) {
			free(st);
			return -1;
		}
	}
	qsort_r(r->order, r->P, sizeof(uint32_t), by_start, st);
	free(st);
	if (rp_groups(r, TOPO_DP) < 0 || rp_groups(r, RP_JOB) < 0)
		return -1;
	r->sord = malloc(W * sizeof(uint32_t));
	r->sstart = calloc((size_t)r->S + 2, sizeof(uint32_t));
	if (!r->sord || !r->sstart)
		return -1;
	for (uint32_t q = 0; q < W; q++) {
		r->stage[q] = topo_coords(r->t, q).pp;
		r->sstart[r->stage[q] + 2]++;
	}
	for (uint32_t k = 0; k < r->S; k++)
		r->sstart[k + 2] += r->sstart[k + 1];
	for (uint32_t q = 0; q < W; q++)
		r->sord[r->sstart[r->stage[q] + 1]++] = q;
	r->cache = malloc(((size_t)r->gcount[TOPO_DP] + r->S + 1) * P * sizeof(double));
	return r->cache ? 0 : -1;
}

/* the iteration's durations into d (ms, NaN where absent); 0 when no rank holds it */
static int rp_load(struct rp *r, uint32_t it)
{
	uint32_t W = r->W, P = r->P;
	int any = 0;
	for (uint32_t q = 0; q < W; q++) {
		const uint32_t *c = store_slot_phases(r->s, q, it);
		float *o = r->d + (size_t)q * P;
		for (uint32_t p = 0; p < P; p++)
			o[p] = c && c[p] != STORE_ABSENT ? (float)(c[p] / 1000.0) : NAN;
		any |= c != NULL;
	}
	return any;
}

/* The replay as recorded: each member's transfer, each instance's median transfer, each
 * phase's mean. A member's transfer is its stay beyond the last arrival, the arrivals as
 * recorded (each rank's durations before the phase, summed). Its members move the same
 * data, so a transfer past RP_CAP times the instance's shortest stay (the last arriver's,
 * a transfer alone) is a wait the records put in another collective than the one that
 * caused it (members that leave long before the others: a simulator's timeline): it is
 * taken as that shortest stay, and the replay finds the wait's cause where it was. A slow
 * NIC's own ranks transfer up to a few times longer than the others (a link at a fifth of
 * its speed: 5x), under the cap, and keep it. Returns the replayed step. */
#define RP_CAP 8
static double rp_record(struct rp *r)
{
	uint32_t W = r->W, P = r->P;
	for (uint32_t q = 0; q < W; q++)
		r->clock[q] = r->raw[q] = 0;
	for (uint32_t k = 0; k < P; k++) {
		uint32_t p = r->order[k];
		double sum = 0;
		uint32_t n = 0;
		if (r->kind[p] != RECORD_KIND_COMM) {
			for (uint32_t q = 0; q < W; q++) {
				float v = r->d[(size_t)q * P + p];
				if (v == v) {
					r->clock[q] += v;
					r->raw[q] += v;
					sum += v;
					n++;
				}
			}
			r->mean[p] = n ? sum / n : NAN;
			continue;
		}
		int dim = r->dim[p];
		const uint32_t *g = r->grp[dim];
		uint32_t G = r->gcount[dim];
		/* the last arrival as recorded (gmax) and the shortest stay (x) of each instance */
		for (uint32_t j = 0; j < G; j++)
			r->gmax[j] = -INFINITY, r->x[j] = INFINITY;
		for (uint32_t q = 0; q < W; q++) {
			float v = r->d[(size_t)q * P + p];
			if (v == v) {
				r->gmax[g[q]] = r->raw[q] > r->gmax[g[q]] ? r->raw[q] : r->gmax[g[q]];
				r->x[g[q]] = v < r->x[g[q]] ? v : r->x[g[q]];
			}
		}
		for (uint32_t q = 0; q < W; q++) {
			size_t c = (size_t)q * P + p;
			float v = r->d[c];
			if (v != v) {
				r->tr[c] = NAN;
				continue;
			}
			double x = r->raw[q] + v - r->gmax[g[q]];
			x = x < 0 ? 0 : x > v ? v : x;
			if (x > RP_CAP * r->x[g[q]])
				x = r->x[g[q]];
			r->tr[c] = (float)x;
			r->raw[q] += v;
		}
		/* the replay: every member leaves at the last arrival plus its transfer */
		for (uint32_t j = 0; j < G; j++)
			r->gmax[j] = -INFINITY;
		for (uint32_t q = 0; q < W; q++)
			if (r->d[(size_t)q * P + p] == r->d[(size_t)q * P + p] && r->clock[q] > r->gmax[g[q]])
				r->gmax[g[q]] = r->clock[q];
		for (uint32_t q = 0; q < W; q++) {
			float x = r->tr[(size_t)q * P + p];
			if (x == x)
				r->clock[q] = r->gmax[g[q]] + x;
		}
		/* each instance's median transfer, which only a link put back needs */
		for (uint32_t j = 0; j < G && r->want_imed; j++) {
			size_t m = 0;
			for (uint32_t i = r->gstart[dim][j]; i < r->gstart[dim][j + 1]; i++) {
				float x = r->tr[(size_t)r->gord[dim][i] * P + p];
				if (x == x)
					r->x[m++] = x;
			}
			r->imed[(size_t)p * W + j] = m ? (float)stats_median_inplace(r->x, m) : NAN;
		}
	}
	double step = 0;
	for (uint32_t q = 0; q < W; q++)
		step = r->clock[q] > step ? r->clock[q] : step;
	return step;
}

/* The median of phase p over the unmarked ranks in rank list ids[0..n) that hold it */
static double unmarked_median(struct rp *r, const uint8_t *mark, const uint32_t *ids, size_t n, uint32_t p,
			      size_t *m)
{
	*m = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t q = ids ? ids[i] : (uint32_t)i;
		float v = r->d[(size_t)q * r->P + p];
		if (!mark[q] && v == v)
			r->x[(*m)++] = v;
	}
	return *m ? stats_median_inplace(r->x, *m) : NAN;
}

/* Rank q's phase p at its own before the window, or as it is without one */
static double own_value(const struct rp *r, uint32_t q, uint32_t p)
{
	size_t c = (size_t)q * r->P + p;
	double own = r->base ? r->base[c] : NAN;
	return own == own ? own : r->d[c];
}

/* Rank q's phase p at its unmarked peers' median: its role group's, else its stage's, else
 * the job's (cached per iteration and what-if), else its own before the window */
static double peer_value(struct rp *r, const uint8_t *mark, uint32_t q, uint32_t p)
{
	uint32_t P = r->P, G = r->gcount[TOPO_DP], g = r->grp[TOPO_DP][q];
	double *c = &r->cache[(size_t)g * P + p];
	size_t m;
	if (*c != *c) {
		*c = unmarked_median(r, mark, r->gord[TOPO_DP] + r->gstart[TOPO_DP][g],
				     r->gstart[TOPO_DP][g + 1] - r->gstart[TOPO_DP][g], p, &m);
		if (m < 2)
			*c = -1;
	}
	if (*c >= 0)
		return *c;
	double *cs = &r->cache[((size_t)G + r->stage[q]) * P + p];
	if (*cs != *cs) {
		uint32_t a = r->sstart[r->stage[q]], b = r->sstart[r->stage[q] + 1];
		*cs = unmarked_median(r, mark, r->sord + a, b - a, p, &m);
		if (m < 2)
			*cs = -1;
	}
	if (*cs >= 0)
		return *cs;
	double *cj = &r->cache[((size_t)G + r->S) * P + p];
	if (*cj != *cj) {
		*cj = unmarked_median(r, mark, NULL, r->W, p, &m);
		if (m < 2)
			*cj = -1;
	}
	return *cj >= 0 ? *cj : own_value(r, q, p);
}

/* The reference transfer of phase p for the marked instances (gmark): the median of the
 * medians of the instances without a marked member */
static double ref_transfer(struct rp *r, uint32_t p)
{
	int dim = r->dim[p];
	size_t m = 0;
	for (uint32_t j = 0; j < r->gcount[dim]; j++) {
		float x = r->imed[(size_t)p * r->W + j];
		if (!r->gmark[j] && x == x)
			r->x[m++] = x;
	}
	return m ? stats_median_inplace(r->x, m) : NAN;
}

/* whether fix x puts compute or host phase p of its marked ranks back */
static int fixes_phase(const struct rp *r, const struct replay_fix *x, uint32_t p)
{
	if (x->phases && !x->phases[p])
		return 0;
	if (x->how == REPLAY_PEERS)
		return r->kind[p] == RECORD_KIND_COMPUTE || r->kind[p] == RECORD_KIND_HOST;
	return x->how != REPLAY_TRANSFER && r->kind[p] == RECORD_KIND_COMPUTE;
}

/* Each rank's first fix of what-if w into who[] (REPLAY_NO_FIX: none), and the ranks any
 * fix marks into marked[] (no peer's median is taken over them): once a what-if, not once
 * an iteration */
#define REPLAY_NO_FIX 0xff
static void rp_who(const struct rp *r, const struct replay_whatif *w, uint8_t *who, uint8_t *marked)
{
	memset(who, REPLAY_NO_FIX, r->W);
	for (size_t f = w->nfix; f-- > 0;)
		for (uint32_t q = 0; q < r->W; q++)
			if (w->fix[f].ranks[q])
				who[q] = (uint8_t)f;
	for (uint32_t q = 0; q < r->W; q++)
		marked[q] = who[q] != REPLAY_NO_FIX;
}

/* One iteration replayed with the what-if's cells at their reference (who, marked: rp_who);
 * returns the step */
static double rp_whatif(struct rp *r, const struct replay_whatif *w, const uint8_t *who, const uint8_t *marked)
{
	uint32_t W = r->W, P = r->P;
	size_t nc = ((size_t)r->gcount[TOPO_DP] + r->S + 1) * P;
	for (size_t i = 0; i < nc; i++)
		r->cache[i] = NAN;
	for (uint32_t q = 0; q < W; q++)
		r->clock[q] = 0;
	for (uint32_t k = 0; k < P; k++) {
		uint32_t p = r->order[k];
		if (r->kind[p] != RECORD_KIND_COMM) {
			uint8_t on[REPLAY_MAX_FIXES + 1] = {0}; /* the fixes that touch p */
			int any = 0;
			for (size_t f = 0; f < w->nfix; f++)
				any |= on[f] = (uint8_t)fixes_phase(r, &w->fix[f], p);
			const float *d = r->d + p;
			for (uint32_t q = 0; q < W; q++) {
				float v = d[(size_t)q * P];
				if (v != v)
					continue;
				double x = v;
				uint8_t f = who[q];
				if (any && f != REPLAY_NO_FIX && on[f])
					x = w->fix[f].how == REPLAY_MEAN   ? r->mean[p]
					    : w->fix[f].how == REPLAY_BASE ? own_value(r, q, p)
									   : peer_value(r, marked, q, p);
				r->clock[q] += x;
			}
			continue;
		}
		int dim = r->dim[p], fix = 0;
		const uint32_t *g = r->grp[dim];
		uint32_t G = r->gcount[dim];
		memset(r->gmark, 0, G);
		for (size_t f = 0; f < w->nfix; f++) {
			const struct replay_fix *x = &w->fix[f];
			if (x->how != REPLAY_TRANSFER || (x->phases && !x->phases[p]))
				continue;
			fix = 1;
			for (uint32_t q = 0; q < W; q++)
				if (x->ranks[q])
					r->gmark[g[q]] = 1;
		}
		double ref = fix ? ref_transfer(r, p) : NAN;
		for (uint32_t j = 0; j < G; j++)
			r->gmax[j] = -INFINITY;
		for (uint32_t q = 0; q < W; q++)
			if (r->d[(size_t)q * P + p] == r->d[(size_t)q * P + p] && r->clock[q] > r->gmax[g[q]])
				r->gmax[g[q]] = r->clock[q];
		for (uint32_t q = 0; q < W; q++) {
			float x = r->tr[(size_t)q * P + p];
			if (x != x)
				continue;
			double y = x;
			if (fix && r->gmark[g[q]]) {
				/* the instance's own transfer before the window, else the others' now */
				float b = r->bimed ? r->bimed[(size_t)p * W + g[q]] : NAN;
				y = b == b ? (b < x ? b : x) : ref == ref ? ref : x;
			}
			r->clock[q] = r->gmax[g[q]] + y;
		}
	}
	double step = 0;
	for (uint32_t q = 0; q < W; q++)
		step = r->clock[q] > step ? r->clock[q] : step;
	return step;
}

/* The collectives whose members all leave together across the whole job, whatever group
 * their records name (a gradient-norm all-reduce recorded as data-parallel): as recorded,
 * every rank arrives at its own time (the durations before it, summed) and leaves at its
 * arrival plus its stay. Where the arrivals spread and the leaves do not (within
 * RP_ALIGNED of the arrivals' spread) in most iterations, the collective is the job's. */
#define RP_ALIGNED 0.25
#define RP_VOTE_ITERS 8

static void rp_votes(struct rp *r, uint32_t *job, uint32_t *seen)
{
	uint32_t W = r->W, P = r->P;
	for (uint32_t q = 0; q < W; q++)
		r->clock[q] = 0;
	for (uint32_t k = 0; k < P; k++) {
		uint32_t p = r->order[k];
		double a0 = INFINITY, a1 = -INFINITY, l0 = INFINITY, l1 = -INFINITY;
		for (uint32_t q = 0; q < W; q++) {
			float v = r->d[(size_t)q * P + p];
			if (v != v)
				continue;
			if (r->kind[p] == RECORD_KIND_COMM) {
				double a = r->clock[q], l = a + v;
				a0 = a < a0 ? a : a0;
				a1 = a > a1 ? a : a1;
				l0 = l < l0 ? l : l0;
				l1 = l > l1 ? l : l1;
			}
			r->clock[q] += v;
		}
		if (r->kind[p] != RECORD_KIND_COMM || !(a1 > a0))
			continue;
		seen[p]++;
		job[p] += l1 - l0 <= RP_ALIGNED * (a1 - a0);
	}
}

/* each instance's mean transfer over the baseline iterations into r->bimed (left NULL when
 * there is no baseline) */
static int rp_baseline(struct rp *r, const struct replay_input *in, uint32_t take)
{
	if (in->blast < in->bfirst)
		return 0;
	size_t cells = (size_t)r->P * r->W;
	float *sum = calloc(cells, sizeof(float));
	uint8_t *cnt = calloc(cells, 1);
	if (!sum || !cnt) {
		free(sum);
		free(cnt);
		return -1;
	}
	uint32_t span = in->blast - in->bfirst + 1, n = span < take ? span : take, got = 0;
	for (uint32_t k = 0; k < n; k++) {
		if (!rp_load(r, in->blast - (uint32_t)((uint64_t)k * span / n)))
			continue;
		rp_record(r);
		got++;
		for (size_t c = 0; c < cells; c++)
			if (r->imed[c] == r->imed[c]) {
				sum[c] += r->imed[c];
				cnt[c]++;
			}
	}
	for (size_t c = 0; c < cells; c++)
		sum[c] = cnt[c] ? sum[c] / cnt[c] : NAN;
	free(cnt);
	if (got)
		r->bimed = sum;
	else
		free(sum);
	return 0;
}

/* A replay of in's range: the layout, the iterations to replay (*take of them, evenly
 * spaced, the last always) and each collective's scope. 1 when ready, 0 when there is
 * nothing to replay, -1 when out of memory (r is freed either way when not ready). */
static int rp_open(struct rp *r, const struct replay_input *in, uint32_t *take)
{
	memset(r, 0, sizeof(*r));
	if (in->last < in->first || !store_phase_count(in->s))
		return 0;
	if (rp_init(r, in->s) < 0) {
		rp_free(r);
		return -1;
	}
	r->base = in->base;
	uint32_t span = in->last - in->first + 1, cap = REPLAY_MAX_ITERS;
	size_t cells = (size_t)r->W * r->P;
	if (cells * REPLAY_MAX_ITERS > REPLAY_CELL_ITERS)
		cap = cells * REPLAY_MIN_ITERS > REPLAY_CELL_ITERS ? REPLAY_MIN_ITERS
								    : (uint32_t)(REPLAY_CELL_ITERS / cells);
	*take = span < cap ? span : cap;
	uint32_t *job = calloc(2 * (size_t)r->P, sizeof(uint32_t));
	if (!job) {
		rp_free(r);
		return -1;
	}
	uint32_t *seen = job + r->P;
	/* the scope of each collective, from a few iterations (each a pass over the cells) */
	uint32_t vote = *take < RP_VOTE_ITERS ? *take : RP_VOTE_ITERS;
	for (uint32_t k = 0; k < vote && r->P; k++)
		if (rp_load(r, in->last - (uint32_t)((uint64_t)k * span / vote)))
			rp_votes(r, job, seen);
	for (uint32_t p = 0; p < r->P; p++)
		if (seen[p] && job[p] * 2 > seen[p])
			r->dim[p] = RP_JOB;
	free(job);
	return 1;
}

int replay_run(const struct replay_input *in, struct replay_whatif *w, size_t n, double *step_ms, double *base_step)
{
	uint32_t first = in->first, last = in->last;
	for (size_t i = 0; i < n; i++) {
		w[i].gain_ms = w[i].gain_max_ms = 0;
		w[i].iters = w[i].iters_gained = 0;
	}
	if (step_ms)
		*step_ms = NAN;
	struct rp r;
	uint32_t take, done = 0;
	int ok = rp_open(&r, in, &take);
	if (ok <= 0)
		return ok;
	uint32_t span = last - first + 1;
	double steps = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t f = 0; f < w[i].nfix; f++)
			r.want_imed |= w[i].fix[f].how == REPLAY_TRANSFER;
	if (r.want_imed && rp_baseline(&r, in, take < 8 ? take : 8) < 0) {
		rp_free(&r);
		return -1;
	}
	r.who = malloc(n * (size_t)r.W + 1);
	r.marked = malloc(n * (size_t)r.W + 1);
	if (!r.who || !r.marked) {
		rp_free(&r);
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		rp_who(&r, &w[i], r.who + i * r.W, r.marked + i * r.W);
	for (uint32_t k = 0; k < take; k++) {
		uint32_t it = last - (uint32_t)((uint64_t)k * span / take); /* the last always */
		if (!rp_load(&r, it))
			continue;
		double base = rp_record(&r);
		steps += base;
		if (base_step)
			base_step[done] = base;
		for (size_t i = 0; i < n; i++) {
			w[i].iter[done] = it;
			w[i].step[done] = rp_whatif(&r, &w[i], r.who + i * r.W, r.marked + i * r.W);
			double gain = base - w[i].step[done];

			w[i].gain_ms += gain;
			w[i].gain_max_ms = gain > w[i].gain_max_ms ? gain : w[i].gain_max_ms;
			w[i].iters_gained += gain >= REPLAY_GAIN_SHARE * base;
		}
		done++;
	}
	for (size_t i = 0; i < n; i++) {
		w[i].iters = done;
		if (done)
			w[i].gain_ms /= done;
	}
	if (step_ms && done)
		*step_ms = steps / done;
	rp_free(&r);
	return 0;
}

int replay_transfers(const struct replay_input *in, float *out, uint8_t *dim)
{
	struct rp r;
	uint32_t take;
	int ok = rp_open(&r, in, &take);
	if (ok <= 0) {
		for (uint32_t p = 0; p < store_phase_count(in->s); p++)
			dim[p] = (uint8_t)l2_collective_dim(store_phase_group(in->s, p));
		size_t cells = (size_t)store_topo(in->s)->world * store_phase_count(in->s);
		for (size_t c = 0; c < cells; c++)
			out[c] = NAN;
		return ok;
	}
	size_t cells = (size_t)r.W * r.P;
	uint16_t *n = calloc(cells + 1, sizeof(uint16_t));
	if (!n) {
		rp_free(&r);
		return -1;
	}
	for (size_t c = 0; c < cells; c++)
		out[c] = 0;
	uint32_t span = in->last - in->first + 1;
	for (uint32_t k = 0; k < take; k++) {
		if (!rp_load(&r, in->last - (uint32_t)((uint64_t)k * span / take)))
			continue;
		rp_record(&r);
		for (size_t c = 0; c < cells; c++)
			if (r.tr[c] == r.tr[c] && r.kind[c % r.P] == RECORD_KIND_COMM) {
				out[c] += r.tr[c];
				n[c]++;
			}
	}
	for (size_t c = 0; c < cells; c++)
		out[c] = n[c] ? out[c] / n[c] : NAN;
	for (uint32_t p = 0; p < r.P; p++)
		dim[p] = r.dim[p];
	free(n);
	rp_free(&r);
	return 0;
}
