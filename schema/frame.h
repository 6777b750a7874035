/* frame.h: the agent protocol's framing: a 4-byte big-endian length, then one protobuf
 * Envelope of exactly that many bytes (docs/protocol.md).
 *
 * Decoding keeps three outcomes apart: need more bytes, malformed, ok. The length is checked
 * against the caller's maximum (and 0 is refused) before anything is buffered or unpacked. */
#ifndef CULPRIT_FRAME_H
#define CULPRIT_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "culprit.pb-c.h"

#define FRAME_HEADER 4u
#define FRAME_PROTOCOL_VERSION 2u

typedef Culprit__V1__Envelope frame_envelope;

enum frame_status {
	FRAME_NEED_MORE = 0,
	FRAME_OK = 1,
	FRAME_MALFORMED = -1,
};

/* Looks at the first len bytes of a stream. FRAME_OK: a whole frame is there, its body
 * length in *body_len. FRAME_NEED_MORE: not yet (when the header is complete *body_len says
 * how much body to expect). FRAME_MALFORMED: the length is 0 or over max_body; *why says so. */
enum frame_status frame_check(const uint8_t *buf, size_t len, uint32_t max_body, uint32_t *body_len, const char **why);

/* About the bytes frame_unpack() allocates for body (its message structures, arrays, strings
 * and protobuf-c's work space), read off the wire format without unpacking; SIZE_MAX when the
 * body is not well-formed. A caller refuses a frame that would cost far more than its size
 * (a frame of a million one-byte names costs about 100 bytes per 3 bytes sent). */
size_t frame_unpacked_size(const uint8_t *body, size_t len);

/* Unpacks a body; NULL when it is not a valid Envelope or carries no message.
 * Free with frame_free(). */
frame_envelope *frame_unpack(const uint8_t *body, size_t len);
void frame_free(frame_envelope *env);

/* Bytes frame_pack() writes for env (header included). */
size_t frame_packed_size(const frame_envelope *env);
/* Writes header and body into out (at least frame_packed_size bytes); returns bytes written. */
size_t frame_pack(const frame_envelope *env, uint8_t *out);
/* env carrying *r, a Relay of agent's frame body (len 0: the agent's connection ended);
 * both point into the arguments, which must outlive env (docs/protocol.md, "Relay"). */
void frame_relay(frame_envelope *env, Culprit__V1__Relay *r, const char *agent, const uint8_t *frame, size_t len);

/* The key that starts field `name` of message d on the wire, (field number << 3) | wire type,
 * for writers that pack part of a message by hand (the agent's batch frames); 0 when d has no
 * such field. From the generated descriptors: the numbers stay with the schema. */
uint32_t frame_field_tag(const ProtobufCMessageDescriptor *d, const char *name);

/* Hex sample of the first bytes of buf for a log line: "de ad be ef ..." (at most 16 bytes). */
void frame_hex_sample(const uint8_t *buf, size_t len, char *out, size_t out_size);

#endif
