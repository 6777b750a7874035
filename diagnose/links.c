/* links.c: a slow NIC located as the node common to the collectives that slowed
 * (docs/method.md, "A slow link"). A collective instance's members leave it at its last
 * arrival plus their transfer; the replay (replay.h) takes each member's transfer from the
 * records, the stay less the wait. A NIC slows the transfers of every collective across
 * nodes that its node is in: its own ranks', and, where the collective runs at its slowest
 * link (a ring, a pipeline hop), every member's. Waiting does not enter a transfer, so a
 * compute fault elsewhere in the window, which makes everyone wait, does not hide it, and
 * the ranks that wait longest are not named for it.
 *
 * Per communication phase and instance across nodes: its transfer (the largest of its
 * members', the mean over the window) against its own before the window. An instance slowed
 * by LINKS_GROWTH and by step_share of the step is slow. A pipeline's instances are its hops,
 * a stage and the next one (a rank's send and receive are one phase, so a hop is slow when
 * both its ends' transfers grew): a NIC slows the two hops of its stage, each of its
 * neighbours one. The node in every slow instance, or
 * all but a tenth of them, in half or more of its own instances, and the only such node, is
 * a slow link's; greedily, as a cover, up to few_nodes nodes. Its ranks are communication
 * culprits; the replay judges them after (judge.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "diagnose.h"
#include "replay.h"
#include "stats.h"
#include "work.h"

#define LINKS_GROWTH 1.25
#define LINKS_MAX_NODES 8

struct inst {
	uint32_t phase, group;
	int slow;
};

/* the node number of each rank (dense, by host id) into hid; returns the node count */
static uint32_t dense_hosts(const struct work *w, uint32_t *hid, uint32_t *key)
{
	uint32_t n = 0;
	for (uint32_t r = 0; r < w->W; r++) {
		uint32_t h = store_host_id(w->s, r), j = 0;
		while (j < n && key[j] != h)
			j++;
		if (j == n)
			key[n++] = h;
		hid[r] = j;
	}
	return n;
}

/* the group of rank r for a collective of dimension dim (REPLAY_JOB_DIM: one for the job) */
static uint32_t group_of(const struct work *w, uint32_t r, uint8_t dim)
{
	return dim == REPLAY_JOB_DIM ? 0 : topo_collective_group(w->t, r, (enum topo_dim)dim);
}

/* a (instance, node) pair: the node holds a member of the instance */
struct pair {
	uint32_t inst, node;
};

/* room for one more instance and one more pair; -1 when out of memory */
static int grow(struct inst **in, size_t n, size_t *icap, struct pair **pairs, size_t np, size_t *pcap)
{
	if (n == *icap) {
		size_t nc = *icap ? 2 * *icap : 256;
		struct inst *t = realloc(*in, nc * sizeof(**in));
		if (!t)
			return -1;
		*in = t;
		*icap = nc;
	}
	if (np + 2 > *pcap) {
		size_t nc = *pcap ? 2 * *pcap : 1024;
		struct pair *t = realloc(*pairs, nc * sizeof(**pairs));
		if (!t)
			return -1;
		*pairs = t;
		*pcap = nc;
	}
	return 0;
}

static int pair_cmp(const void *a, const void *b)
{
	const struct pair *x = a, *y = b;
	if (x->inst != y->inst)
		return x->inst < y->inst ? -1 : 1;
	return (x->node > y->node) - (x->node < y->node);
}

/* One location's state, shared by its steps: the ranks' transfers now and before, the
 * instances across nodes with their (instance, node) pairs, and the nodes named. */
struct links {
	uint32_t W, P, nodes;
	float *now, *before;  /* [rank * P + phase] the mean transfer (replay_transfers) */
	uint8_t *dim, *dim_b; /* [phase] its collective's dimension, now and before */
	uint32_t *hid, *key;  /* [rank] its node; scratch of dense_hosts */
	double *imax;         /* [group], [W + group]: its largest transfer now, before */
	double floor;         /* the least growth (ms) of a slow instance */
	struct inst *in;
	struct pair *pairs;
	size_t ninst, icap, npairs, pcap;
	uint32_t *slow_in, *all_in; /* [node] its slow instances not yet covered, all its instances */
	uint8_t *covered, *named;   /* [instance] covered by a named node; [node] named */
};

static void links_free(struct links *k)
{
	free(k->now);
	free(k->before);
	free(k->dim);
	free(k->dim_b);
	free(k->hid);
	free(k->key);
	free(k->imax);
	free(k->in);
	free(k->pairs);
	free(k->slow_in);
	free(k->all_in);
	free(k->covered);
	free(k->named);
}

/* Each rank's transfers in the window and the baseline, and its node; -1 when out of memory
 * or when the replay fails. */
