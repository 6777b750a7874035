/* pgbuf.c: see pgbuf.h. */
#include "pgbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void need(struct pgbuf *b, size_t n)
{
	if (b->failed || b->cap - b->len >= n)
		return;
	size_t ncap = b->cap ? b->cap : 4096;
	while (ncap - b->len < n) {
		if (ncap > SIZE_MAX / 2) {
			b->failed = true;
			return;
		}
		ncap *= 2;
	}
	char *np = realloc(b->p, ncap);
	if (!np) {
		b->failed = true;
		return;
	}
	b->p = np;
	b->cap = ncap;
}

void pgbuf_put(struct pgbuf *b, const void *data, size_t n)
{
	need(b, n);
	if (b->failed || n == 0)
		return;
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

void pgbuf_printf(struct pgbuf *b, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	if (n > 0)
		pgbuf_put(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

void pgbuf_be16(struct pgbuf *b, uint16_t v)
{
	unsigned char x[2] = {(unsigned char)(v >> 8), (unsigned char)v};
	pgbuf_put(b, x, 2);
}

void pgbuf_be32(struct pgbuf *b, uint32_t v)
{
	unsigned char x[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8),
			      (unsigned char)v};
	pgbuf_put(b, x, 4);
}

void pgbuf_be64(struct pgbuf *b, uint64_t v)
{
	pgbuf_be32(b, (uint32_t)(v >> 32));
	pgbuf_be32(b, (uint32_t)v);
}

void pgbuf_reset(struct pgbuf *b)
{
	b->len = 0;
	b->failed = false;
}

void pgbuf_free(struct pgbuf *b)
{
	free(b->p);
	memset(b, 0, sizeof *b);
}

void pgbuf_copy_header(struct pgbuf *b)
{
	/* signature, flags (no OIDs), header extension length */
	pgbuf_put(b, "PGCOPY\n\377\r\n\0", 11);
	pgbuf_be32(b, 0);
	pgbuf_be32(b, 0);
}

void pgbuf_copy_tuple(struct pgbuf *b, uint16_t nfields) { pgbuf_be16(b, nfields); }

void pgbuf_copy_int2(struct pgbuf *b, int16_t v)
{
	pgbuf_be32(b, 2);
	pgbuf_be16(b, (uint16_t)v);
}

void pgbuf_copy_int4(struct pgbuf *b, int32_t v)
{
	pgbuf_be32(b, 4);
	pgbuf_be32(b, (uint32_t)v);
}

void pgbuf_copy_int8(struct pgbuf *b, int64_t v)
{
	pgbuf_be32(b, 8);
	pgbuf_be64(b, (uint64_t)v);
}

void pgbuf_copy_timestamptz(struct pgbuf *b, int64_t unix_us)
{
	pgbuf_copy_int8(b, (int64_t)((uint64_t)unix_us - (uint64_t)PGBUF_PG_EPOCH_US));
}

void pgbuf_copy_bytea(struct pgbuf *b, const void *data, uint32_t len)
{
	pgbuf_be32(b, len);
	pgbuf_put(b, data, len);
}

void pgbuf_copy_null(struct pgbuf *b) { pgbuf_be32(b, UINT32_MAX); }

void pgbuf_copy_trailer(struct pgbuf *b) { pgbuf_be16(b, 0xFFFF); }

void pgbuf_copy_array(struct pgbuf *b, uint32_t elem_oid, uint32_t elem_bytes, int ndim, const uint32_t *dims,
		      size_t n_null)
{
	size_t n = 1;
	for (int i = 0; i < ndim; i++)
		n *= dims[i];
	/* ndim, has-null flag, element type, then (size, lower bound) per dimension */
	pgbuf_be32(b, (uint32_t)(12 + 8 * (size_t)ndim + 4 * n + (n - n_null) * elem_bytes));
	pgbuf_be32(b, (uint32_t)ndim);
	pgbuf_be32(b, n_null > 0);
	pgbuf_be32(b, elem_oid);
	for (int i = 0; i < ndim; i++) {
		pgbuf_be32(b, dims[i]);
		pgbuf_be32(b, 1);
	}
}

void pgbuf_array_str(struct pgbuf *b, const char *s)
{
	pgbuf_put(b, "\"", 1);
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			pgbuf_put(b, "\\", 1);
		pgbuf_put(b, s, 1);
	}
	pgbuf_put(b, "\"", 1);
}
