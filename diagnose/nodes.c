/* nodes.c: the rules of attribution that judge whole nodes and links rather than ranks: a
 * node whose ranks all slowed alike, a slow NIC told by the collectives it takes part in
 * (comm_cover), by the order of the collectives among few nodes (node_first_long) and
 * beside a compute fault (node_leaves_late). docs/method.md, "Attribution". */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "stats.h"
#include "work.h"

/* Whether rank r's long collectives are only the wait of a rank that arrives early: its
 * own work is shorter than its peers' by as much as its collectives are longer (the fast
 * half of a bimodal fleet waits longest), within COMM_WAIT_SLACK. Both sides are per iteration: each phase's
 * difference to its reference (value / ratio) weighted by the phase's presence. (A
 * collective's own difference says nothing of arriving early: its members leave it
 * together, and a short one means arriving last.) */
#define COMM_WAIT_SLACK 1.25 /* the two sides are medians of noisy steps: 26.0 ms against 25.7 */
int comm_is_wait(const struct work *w, uint32_t r)
{
	double ahead = 0, extra = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		double v = w->l2.val[i], q = w->l2.ratio[i], pr = w->l2.presence[p];
		if (!isfinite(v) || !(q > 0) || !isfinite(q) || !(pr > 0))
			continue;
		double d = (v - v / q) * pr;
		if (w->kind[p] == RECORD_KIND_COMM) {
			if (w->l2.flag[i] & L2_HIGH)
				extra += d;
		} else if (d < 0) {
			ahead -= d;
		}
	}
	return extra > 0 && extra <= COMM_WAIT_SLACK * ahead;
}

/* distinct hosts of the ranks of kind k (counted up to 65: more is "many") */
static size_t nodes_of(const struct work *w, const uint8_t *kind, int k)
{
	enum { MAX = 65 };
	char h[REPORT_NAME_MAX], seen[MAX][REPORT_NAME_MAX];
	size_t n = 0;
	for (uint32_t r = 0; r < w->W && n < MAX; r++) {
		if (kind[r] != k)
			continue;
		store_host(w->s, r, h, sizeof(h));
		size_t j = 0;
		while (j < n && strcmp(seen[j], h) != 0)
			j++;
		if (j == n)
			snprintf(seen[n++], sizeof(seen[0]), "%s", h);
	}
	return n;
}

/* "A few" ranks of kind k, as a node's or a link's fault is: on at most few_nodes hosts and
 * on no more than half of the job's, or at most few_fraction of the ranks (one rank of a
 * one-node job) */
int on_few_nodes(const struct work *w, const uint8_t *kind, int k, size_t n, uint32_t nodes, size_t few_nodes)
{
	size_t on = nodes_of(w, kind, k);
	return (on <= few_nodes && on * 2 <= nodes) || n <= (size_t)(w->cfg->few_fraction * w->W) || n == 1;
}

/* The nodes every rank of which (2 or more) is marked (mark(w, r, arg)): their host ids
 * into ids[NODE_MAX]. Returns how many, 0 when none or when the marked ranks are on more
 * than NODE_MAX nodes (then it is no node's fault). */
#define NODE_MAX 8
static size_t whole_nodes(const struct work *w, int (*mark)(const struct work *, uint32_t, uint32_t), uint32_t arg,
			  uint32_t *ids)
{
	uint32_t cand[NODE_MAX], all[NODE_MAX] = {0}, on[NODE_MAX] = {0};
	size_t nc = 0, n = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		if (!mark(w, r, arg))
			continue;
		uint32_t h = store_host_id(w->s, r);
		size_t j = 0;
		while (j < nc && cand[j] != h)
			j++;
		if (j == nc) {
			if (nc == NODE_MAX)
				return 0;
			cand[nc++] = h;
		}
		on[j]++;
	}
	for (uint32_t r = 0; r < w->W && nc; r++) {
		uint32_t h = store_host_id(w->s, r);
		for (size_t j = 0; j < nc; j++)
			all[j] += cand[j] == h;
	}
	for (size_t j = 0; j < nc; j++)
		if (all[j] >= 2 && on[j] == all[j])
			ids[n++] = cand[j];
	return n;
}

static int on_nodes(const struct work *w, uint32_t r, const uint32_t *ids, size_t n)
{
	uint32_t h = store_host_id(w->s, r);
	for (size_t j = 0; j < n; j++)
		if (ids[j] == h)
			return 1;
	return 0;
}

/* Whether rank r has a compute phase past the subtle cut in one comparison (L2_HINT) and
 * that much slower than its own baseline */
static int own_hint(const struct work *w, uint32_t r, uint32_t unused)
{
	(void)unused;
	for (uint32_t p = 0; p < w->P; p++) {
		size_t i = (size_t)r * w->P + p;
		if (w->kind[p] == RECORD_KIND_COMPUTE && (w->l2.flag[i] & L2_HINT) &&
		    w->l2.val[i] > w->l2.base[i] * w->cfg->l2.subtle_ratio)
			return 1;
	}
	return 0;
}

/* A node whose ranks all slowed alike: nobody stands out against its peers (the node is
 * half its role groups or its stages, which then slowed with it), but every rank of the
 * node, two or more, has a compute phase past the subtle cut against its own past
 * (own_hint). At most few_nodes such nodes and no more than half of the job's; their
 * ranks become compute culprits. Returns the number of ranks named. */
size_t node_shift(const struct work *w, uint8_t *kind, uint32_t nodes, size_t few_nodes)
{
	uint32_t ids[NODE_MAX];
	size_t n = whole_nodes(w, own_hint, 0, ids), named = 0;
	if (!n || n > few_nodes || n * 2 > nodes)
		return 0;
	for (uint32_t r = 0; r < w->W; r++)
		if (on_nodes(w, r, ids, n)) {
			kind[r] = FK_COMPUTE;
			named++;
		}
	return named;
}

/* Whether rank r is past the subtle cut in communication phase p against its collective */
static int comm_hint(const struct work *w, uint32_t r, uint32_t p)
{
	return (w->l2.flag[(size_t)r * w->P + p] & (L2_HINT | L2_HIGH)) != 0;
}

/* A node whose ranks are all long in one collective: a slow NIC slows every transfer of its
 * node, each by less than a lone slow link would have to show (past subtle_z and
 * subtle_ratio, 1% of the step, against the members of each collective; L2_HINT), but on
 * every rank of the node at once, which chance does not do. Their phase counts as high
 * and they become communication culprits (unless they only wait: comm_is_wait). */
