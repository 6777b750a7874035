/* topo.c: rank <-> coordinates for Megatron rank orders, with EP carved out of DP. */
#include "topo.h"

#include <stdio.h>
#include <string.h>

static const char *const dim_names[TOPO_DIM_COUNT] = {"tp", "cp", "ep", "dp", "pp"};

static int fail(char *err, size_t errlen, const char *msg, const char *arg)
{
	if (err && errlen)
		snprintf(err, errlen, "%s%s%s", msg, arg ? ": " : "", arg ? arg : "");
	return -1;
}

int topo_equal(const struct topo *a, const struct topo *b)
{
	if (a->world != b->world || a->tp != b->tp || a->cp != b->cp || a->pp != b->pp || a->dp != b->dp ||
	    a->ep != b->ep || a->gpus_per_node != b->gpus_per_node || a->ndims != b->ndims ||
	    a->ep_in_order != b->ep_in_order)
		return 0;
	for (int d = 0; d < TOPO_DIM_COUNT; d++)
		if (a->order[d] != b->order[d] || a->size[d] != b->size[d] || a->stride[d] != b->stride[d])
			return 0;
	return 1;
}

int topo_init(struct topo *t, uint32_t world, uint32_t tp, uint32_t cp, uint32_t pp, uint32_t dp, uint32_t ep,
	      const char *order, uint32_t gpus_per_node, char *err, size_t errlen)
{
	memset(t, 0, sizeof(*t));
	if (!tp || !cp || !pp || !dp)
		return fail(err, errlen, "tp, cp, pp and dp must be at least 1", NULL);
	if (!ep)
		ep = 1;
	if ((uint64_t)tp * cp * pp * dp != world)
		return fail(err, errlen, "world is not tp * cp * pp * dp", NULL);
	if (dp % ep)
		return fail(err, errlen, "ep does not divide dp", NULL);
	t->world = world;
	t->tp = tp;
	t->cp = cp;
	t->pp = pp;
	t->dp = dp;
	t->ep = ep;
	t->gpus_per_node = gpus_per_node ? gpus_per_node : 8;
	if (!order || !*order)
		order = "tp-cp-ep-dp-pp";

	char buf[64];
	if (strlen(order) >= sizeof(buf))
		return fail(err, errlen, "order too long", order);
	strcpy(buf, order);
	int seen[TOPO_DIM_COUNT] = {0};
	char *save = NULL;
	for (char *tok = strtok_r(buf, "-", &save); tok; tok = strtok_r(NULL, "-", &save)) {
		int d = -1;
		for (int i = 0; i < TOPO_DIM_COUNT; i++)
			if (strcmp(tok, dim_names[i]) == 0)
				d = i;
		if (d < 0)
			return fail(err, errlen, "unknown dimension in order", tok);
		if (seen[d])
			return fail(err, errlen, "repeated dimension in order", tok);
		seen[d] = 1;
		t->order[t->ndims++] = (uint8_t)d;
	}
	uint32_t full[TOPO_DIM_COUNT] = {tp, cp, ep, dp, pp};
	for (int d = 0; d < TOPO_DIM_COUNT; d++) {
		if (d == TOPO_EP)
			continue;
		if (!seen[d] && full[d] > 1)
			return fail(err, errlen, "order misses a dimension of size > 1", dim_names[d]);
	}
	t->ep_in_order = (uint32_t)seen[TOPO_EP];
	uint32_t stride = 1;
	for (uint32_t i = 0; i < t->ndims; i++) {
		uint32_t s = full[t->order[i]];
		if (t->order[i] == TOPO_DP && seen[TOPO_EP])
			s = dp / ep;
		t->size[i] = s;
		t->stride[i] = stride;
		stride *= s;
	}
	return 0;
}

