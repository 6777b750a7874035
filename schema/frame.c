/* frame.c: length-prefixed protobuf frames (see frame.h). */
#include "frame.h"

#include <endian.h>
#include <stdio.h>
#include <string.h>

enum frame_status frame_check(const uint8_t *buf, size_t len, uint32_t max_body, uint32_t *body_len,
			      const char **why)
{
	uint32_t be;

	*body_len = 0;
	if (len < FRAME_HEADER)
		return FRAME_NEED_MORE;
	memcpy(&be, buf, sizeof(be));
	*body_len = be32toh(be);
	if (*body_len == 0) {
		*why = "zero-length frame";
		return FRAME_MALFORMED;
	}
	if (*body_len > max_body) {
		*why = "frame longer than the maximum";
		return FRAME_MALFORMED;
	}
	if (len - FRAME_HEADER < *body_len)
		return FRAME_NEED_MORE;
	return FRAME_OK;
}

frame_envelope *frame_unpack(const uint8_t *body, size_t len)
{
	frame_envelope *env = culprit__v1__envelope__unpack(NULL, len, body);

	if (env && env->msg_case == CULPRIT__V1__ENVELOPE__MSG__NOT_SET) {
		culprit__v1__envelope__free_unpacked(env, NULL);
		return NULL;
	}
	return env;
}

void frame_free(frame_envelope *env)
{
	if (env)
		culprit__v1__envelope__free_unpacked(env, NULL);
}

size_t frame_packed_size(const frame_envelope *env)
{
	return FRAME_HEADER + culprit__v1__envelope__get_packed_size(env);
}

size_t frame_pack(const frame_envelope *env, uint8_t *out)
{
	size_t n = culprit__v1__envelope__pack(env, out + FRAME_HEADER);
	uint32_t be = htobe32((uint32_t)n);

	memcpy(out, &be, sizeof(be));
	return FRAME_HEADER + n;
}

void frame_hex_sample(const uint8_t *buf, size_t len, char *out, size_t out_size)
{
	size_t n = len < 16 ? len : 16, used = 0;

	if (out_size == 0)
		return;
	out[0] = '\0';
	for (size_t i = 0; i < n && used + 4 < out_size; i++)
		used += (size_t)snprintf(out + used, out_size - used, i ? " %02x" : "%02x", buf[i]);
	if (len > n && used + 5 < out_size)
		snprintf(out + used, out_size - used, " ...");
}