void node_comm(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes)
{
	for (uint32_t p = 0; p < w->P; p++) {
		if (w->kind[p] != RECORD_KIND_COMM)
			continue;
		uint32_t ids[NODE_MAX];
		size_t n = whole_nodes(w, comm_hint, p, ids);
		if (!n || n > few_nodes || n * 2 > nodes)
			continue;
		for (uint32_t r = 0; r < w->W; r++)
			if (on_nodes(w, r, ids, n))
				w->l2.flag[(size_t)r * w->P + p] |= L2_HIGH;
	}
	for (uint32_t r = 0; r < w->W; r++)
		if (kind[r] == FK_NONE && phase_flag_any(w, r, KM_COMM, L2_HIGH) && !comm_is_wait(w, r)) {
			kind[r] = FK_COMM;
			count[FK_NONE]--;
			count[FK_COMM]++;
		}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The slow links, by the collectives they take part in (docs/method.md, "Slow links"). A
 * slow NIC slows every collective its node takes part in across nodes. When the node is
 * half or more of such a collective, no member stands out against the others; but the
 * collectives that slowed all include the node. A member's stay in a collective is its wait
 * for the last to arrive plus the transfer; the shortest stay is the last arriver's, the
 * transfer alone, which waiting does not lengthen. Per communication phase and instance (the
 * members of one group along the phase's dimension, on two nodes or more): the shortest
 * stay's own change (window / baseline), slow when past ratio_high and subtle_z against the
 * lower half of the phase's instances (a slow node may be in half of them) and by
 * step_share of the step; a phase whose lower half grew by ratio_high is where the job
 * waits, no link's. Then the nodes, greedily: the node with the most slowing (each slow
 * instance weighed by its ratio - 1) not yet explained, when that is half or more of all
 * (a quarter for a second node), over two instances or more, when half or more of its own
 * instances are slow, and when its ranks do not stay shorter than their instances' median
 * (a node whose ranks arrive late makes its collectives wait: then nothing is named). At
 * most few_nodes nodes and no more than half of the job's. Their ranks become
 * communication culprits, the slow phases flagged high by own change (L2_FALLBACK). */
struct cover {
	uint32_t *hid;         /* [rank] dense node index */
	uint32_t nh;           /* nodes */
	uint32_t *ord, *start; /* ranks bucketed by group: start[g] .. start[g + 1] */
	uint8_t ci[256];       /* phase slot -> its number among the communication phases */
	uint32_t ncomm;
	uint8_t *slow;             /* [instance: ci[p] * W + g] COVER_* */
	float *gratio;             /* [instance] */
	uint32_t *pair_i, *pair_h; /* a slow instance and a node in it */
	size_t npair, cap;
	uint32_t *all, *in_slow, *in_hint, *late, *seen; /* [node]; seen: the last instance counted */
	uint32_t *cursor;
	double *x, *gval, *gbase; /* [group] the members' shortest stay, window and baseline */
};

/* an instance's state: slow (past the cut), a hint (past the subtle cut only: it counts for
 * a node with a slow instance of its own), and, in the greedy pass, explained by a node */
enum { COVER_SLOW = 1, COVER_HINT = 2, COVER_DONE = 4 };

static int cover_pair(struct cover *c, uint32_t inst, uint32_t h)
{
	if (c->npair == c->cap) {
		size_t n = c->cap ? 2 * c->cap : 1024;
		uint32_t *a = realloc(c->pair_i, n * sizeof(*a));
		if (!a)
			return -1;
		c->pair_i = a;
		uint32_t *b = realloc(c->pair_h, n * sizeof(*b));
		if (!b)
			return -1;
		c->pair_h = b;
		c->cap = n;
	}
	c->pair_i[c->npair] = inst;
	c->pair_h[c->npair++] = h;
	return 0;
}

/* the ranks bucketed by their group along dim into c (ord, start); returns the groups */
static uint32_t cover_buckets(struct work *w, struct cover *c, enum topo_dim dim)
{
	uint32_t W = w->W, G = topo_collective_group_count(w->t, dim);
	if (G > W)
		return 0;
	memset(c->start, 0, (G + 1) * sizeof(uint32_t));
	for (uint32_t r = 0; r < W; r++) {
		c->cursor[r] = topo_collective_group(w->t, r, dim); /* the rank's group, for now */
		c->start[c->cursor[r] + 1]++;
	}
	for (uint32_t g = 0; g < G; g++)
		c->start[g + 1] += c->start[g];
	for (uint32_t r = 0; r < W; r++)
		c->ord[c->start[c->cursor[r]]++] = r;
	for (uint32_t g = G; g > 0; g--) /* each start moved to the next group's: shift back */
		c->start[g] = c->start[g - 1];
	c->start[0] = 0;
	return G;
}

/* the slow instances of phase p into c (slow, gratio, pairs, per-node counts) */
static int cover_phase(struct work *w, struct cover *c, uint32_t p, uint32_t G, double floor_ms)
{
	uint32_t W = w->W, P = w->P;
	if (G < 3)
		return 0;
	/* each inter-node instance's shortest stay, window over baseline */
	double *gmed = malloc(G * sizeof(double));
	if (!gmed)
		return -1;
	size_t ng = 0;
	for (uint32_t g = 0; g < G; g++) {
		gmed[g] = NAN;
		double lo = INFINITY, blo = INFINITY;
		int multi = 0, unheard = 0;
		for (uint32_t k = c->start[g]; k < c->start[g + 1]; k++) {
			uint32_t r = c->ord[k];
			size_t i = (size_t)r * P + p;
			multi |= c->hid[r] != c->hid[c->ord[c->start[g]]];
			unheard |= !isfinite(w->l2.val[i]);
			if (w->l2.base[i] > 0 && isfinite(w->l2.val[i])) {
				lo = fmin(lo, w->l2.val[i]);
				blo = fmin(blo, w->l2.base[i]);
			}
		}
		/* a member not heard from in the window may be the last to arrive, whose stay is
		 * the short one: without it the others' waits look like a slow link, on the node
		 * of the member not heard from */
		if (multi && isfinite(lo) && !unheard)
			gmed[g] = lo / blo;
		c->gval[g] = lo;
		c->gbase[g] = blo;
	}
	for (uint32_t g = 0; g < G; g++)
		if (isfinite(gmed[g]))
			c->x[ng++] = gmed[g];
	if (ng < 3) {
		free(gmed);
		return 0;
	}
	/* the reference is the lower half of the instances: a slow node may be in half of them */
	qsort(c->x, ng, sizeof(double), cmp_double);
	ng = (ng + 1) / 2;
	double m = stats_median_inplace(c->x, ng);
	double mad = stats_mad_inplace(c->x, ng, m);
	const struct l2_config *cf = &w->cfg->l2;
	if (!(m < cf->ratio_high)) {
		/* the job waits in this collective (most of its instances grew): no link's */
		free(gmed);
		return 0;
	}
	for (uint32_t g = 0; g < G; g++) {
		if (!isfinite(gmed[g]) || !(m > 0))
			continue;
		double z = stats_robust_z(gmed[g], m, mad, cf->mad_floor_rel * m);
		double excess = c->gval[g] - c->gbase[g] * m, med = NAN;
		int slow = z > cf->subtle_z && gmed[g] > m * cf->ratio_high && excess > floor_ms;
		int hint = !slow && z > cf->subtle_z && gmed[g] > m * cf->subtle_ratio;
		if (slow) {
			/* the members' median own change, against which a late member stays shorter */
			size_t n = 0;
			for (uint32_t k = c->start[g]; k < c->start[g + 1]; k++) {
				size_t i = (size_t)c->ord[k] * P + p;
				if (w->l2.base[i] > 0 && isfinite(w->l2.val[i]))
					c->x[n++] = w->l2.val[i] / w->l2.base[i];
			}
			med = stats_median_inplace(c->x, n);
		}
		uint32_t inst = c->ci[p] * W + g;
		c->slow[inst] = slow ? COVER_SLOW : hint ? COVER_HINT : 0;
		c->gratio[inst] = (float)(gmed[g] / m);
		for (uint32_t k = c->start[g]; k < c->start[g + 1]; k++) {
			uint32_t r = c->ord[k], h = c->hid[r];
			size_t i = (size_t)r * P + p;
			if (slow && isfinite(w->l2.val[i]) && w->l2.base[i] > 0 &&
			    w->l2.val[i] / w->l2.base[i] < 0.9 * med)
				c->late[h]++;
			if (c->seen[h] == inst + 1)
				continue;
			c->seen[h] = inst + 1;
			c->all[h]++;
			c->in_slow[h] += (uint32_t)slow;
			c->in_hint[h] += (uint32_t)hint;
			if (slow || hint) {
				if (cover_pair(c, inst, h) < 0) {
					free(gmed);
					return -1;
				}
			}
		}
	}
	free(gmed);
	return 0;
}

static void cover_free(struct cover *c)
{
	free(c->hid);
	free(c->ord);
	free(c->start);
	free(c->seen);
	free(c->cursor);
	free(c->x);
	free(c->gval);
	free(c->gbase);
	free(c->slow);
	free(c->gratio);
	free(c->pair_i);
	free(c->pair_h);
	free(c->all);
	free(c->in_slow);
	free(c->in_hint);
	free(c->late);
}

/* Dense node numbers into c->hid and c->nh, through an open-addressing table of host id ->
 * number; -1 when out of memory. */
static int cover_hosts(struct work *w, struct cover *c)
{
	size_t cap = 16;
	while (cap < 2 * (size_t)w->W)
		cap *= 2;
	uint32_t *key = malloc(cap * sizeof(uint32_t)), *num = malloc(cap * sizeof(uint32_t));
	if (!key || !num) {
		free(key);
		free(num);
		return -1;
	}
	memset(num, 0xff, cap * sizeof(uint32_t));
	for (uint32_t r = 0; r < w->W; r++) {
		uint32_t h = store_host_id(w->s, r);
		size_t j = (h * 2654435761u) & (cap - 1);
		while (num[j] != UINT32_MAX && key[j] != h)
			j = (j + 1) & (cap - 1);
		if (num[j] == UINT32_MAX) {
			key[j] = h;
			num[j] = c->nh++;
		}
		c->hid[r] = num[j];
	}
	free(key);
	free(num);
	return 0;
}

/* c's arrays for W ranks and the job's communication phases, and its nodes (cover_hosts);
 * -1 when out of memory. */
static int cover_alloc(struct work *w, struct cover *c)
{
	uint32_t W = w->W, P = w->P;
	c->hid = malloc(W * sizeof(uint32_t));
	c->ord = malloc(W * sizeof(uint32_t));
	c->start = malloc((W + 1) * sizeof(uint32_t));
	c->cursor = malloc(W * sizeof(uint32_t));
	c->x = malloc(W * sizeof(double));
	c->gval = malloc(W * sizeof(double));
	c->gbase = malloc(W * sizeof(double));
	for (uint32_t p = 0; p < P; p++)
		if (w->kind[p] == RECORD_KIND_COMM)
			c->ci[p] = (uint8_t)c->ncomm++;
	c->slow = calloc((size_t)c->ncomm * W + 1, 1);
	c->gratio = calloc((size_t)c->ncomm * W + 1, sizeof(float));
	if (!c->hid || !c->ord || !c->start || !c->cursor || !c->x || !c->gval || !c->gbase || !c->slow || !c->gratio ||
	    cover_hosts(w, c) < 0)
		return -1;
	c->all = calloc(c->nh, sizeof(uint32_t));
	c->in_slow = calloc(c->nh, sizeof(uint32_t));
	c->in_hint = calloc(c->nh, sizeof(uint32_t));
	c->late = calloc(c->nh, sizeof(uint32_t));
	c->seen = calloc(c->nh, sizeof(uint32_t));
	return !c->all || !c->in_slow || !c->in_hint || !c->late || !c->seen ? -1 : 0;
}

/* Every communication phase's instances judged (cover_phase), a dimension's groups bucketed
 * once for all its phases; returns the slow instances, -1 when out of memory. */
static int64_t cover_instances(struct work *w, struct cover *c)
{
	uint32_t W = w->W, P = w->P;
	const struct l2_config *cf = &w->cfg->l2;
	double floor_ms = cf->step_ms > 0 ? cf->step_share * cf->step_ms : cf->min_delta_ms;
	uint32_t dims = 0; /* the dimensions of the communication phases, as bits */
	for (uint32_t p = 0; p < P; p++)
		if (w->kind[p] == RECORD_KIND_COMM)
			dims |= 1u << l2_collective_dim(store_phase_group(w->s, p));
	for (uint32_t d = 0; d < 32; d++) {
		if (!(dims >> d & 1))
			continue;
		uint32_t G = cover_buckets(w, c, (enum topo_dim)d);
		for (uint32_t p = 0; p < P; p++)
			if (w->kind[p] == RECORD_KIND_COMM && l2_collective_dim(store_phase_group(w->s, p)) == d &&
			    cover_phase(w, c, p, G, floor_ms) < 0)
				return -1;
	}
	int64_t ninst = 0;
	for (size_t k = 0; k < (size_t)c->ncomm * W; k++)
		ninst += c->slow[k] == COVER_SLOW;
	return ninst;
}

/* Greedy: the node in the most slow instances and hints not yet explained, each weighed by
 * how much it slowed (gratio - 1), into chosen[NODE_MAX]; the instances it explains marked
 * COVER_DONE. Returns how many, -1 when out of memory. */
static int cover_choose(struct work *w, struct cover *c, size_t few_nodes, uint32_t *chosen)
{
	uint32_t W = w->W;
	uint8_t *covered = c->slow;
	double total = 0, *left = calloc(c->nh, sizeof(double));
	uint32_t *nleft = calloc(c->nh, sizeof(uint32_t));
	int nchosen = 0;
	if (!left || !nleft) {
		free(left);
		free(nleft);
		return -1;
	}
	for (size_t k = 0; k < (size_t)c->ncomm * W; k++)
		if (c->slow[k])
			total += c->gratio[k] - 1;
	while ((size_t)nchosen < few_nodes && nchosen < NODE_MAX) {
		memset(left, 0, c->nh * sizeof(double));
		memset(nleft, 0, c->nh * sizeof(uint32_t));
		for (size_t k = 0; k < c->npair; k++)
			if (!(covered[c->pair_i[k]] & COVER_DONE)) {
				left[c->pair_h[k]] += c->gratio[c->pair_i[k]] - 1;
				nleft[c->pair_h[k]]++;
			}
		uint32_t best = 0, tie = 0;
		for (uint32_t h = 1; h < c->nh; h++)
			if (left[h] > left[best])
				best = h;
		/* another node with as much: the instances hold both and do not say which it is */
		for (uint32_t h = 0; h < c->nh; h++)
			tie |= h != best && left[h] >= left[best];
		if (tie)
			break;
		if (nleft[best] < 2 || left[best] * (nchosen ? 4 : 2) < total || !c->in_slow[best] ||
		    (c->in_slow[best] + c->in_hint[best]) * 2 < c->all[best])
			break;
		/* its ranks shorter than their instances: it arrives late, the others wait */
		uint32_t members = 0;
		for (uint32_t r = 0; r < W; r++)
			members += c->hid[r] == best;
		if (c->late[best] * 2 > members * c->in_slow[best])
			break;
		chosen[nchosen++] = best;
		for (size_t k = 0; k < c->npair; k++)
			if (c->pair_h[k] == best)
				covered[c->pair_i[k]] |= COVER_DONE;
	}
	free(left);
	free(nleft);
	return nchosen;
}

/* The ranks of the chosen nodes: their slow phases flagged high by own change at their
 * instance's ratio, and those without a fault of their own communication culprits. */
static void cover_name(struct work *w, const struct cover *c, uint8_t *kind, size_t *count, const uint32_t *chosen,
		       size_t nchosen)
{
	uint32_t W = w->W, P = w->P;
	for (uint32_t r = 0; r < W; r++) {
		size_t j = 0;
		while (j < nchosen && chosen[j] != c->hid[r])
			j++;
		if (j == nchosen)
			continue;
		for (uint32_t p = 0; p < P; p++) {
			if (w->kind[p] != RECORD_KIND_COMM)
				continue;
			enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
			uint32_t inst = c->ci[p] * W + topo_collective_group(w->t, r, dim);
			if (!c->slow[inst])
				continue;
			size_t i = (size_t)r * P + p;
			w->l2.flag[i] |= L2_HIGH | L2_FALLBACK;
			w->l2.ratio[i] = c->gratio[inst];
		}
		if (kind[r] == FK_NONE) {
			kind[r] = FK_COMM;
			count[FK_NONE]--;
			count[FK_COMM]++;
		}
	}
}

int comm_cover(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes)
{
	struct cover c;
	memset(&c, 0, sizeof(c));
	uint32_t chosen[NODE_MAX];
	int rc = -1;
	if (cover_alloc(w, &c) < 0)
		goto out;
	int64_t ninst = cover_instances(w, &c);
	if (ninst < 0)
		goto out;
	rc = 0;
	if (!ninst)
		goto out;
	int nchosen = cover_choose(w, &c, few_nodes, chosen);
	if (nchosen < 0)
		rc = -1;
	else if (nchosen && (size_t)nchosen * 2 <= nodes)
		cover_name(w, &c, kind, count, chosen, (size_t)nchosen);
out:
	cover_free(&c);
	return rc;
}

/* The ranks of the slow nodes slow[0..n) (a few nodes: at most few_nodes, and half the
 * job's) without a fault of their own are communication culprits in the node's phase
 * slowp[j] at ratio[j]. Always 0 (node_first_long and node_leaves_late return it). */
static int name_slow_nodes(struct work *w, uint8_t *kind, size_t *count, const uint32_t *slow, const uint32_t *slowp,
			   const double *ratio, size_t n, uint32_t nodes, size_t few_nodes)
{
	if (!n || n > few_nodes || n * 2 > nodes)
		return 0;
	for (uint32_t r = 0; r < w->W; r++) {
		uint32_t h = store_host_id(w->s, r);
		size_t j = 0;
		while (j < n && slow[j] != h)
			j++;
		if (j == n || kind[r] != FK_NONE)
			continue;
		size_t i = (size_t)r * w->P + slowp[j];
		w->l2.flag[i] |= L2_HIGH | L2_FALLBACK;
		w->l2.ratio[i] = (float)ratio[j];
		kind[r] = FK_COMM;
		count[FK_NONE]--;
		count[FK_COMM]++;
	}
	return 0;
}

/* The job's hosts into hosts[NODE_MAX], in rank order: how many, 0 when more than NODE_MAX */
static uint32_t job_hosts(const struct work *w, uint32_t *hosts)
{
	uint32_t nh = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		uint32_t h = store_host_id(w->s, r), j = 0;
		while (j < nh && hosts[j] != h)
			j++;
		if (j == nh) {
			if (nh == NODE_MAX)
				return 0;
			hosts[nh++] = h;
		}
	}
	return nh;
}

