/* test_topo.c: rank <-> coordinates for Megatron orders, groups, nodes; the seed's numbers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "topo.h"

static struct topo seed_topo(const char *order)
{
	struct topo t;
	char err[128];
	assert_int_equal(topo_init(&t, 12960, 1, 1, 9, 1440, 32, order, 8, err, sizeof(err)), 0);
	return t;
}

static void seed_numbers(void **state)
{
	(void)state;
	const char *orders[] = {NULL, "tp-cp-ep-dp-pp", "tp-cp-dp-pp"};
	for (size_t o = 0; o < 3; o++) {
		struct topo t = seed_topo(orders[o]);
		assert_int_equal(t.world, 9 * 1440);
		struct topo_coords c = topo_coords(&t, 10352);
		assert_int_equal(c.pp, 7);
		assert_int_equal(c.dp, 272);
		assert_int_equal(c.ep, 16);
		assert_int_equal(c.tp, 0);
		assert_int_equal(c.cp, 0);
		uint32_t m[64];
		assert_int_equal(topo_ep_members(&t, 10352, m, 64), 32);
		for (uint32_t i = 0; i < 32; i++)
			assert_int_equal(m[i], 10336 + i);
		for (uint32_t r = 10352; r < 10360; r++) {
			assert_int_equal(topo_node(&t, r), 1294);
			assert_int_equal(topo_ep_group(&t, r), topo_ep_group(&t, 10336));
			struct topo_coords k = topo_coords(&t, r);
			assert_int_equal(k.dp, 272 + (r - 10352));
		}
		assert_int_not_equal(topo_ep_group(&t, 10335), topo_ep_group(&t, 10336));
		assert_int_not_equal(topo_ep_group(&t, 10368), topo_ep_group(&t, 10367));
		/* role group: the 1440 ranks of stage 7 */
		uint32_t *rm = test_malloc(1440 * sizeof(uint32_t));
		assert_int_equal(topo_role_members(&t, 10352, rm, 1440), 1440);
		assert_int_equal(rm[0], 7 * 1440);
		assert_int_equal(rm[1439], 8 * 1440 - 1);
		test_free(rm);
		assert_int_equal(topo_role_group_count(&t), 9);
		assert_int_equal(topo_ep_group_count(&t), 9 * 45);
		/* PP chain of rank 10352: dp 272 of every stage */
		uint32_t chain[9];
		assert_int_equal(topo_pp_members(&t, 10352, chain, 9), 9);
		for (uint32_t p = 0; p < 9; p++)
			assert_int_equal(chain[p], p * 1440 + 272);
	}
}

static void dense_orders(void **state)
{
	(void)state;
	struct topo t;
	char err[128];
	/* TP=8 CP=2 PP=4 DP=8 EP=4, default order: tp fastest, then cp, ep, dp/ep, pp */
	assert_int_equal(topo_init(&t, 512, 8, 2, 4, 8, 4, "", 8, err, sizeof(err)), 0);
	struct topo_coords c = topo_coords(&t, 83); /* tp 3, cp 0, ep 1, dp-outer 1 */
	assert_int_equal(c.tp, 3);
	assert_int_equal(c.cp, 0);
	assert_int_equal(c.ep, 1);
	assert_int_equal(c.dp, 5);
	assert_int_equal(c.pp, 0);
	/* explicit order with pp before dp */
	assert_int_equal(topo_init(&t, 512, 8, 2, 4, 8, 1, "tp-cp-pp-dp", 8, err, sizeof(err)), 0);
	c = topo_coords(&t, 16 * 3 + 5);
	assert_int_equal(c.tp, 5);
	assert_int_equal(c.pp, 3);
	assert_int_equal(c.dp, 0);
	c = topo_coords(&t, 64);
	assert_int_equal(c.pp, 0);
	assert_int_equal(c.dp, 1);
}

static void round_trip(void **state)
{
	(void)state;
	const char *orders[] = {"tp-cp-ep-dp-pp", "tp-cp-dp-pp", "tp-pp-dp-cp", "pp-dp-cp-tp"};
	for (size_t o = 0; o < 4; o++) {
		struct topo t;
		char err[128];
		assert_int_equal(topo_init(&t, 2 * 3 * 4 * 8, 2, 3, 4, 8, 4, orders[o], 4, err, sizeof(err)), 0);
		int seen[192] = {0};
		for (uint32_t r = 0; r < t.world; r++) {
			struct topo_coords c = topo_coords(&t, r);
			assert_true(c.tp < 2 && c.cp < 3 && c.pp < 4 && c.dp < 8 && c.ep < 4);
			assert_int_equal(c.ep, c.dp % 4);
			assert_int_equal(topo_rank(&t, &c), r);
			seen[topo_rank(&t, &c)]++;
			/* the group ids agree with the coordinates */
			uint32_t m[8];
			topo_role_members(&t, r, m, 8);
			for (int i = 0; i < 8; i++) {
				struct topo_coords k = topo_coords(&t, m[i]);
				assert_int_equal(k.pp, c.pp);
				assert_int_equal(k.tp, c.tp);
				assert_int_equal(k.cp, c.cp);
				assert_int_equal(k.dp, (uint32_t)i);
				assert_int_equal(topo_role_group(&t, m[i]), topo_role_group(&t, r));
			}
		}
		for (uint32_t r = 0; r < t.world; r++)
			assert_int_equal(seen[r], 1);
	}
}

static void rejects(void **state)
{
	(void)state;
	struct topo t;
	char err[128];
	assert_int_equal(topo_init(&t, 100, 1, 1, 9, 1440, 32, NULL, 8, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "world"));
	assert_int_equal(topo_init(&t, 12960, 1, 1, 9, 1440, 7, NULL, 8, err, sizeof(err)), -1);
	assert_int_equal(topo_init(&t, 12960, 1, 1, 9, 1440, 32, "tp-cp-xp-pp", 8, err, sizeof(err)), -1);
	assert_int_equal(topo_init(&t, 12960, 1, 1, 9, 1440, 32, "tp-dp-dp-pp", 8, err, sizeof(err)), -1);
	assert_int_equal(topo_init(&t, 16, 2, 1, 1, 8, 1, "dp-pp", 8, err, sizeof(err)), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(seed_numbers),
		cmocka_unit_test(dense_orders),
		cmocka_unit_test(round_trip),
		cmocka_unit_test(rejects),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
