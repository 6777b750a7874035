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

int links_locate(struct work *w, struct faults *f, size_t few_nodes)
{
	if (!w->l2.has_base || w->blast < w->bfirst)
		return 0;
	uint32_t W = w->W, P = w->P;
	size_t cells = (size_t)W * P;
	float *now = malloc(cells * sizeof(float)), *before = malloc(cells * sizeof(float));
	uint8_t *dim = malloc(P + 1), *dim_b = malloc(P + 1);
	uint32_t *hid = malloc(W * sizeof(uint32_t)), *key = malloc(W * sizeof(uint32_t));
	uint32_t *slot = malloc(W * sizeof(uint32_t)); /* a group's instance, per phase */
	double *imax = malloc(2 * (size_t)W * sizeof(double));
	struct inst *in = NULL;
	struct pair *pairs = NULL;
	size_t ninst = 0, icap = 0, npairs = 0, pcap = 0;
	uint32_t *slow_in = NULL, *all_in = NULL;
	uint8_t *covered = NULL, *named = NULL;
	int rc = -1;
	if (!now || !before || !dim || !dim_b || !hid || !key || !slot || !imax)
		goto out;
	struct replay_input rw = {w->s, w->first, w->last, 1, 0, NULL};
	struct replay_input rb = {w->s, w->bfirst, w->blast, 1, 0, NULL};
	if (replay_transfers(&rw, now, dim) < 0 || replay_transfers(&rb, before, dim_b) < 0)
		goto out;
	uint32_t nodes = dense_hosts(w, hid, key);
	double floor = w->cfg->l2.step_ms > 0 ? w->cfg->l2.step_share * w->cfg->l2.step_ms : w->cfg->l2.min_delta_ms;
	for (uint32_t p = 0; p < P && nodes >= 2; p++) {
		if (w->kind[p] != RECORD_KIND_COMM || dim[p] != dim_b[p])
			continue;
		if (dim[p] == TOPO_PP && w->t->pp > 1) {
			/* hops: rank r at its stage and the rank of the next stage of its pipeline */
			for (uint32_t r = 0; r < W; r++) {
				struct topo_coords c = topo_coords(w->t, r);
				if (c.pp + 1 >= w->t->pp)
					continue;
				c.pp++;
				uint32_t q = topo_rank(w->t, &c);
				size_t a = (size_t)r * P + p, b = (size_t)q * P + p;
				if (hid[r] == hid[q] || !(before[a] > 0) || !(before[b] > 0) || now[a] != now[a] ||
				    now[b] != now[b])
					continue;
				if (grow(&in, ninst, &icap, &pairs, npairs, &pcap) < 0)
					goto out;
				double grew = fmin(now[a] / before[a], now[b] / before[b]);
				double more = fmin(now[a] - before[a], now[b] - before[b]);
				in[ninst] = (struct inst){p, r, grew > LINKS_GROWTH && more > floor};
				pairs[npairs++] = (struct pair){(uint32_t)ninst, hid[r]};
				pairs[npairs++] = (struct pair){(uint32_t)ninst, hid[q]};
				ninst++;
			}
			continue;
		}
		/* each group's largest transfer now and before, and its members' nodes */
		size_t p0 = npairs;
		for (uint32_t g = 0; g < W; g++)
			imax[g] = imax[W + g] = -1, slot[g] = UINT32_MAX;
		for (uint32_t r = 0; r < W; r++) {
			size_t c = (size_t)r * P + p;
			uint32_t g = group_of(w, r, dim[p]) % W;
			if (now[c] == now[c] && now[c] > imax[g])
				imax[g] = now[c];
			if (before[c] == before[c] && before[c] > imax[W + g])
				imax[W + g] = before[c];
			if (npairs == pcap) {
				size_t nc = pcap ? 2 * pcap : 1024;
				struct pair *t = realloc(pairs, nc * sizeof(*pairs));
				if (!t)
					goto out;
				pairs = t;
				pcap = nc;
			}
			pairs[npairs++] = (struct pair){g, hid[r]};
		}
		/* the instances on two nodes or more, each slow or not; their pairs renumbered */
		qsort(pairs + p0, npairs - p0, sizeof(*pairs), pair_cmp);
		size_t o = p0;
		for (size_t i = p0; i < npairs;) {
			size_t j = i;
			while (j < npairs && pairs[j].inst == pairs[i].inst)
				j++;
			uint32_t g = pairs[i].inst;
			int multi = pairs[j - 1].node != pairs[i].node;
			if (multi && imax[g] >= 0 && imax[W + g] > 0) {
				if (ninst == icap) {
					size_t nc = icap ? 2 * icap : 256;
					struct inst *t = realloc(in, nc * sizeof(*in));
					if (!t)
						goto out;
					in = t;
					icap = nc;
				}
				double grew = imax[g] / imax[W + g];
				in[ninst] = (struct inst){p, g, grew > LINKS_GROWTH && imax[g] - imax[W + g] > floor};
				for (size_t k = i; k < j; k++) /* distinct nodes */
					if (k == i || pairs[k].node != pairs[k - 1].node)
						pairs[o++] = (struct pair){(uint32_t)ninst, pairs[k].node};
				ninst++;
			}
			i = j;
		}
		npairs = o;
	}
	rc = 0;
	slow_in = calloc(nodes + 1, sizeof(uint32_t));
	all_in = calloc(nodes + 1, sizeof(uint32_t));
	covered = calloc(ninst + 1, 1);
	named = calloc(nodes + 1, 1);
	if (!slow_in || !all_in || !covered || !named) {
		rc = -1;
		goto out;
	}
	for (size_t k = 0; k < npairs; k++)
		all_in[pairs[k].node]++;
	/* greedily, the node in the most slow instances not yet covered, when it is in nine
	 * tenths of them or more, in half of its own instances or more, and no other node is in
	 * as many */
	size_t nnamed = 0;
	while (nnamed < few_nodes && nnamed < LINKS_MAX_NODES) {
		memset(slow_in, 0, nodes * sizeof(uint32_t));
		uint32_t left = 0;
		for (size_t i = 0; i < ninst; i++)
			left += in[i].slow && !covered[i];
		for (size_t k = 0; k < npairs; k++)
			slow_in[pairs[k].node] += in[pairs[k].inst].slow && !covered[pairs[k].inst];
		if (left < 2)
			break;
		uint32_t best = 0;
		for (uint32_t h = 1; h < nodes; h++)
			if (slow_in[h] > slow_in[best])
				best = h;
		int tie = 0;
		for (uint32_t h = 0; h < nodes; h++)
			tie |= h != best && slow_in[h] == slow_in[best];
		if (tie || named[best] || slow_in[best] * 10 < left * 9 || slow_in[best] * 2 < all_in[best])
			break;
		named[best] = 1;
		nnamed++;
		for (size_t k = 0; k < npairs; k++)
			if (pairs[k].node == best)
				covered[pairs[k].inst] = 1;
	}
	/* the named nodes' ranks without a fault of their own are communication culprits, the
	 * phase whose transfer grew most shown against their own past; communication culprits on
	 * other nodes only waited for them */
	for (uint32_t r = 0; r < W && nnamed && nnamed * 2 <= nodes; r++) {
		if (!named[hid[r]] && f->kind[r] == FK_COMM) {
			f->kind[r] = FK_NONE;
			f->count[FK_COMM]--;
			f->count[FK_NONE]++;
		}
		if (!named[hid[r]] || f->kind[r] != FK_NONE)
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
out:
	free(now);
	free(before);
	free(dim);
	free(dim_b);
	free(hid);
	free(key);
	free(slot);
	free(imax);
	free(in);
	free(pairs);
	free(slow_in);
	free(all_in);
	free(covered);
	free(named);
	return rc;
}
