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

/* A batch of n names of len bytes each (and packed columns of n values), packed into a malloc'd
 * frame; the estimate of its body's unpacked size per byte of body. */
static double unpacked_per_byte(size_t n, size_t len, int names_only)
{
	Culprit__V1__Envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	char **names = calloc(n, sizeof(*names)), *name = calloc(1, len + 1);
	uint32_t *ranks = calloc(n, sizeof(*ranks));
	int64_t *starts = calloc(n, sizeof(*starts));
	uint8_t *buf;
	size_t size, cost;

	assert_non_null(names && name && ranks && starts);
	memset(name, 'k', len);
	for (size_t i = 0; i < n; i++) {
		names[i] = name;
		ranks[i] = (uint32_t)i;
		starts[i] = 1700000000000000LL + (int64_t)i;
	}
	b.names = names, b.n_names = n;
	if (!names_only) {
		b.iter_rank = ranks, b.n_iter_rank = n;
		b.iter_iter = ranks, b.n_iter_iter = n;
		b.iter_start_us = starts, b.n_iter_start_us = n;
		b.iter_dur_us = starts, b.n_iter_dur_us = n;
	}
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	size = frame_packed_size(&env);
	buf = malloc(size);
	assert_non_null(buf);
	frame_pack(&env, buf);
	cost = frame_unpacked_size(buf + FRAME_HEADER, size - FRAME_HEADER);
	free(buf);
	free(names);
	free(name);
	free(ranks);
	free(starts);
	return (double)cost / (double)(size - FRAME_HEADER);
}

/* culpritd refuses a frame estimated at more than 16 times its size: a flood of one-byte
 * names is, a batch of real names and columns is not; broken bytes are SIZE_MAX */
static void unpacked_size(void **state)
{
	static const uint8_t truncated[] = {0x1a, 0x10, 0x0a}; /* a Batch said to be 16 bytes, of 1 */

	(void)state;
	assert_true(unpacked_per_byte(100000, 1, 1) > 16);
	assert_true(unpacked_per_byte(10000, 40, 0) < 6);
	assert_int_equal(frame_unpacked_size(truncated, sizeof(truncated)), SIZE_MAX);
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

/* The keys frame_field_tag derives are the ones protobuf-c writes: an Envelope with a Batch
 * (seq 300, one NameDef 7 "x") packed, byte by byte. */
static void field_tags(void **state)
{
	Culprit__V1__Envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__NameDef d = CULPRIT__V1__NAME_DEF__INIT, *pd = &d;
	uint8_t buf[64];
	char x[] = "x";

	d.id = 7;
	d.name = x;
	b.seq = 300;
	b.name_defs = &pd;
	b.n_name_defs = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	assert_int_equal(frame_pack(&env, buf), FRAME_HEADER + 12);
	const uint8_t want[12] = {(uint8_t)frame_field_tag(&culprit__v1__envelope__descriptor, "batch"),
				  10,
				  (uint8_t)frame_field_tag(&culprit__v1__batch__descriptor, "seq"),
				  0xac,
				  0x02,
				  (uint8_t)frame_field_tag(&culprit__v1__batch__descriptor, "name_defs"),
				  5,
				  (uint8_t)frame_field_tag(&culprit__v1__name_def__descriptor, "id"),
				  7,
				  (uint8_t)frame_field_tag(&culprit__v1__name_def__descriptor, "name"),
				  1,
				  'x'};
	assert_memory_equal(buf + FRAME_HEADER, want, 12);
	/* a packed repeated scalar is length-delimited; no such field: 0 */
	assert_int_equal(frame_field_tag(&culprit__v1__batch__descriptor, "phase_rank") & 7, 2);
	assert_int_equal(frame_field_tag(&culprit__v1__batch__descriptor, "no_such_field"), 0);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(round_trip),        cmocka_unit_test(need_more_at_every_cut),
		cmocka_unit_test(malformed_lengths), cmocka_unit_test(garbage_body_is_refused),
		cmocka_unit_test(hex_sample),        cmocka_unit_test(unpacked_size),
		cmocka_unit_test(field_tags),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
