/* jsonl_parse.h: the JSON parser of the interchange reader (client/jsonl_read.c), for one
 * flat JSON object a line: the keys records have (enum jkey) are kept in their slots,
 * others validated and ignored. Internal to client/jsonl_*.c.
 *
 * A small validating parser (jansson allocates per value). Top-level scalars are decoded in
 * place (strings unescaped where they stand in the line, which the reader owns); nested
 * arrays and objects are validated only (their strings unescaped in place too: their text
 * is not kept), durs_us is decoded as it is read. Anything that is not JSON is an error. */
#ifndef CULPRIT_JSONL_PARSE_H
#define CULPRIT_JSONL_PARSE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "attrs.h"

enum jt { JT_NULL, JT_BOOL, JT_NUM, JT_STR, JT_ARR, JT_OBJ };

struct jval {
	enum jt t;
	const char *s; /* JT_STR: unescaped, NUL-terminated, in the line */
	size_t len;
	int is_int;
	int64_t i;
	double d;
};

#define JMAX_DEPTH 32

/* The keys records have; others are validated and ignored. A key is looked up once, when
 * parsed (a small open-addressing table), and its value kept in its slot: no string
 * comparisons per field read. */
#define JKEYS(X)                                                                                                      \
	X(type)                                                                                                       \
	X(job)                                                                                                        \
	X(world)                                                                                                      \
	X(tp) X(cp) X(pp) X(dp) X(ep) X(gpus_per_node) X(order) X(rank) X(host) X(iter) X(start_us) X(dur_us) X(name) \
		X(kind) X(group) X(count) X(durs_us) X(sum_us) X(min_us) X(max_us) X(p50_us) X(p99_us) X(ts_us)       \
			X(source) X(detail) X(device)

enum jkey {
#define X(k) JK_##k,
	JKEYS(X)
#undef X
		JK_COUNT,
	JK_NONE = JK_COUNT,
	JK_FIRST, /* no key before (the first of an object) */
};
_Static_assert(JK_COUNT <= 32, "struct jobj.seen has a bit per key");

/* the keys' names, by enum jkey */
extern const char *const jkey_names[];

struct jobj {
	uint32_t seen;               /* bit per enum jkey */
	struct jval v[JK_COUNT + 1]; /* [JK_NONE]: the value of an unknown key, not kept */
	/* durs_us, decoded while parsing; durs_ok when it was an array of integers */
	int64_t *durs;
	size_t ndurs, durs_cap;
	int durs_ok;
	/* the key that followed key k last time ([JK_FIRST]: the first of a line), tried first:
	 * the lines of one type have their keys in one order */
	unsigned char next_key[JK_COUNT + 2];
};

struct jp {
	char *p, *end; /* the line, unescaped in place */
	const char *err;
};

/* The tables of the keys; once, before any line is parsed. */
void jsonl_parse_init(void);
/* Parses the object of the line [j->p, j->end) into o: 0, or -1 with j->err set and j->p
 * where it failed. */
MUST_CHECK int jsonl_parse_line(struct jp *j, struct jobj *o);

/* The value of key in o, NULL when the line did not have it. */
static inline const struct jval *jget(const struct jobj *o, enum jkey key)
{
	return o->seen & (1u << key) ? &o->v[key] : NULL;
}

/* The end of a run of characters from p that are not '"', '\\' or control characters, at most
 * end. Eight at a time: the line ends in a control character ('\n', '\r' or the zero bytes
 * that pad the block, readahead.h), so the words read stop there or before. */
static inline char *plain_run(char *p, char *end)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
	for (;; p += 8) {
		uint64_t w, q, b;
		memcpy(&w, p, 8);
		q = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		/* the high bit of each byte that is a quote, a backslash, or under 0x20: exact up to
		 * the first one (a borrow marks only bytes after it) */
		uint64_t m = (((q - ones) & ~q) | ((b - ones) & ~b) | ((w - ones * 0x20) & ~w)) & high;
		if (m) {
			p += __builtin_ctzll(m) / 8;
			return p < end ? p : end;
		}
		if (p + 8 >= end)
			return end;
	}
#else
	while (p < end && (unsigned char)*p >= 0x20 && *p != '"' && *p != '\\')
		p++;
	return p;
#endif
}

#endif
