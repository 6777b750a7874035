/* test_frame.c: framing outcomes are kept apart; pack and unpack round-trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"

static size_t pack_heartbeat(uint8_t *buf, int64_t t)
{
	Culprit__V1__Envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Heartbeat hb = CULPRIT__V1__HEARTBEAT__INIT;

	hb.time_us = t;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT;
	env.heartbeat = &hb;
	assert_true(frame_packed_size(&env) <= 64);
	return frame_pack(&env, buf);
}

static void round_trip(void **state)
{
	uint8_t buf[64];
	uint32_t body;
	const char *why = NULL;
	size_t n = pack_heartbeat(buf, 123456789);

	assert_int_equal(frame_check(buf, n, 1024, &body, &why), FRAME_OK);
	assert_int_equal(body, n - FRAME_HEADER);
	frame_envelope *env = frame_unpack(buf + FRAME_HEADER, body);
	assert_non_null(env);
	assert_int_equal(env->msg_case, CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT);
	assert_int_equal(env->heartbeat->time_us, 123456789);
	frame_free(env);
	(void)state;
}

static void need_more_at_every_cut(void **state)
{
	uint8_t buf[64];
	uint32_t body;
	const char *why = NULL;
	size_t n = pack_heartbeat(buf, 42);

	for (size_t cut = 0; cut < n; cut++)
		assert_int_equal(frame_check(buf, cut, 1024, &body, &why), FRAME_NEED_MORE);
	(void)state;
}

static void malformed_lengths(void **state)
{
	uint8_t zero[4] = {0, 0, 0, 0}, huge[4] = {0xff, 0xff, 0xff, 0xff}, over[4] = {0, 0, 4, 1};
	uint32_t body;
	const char *why = NULL;

	assert_int_equal(frame_check(zero, 4, 1024, &body, &why), FRAME_MALFORMED);
	assert_non_null(why);
	assert_int_equal(frame_check(huge, 4, 1024, &body, &why), FRAME_MALFORMED);
	assert_int_equal(frame_check(over, 4, 1024, &body, &why), FRAME_MALFORMED);
	over[3] = 0; /* exactly 1024 is allowed */
	assert_int_equal(frame_check(over, 4, 1024, &body, &why), FRAME_NEED_MORE);
	(void)state;
}

static void garbage_body_is_refused(void **state)
{
	const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	const uint8_t empty_envelope[] = {0x30, 0x00}; /* unknown field 6 varint: no message set */

	assert_null(frame_unpack(garbage, sizeof(garbage)));
	assert_null(frame_unpack(empty_envelope, sizeof(empty_envelope)));
	(void)state;
}

static void hex_sample(void **state)
{
	const uint8_t b[20] = {0xde, 0xad, 0xbe, 0xef};
	char out[128];

	frame_hex_sample(b, 4, out, sizeof(out));
	assert_string_equal(out, "de ad be ef");
	frame_hex_sample(b, 20, out, sizeof(out));
	assert_non_null(strstr(out, "..."));
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),
		cmocka_unit_test(need_more_at_every_cut),
		cmocka_unit_test(malformed_lengths),
		cmocka_unit_test(garbage_body_is_refused),
		cmocka_unit_test(hex_sample),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
