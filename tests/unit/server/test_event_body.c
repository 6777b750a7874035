/* test_event_body.c: the POST /api/v1/events body, good and bad, table-driven. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "event_body.h"

#define NOW 1796207474198102LL

struct bad_case {
	const char *body;
	int status;
	const char *in_err; /* a piece of the message */
};

static const struct bad_case bad[] = {
	{"", 400, "empty"},
	{"{\"host\":\"n\",", 400, "line 1"},
	{"42", 400, "expected"},
	{"\"host\"", 400, "expected"},
	{"[]", 400, "between 1 and 1000"},
	{"[1]", 400, "event 0 is not a JSON object"},
	{"{\"kind\":\"k\"}", 400, "\"host\" is required"},
	{"{\"host\":\"n\"}", 400, "\"kind\" is required"},
	{"{\"host\":7,\"kind\":\"k\"}", 400, "\"host\" must be a string"},
	{"{\"host\":\"\",\"kind\":\"k\"}", 400, "\"host\" must be a string"},
	{"{\"host\":\"n\",\"kind\":[]}", 400, "\"kind\" must be a string"},
	{"{\"host\":\"a\\u0000b\",\"kind\":\"k\"}", 400, "not allowed"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":\"now\"}", 400, "ts_us"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":0}", 400, "ts_us"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":-1}", 400, "ts_us"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":1.5}", 400, "ts_us"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"ts_us\":253402300799000001}", 400, "ts_us"},
	{"{\"host\":\"n\",\"kind\":\"k\",\"source\":1}", 400, "\"source\""},
	{"{\"host\":\"n\",\"kind\":\"k\",\"detail\":{}}", 400, "\"detail\""},
	{"{\"host\":\"n\",\"kind\":\"k\",\"job\":false}", 400, "\"job\""},
	{"[{\"host\":\"n\",\"kind\":\"k\"},{\"host\":\"n\"}]", 400, "event 1"},
};

static void test_bad(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct event_body b;
		char err[512] = "";
		int st = event_body_parse(bad[i].body, strlen(bad[i].body), NOW, &b, err, sizeof(err));

		if (st != bad[i].status || !strstr(err, bad[i].in_err))
			fail_msg("body %s: status %d (want %d), message \"%s\" (want \"%s\")", bad[i].body, st,
				 bad[i].status, err, bad[i].in_err);
		assert_null(b.root);
		assert_null(b.ev);
	}
}

static void test_one_and_defaults(void **state)
{
	const char *body = "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"unknown\":[1,2]}";
	struct event_body b;
	char err[256];

	(void)state;
	assert_int_equal(event_body_parse(body, strlen(body), NOW, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n, 1);
	assert_string_equal(b.ev[0].host, "node-1294");
	assert_string_equal(b.ev[0].kind, "port_down");
	assert_string_equal(b.ev[0].source, "api");
	assert_string_equal(b.ev[0].detail, "");
	assert_null(b.ev[0].job);
	assert_int_equal(b.ev[0].ts_us, NOW);
	event_body_free(&b);
}

static void test_array(void **state)
{
	const char *body =
		"[{\"host\":\"a\",\"kind\":\"ecc\",\"ts_us\":5,\"source\":\"dcgm\",\"detail\":\"dbe\",\"job\":\"J\"},"
		"{\"host\":\"b\",\"kind\":\"link_flap\",\"ts_us\":null,\"job\":null}]";
	struct event_body b;
	char err[256];

	(void)state;
	assert_int_equal(event_body_parse(body, strlen(body), NOW, &b, err, sizeof(err)), 0);
	assert_int_equal(b.n, 2);
	assert_int_equal(b.ev[0].ts_us, 5);
	assert_string_equal(b.ev[0].source, "dcgm");
	assert_string_equal(b.ev[0].detail, "dbe");
	assert_string_equal(b.ev[0].job, "J");
	assert_string_equal(b.ev[1].host, "b");
	assert_int_equal(b.ev[1].ts_us, NOW);
	assert_null(b.ev[1].job);
	event_body_free(&b);
}

static void test_limits(void **state)
{
	size_t cap = (EVENT_BODY_MAX + 1) * 32 + 16;
	char *body = malloc(cap), err[256], host[EVENT_HOST_MAX + 2];
	struct event_body b;
	size_t len;

	(void)state;
	assert_non_null(body);
	/* exactly the maximum is fine, one more is 413 */
	for (int extra = 0; extra < 2; extra++) {
		len = (size_t)snprintf(body, cap, "[");
		for (int i = 0; i < EVENT_BODY_MAX + extra; i++)
			len += (size_t)snprintf(body + len, cap - len, "%s{\"host\":\"h\",\"kind\":\"k\"}",
						i ? "," : "");
		len += (size_t)snprintf(body + len, cap - len, "]");
		assert_int_equal(event_body_parse(body, len, NOW, &b, err, sizeof(err)), extra ? 413 : 0);
		if (!extra)
			assert_int_equal(b.n, EVENT_BODY_MAX);
		event_body_free(&b);
	}
	/* a host of the maximum length, then one byte more */
	for (int extra = 0; extra < 2; extra++) {
		memset(host, 'h', sizeof(host));
		host[EVENT_HOST_MAX + extra] = '\0';
		len = (size_t)snprintf(body, cap, "{\"host\":\"%s\",\"kind\":\"k\"}", host);
		assert_int_equal(event_body_parse(body, len, NOW, &b, err, sizeof(err)), extra ? 400 : 0);
		event_body_free(&b);
	}
	free(body);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_one_and_defaults),
		cmocka_unit_test(test_array),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
