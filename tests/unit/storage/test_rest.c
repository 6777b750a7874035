/* test_rest.c: every statement of storage/rest.h has its text, and its parameter count is
 * the highest $n it uses (a count too small makes PostgreSQL refuse it, too large sends a
 * parameter it never reads); out of range answers NULL. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "rest.h"

static void counts(void **state)
{
	(void)state;
	for (int i = 0; i < STORAGE_REST_STATEMENTS; i++) {
		int n = -1, highest = 0;
		const char *sql = storage_rest_sql((enum storage_rest)i, &n);

		assert_non_null(sql);
		for (const char *p = strchr(sql, '$'); p; p = strchr(p + 1, '$')) {
			int k = atoi(p + 1);

			if (k > highest)
				highest = k;
		}
		assert_int_equal(n, highest);
		assert_true(n >= 1 && n <= 8); /* STORAGE_QUERY_MAX_PARAMS */
	}
	int n = 0;
	assert_null(storage_rest_sql(STORAGE_REST_STATEMENTS, &n));
	assert_null(storage_rest_sql((enum storage_rest) - 1, &n));
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(counts)};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