static int gather_transfers(struct work *w, struct links *k)
{
	size_t cells = (size_t)k->W * k->P;
	k->now = malloc(cells * sizeof(float));
	k->before = malloc(cells * sizeof(float));
	k->dim = malloc(k->P + 1);
	k->dim_b = malloc(k->P + 1);
	k->hid = malloc(k->W * sizeof(uint32_t));
	k->key = malloc(k->W * sizeof(uint32_t));
	k->imax = malloc(2 * (size_t)k->W * sizeof(double));
	if (!k->now || !k->before || !k->dim || !k->dim_b || !k->hid || !k->key || !k->imax)
		return -1;
	struct replay_input rw = {w->s, w->first, w->last, 1, 0, NULL};
	struct replay_input rb = {w->s, w->bfirst, w->blast, 1, 0, NULL};
	if (replay_transfers(&rw, k->now, k->dim) < 0 || replay_transfers(&rb, k->before, k->dim_b) < 0)
		return -1;
	k->nodes = dense_hosts(w, k->hid, k->key);
	return 0;
}

/* The hops of pipeline phase p across nodes, rank r at its stage and the rank of the next
 * stage of its pipeline, each slow when both its ends' transfers grew; -1 when out of
 * memory. */
static int hop_instances(struct work *w, struct links *k, uint32_t p)
{
	uint32_t P = k->P;
	const float *now = k->now, *before = k->before;
	for (uint32_t r = 0; r < k->W; r++) {
		struct topo_coords c = topo_coords(w->t, r);
		if (c.pp + 1 >= w->t->pp)
			continue;
		c.pp++;
		uint32_t q = topo_rank(w->t, &c);
		size_t a = (size_t)r * P + p, b = (size_t)q * P + p;
		if (k->hid[r] == k->hid[q] || !(before[a] > 0) || !(before[b] > 0) || now[a] != now[a] ||
		    now[b] != now[b])
			continue;
		if (grow(&k->in, k->ninst, &k->icap, &k->pairs, k->npairs, &k->pcap) < 0)
			return -1;
		double grew = fmin(now[a] / before[a], now[b] / before[b]);
		double more = fmin(now[a] - before[a], now[b] - before[b]);
		k->in[k->ninst] = (struct inst){p, r, grew > LINKS_GROWTH && more > k->floor};
		k->pairs[k->npairs++] = (struct pair){(uint32_t)k->ninst, k->hid[r]};
		k->pairs[k->npairs++] = (struct pair){(uint32_t)k->ninst, k->hid[q]};
		k->ninst++;
	}
	return 0;
}

/* The collective groups of phase p on two nodes or more, each slow when its largest
 * transfer grew, with their nodes; -1 when out of memory. */
static int group_instances(struct work *w, struct links *k, uint32_t p)
{
	uint32_t W = k->W, P = k->P;
	double *imax = k->imax;
	/* each group's largest transfer now and before, and its members' nodes */
	size_t p0 = k->npairs;
	for (uint32_t g = 0; g < W; g++)
		imax[g] = imax[W + g] = -1;
	for (uint32_t r = 0; r < W; r++) {
		size_t c = (size_t)r * P + p;
		uint32_t g = group_of(w, r, k->dim[p]) % W;
		if (k->now[c] == k->now[c] && k->now[c] > imax[g])
			imax[g] = k->now[c];
		if (k->before[c] == k->before[c] && k->before[c] > imax[W + g])
			imax[W + g] = k->before[c];
		if (k->npairs == k->pcap) {
			size_t nc = k->pcap ? 2 * k->pcap : 1024;
			struct pair *t = realloc(k->pairs, nc * sizeof(*k->pairs));
			if (!t)
				return -1;
			k->pairs = t;
			k->pcap = nc;
		}
		k->pairs[k->npairs++] = (struct pair){g, k->hid[r]};
	}
	/* the instances on two nodes or more, each slow or not; their pairs renumbered */
	struct pair *pairs = k->pairs;
	qsort(pairs + p0, k->npairs - p0, sizeof(*pairs), pair_cmp);
	size_t o = p0;
	for (size_t i = p0; i < k->npairs;) {
		size_t j = i;
		while (j < k->npairs && pairs[j].inst == pairs[i].inst)
			j++;
		uint32_t g = pairs[i].inst;
		int multi = pairs[j - 1].node != pairs[i].node;
		if (multi && imax[g] >= 0 && imax[W + g] > 0) {
			if (k->ninst == k->icap) {
				size_t nc = k->icap ? 2 * k->icap : 256;
				struct inst *t = realloc(k->in, nc * sizeof(*k->in));
				if (!t)
					return -1;
				k->in = t;
				k->icap = nc;
			}
			double grew = imax[g] / imax[W + g];
			k->in[k->ninst] = (struct inst){p, g, grew > LINKS_GROWTH && imax[g] - imax[W + g] > k->floor};
			for (size_t m = i; m < j; m++) /* distinct nodes */
				if (m == i || pairs[m].node != pairs[m - 1].node)
					pairs[o++] = (struct pair){(uint32_t)k->ninst, pairs[m].node};
			k->ninst++;
		}
		i = j;
	}
	k->npairs = o;
	return 0;
}

/* Whether node a is ahead of node b: in more slow instances not yet covered, or in as
 * many and a larger share of its own instances slow. Two nodes alone at the ends of the slow
 * hops (a node that is one pipeline stage and the one before it) are told apart by their
 * other instances: a slow NIC slows every instance of its node, so the node whose other
 * hops kept their pace is not the one. */
