/* test_auth.c: server/auth.c: the constant-time token comparison, the job tokens file
 * parser, the settings it refuses, and the verdicts on agents and REST requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "config.h"

static void token_equal(void **state)
{
	static const struct {
		const char *a, *b;
		bool equal;
	} cases[] = {
		{"s3cret", "s3cret", true},
		{"s3cret", "s3creT", false},
		{"s3cret", "s3cre", false},   /* a prefix */
		{"s3cret", "s3cret ", false}, /* longer */
		{"", "", true},
		{"", "x", false},
		{"a-long-token-0123456789abcdef0123456789abcdef", "a-long-token-0123456789abcdef0123456789abcdeF",
		 false},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(auth_token_equal(cases[i].a, cases[i].b), cases[i].equal);
}

static void token_valid(void **state)
{
	char big[5000];

	(void)state;
	assert_true(auth_token_valid("abc-DEF_123.~+/="));
	assert_false(auth_token_valid(""));
	assert_false(auth_token_valid("has space"));
	assert_false(auth_token_valid("tab\there"));
	assert_false(auth_token_valid("caf\xc3\xa9"));
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_false(auth_token_valid(big));
	big[4096] = '\0';
	assert_true(auth_token_valid(big));
}

struct pairs {
	int n;
	char job[8][64], token[8][64];
};

static int collect(void *arg, const char *job, const char *token)
{
	struct pairs *p = arg;

	if (p->n == 8)
		return -1;
	snprintf(p->job[p->n], 64, "%s", job);
	snprintf(p->token[p->n], 64, "%s", token);
	p->n++;
	return 0;
}

static void job_tokens_parse(void **state)
{
	static const struct {
		const char *text;
		int ok, n;
		const char *err_has;
	} cases[] = {
		{"", 1, 0, NULL},
		{"# only a comment\n\n   \n", 1, 0, NULL},
		{"j1 t1\nj2\tt2\n", 1, 2, NULL},
		{"  j1   t1   # trailing comment\r\nj2 t2", 1, 2, NULL}, /* CRLF, no final newline */
		{"j1\n", 0, 0, "line 1: expected \"JOB TOKEN\""},
		{"j1 t1\nj2 t2 extra\n", 0, 0, "line 2: expected"},
		{"j1 t1\nj2 t\x01x\n", 0, 0, "line 2: the token of job \"j2\""},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct pairs p = {0};
		char err[256] = "";
		int rc = auth_parse_job_tokens(cases[i].text, collect, &p, err, sizeof(err));

		assert_int_equal(rc == 0, cases[i].ok);
		if (cases[i].ok) {
			assert_int_equal(p.n, cases[i].n);
		} else {
			assert_non_null(strstr(err, cases[i].err_has));
			assert_null(strstr(err, "\x01")); /* a token is not repeated */
		}
	}
	{
		struct pairs p = {0};
		char err[256];

		assert_int_equal(auth_parse_job_tokens("  j1   t1 # c\nj2\tt2", collect, &p, err, sizeof(err)), 0);
		assert_string_equal(p.job[0], "j1");
		assert_string_equal(p.token[0], "t1");
		assert_string_equal(p.job[1], "j2");
		assert_string_equal(p.token[1], "t2");
	}
}

/* a configuration with these tokens (NULL: unset) */
static struct auth *make(const char *agent, const char *jobs_text, const char *rd, const char *wr, char *err,
			 size_t err_size)
{
	struct config cfg;
	char path[] = "/tmp/test_auth_jobs.XXXXXX", e[256];
	struct auth *a;

	config_defaults(&cfg);
	if (agent)
		assert_int_equal(config_set(&cfg, "agent_token", agent, false, e, sizeof(e)), 0);
	if (rd)
		assert_int_equal(config_set(&cfg, "http_read_token", rd, false, e, sizeof(e)), 0);
	if (wr)
		assert_int_equal(config_set(&cfg, "http_write_token", wr, false, e, sizeof(e)), 0);
	if (jobs_text) {
		int fd = mkstemp(path);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, jobs_text, strlen(jobs_text)), (ssize_t)strlen(jobs_text));
		close(fd);
		assert_int_equal(config_set(&cfg, "job_tokens_file", path, false, e, sizeof(e)), 0);
	}
	a = auth_new(&cfg, err, err_size);
	if (jobs_text)
		unlink(path);
	config_free(&cfg);
	return a;
}