/* A phase's typical start within the step (store_phase_start); the untracked time before the
 * first phase starts the step. -1 when its records carried no start. */
static double phase_start(const struct work *w, uint32_t p)
{
	double st = store_phase_start(w->s, p);
	if (st < 0 && strcmp(store_name(w->s, store_phase_name(w->s, p)), STORE_LEAD_PHASE) == 0)
		return 0;
	return st;
}

/* The communication phases in the order the step runs them (by typical start), into ord;
 * returns how many, 0 when one of them has no start (no order: the rule is not used). */
static uint32_t comm_order(const struct work *w, uint32_t *ord, double *at)
{
	uint32_t n = 0;
	for (uint32_t p = 0; p < w->P; p++) {
		if (w->kind[p] != RECORD_KIND_COMM)
			continue;
		double st = phase_start(w, p);
		if (st < 0)
			return 0;
		uint32_t j = n++;
		for (; j > 0 && at[j - 1] > st; j--) {
			ord[j] = ord[j - 1];
			at[j] = at[j - 1];
		}
		ord[j] = p;
		at[j] = st;
	}
	return n;
}

/* One node's side of a collective against its members on other nodes: the medians of the
 * own change (window / baseline) of each side, the node's extra time beyond the others'
 * change, and how much later than before the others arrive at it than the node does (the
 * change of the time the phases before it take, medians of each side). */