struct topo_coords topo_coords(const struct topo *t, uint32_t rank)
{
	struct topo_coords c = {0, 0, 0, 0, 0};
	uint32_t v[TOPO_DIM_COUNT] = {0};
	/* the rank's digits in the sizes, fastest first: one division a dimension (its quotient
	 * and remainder at once), none for one of size 1 */
	uint32_t r = rank;
	for (uint32_t i = 0; i < t->ndims; i++) {
		uint32_t s = t->size[i];
		if (s > 1) {
			v[t->order[i]] = r % s;
			r /= s;
		}
	}
	c.tp = v[TOPO_TP];
	c.cp = v[TOPO_CP];
	c.pp = v[TOPO_PP];
	if (t->ep_in_order) {
		c.dp = v[TOPO_DP] * t->ep + v[TOPO_EP];
		c.ep = v[TOPO_EP];
		return c;
	}
	c.dp = v[TOPO_DP];
	c.ep = c.dp % t->ep;
	return c;
}

uint32_t topo_rank(const struct topo *t, const struct topo_coords *c)
{
	uint32_t v[TOPO_DIM_COUNT] = {c->tp, c->cp, 0, c->dp, c->pp};
	if (t->ep_in_order) {
		v[TOPO_EP] = c->dp % t->ep;
		v[TOPO_DP] = c->dp / t->ep;
	}
	uint32_t r = 0;
	for (uint32_t i = 0; i < t->ndims; i++)
		r += v[t->order[i]] * t->stride[i];
	return r;
}

uint32_t topo_node(const struct topo *t, uint32_t rank) { return rank / t->gpus_per_node; }

uint32_t topo_role_group_count(const struct topo *t) { return t->pp * t->cp * t->tp; }

uint32_t topo_role_group(const struct topo *t, uint32_t rank)
{
	struct topo_coords c = topo_coords(t, rank);
	return (c.pp * t->cp + c.cp) * t->tp + c.tp;
}

uint32_t topo_ep_group_count(const struct topo *t) { return topo_role_group_count(t) * (t->dp / t->ep); }

uint32_t topo_ep_group(const struct topo *t, uint32_t rank)
{
	struct topo_coords c = topo_coords(t, rank);
	return ((c.pp * t->cp + c.cp) * t->tp + c.tp) * (t->dp / t->ep) + c.dp / t->ep;
}

uint32_t topo_pp_chain_count(const struct topo *t) { return t->dp * t->cp * t->tp; }

uint32_t topo_pp_chain(const struct topo *t, uint32_t rank)
{
	struct topo_coords c = topo_coords(t, rank);
	return (c.dp * t->cp + c.cp) * t->tp + c.tp;
}

uint32_t topo_collective_group_count(const struct topo *t, enum topo_dim dim)
{
	switch (dim) {
	case TOPO_TP: return t->pp * t->cp * t->dp;
	case TOPO_CP: return t->pp * t->tp * t->dp;
	case TOPO_EP: return topo_ep_group_count(t);
	case TOPO_PP: return topo_pp_chain_count(t);
	default: return topo_role_group_count(t);
	}
}

uint32_t topo_collective_group(const struct topo *t, uint32_t rank, enum topo_dim dim)
{
	struct topo_coords c = topo_coords(t, rank);
	switch (dim) {
	case TOPO_TP: return (c.pp * t->cp + c.cp) * t->dp + c.dp;
	case TOPO_CP: return (c.pp * t->tp + c.tp) * t->dp + c.dp;
	case TOPO_EP: return topo_ep_group(t, rank);
	case TOPO_PP: return topo_pp_chain(t, rank);
	default: return topo_role_group(t, rank);
	}
}

size_t topo_role_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap)
{
	struct topo_coords c = topo_coords(t, rank);
	for (uint32_t d = 0; d < t->dp && d < cap; d++) {
		c.dp = d;
		out[d] = topo_rank(t, &c);
	}
	return t->dp;
}

size_t topo_ep_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap)
{
	struct topo_coords c = topo_coords(t, rank);
	uint32_t base = c.dp - c.dp % t->ep;
	for (uint32_t e = 0; e < t->ep && e < cap; e++) {
		c.dp = base + e;
		out[e] = topo_rank(t, &c);
	}
	return t->ep;
}

size_t topo_pp_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap)
{
	struct topo_coords c = topo_coords(t, rank);
	for (uint32_t p = 0; p < t->pp && p < cap; p++) {
		c.pp = p;
		out[p] = topo_rank(t, &c);
	}
	return t->pp;
}
