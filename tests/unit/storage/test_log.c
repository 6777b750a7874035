/* test_log.c: log_escape, the one way a client's string reaches a log line: no control byte,
 * quote or backslash survives, printable text stays as it is, and a long string is cut with
 * "..." inside the buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "log.h"

static void escape(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"node-7.example", "node-7.example"},
		{"a\nb", "a\\nb"},
		{"\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"},
		{"x\r\ty\x7f", "x\\r\\ty\\x7f"},
		{"say \"hi\" \\ bye", "say \\\"hi\\\" \\\\ bye"},
		{"\xc2\x9b" "2J", "\\xc2\\x9b2J"},
		{"", ""},
	};
	char buf[LOG_ESCAPE_MAX];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_string_equal(log_escape(cases[i].in, buf, sizeof(buf)), cases[i].want);
	assert_string_equal(LOG_ESC("\n"), "\\n");
	(void)state;
}

static void cut(void **state)
{
	char in[2000], buf[64];

	memset(in, '\n', sizeof(in) - 1);
	in[sizeof(in) - 1] = '\0';
	log_escape(in, buf, sizeof(buf));
	assert_true(strlen(buf) < sizeof(buf));
	assert_string_equal(buf + strlen(buf) - 3, "...");
	assert_null(strchr(buf, '\n'));
	/* an escape is never cut in half */
	memset(in, 'a', 60);
	strcpy(in + 58, "\x1b\x1b\x1b");
	log_escape(in, buf, sizeof(buf));
	assert_string_equal(buf + 58, "...");
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escape),
		cmocka_unit_test(cut),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