struct side {
	double mine, theirs, extra, late;
};

/* the median of x[0..n) (reordered), NAN when empty */
static double median_or_nan(double *x, size_t n) { return n ? stats_median_inplace(x, n) : NAN; }

/* How much longer than in the baseline each rank takes to reach each communication phase:
 * arr[k * W + r] for the k-th in step order (the change of the phases that start before it;
 * st: every phase's start; at[] ascends). One running sum per rank over the phases in start
 * order, not one sum per rank and phase. */
static void arrival_changes(const struct work *w, const double *st, const double *at, uint32_t nc, double *arr)
{
	uint32_t W = w->W, P = w->P, qs[256] = {0}, n = 0; /* zeroed: cppcheck cannot see that n counts qs */
	for (uint32_t q = 0; q < P; q++) {
		if (st[q] < 0)
			continue;
		uint32_t j = n++;
		for (; j > 0 && st[qs[j - 1]] > st[q]; j--)
			qs[j] = qs[j - 1];
		qs[j] = q;
	}
	for (uint32_t r = 0; r < W; r++) {
		const double *v = w->l2.val + (size_t)r * P, *b = w->l2.base + (size_t)r * P;
		double d = 0;
		for (uint32_t k = 0, j = 0; k < nc; k++) {
			for (; j < n && st[qs[j]] < at[k]; j++)
				if (isfinite(v[qs[j]]) && isfinite(b[qs[j]]))
					d += v[qs[j]] - b[qs[j]];
			arr[(size_t)k * W + r] = d;
		}
	}
}