static int ahead(const struct links *k, uint32_t a, uint32_t b)
{
	if (k->slow_in[a] != k->slow_in[b])
		return k->slow_in[a] > k->slow_in[b];
	return (uint64_t)k->slow_in[a] * k->all_in[b] > (uint64_t)k->slow_in[b] * k->all_in[a];
}

/* Greedily, the node ahead of every other (ahead()), when it is in nine tenths of the slow
 * instances not yet covered or more and in half of its own instances or more, into
 * k->named; returns how many, -1 when out of memory. */
static int cover_nodes(struct links *k, size_t few_nodes)
{
	uint32_t nodes = k->nodes;
	k->slow_in = calloc(nodes + 1, sizeof(uint32_t));
	k->all_in = calloc(nodes + 1, sizeof(uint32_t));
	k->covered = calloc(k->ninst + 1, 1);
	k->named = calloc(nodes + 1, 1);
	if (!k->slow_in || !k->all_in || !k->covered || !k->named)
		return -1;
	const struct pair *pairs = k->pairs;
	for (size_t m = 0; m < k->npairs; m++)
		k->all_in[pairs[m].node]++;
	int nnamed = 0;
	while ((size_t)nnamed < few_nodes && nnamed < LINKS_MAX_NODES) {
		uint32_t *slow_in = k->slow_in;
		memset(slow_in, 0, nodes * sizeof(uint32_t));
		uint32_t left = 0;
		for (size_t i = 0; i < k->ninst; i++)
			left += k->in[i].slow && !k->covered[i];
		for (size_t m = 0; m < k->npairs; m++)
			slow_in[pairs[m].node] += k->in[pairs[m].inst].slow && !k->covered[pairs[m].inst];
		if (left < 2)
			break;
		uint32_t best = 0;
		for (uint32_t h = 1; h < nodes; h++)
			if (ahead(k, h, best))
				best = h;
		int tie = 0;
		for (uint32_t h = 0; h < nodes; h++)
			tie |= h != best && !ahead(k, best, h);
		if (tie || k->named[best] || slow_in[best] * 10 < left * 9 || slow_in[best] * 2 < k->all_in[best])
			break;
		k->named[best] = 1;
		nnamed++;
		for (size_t m = 0; m < k->npairs; m++)
			if (pairs[m].node == best)
				k->covered[pairs[m].inst] = 1;
	}
	return nnamed;
}

/* The named nodes' ranks without a fault of their own are communication culprits, the
 * phase whose transfer grew most shown against their own past; communication culprits on
 * other nodes only waited for them. */
static void name_culprits(struct work *w, struct faults *f, const struct links *k, size_t nnamed)
{
	uint32_t P = k->P;
	const float *now = k->now, *before = k->before;
	for (uint32_t r = 0; r < k->W && nnamed && nnamed * 2 <= k->nodes; r++) {
		if (!k->named[k->hid[r]] && f->kind[r] == FK_COMM) {
			f->kind[r] = FK_NONE;
			f->count[FK_COMM]--;
			f->count[FK_NONE]++;
		}
		if (!k->named[k->hid[r]] || f->kind[r] != FK_NONE)
			continue;
		uint32_t top = UINT32_MAX;
		double most = 0;
		for (uint32_t p = 0; p < P; p++) {
			size_t c = (size_t)r * P + p;
			if (w->kind[p] == RECORD_KIND_COMM && before[c] > 0 && now[c] / before[c] > most)
				most = now[c] / before[c], top = p;
		}
		if (top == UINT32_MAX)
			continue;
		size_t c = (size_t)r * P + top;
		w->l2.flag[c] |= L2_HIGH | L2_FALLBACK;
		w->l2.ratio[c] = (float)most;
		f->kind[r] = FK_COMM;
		f->count[FK_NONE]--;
		f->count[FK_COMM]++;
	}
}

int links_locate(struct work *w, struct faults *f, size_t few_nodes)
{
	if (!w->l2.has_base || w->blast < w->bfirst)
		return 0;
	struct links k = {0};
	k.W = w->W;
	k.P = w->P;
	k.floor = w->cfg->l2.step_ms > 0 ? w->cfg->l2.step_share * w->cfg->l2.step_ms : w->cfg->l2.min_delta_ms;
	int rc = -1;
	if (gather_transfers(w, &k) < 0)
		goto out;
	for (uint32_t p = 0; p < k.P && k.nodes >= 2; p++) {
		if (w->kind[p] != RECORD_KIND_COMM || k.dim[p] != k.dim_b[p])
			continue;
		int hops = k.dim[p] == TOPO_PP && w->t->pp > 1;
		if ((hops ? hop_instances(w, &k, p) : group_instances(w, &k, p)) < 0)
			goto out;
	}
	int nnamed = cover_nodes(&k, few_nodes);
	if (nnamed < 0)
		goto out;
	name_culprits(w, f, &k, (size_t)nnamed);
	rc = 0;
out:
	links_free(&k);
	return rc;
}
