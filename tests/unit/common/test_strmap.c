/* test_strmap.c: the string map against a plain array model, with deletions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "strmap.h"

#define N 5000

static void against_model(void **state)
{
	struct strmap m = {0};
	static int present[N];
	char key[32];
	unsigned seed = 7;

	for (int step = 0; step < 50000; step++) {
		int k = (int)(rand_r(&seed) % N);

		snprintf(key, sizeof(key), "job-%d", k);
		if (rand_r(&seed) % 3 == 0) {
			void *v = strmap_del(&m, key);
			assert_int_equal(v != NULL, present[k]);
			present[k] = 0;
		} else {
			assert_int_equal(strmap_put(&m, key, (void *)(intptr_t)(k + 1)), 0);
			present[k] = 1;
		}
	}
	size_t count = 0;
	for (int k = 0; k < N; k++) {
		snprintf(key, sizeof(key), "job-%d", k);
		void *v = strmap_get(&m, key);
		if (present[k]) {
			assert_int_equal((intptr_t)v, k + 1);
			count++;
		} else {
			assert_null(v);
		}
	}
	assert_int_equal(m.len, count);
	strmap_free(&m);
	(void)state;
}

/* A map of integers: 0 is a value (found), a missing key is not; values are replaced. */
static void numbers(void **state)
{
	struct strmap m = {0};
	char key[32];

	for (int64_t k = 0; k < 1000; k++) {
		snprintf(key, sizeof(key), "agent-%lld", (long long)k);
		assert_int_equal(strmap_put_num(&m, key, k - 1), 0);
	}
	assert_int_equal(strmap_put_num(&m, "agent-5", INT64_MAX), 0);
	assert_int_equal(m.len, 1000);
	for (int64_t k = 0; k < 1000; k++) {
		const struct strmap_entry *e;

		snprintf(key, sizeof(key), "agent-%lld", (long long)k);
		e = strmap_find(&m, key);
		assert_non_null(e);
		assert_int_equal(e->num, k == 5 ? INT64_MAX : k - 1);
	}
	assert_null(strmap_find(&m, "agent-1000"));
	strmap_free(&m);
	assert_null(strmap_find(&m, "agent-1"));
	assert_int_equal(strmap_put_num(&m, "again", 0), 0); /* usable after strmap_free */
	assert_non_null(strmap_find(&m, "again"));
	strmap_free(&m);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(against_model), cmocka_unit_test(numbers)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
