/* pgbuf.h: a growable byte buffer with a sticky failure flag, and the encodings PostgreSQL
 * reads from it: binary COPY (header, fields, trailer) and array literals for unnest().
 *
 * A failed allocation sets `failed` and makes every later append a no-op: build, then check
 * the flag once. */
#ifndef CULPRIT_STORAGE_PGBUF_H
#define CULPRIT_STORAGE_PGBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pgbuf {
	char *p;
	size_t len, cap;
	bool failed;
};

/* Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 00:00 UTC). */
#define PGBUF_PG_EPOCH_US INT64_C(946684800000000)

void pgbuf_put(struct pgbuf *b, const void *data, size_t n);
/* At most 63 bytes of output (numbers). */
void pgbuf_printf(struct pgbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pgbuf_be16(struct pgbuf *b, uint16_t v);
void pgbuf_be32(struct pgbuf *b, uint32_t v);
void pgbuf_be64(struct pgbuf *b, uint64_t v);
/* Empties the buffer (keeps its memory) and clears the failure flag. */
void pgbuf_reset(struct pgbuf *b);
void pgbuf_free(struct pgbuf *b);

/* Binary COPY: the 19-byte header, a tuple's field count, typed fields, the trailer. */
void pgbuf_copy_header(struct pgbuf *b);
void pgbuf_copy_tuple(struct pgbuf *b, uint16_t nfields);
void pgbuf_copy_int2(struct pgbuf *b, int16_t v);
void pgbuf_copy_int4(struct pgbuf *b, int32_t v);
void pgbuf_copy_int8(struct pgbuf *b, int64_t v);
/* timestamptz from microseconds since the Unix epoch */
void pgbuf_copy_timestamptz(struct pgbuf *b, int64_t unix_us);
void pgbuf_copy_bytea(struct pgbuf *b, const void *data, uint32_t len);
void pgbuf_copy_null(struct pgbuf *b);
void pgbuf_copy_trailer(struct pgbuf *b);
/* An array field: its length, ndim, has-null flag, element type and dims[] (lower bounds 1);
 * then the caller appends the product of dims[] elements in row-major order with the
 * pgbuf_copy_int2/int4/int8 of elem_bytes, and n_null of them with pgbuf_copy_null. */
#define PGBUF_INT2OID 21
#define PGBUF_INT4OID 23
#define PGBUF_INT8OID 20
void pgbuf_copy_array(struct pgbuf *b, uint32_t elem_oid, uint32_t elem_bytes, int ndim, const uint32_t *dims,
		      size_t n_null);

/* One element of an array literal ("{...}"), always quoted: "a\"b" for a"b. NULL is "". */
void pgbuf_array_str(struct pgbuf *b, const char *s);

#endif