/* node h's side of phase p against the members, on other nodes, of the instances marked in
 * gmark; arr: the ranks' arrival changes at p (arrival_changes); x: scratch of 4 * W doubles */
static void node_side(const struct work *w, uint32_t h, uint32_t p, const double *arr, const uint8_t *gmark, double *x,
		      struct side *out)
{
	uint32_t W = w->W, P = w->P;
	enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
	double *change[2] = {x, x + W}, *arrive[2] = {x + 2 * W, x + 3 * W}; /* [0] the others, [1] the node */
	size_t n[2] = {0, 0};
	for (uint32_t r = 0; r < W; r++) {
		size_t i = (size_t)r * P + p;
		int mine = store_host_id(w->s, r) == h;
		if (!gmark[topo_collective_group(w->t, r, dim)] || !isfinite(w->l2.val[i]) || !(w->l2.base[i] > 0))
			continue;
		change[mine][n[mine]] = w->l2.val[i] / w->l2.base[i];
		arrive[mine][n[mine]++] = arr[r];
	}
	out->mine = median_or_nan(change[1], n[1]);
	out->theirs = median_or_nan(change[0], n[0]);
	out->late = median_or_nan(arrive[0], n[0]) - median_or_nan(arrive[1], n[1]);
	/* the node's extra time: its stay beyond its baseline grown as the others' did */
	size_t k = 0;
	for (uint32_t r = 0; r < W; r++) {
		size_t i = (size_t)r * P + p;
		if (store_host_id(w->s, r) == h && gmark[topo_collective_group(w->t, r, dim)] &&
		    isfinite(w->l2.val[i]) && w->l2.base[i] > 0)
			x[k++] = w->l2.val[i] - w->l2.base[i] * out->theirs;
	}
	out->extra = median_or_nan(x, k);
}

/* The slow NIC of a node that is in half or more of its collectives' instances (a job of a
 * few nodes), where no instance stands out against the others (comm_cover). It slows the
 * node's side of the first collective across nodes the step runs after the fault, and the
 * others wait for it in the next one: the same two collectives, read in the other order,
 * are a node that arrives late. So the order comes from the phases' typical starts in the
 * step (store_phase_start); without starts, nothing is named. Per node, the communication
 * phases in step order with members on other nodes: the first where the node's own change
 * differs from its co-members' by ratio_high decides. The node's larger (by step_share of
 * the step) is a slow link, unless the others arrive later than before by half that extra
 * or more (they were late: the node waited). At most few_nodes nodes and no more than half
 * of the job's, on NODE_MAX nodes or fewer (beyond, comm_cover sees a node among many). */
int node_first_long(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes)
{
	uint32_t W = w->W, P = w->P, ord[256];
	double at[256];
	uint32_t nc = comm_order(w, ord, at);
	uint32_t hosts[NODE_MAX], nh = 0, slowp[NODE_MAX];
	double ratio[NODE_MAX];
	if (!nc)
		return 0;
	nh = job_hosts(w, hosts);
	if (nh < 2)
		return 0;
	uint8_t *gmark = malloc(W);
	double *x = malloc(4 * (size_t)W * sizeof(double)), st[256];
	double *arr = malloc((size_t)nc * W * sizeof(double));
	if (!gmark || !x || !arr) {
		free(gmark);
		free(x);
		free(arr);
		return -1;
	}
	for (uint32_t q = 0; q < P; q++)
		st[q] = phase_start(w, q);
	arrival_changes(w, st, at, nc, arr);
	const struct l2_config *cf = &w->cfg->l2;
	double floor_ms = cf->step_ms > 0 ? cf->step_share * cf->step_ms : cf->min_delta_ms;
	size_t nslow = 0;
	uint32_t slow[NODE_MAX];
	for (uint32_t j = 0; j < nh; j++) {
		for (uint32_t k = 0; k < nc; k++) {
			uint32_t p = ord[k];
			enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
			memset(gmark, 0, W);
			for (uint32_t r = 0; r < W; r++)
				if (store_host_id(w->s, r) == hosts[j])
					gmark[topo_collective_group(w->t, r, dim)] = 1;
			struct side sd;
			node_side(w, hosts[j], p, arr + (size_t)k * W, gmark, x, &sd);
			if (!isfinite(sd.mine) || !isfinite(sd.theirs) || !(sd.theirs > 0) || !(sd.mine > 0))
				continue; /* no members on other nodes: a NIC does not carry it */
			if (sd.mine > sd.theirs * cf->ratio_high && sd.extra > floor_ms) {
				if (!(sd.late * 2 >= sd.extra)) {
					slow[nslow] = hosts[j];
					slowp[nslow] = p;
					ratio[nslow++] = sd.mine / sd.theirs;
				}
				break;
			}
			if (sd.theirs > sd.mine * cf->ratio_high)
				break; /* the others stay longer first: the node arrives late */
		}
	}
	free(gmark);
	free(x);
	free(arr);
	return name_slow_nodes(w, kind, count, slow, slowp, ratio, nslow, nodes, few_nodes);
}

