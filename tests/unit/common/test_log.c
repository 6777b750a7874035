/* test_log.c: log_escape, the one way a client's string reaches a log line: no control byte,
 * quote or backslash survives, printable text stays as it is, and a long string is cut with
 * "..." inside the buffer. The lines themselves, written to a file as stderr: the UTC time
 * and the level before each line of a message of several lines, a long report whole; with
 * JOURNAL_STREAM naming that file, "<N>" syslog priorities instead. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
		{"\xc2\x9b"
		 "2J",
		 "\\xc2\\x9b2J"},
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

/* Logs through a temporary file as stderr; returns what was written (malloc'd). */
static char *logged(int journal, void (*emit)(void))
{
	char path[] = "/tmp/test_log_XXXXXX", env[64], *text;
	int fd = mkstemp(path), saved = dup(STDERR_FILENO);
	struct stat st;
	long n;
	FILE *f;

	assert_true(fd >= 0 && saved >= 0 && fstat(fd, &st) == 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", env, 1);
	else
		unsetenv("JOURNAL_STREAM");
	dup2(fd, STDERR_FILENO);
	emit();
	dup2(saved, STDERR_FILENO);
	close(saved);
	unsetenv("JOURNAL_STREAM");
	f = fdopen(fd, "r");
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	text = calloc(1, (size_t)n + 1);
	assert_non_null(text);
	assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	unlink(path);
	return text;
}

/* a report: 3 lines, the last one 3,000 bytes (past one line's 2 KiB) */
static void emit_report(void)
{
	char tail[3001];

	memset(tail, 'x', 3000);
	tail[3000] = '\0';
	log_info("INCIDENT j/1/hang firing\njob j: hang\n%s", tail);
	log_warning("one warning");
	log_error("an error");
}

static void lines(void **state)
{
	char *t = logged(0, emit_report), *l;
	int n = 0;

	/* every line its own time (UTC) and level */
	for (l = t; *l; l = strchr(l, '\n') + 1, n++) {
		assert_true(strlen(l) > 30 && l[4] == '-' && l[10] == ' ');
		assert_memory_equal(l + 23, " UTC ", 5);
	}
	assert_int_equal(n, 5);
	assert_non_null(strstr(t, " UTC INFO    job j: hang\n"));
	assert_non_null(strstr(t, " UTC WARNING one warning\n"));
	assert_non_null(strstr(t, " UTC ERROR   an error\n"));
	/* the long line cut at LOG_LINE_MAX, not the whole report at 2 KiB */
	l = strstr(t, "xxx");
	assert_non_null(l);
	assert_true(strchr(l, '\n') - l > 1900);
	free(t);
	(void)state;
}

static void journal(void **state)
{
	char *t = logged(1, emit_report);

	assert_memory_equal(t, "<6>INCIDENT j/1/hang firing\n<6>job j: hang\n<6>xxx", 49);
	assert_non_null(strstr(t, "\n<4>one warning\n<3>an error\n"));
	assert_null(strstr(t, " UTC "));
	free(t);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escape),
		cmocka_unit_test(cut),
		cmocka_unit_test(lines),
		cmocka_unit_test(journal),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
