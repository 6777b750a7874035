/* topo.h: job topology, rank <-> coordinates {tp, cp, ep, dp, pp}, nodes and the groups
 * along which work is shared (role groups) and waits propagate (EP groups, PP chains).
 *
 * Rank order follows Megatron: an order string lists the dimensions fastest first, e.g.
 * "tp-cp-ep-dp-pp" (the default) or "tp-cp-dp-pp". EP is carved out of DP: the dp
 * coordinate always runs over the whole data-parallel size, and ep = dp % ep_size. When
 * "ep" appears in the order, the "dp" entry of the order means the outer part dp / ep_size
 * (so both orders above give the same mapping); without it ep is simply derived from dp. */
#ifndef CULPRIT_TOPO_H
#define CULPRIT_TOPO_H

#include <stddef.h>
#include <stdint.h>

enum topo_dim { TOPO_TP = 0, TOPO_CP, TOPO_EP, TOPO_DP, TOPO_PP, TOPO_DIM_COUNT };

struct topo_coords {
	uint32_t tp, cp, ep, dp, pp;
};

struct topo {
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	uint32_t ndims;                /* entries of order[] */
	uint32_t ep_in_order;          /* "ep" appears in the order */
	uint8_t order[TOPO_DIM_COUNT]; /* enum topo_dim, fastest first */
	uint32_t size[TOPO_DIM_COUNT]; /* size of each order entry as laid out */
	uint32_t stride[TOPO_DIM_COUNT];
};

/* 1 when a and b map ranks alike (every field the same), else 0 */
int topo_equal(const struct topo *a, const struct topo *b);
/* Fills *t. order may be NULL or "" (Megatron's default). gpus_per_node 0 means 8.
 * Returns 0, or -1 with a message in err (world != tp*cp*pp*dp, ep not dividing dp,
 * unknown or repeated dimension in order, a dimension of size > 1 missing from order). */
int topo_init(struct topo *t, uint32_t world, uint32_t tp, uint32_t cp, uint32_t pp, uint32_t dp, uint32_t ep,
	      const char *order, uint32_t gpus_per_node, char *err, size_t errlen);

/* Coordinates of rank (< world). */
struct topo_coords topo_coords(const struct topo *t, uint32_t rank);
/* Rank of coordinates; ep is ignored (it is dp % ep). */
uint32_t topo_rank(const struct topo *t, const struct topo_coords *c);
/* Node index of rank: rank / gpus_per_node. */
uint32_t topo_node(const struct topo *t, uint32_t rank);

/* Role group: ranks with the same pp, tp, cp (the DP group). Ids are 0 .. count-1. */
uint32_t topo_role_group_count(const struct topo *t);
uint32_t topo_role_group(const struct topo *t, uint32_t rank);
/* EP group: a role group's block of ep consecutive dp indexes. */
uint32_t topo_ep_group_count(const struct topo *t);
uint32_t topo_ep_group(const struct topo *t, uint32_t rank);
/* PP chain: ranks with the same tp, cp, dp (all stages of one pipeline). */
uint32_t topo_pp_chain_count(const struct topo *t);
uint32_t topo_pp_chain(const struct topo *t, uint32_t rank);

/* The group a collective along dimension dim runs in: the ranks that differ from rank only
 * in that coordinate (TP: same pp, cp, dp; CP: same pp, tp, dp; DP: the role group; EP:
 * the EP group; PP: the pipeline chain). Ids are 0 .. count-1. */
uint32_t topo_collective_group_count(const struct topo *t, enum topo_dim dim);
uint32_t topo_collective_group(const struct topo *t, uint32_t rank, enum topo_dim dim);

/* Members of the group of rank, in ascending dp (role/EP) or pp (chain) order.
 * Each writes at most cap ranks to out and returns the group's size. */
size_t topo_role_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap);
size_t topo_ep_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap);
size_t topo_pp_members(const struct topo *t, uint32_t rank, uint32_t *out, size_t cap);

#endif