/* The median over iterations [a, b] of rank r's time from its iteration's start to the end
 * of its phases that start by `by` (st: each phase's typical start), NAN when the ring holds
 * none of them; tmp: scratch of b - a + 1 doubles. Absent phases count as 0. */
static double leave_at(const struct work *w, uint32_t r, uint32_t a, uint32_t b, const double *st, double by,
		       double *tmp)
{
	size_t n = 0;
	for (uint32_t it = a;; it++) { /* a <= b: the callers check it */
		const uint32_t *d = store_has_iter(w->s, r, it) ? store_slot_phases(w->s, r, it) : NULL;
		double sum = 0;
		for (uint32_t q = 0; d && q < w->P; q++)
			if (st[q] <= by && d[q] != STORE_ABSENT)
				sum += d[q] / 1000.0;
		if (d)
			tmp[n++] = sum;
		if (it == b)
			break;
	}
	return median_or_nan(tmp, n);
}

/* How much later than its co-members on other nodes node h's ranks leave the collectives
 * marked 3 in gmark (they hold h and another node): per instance, the median change of the
 * node's ranks' leave time less the others'; the median over instances, NAN when none. *z:
 * that against the spread of the ranks around their side's median in their instance (robust
 * z; infinite when nothing spreads). x: scratch of 4 * W doubles. */
static double node_leave_gap(const struct work *w, uint32_t h, enum topo_dim dim, const uint8_t *gmark,
			     const double *leave, double *x, double *z)
{
	uint32_t W = w->W;
	double *a = x, *b = x + W, *dg = x + 2 * W, *dev = x + 3 * W;
	size_t ng = 0, nd = 0;
	for (uint32_t g = 0; g < W; g++) {
		if (gmark[g] != 3)
			continue;
		size_t na = 0, nb = 0;
		for (uint32_t r = 0; r < W; r++) {
			if (topo_collective_group(w->t, r, dim) != g || !isfinite(leave[r]))
				continue;
			if (store_host_id(w->s, r) == h)
				a[na++] = leave[r];
			else
				b[nb++] = leave[r];
		}
		if (!na || !nb)
			continue;
		double ma = stats_median_inplace(a, na), mb = stats_median_inplace(b, nb);
		dg[ng++] = ma - mb;
		for (size_t i = 0; i < na; i++)
			dev[nd++] = fabs(a[i] - ma);
		for (size_t i = 0; i < nb; i++)
			dev[nd++] = fabs(b[i] - mb);
	}
	double d = median_or_nan(dg, ng), mad = 1.4826 * median_or_nan(dev, nd);
	*z = mad > 0 ? d / mad : (d > 0 ? INFINITY : 0);
	return d;
}

/* Ranks in the order of a key (instances of a collective, nodes): ranks sorted by key[r],
 * then by rank, for runs of equal keys */
struct keyed {
	uint64_t key;
	uint32_t r;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->r < y->r ? -1 : x->r > y->r;
}

/* Every rank's change (window less baseline) of the time it takes to leave each
 * communication phase: leave[k * W + r] for the k-th in step order (at[k]: its start;
 * st: every phase's start). One pass over each rank's iterations; tmp: scratch of
 * nc * max(window, baseline) doubles. */
static void leave_changes(const struct work *w, const double *st, const double *at, uint32_t nc, double *leave,
			  double *tmp)
{
	uint32_t W = w->W, P = w->P;
	uint32_t span[2][2] = {{w->first, w->last}, {w->bfirst, w->blast}};
	/* the phases in step order, and how many of them start by each collective's start
	 * (at[] ascends): one running sum a rank-iteration gives every leave time */
	uint32_t qs[256] = {0}, upto[256] = {0}; /* zeroed: cppcheck cannot see that q < P fills qs */
	for (uint32_t q = 0, j; q < P; q++) {
		for (j = q; j > 0 && st[qs[j - 1]] > st[q]; j--)
			qs[j] = qs[j - 1];
		qs[j] = q;
	}
	for (uint32_t k = 0, j = 0; k < nc; k++) {
		while (j < P && st[qs[j]] <= at[k])
			j++;
		upto[k] = j;
	}
	for (uint32_t r = 0; r < W; r++) {
		double med[2][256];
		for (int s = 0; s < 2; s++) {
			size_t n = 0, cap = span[s][1] - span[s][0] + 1;
			for (uint32_t it = span[s][0]; it <= span[s][1]; it++) {
				if (!store_has_iter(w->s, r, it))
					continue;
				const uint32_t *d = store_slot_phases(w->s, r, it);
				uint64_t sum = 0; /* microseconds: exact in any order */
				for (uint32_t k = 0, j = 0; k < nc; k++) {
					for (; j < upto[k]; j++)
						if (d[qs[j]] != STORE_ABSENT)
							sum += d[qs[j]];
					tmp[(size_t)k * cap + n] = (double)sum / 1000.0;
				}
				n++;
			}
			for (uint32_t k = 0; k < nc; k++)
				med[s][k] = median_or_nan(tmp + (size_t)k * cap, n);
		}
		for (uint32_t k = 0; k < nc; k++)
			leave[(size_t)k * W + r] = med[0][k] - med[1][k];
	}
}

/* Per communication phase k: each rank's leave-time change (leave[k * W + r]) less the
 * median of its collective instance's (when its node holds under half of the instance, so
 * that the median is the others'); per node the median of that over its ranks, against the
 * spread of it over all ranks (robust z). A node that leaves later by floor_ms and zmin
 * gets best[j] (the largest such gap), bestp[j] (its phase) and ratio[j]; one that leaves
 * earlier by floor_ms in any phase is early[j]. O(W) a phase after one sort per dimension. */
struct late_nodes {
	struct keyed *by_node;
	struct keyed *by_inst; /* TOPO_DIM_COUNT * W: per dimension, sorted at its first use (key
				  UINT64_MAX before) and kept for the next phase and pass */
	uint32_t *node, *bestp;
	double *dev, *x, *best, *ratio;
	double *nd; /* per node: the median of its ranks' changes in the phase at hand */
	uint8_t *early;
};

