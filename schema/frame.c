/* frame.c: length-prefixed protobuf frames (see frame.h). */
#include "frame.h"

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum frame_status frame_check(const uint8_t *buf, size_t len, uint32_t max_body, uint32_t *body_len, const char **why)
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

/* protobuf-c, per field of a message past its first 16 (those are on the stack): a "scanned
 * member" of 32 bytes, in slabs that double (up to 64 bytes each); per allocation the
 * allocator's overhead */
#define SCANNED 64u
#define SCANNED_ON_STACK 16u
#define MALLOC 16u

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	*v = 0;
	for (int shift = 0; *p < end && shift < 64; shift += 7) {
		uint8_t b = *(*p)++;

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

static size_t scalar_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE: return 8;
	case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
	default: return 4;
	}
}

static size_t message_cost(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end)
{
	size_t cost = desc->sizeof_message + MALLOC, fields = 0;

	while (p < end) {
		uint64_t tag, len = 0;
		const ProtobufCFieldDescriptor *f;
		const uint8_t *data;
		bool repeated;

		if (read_varint(&p, end, &tag) < 0 || tag >> 3 == 0 || tag >> 3 > UINT32_MAX)
			return SIZE_MAX;
		switch (tag & 7) {
		case 0:
			if (read_varint(&p, end, &len) < 0)
				return SIZE_MAX;
			len = 0;
			break;
		case 1:
		case 5:
			len = (tag & 7) == 1 ? 8 : 4;
			if ((size_t)(end - p) < len)
				return SIZE_MAX;
			p += len;
			len = 0;
			break;
		case 2:
			if (read_varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
				return SIZE_MAX;
			break;
		default: return SIZE_MAX; /* groups and wire types protobuf-c does not take */
		}
		data = p;
		p += len;
		if (++fields > SCANNED_ON_STACK)
			cost += SCANNED;
		f = protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3));
		if (!f) { /* kept as an unknown field, with a copy of its bytes */
			cost += sizeof(ProtobufCMessageUnknownField) + len + MALLOC;
			continue;
		}
		repeated = f->label == PROTOBUF_C_LABEL_REPEATED;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE) {
			size_t sub = message_cost(f->descriptor, data, data + len);

			if (sub == SIZE_MAX)
				return SIZE_MAX;
			cost += sub + (repeated ? 8 : 0);
		} else if (f->type == PROTOBUF_C_TYPE_STRING || f->type == PROTOBUF_C_TYPE_BYTES) {
			cost += len + 1 + MALLOC + (repeated ? scalar_size(f->type) : 0);
		} else if (repeated && (tag & 7) == 2) { /* packed */
			size_t n = 0;

			if (f->type == PROTOBUF_C_TYPE_FIXED32 || f->type == PROTOBUF_C_TYPE_SFIXED32 ||
			    f->type == PROTOBUF_C_TYPE_FLOAT)
				n = len / 4;
			else if (f->type == PROTOBUF_C_TYPE_FIXED64 || f->type == PROTOBUF_C_TYPE_SFIXED64 ||
				 f->type == PROTOBUF_C_TYPE_DOUBLE)
				n = len / 8;
			else
				n = len; /* a varint takes a byte at least: a bound, not a count */
			cost += n * scalar_size(f->type);
		} else if (repeated) {
			cost += scalar_size(f->type);
		}
	}
	return cost;
}

size_t frame_unpacked_size(const uint8_t *body, size_t len)
{
	return message_cost(&culprit__v1__envelope__descriptor, body, body + len);
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

uint32_t frame_field_tag(const ProtobufCMessageDescriptor *d, const char *name)
{
	const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, name);
	uint32_t wire = 0; /* varint */

	if (!f)
		return 0;
	if (f->label == PROTOBUF_C_LABEL_REPEATED && (f->flags & PROTOBUF_C_FIELD_FLAG_PACKED))
		wire = 2;
	else
		switch (f->type) {
		case PROTOBUF_C_TYPE_STRING:
		case PROTOBUF_C_TYPE_BYTES:
		case PROTOBUF_C_TYPE_MESSAGE:
			wire = 2; /* length-delimited */
			break;
		case PROTOBUF_C_TYPE_FIXED64:
		case PROTOBUF_C_TYPE_SFIXED64:
		case PROTOBUF_C_TYPE_DOUBLE: wire = 1; break;
		case PROTOBUF_C_TYPE_FIXED32:
		case PROTOBUF_C_TYPE_SFIXED32:
		case PROTOBUF_C_TYPE_FLOAT: wire = 5; break;
		default: break;
		}
	return f->id << 3 | wire;
}

void frame_relay(frame_envelope *env, Culprit__V1__Relay *r, const char *agent, const uint8_t *frame, size_t len)
{
	culprit__v1__envelope__init(env);
	culprit__v1__relay__init(r);
	r->agent_id = (char *)agent;
	r->frame.data = (uint8_t *)frame;
	r->frame.len = len;
	env->msg_case = CULPRIT__V1__ENVELOPE__MSG_RELAY;
	env->relay = r;
}