static void agents(void **state)
{
	char err[512];
	struct auth *a;

	(void)state;
	/* nothing set: open */
	a = make(NULL, NULL, NULL, NULL, err, sizeof(err));
	assert_non_null(a);
	assert_true(auth_agent(a, "any", NULL));
	assert_true(auth_agent(a, "any", "whatever"));
	auth_free(a);

	/* a shared token */
	a = make("shared-1", NULL, NULL, NULL, err, sizeof(err));
	assert_non_null(a);
	assert_true(auth_agent(a, "j", "shared-1"));
	assert_false(auth_agent(a, "j", "shared-2"));
	assert_false(auth_agent(a, "j", "shared-"));
	assert_false(auth_agent(a, "j", ""));
	assert_false(auth_agent(a, "j", NULL));
	auth_free(a);

	/* per-job tokens and a shared one for the other jobs */
	a = make("shared-1", "j1 tok-j1\nj2 tok-j2\n", NULL, NULL, err, sizeof(err));
	assert_non_null(a);
	assert_true(auth_agent(a, "j1", "tok-j1"));
	assert_false(auth_agent(a, "j1", "tok-j2"));   /* another job's token */
	assert_false(auth_agent(a, "j1", "shared-1")); /* a listed job needs its own */
	assert_true(auth_agent(a, "j3", "shared-1"));
	assert_false(auth_agent(a, "j3", "tok-j1"));
	auth_free(a);

	/* per-job tokens only: a job not listed is refused */
	a = make(NULL, "j1 tok-j1\n", NULL, NULL, err, sizeof(err));
	assert_non_null(a);
	assert_true(auth_agent(a, "j1", "tok-j1"));
	assert_false(auth_agent(a, "j3", "tok-j1"));
	assert_false(auth_agent(a, "j3", ""));
	auth_free(a);

	/* a rotation: the new and the old token both accepted, for the shared token and for a
	 * job listed twice */
	a = make("new-s,old-s", "j1 new-j1\nj1 old-j1\n", NULL, NULL, err, sizeof(err));
	assert_non_null(a);
	assert_true(auth_agent(a, "j", "new-s"));
	assert_true(auth_agent(a, "j", "old-s"));
	assert_false(auth_agent(a, "j", "new-s,old-s"));
	assert_false(auth_agent(a, "j", "new-j1"));
	assert_true(auth_agent(a, "j1", "new-j1"));
	assert_true(auth_agent(a, "j1", "old-j1"));
	assert_false(auth_agent(a, "j1", "old-s"));
	{
		unsigned char d[AUTH_DIGEST];

		auth_token_digest("old-j1", d);
		assert_true(auth_agent_digest(a, "j1", d));
		assert_false(auth_agent_digest(a, "j2", d));
	}
	auth_free(a);
}

static void refused_settings(void **state)
{
	char err[512];

	(void)state;
	assert_null(make("has space", NULL, NULL, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "\"agent_token\""));
	assert_null(strstr(err, "has space"));
	assert_null(make(NULL, NULL, "r", NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "\"http_read_token\" needs \"http_write_token\""));
	assert_null(make(NULL, NULL, "same", "same", err, sizeof(err)));
	assert_non_null(strstr(err, "must differ"));
	assert_null(make(NULL, "j1 t1\nj1 t2\nj1 t3\nj1 t4\nj1 t5\n", NULL, NULL, err, sizeof(err)));
	assert_non_null(strstr(err, "\"job_tokens_file\""));
	assert_non_null(strstr(err, "line 5"));
	/* lists: at most 4 tokens, none empty */
	{
		struct auth *four = make("a,b,c,d", NULL, NULL, NULL, err, sizeof(err));

		assert_non_null(four);
		assert_true(auth_agent(four, "j", "d"));
		auth_free(four);
	}
	static const char *const bad_lists[] = {"a,b,c,d,e", "a,", ",a", "a,,b", ",", "a, b"};
	for (size_t i = 0; i < sizeof(bad_lists) / sizeof(bad_lists[0]); i++) {
		assert_null(make(bad_lists[i], NULL, NULL, NULL, err, sizeof(err)));
		assert_non_null(strstr(err, "\"agent_token\""));
	}
	assert_null(make(NULL, NULL, "r1,same", "w1,same", err, sizeof(err)));
	assert_non_null(strstr(err, "must differ"));
	{
		struct config cfg;
		char e[256];

		config_defaults(&cfg);
		assert_int_equal(config_set(&cfg, "job_tokens_file", "/nonexistent/jobs", false, e, sizeof(e)), 0);
		assert_null(auth_new(&cfg, err, sizeof(err)));
		assert_non_null(strstr(err, "could not open \"/nonexistent/jobs\""));
		config_free(&cfg);
	}
}

