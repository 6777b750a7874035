/* test_pgbuf.c: the byte encodings PostgreSQL reads (binary COPY, array literals). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "pgbuf.h"

static void test_copy_encoding(void **state)
{
	(void)state;
	struct pgbuf b = {0};
	pgbuf_copy_header(&b);
	assert_int_equal(b.len, 19);
	assert_memory_equal(b.p, "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0", 19);
	pgbuf_reset(&b);

	static const struct {
		const char *what;
		int type; /* 2, 4, 8: int; 't': timestamptz; 'n': null; 'b': bytea */
		int64_t v;
		const char *bytes;
		size_t len;
	} cases[] = {
		{"int2 1", 2, 1, "\0\0\0\2\0\1", 6},
		{"int2 -1", 2, -1, "\0\0\0\2\377\377", 6},
		{"int4 0x01020304", 4, 0x01020304, "\0\0\0\4\1\2\3\4", 8},
		{"int4 -2", 4, -2, "\0\0\0\4\377\377\377\376", 8},
		{"int8 1", 8, 1, "\0\0\0\10\0\0\0\0\0\0\0\1", 12},
		{"int8 -1", 8, -1, "\0\0\0\10\377\377\377\377\377\377\377\377", 12},
		/* 2000-01-01 00:00:01 UTC is 1 s after PostgreSQL's epoch */
		{"timestamptz 2000-01-01T00:00:01Z", 't', INT64_C(946684801000000), "\0\0\0\10\0\0\0\0\0\17\102\100",
		 12},
		/* the Unix epoch is before it */
		{"timestamptz 1970", 't', 0, "\0\0\0\10\377\374\242\376\304\310\040\000", 12},
		{"null", 'n', 0, "\377\377\377\377", 4},
		{"bytea", 'b', 0, "\0\0\0\3abc", 7},
	};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		pgbuf_reset(&b);
		switch (cases[i].type) {
		case 2: pgbuf_copy_int2(&b, (int16_t)cases[i].v); break;
		case 4: pgbuf_copy_int4(&b, (int32_t)cases[i].v); break;
		case 8: pgbuf_copy_int8(&b, cases[i].v); break;
		case 't': pgbuf_copy_timestamptz(&b, cases[i].v); break;
		case 'n': pgbuf_copy_null(&b); break;
		case 'b': pgbuf_copy_bytea(&b, "abc", 3); break;
		}
		if (b.len != cases[i].len || memcmp(b.p, cases[i].bytes, b.len) != 0)
			fail_msg("%s: wrong bytes", cases[i].what);
	}
	/* no overflow trap at the extremes (hostile input reaches here) */
	pgbuf_reset(&b);
	pgbuf_copy_timestamptz(&b, INT64_MIN);
	pgbuf_copy_timestamptz(&b, INT64_MAX);
	assert_int_equal(b.len, 24);
	pgbuf_reset(&b);
	pgbuf_copy_tuple(&b, 9);
	pgbuf_copy_trailer(&b);
	assert_memory_equal(b.p, "\0\11\377\377", 4);
	assert_false(b.failed);
	pgbuf_free(&b);
	assert_null(b.p);
}

static void test_array_literal(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} cases[] = {
		{"mlp", "\"mlp\""},     {"", "\"\""},           {"a\"b", "\"a\\\"b\""},
		{"a\\b", "\"a\\\\b\""}, {"{x,y}", "\"{x,y}\""}, {NULL, "\"\""},
	};
	struct pgbuf b = {0};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		pgbuf_reset(&b);
		pgbuf_array_str(&b, cases[i].in);
		pgbuf_put(&b, "", 1);
		assert_string_equal(b.p, cases[i].out);
	}
	pgbuf_reset(&b);
	pgbuf_printf(&b, "%d,%s", 42, "x");
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.p, "42,x", 4);
	/* growth across the first allocation */
	pgbuf_reset(&b);
	for (int i = 0; i < 10000; i++)
		pgbuf_be32(&b, (uint32_t)i);
	assert_int_equal(b.len, 40000);
	assert_memory_equal(b.p + 4 * 9999, "\0\0\x27\x0f", 4);
	pgbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_copy_encoding),
		cmocka_unit_test(test_array_literal),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