static void judge_leaves(struct work *w, const struct late_nodes *a, const uint32_t *ord, uint32_t nc,
			 const double *leave, double floor_ms, double zmin)
{
	uint32_t W = w->W, P = w->P;
	struct keyed *by_node = a->by_node;
	uint32_t *node = a->node, *bestp = a->bestp;
	double *dev = a->dev, *x = a->x, *best = a->best, *ratio = a->ratio;
	uint8_t *early = a->early;
	double *nd = a->nd;
	memset(best, 0, W * sizeof(double));
	memset(early, 0, W);
	for (uint32_t k = 0; k < nc; k++) {
		uint32_t p = ord[k];
		const double *lv = leave + (size_t)k * W;
		enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
		struct keyed *by_inst = a->by_inst + (size_t)dim * W;
		if (by_inst[0].key == UINT64_MAX) {
			for (uint32_t r = 0; r < W; r++)
				by_inst[r] = (struct keyed){
					(uint64_t)topo_collective_group(w->t, r, dim) << 32 | node[r], r};
			qsort(by_inst, W, sizeof(*by_inst), keyed_cmp);
		}
		/* each rank's change against its instance's median */
		for (uint32_t a = 0, b; a < W; a = b) {
			size_t n = 0;
			for (b = a; b < W && by_inst[b].key >> 32 == by_inst[a].key >> 32; b++)
				if (isfinite(lv[by_inst[b].r]))
					x[n++] = lv[by_inst[b].r];
			double m = median_or_nan(x, n);
			for (uint32_t c = a, e; c < b; c = e) {
				size_t mine = 0;
				for (e = c; e < b && by_inst[e].key == by_inst[c].key; e++)
					mine += isfinite(lv[by_inst[e].r]);
				for (uint32_t i = c; i < e; i++)
					dev[by_inst[i].r] = mine * 2 < n ? lv[by_inst[i].r] - m : NAN;
			}
		}
		size_t n = 0;
		for (uint32_t r = 0; r < W; r++)
			n += isfinite(dev[r]) != 0;
		if (n < 8)
			continue; /* no instance spans other nodes: a NIC does not carry it */
		/* per node; the spread over the ranks and the job's stay in the phase only when a
		 * node leaves later by the floor (most phases have none) */
		int late = 0;
		for (uint32_t a = 0, b; a < W; a = b) {
			size_t m = 0;
			for (b = a; b < W && by_node[b].key == by_node[a].key; b++)
				if (isfinite(dev[by_node[b].r]))
					x[m++] = dev[by_node[b].r];
			double d = median_or_nan(x, m);
			uint32_t j = node[by_node[a].r];
			nd[j] = d;
			if (d < -floor_ms)
				early[j] = 1;
			late |= d > floor_ms;
		}
		if (!late)
			continue;
		n = 0;
		for (uint32_t r = 0; r < W; r++)
			if (isfinite(dev[r]))
				x[n++] = dev[r];
		double mid = stats_median_inplace(x, n);
		for (size_t i = 0; i < n; i++)
			x[i] = fabs(x[i] - mid);
		double mad = 1.4826 * stats_median_inplace(x, n);
		n = 0;
		for (uint32_t r = 0; r < W; r++)
			if (isfinite(dev[r]) && isfinite(w->l2.val[(size_t)r * P + p]))
				x[n++] = w->l2.val[(size_t)r * P + p];
		double peer = median_or_nan(x, n);
		for (uint32_t a = 0, b; a < W; a = b) {
			for (b = a; b < W && by_node[b].key == by_node[a].key; b++)
				;
			uint32_t j = node[by_node[a].r];
			double d = nd[j];
			double z = mad > 0 ? d / mad : (d > 0 ? INFINITY : 0);
			if (d > floor_ms && z > zmin && d > best[j] && peer > 0) {
				best[j] = d;
				bestp[j] = p;
				ratio[j] = (peer + d) / peer;
			}
		}
	}
}

/* node_leaves_late on a job of more than NODE_MAX nodes. Per communication phase: each
 * rank's leave-time change less the median of its collective instance's (the node holding
 * under half of the instance, so that the median is the others'), and per node the median
 * of that over its ranks, against the spread of it over all ranks (robust z). A node that
 * leaves later by step_share of the step and subtle_z in one phase or more and earlier in
 * none is a slow link; at most few_nodes of them. O(W) a phase after a sort per dimension. */
static int leaves_late_many(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes,
			    const uint32_t *ord, const double *at, uint32_t nc, const double *st)
{
	uint32_t W = w->W;
	if (!W)
		return 0;
	uint32_t nwin = w->last - w->first + 1, nbase = w->blast - w->bfirst + 1;
	size_t cap = nwin > nbase ? nwin : nbase;
	struct keyed *by_node = malloc((size_t)W * sizeof(*by_node));
	struct keyed *by_inst = malloc((size_t)TOPO_DIM_COUNT * W * sizeof(*by_inst));
	double *leave = malloc((size_t)nc * W * sizeof(double)), *dev = malloc((size_t)W * sizeof(double));
	double *x = malloc(((size_t)W + nc * cap) * sizeof(double));
	uint32_t *node = malloc((size_t)W * sizeof(uint32_t)), *bestp = calloc(W, sizeof(uint32_t));
	double *best = calloc(W, sizeof(double)), *ratio = calloc(W, sizeof(double)); /* per node */
	double *nd = malloc((size_t)W * sizeof(double));
	uint8_t *early = calloc(W, 1);
	int rc = -1;
	if (!by_node || !by_inst || !leave || !dev || !x || !node || !bestp || !best || !ratio || !early || !nd)
		goto out;
	for (int d = 0; d < TOPO_DIM_COUNT; d++)
		by_inst[(size_t)d * W].key = UINT64_MAX; /* not sorted yet */
	/* the nodes, numbered 0..nn-1 in host order */
	for (uint32_t r = 0; r < W; r++)
		by_node[r] = (struct keyed){store_host_id(w->s, r), r};
	qsort(by_node, W, sizeof(*by_node), keyed_cmp);
	for (uint32_t i = 0, nn = 0; i < W; i++) {
		if (i && by_node[i].key != by_node[i - 1].key)
			nn++;
		node[by_node[i].r] = nn;
	}
	const struct l2_config *cf = &w->cfg->l2;
	double floor_ms = cf->step_ms > 0 ? cf->step_share * cf->step_ms : cf->min_delta_ms;
	struct late_nodes ln = {by_node, by_inst, node, bestp, dev, x, best, ratio, nd, early};
	/* first on a stand-in at half the floor and z (the change of each phase's window
	 * median over its baseline one, summed up to the collective's end): the exact changes
	 * (medians over iterations of each iteration's sum, a read of every rank-iteration)
	 * only when a node with a rank not yet a culprit might leave late (the rank of a
	 * compute fault leaves late too, but is named already) */
	arrival_changes(w, st, at, nc, leave); /* plus each collective's own change */
	for (uint32_t k = 0; k < nc; k++)
		for (uint32_t r = 0; r < W; r++) {
			size_t i = (size_t)r * w->P + ord[k];
			double v = w->l2.val[i], b = w->l2.base[i];
			if (isfinite(v) && isfinite(b))
				leave[(size_t)k * W + r] += v - b;
		}
	judge_leaves(w, &ln, ord, nc, leave, floor_ms / 2, cf->subtle_z / 2);
	int maybe = 0;
	for (uint32_t r = 0; r < W && !maybe; r++)
		maybe = kind[r] == FK_NONE && best[node[r]] > 0;
	if (!maybe) {
		rc = 0;
		goto out;
	}
	leave_changes(w, st, at, nc, leave, x);
	judge_leaves(w, &ln, ord, nc, leave, floor_ms, cf->subtle_z);
	uint32_t slow[NODE_MAX], slowp[NODE_MAX];
	double sratio[NODE_MAX];
	size_t nslow = 0;
	for (uint32_t a = 0, b; a < W; a = b) {
		for (b = a; b < W && by_node[b].key == by_node[a].key; b++)
			;
		uint32_t j = node[by_node[a].r];
		if (!(best[j] > 0) || early[j])
			continue;
		if (nslow == NODE_MAX) {
			nslow = 0; /* more than a few: no node's fault */
			break;
		}
		slow[nslow] = (uint32_t)by_node[a].key;
		slowp[nslow] = bestp[j];
		sratio[nslow++] = ratio[j];
	}
	rc = name_slow_nodes(w, kind, count, slow, slowp, sratio, nslow, nodes, few_nodes);
out:
	free(best);
	free(nd);
	free(ratio);
	free(bestp);
	free(early);
	free(by_node);
	free(by_inst);
	free(leave);
	free(dev);
	free(x);
	free(node);
	return rc;
}

