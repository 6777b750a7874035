/* test_text.c: the one rule for strings from clients (common/text.h), table-driven: UTF-8
 * of every length, the malformed forms (overlong, surrogate, past U+10FFFF, truncated, a
 * continuation byte alone such as the 8-bit CSI 0x9b), C0, DEL and C1 controls, bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "text.h"

static void table(void **state)
{
	static const struct {
		const char *s;
		size_t min, max;
		const char *want; /* NULL: accepted */
	} cases[] = {
		{"node-1294", 1, 127, NULL},
		{"n\xc3\xb6"
		 "de",
		 1, 127, NULL},                            /* U+00F6 */
		{"\xe2\x82\xac", 1, 127, NULL},            /* U+20AC, 3 bytes */
		{"\xf0\x9f\x98\x80", 1, 127, NULL},        /* U+1F600, 4 bytes */
		{"\xc2\xa0", 1, 127, NULL},                /* U+00A0, just past C1 */
		{"", 0, 127, NULL},                        /* empty where allowed */
		{"", 1, 127, "is empty"},
		{"abcd", 1, 3, "is longer than allowed"},
		{"abc", 1, 3, NULL},
		{"a\nb", 1, 127, "holds a control character"},
		{"a\tb", 1, 127, "holds a control character"},
		{"\x1b[31mred", 1, 127, "holds a control character"},
		{"a\x7f", 1, 127, "holds a control character"},
		{"x\xc2\x9b"
		 "2J",
		 1, 127, "holds a control character"}, /* U+009B, C1 CSI in UTF-8 */
		{"x\xc2\x80", 1, 127, "holds a control character"},
		{"x\xc2\x9f", 1, 127, "holds a control character"},
		{"x\x9b[2J", 1, 127, "is not valid UTF-8"}, /* the raw 8-bit CSI */
		{"\xff", 1, 127, "is not valid UTF-8"},
		{"\xc0\xaf", 1, 127, "is not valid UTF-8"},         /* overlong '/' */
		{"\xe0\x80\xaf", 1, 127, "is not valid UTF-8"},     /* overlong, 3 bytes */
		{"\xed\xa0\x80", 1, 127, "is not valid UTF-8"},     /* surrogate U+D800 */
		{"\xf4\x90\x80\x80", 1, 127, "is not valid UTF-8"}, /* U+110000 */
		{"ab\xe2\x82", 1, 127, "is not valid UTF-8"},       /* truncated */
		{"\xc3(", 1, 127, "is not valid UTF-8"},            /* a lead without its continuation */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *got = text_check_str(cases[i].s, cases[i].min, cases[i].max);

		if (!cases[i].want)
			assert_null(got);
		else
			assert_string_equal(got, cases[i].want);
	}
	assert_null(text_check_str(NULL, 0, 10));
	assert_string_equal(text_check_str(NULL, 1, 10), "is empty");
	/* a length that stops inside a sequence, and a NUL inside what the caller counted */
	assert_string_equal(text_check("\xc3\xb6", 1, 1, 10), "is not valid UTF-8");
	assert_string_equal(text_check("a\0b", 3, 1, 10), "holds a control character");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(table)};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
