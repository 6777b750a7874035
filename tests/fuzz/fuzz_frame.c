/* fuzz_frame: libFuzzer driver for what an agent's bytes meet before any state: the frame
 * header check (schema/frame.c), the protobuf unpack of the envelope, a pack/unpack round
 * trip of what unpacked, and for a Batch the listener's validation (batch_validate,
 * for an agent serving ranks 0..7) and the decoding of every kernel sketch it accepted (what
 * the listener does next, record_kernel_quantiles). The input is one frame: 4-byte big-endian
 * length, then the body. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "batch.h"
#include "record.h"
#include "sketch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_batch(const Culprit__V1__Batch *b)
{
	static const uint32_t ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};
	char err[256] = "";
	struct sketch scratch;
	size_t off = 0;

	/* a batch with a dictionary of its own (name ids defined earlier on the connection are
	 * connection state: without one, any name index is outside the dictionary) */
	/* a job at iteration 1,000 on 2026-12-01 */
	const struct batch_limits lim = {.now_us = 1796169600000000LL, .job_iter = 1000, .window = 64};

	if (batch_validate(ranks, 8, b, b->n_names, &lim, err, sizeof(err)) < 0) {
		if (!err[0])
			__builtin_trap(); /* a refusal always says why */
		return;
	}
	sketch_init(&scratch);
	for (size_t i = 0; i < b->n_kernel_name; i++) {
		struct record_kernel k = {0};

		k.count = b->kernel_count[i];
		k.sum_us = b->kernel_sum_us[i];
		k.min_us = b->kernel_min_us[i];
		k.max_us = b->kernel_max_us[i];
		if (b->n_kernel_sketch_len && b->kernel_sketch_len[i]) {
			if (off + b->kernel_sketch_len[i] > b->kernel_sketches.len)
				__builtin_trap(); /* validation promised the lengths add up */
			k.sketch = b->kernel_sketches.data + off;
			k.sketch_len = b->kernel_sketch_len[i];
			off += k.sketch_len;
		}
		(void)record_kernel_quantiles(&k, &scratch);
	}
	sketch_free(&scratch);
}

/* Whether a message or any message inside it carried fields unknown to us (protobuf-c keeps
 * them as they came and packs them back verbatim, even with a field number 0). */
static int has_unknown(const ProtobufCMessage *m)
{
	if (!m)
		return 0;
	if (m->n_unknown_fields)
		return 1;
	const ProtobufCMessageDescriptor *d = m->descriptor;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		if (f->type != PROTOBUF_C_TYPE_MESSAGE)
			continue;
		const char *at = (const char *)m + f->offset;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
			ProtobufCMessage *const *v = *(ProtobufCMessage *const *const *)at;
			for (size_t k = 0; k < n; k++)
				if (has_unknown(v[k]))
					return 1;
		} else if (has_unknown(*(const ProtobufCMessage *const *)at)) {
			return 1;
		}
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t body = 0, body2 = 0;
	const char *why = NULL;
	enum frame_status st = frame_check(data, size, 4u << 20, &body, &why);
	frame_envelope *env, *again;
	uint8_t *buf;
	size_t n;

	if (st == FRAME_MALFORMED) {
		if (!why)
			__builtin_trap();
		return 0;
	}
	if (st == FRAME_NEED_MORE)
		return 0;
	if (body == 0 || body > size - FRAME_HEADER)
		__builtin_trap();
	/* culpritd estimates the unpacked size before unpacking: it reads any bytes safely */
	(void)frame_unpacked_size(data + FRAME_HEADER, body);
	env = frame_unpack(data + FRAME_HEADER, body);
	if (!env)
		return 0;
	/* what unpacked packs again, and that unpacks, unless it held unknown fields: protobuf-c
	 * keeps those as they came (even a field number 0) and packs them back verbatim */
	n = frame_packed_size(env);
	buf = malloc(n);
	if (!buf || frame_pack(env, buf) != n || frame_check(buf, n, UINT32_MAX, &body2, &why) != FRAME_OK ||
	    body2 + FRAME_HEADER != n)
		__builtin_trap();
	again = frame_unpack(buf + FRAME_HEADER, body2);
	if (!again ? !has_unknown(&env->base) : again->msg_case != env->msg_case)
		__builtin_trap();
	frame_free(again);
	free(buf);
	if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_BATCH)
		check_batch(env->batch);
	frame_free(env);
	return 0;
}
