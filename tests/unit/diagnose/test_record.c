/* test_record.c: record kind and group names round-trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "record.h"

static void kinds_round_trip(void **state)
{
	(void)state;
	for (int k = 0; k < RECORD_KIND_COUNT; k++)
		assert_int_equal(record_kind_parse(record_kind_name(k)), k);
	assert_int_equal(record_kind_parse("gpu"), -1);
}

static void groups_round_trip(void **state)
{
	(void)state;
	for (int g = 0; g < RECORD_GROUP_COUNT; g++)
		assert_int_equal(record_group_parse(record_group_name(g)), g);
	assert_int_equal(record_group_parse("none"), RECORD_GROUP_NONE);
	assert_int_equal(record_group_parse("xp"), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds_round_trip),
		cmocka_unit_test(groups_round_trip),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