static void http(void **state)
{
	static const struct {
		const char *read, *write; /* tokens configured */
		bool is_write;
		const char *header;
		enum auth_http_result want;
	} cases[] = {
		/* nothing set: open */
		{NULL, NULL, false, NULL, AUTH_HTTP_OK},
		{NULL, NULL, true, NULL, AUTH_HTTP_OK},
		/* a write token only: reads open */
		{NULL, "W", false, NULL, AUTH_HTTP_OK},
		{NULL, "W", true, NULL, AUTH_HTTP_UNAUTHORIZED},
		{NULL, "W", true, "Bearer W", AUTH_HTTP_OK},
		{NULL, "W", true, "bearer   W", AUTH_HTTP_OK},
		{NULL, "W", true, "Bearer X", AUTH_HTTP_UNAUTHORIZED},
		{NULL, "W", true, "Basic W", AUTH_HTTP_UNAUTHORIZED},
		{NULL, "W", true, "BearerW", AUTH_HTTP_UNAUTHORIZED},
		{NULL, "W", true, "Bearer ", AUTH_HTTP_UNAUTHORIZED},
		/* both */
		{"R", "W", false, NULL, AUTH_HTTP_UNAUTHORIZED},
		{"R", "W", false, "Bearer R", AUTH_HTTP_OK},
		{"R", "W", false, "Bearer W", AUTH_HTTP_OK},
		{"R", "W", false, "Bearer RR", AUTH_HTTP_UNAUTHORIZED},
		{"R", "W", true, "Bearer R", AUTH_HTTP_FORBIDDEN},
		{"R", "W", true, "Bearer W", AUTH_HTTP_OK},
		{"R", "W", true, "Bearer Z", AUTH_HTTP_UNAUTHORIZED},
		{"R", "W", true, NULL, AUTH_HTTP_UNAUTHORIZED},
		/* rotations: lists of tokens */
		{"R2,R1", "W2,W1", false, "Bearer R1", AUTH_HTTP_OK},
		{"R2,R1", "W2,W1", true, "Bearer W1", AUTH_HTTP_OK},
		{"R2,R1", "W2,W1", true, "Bearer W2", AUTH_HTTP_OK},
		{"R2,R1", "W2,W1", true, "Bearer R2", AUTH_HTTP_FORBIDDEN},
		{"R2,R1", "W2,W1", false, "Bearer R2,R1", AUTH_HTTP_UNAUTHORIZED},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[512];
		struct auth *a = make(NULL, NULL, cases[i].read, cases[i].write, err, sizeof(err));

		assert_non_null(a);
		if (auth_http(a, cases[i].is_write, cases[i].header) != cases[i].want)
			fail_msg("case %zu: read %s write %s %s \"%s\"", i, cases[i].read ? cases[i].read : "-",
				 cases[i].write ? cases[i].write : "-", cases[i].is_write ? "write" : "read",
				 cases[i].header ? cases[i].header : "(none)");
		auth_free(a);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(token_equal), cmocka_unit_test(token_valid),      cmocka_unit_test(job_tokens_parse),
		cmocka_unit_test(agents),      cmocka_unit_test(refused_settings), cmocka_unit_test(http),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