/* A slow NIC on a job of a few nodes while a compute fault holds the window (two faults at
 * once; docs/method.md, "A slow NIC beside a compute fault"). Every member of a collective
 * instance leaves it at the last arrival plus its own transfer, so the time from the step's
 * start to the end of the collective is the same for all members but for their transfers:
 * a slow GPU makes everyone wait alike (it arrives last and leaves with the others), a slow
 * NIC makes its own ranks leave later. Per node and communication phase with members on
 * other nodes: the median change (window over baseline) of the node's ranks' leave time
 * against their co-members' on other nodes. A node that leaves later by step_share of the
 * step in one phase or more and earlier in none is a slow link; at most few_nodes of them
 * and no more than half of the job's. Without phase starts (no step order) nothing is named. */
int node_leaves_late(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes)
{
	uint32_t W = w->W, P = w->P, ord[256];
	double at[256], st[256];
	uint32_t nc = comm_order(w, ord, at);
	uint32_t hosts[NODE_MAX], nh = 0, slowp[NODE_MAX];
	double ratio[NODE_MAX], best[NODE_MAX];
	int early[NODE_MAX];
	if (!nc || w->blast < w->bfirst || w->last < w->first)
		return 0;
	for (uint32_t q = 0; q < P; q++) {
		st[q] = phase_start(w, q);
		if (st[q] < 0)
			return 0; /* a phase with no place in the step: leave times are incomplete */
	}
	nh = job_hosts(w, hosts);
	if (!nh)
		return leaves_late_many(w, kind, count, nodes, few_nodes, ord, at, nc, st);
	if (nh < 2)
		return 0;
	uint32_t nwin = w->last - w->first + 1, nbase = w->blast - w->bfirst + 1;
	size_t ntmp = (nwin > nbase ? nwin : nbase) + 4 * (size_t)W;
	double *leave = malloc((size_t)W * sizeof(double)), *tmp = malloc(ntmp * sizeof(double));
	uint8_t *gmark = malloc(W);
	if (!leave || !tmp || !gmark) {
		free(leave);
		free(tmp);
		free(gmark);
		return -1;
	}
	const struct l2_config *cf = &w->cfg->l2;
	double floor_ms = cf->step_ms > 0 ? cf->step_share * cf->step_ms : cf->min_delta_ms;
	for (uint32_t j = 0; j < nh; j++) {
		best[j] = 0;
		early[j] = 0;
	}
	for (uint32_t k = 0; k < nc; k++) {
		uint32_t p = ord[k];
		enum topo_dim dim = l2_collective_dim(store_phase_group(w->s, p));
		for (uint32_t r = 0; r < W; r++)
			leave[r] = leave_at(w, r, w->first, w->last, st, at[k], tmp) -
				   leave_at(w, r, w->bfirst, w->blast, st, at[k], tmp);
		for (uint32_t j = 0; j < nh; j++) {
			/* the node's instances: 1 holds the node, 3 also a rank of another node */
			memset(gmark, 0, W);
			for (uint32_t r = 0; r < W; r++)
				if (store_host_id(w->s, r) == hosts[j])
					gmark[topo_collective_group(w->t, r, dim)] |= 1;
			for (uint32_t r = 0; r < W; r++) {
				uint32_t g = topo_collective_group(w->t, r, dim);
				if (gmark[g] && store_host_id(w->s, r) != hosts[j])
					gmark[g] |= 2;
			}
			double z, d = node_leave_gap(w, hosts[j], dim, gmark, leave, tmp, &z);
			if (!isfinite(d))
				continue; /* no members on other nodes: a NIC does not carry it */
			if (d < -floor_ms)
				early[j] = 1;
			if (!(d > floor_ms && z > cf->subtle_z && d > best[j]))
				continue;
			/* the evidence: the node's stay as long as its co-members' plus its extra */
			double *vt = tmp;
			size_t nt = 0;
			for (uint32_t r = 0; r < W; r++) {
				size_t i = (size_t)r * P + p;
				if (gmark[topo_collective_group(w->t, r, dim)] == 3 &&
				    store_host_id(w->s, r) != hosts[j] && isfinite(w->l2.val[i]))
					vt[nt++] = w->l2.val[i];
			}
			double peer = median_or_nan(vt, nt);
			best[j] = d;
			slowp[j] = p;
			ratio[j] = peer > 0 ? (peer + d) / peer : NAN;
		}
	}
	free(leave);
	free(tmp);
	free(gmark);
	size_t nslow = 0;
	uint32_t slow[NODE_MAX];
	for (uint32_t j = 0; j < nh; j++)
		if (best[j] > 0 && !early[j] && isfinite(ratio[j])) {
			slow[nslow] = hosts[j];
			slowp[nslow] = slowp[j];
			ratio[nslow++] = ratio[j];
		}
	return name_slow_nodes(w, kind, count, slow, slowp, ratio, nslow, nodes, few_nodes);
}
