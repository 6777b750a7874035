/* import_stream.c: the streaming Chrome-trace event reader. A scanner made for the trace's
 * shape, over gzread chunks (memory stays bounded whatever the file size): it walks the
 * document as strict JSON, reads the keys of the events the importers use and skips every
 * other value, checking it all the same.
 *
 * The grammar is the one yajl accepted when it parsed these files: RFC 8259 with \v and \f
 * also white space, containers nested at most 64 deep, no control character in a string,
 * and multi-byte UTF-8 checked by its lead and continuation bytes only (as yajl did).
 * Strings are decoded as yajl decoded them, and a number is what strtod makes of its first
 * 63 bytes (exactly: the common ones are converted here, correctly rounded, the others by
 * strtod). One difference: yajl let a document be followed by an unterminated string (its
 * lexer was still waiting for the token to end); here that is trailing garbage. Unlike
 * yajl's lexer, which buffered a token across chunks and grew quadratic on a long one, no
 * token is buffered: a kept string is cut at its field's size as it is read. */
#include "import_stream.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "readahead.h"

#ifndef IMPORT_STREAM_CHUNK /* a test build reads a few bytes at a time, to split every token */
#define IMPORT_STREAM_CHUNK (1u << 18)
#endif
#define CHUNK IMPORT_STREAM_CHUNK
#define PAD 16 /* zero bytes after the data: the sentinel that ends every scanning loop */
#define MAX_DEPTH 64
#define KEY_MAX 16 /* a longer key is none of ours ("distributedInfo" has 15 bytes) */
/* a kept string's tail from its first backslash: each output byte takes at most 7 of it */
#define RAW_MAX (8 * IMPORT_STREAM_NAME_MAX + 32)
#define NUM_MAX 63 /* bytes of a number given to strtod, as before */

static const char TRUNCATED[] = "truncated JSON (the document does not end)";

enum key {
	K_OTHER = 0,
	K_TRACEEVENTS,
	K_DIST,
	K_PH,
	K_CAT,
	K_NAME,
	K_TS,
	K_DUR,
	K_PID,
	K_TID,
	K_ARGS,
	K_STEP,
	K_RANK,
	K_WORLD,
	K_ITER,
	K_DUR_US,
	K_KIND,
	K_GROUP,
	K_DETAIL,
	K_START_KNOWN,
	K_OTHERDATA,
	K_JOB,
	K_JOB_START,
	K_ORDER,
	K_TP,
	K_CP,
	K_PP,
	K_DP,
	K_EP,
	K_GPUS,
};

/* where a key is: its meaning depends on it */
enum where { W_NONE, W_TOP, W_EVENT, W_ARGS, W_DIST, W_OTHER };

struct rd {
	gzFile f;
	unsigned char *buf;           /* CHUNK + PAD bytes */
	const unsigned char *p, *end; /* the unread bytes; *end == 0 */
	uint64_t base;                /* the input offset of buf[0] */
	int eof;
	const char *why; /* the first error, NULL while none */
	uint64_t at;     /* its input offset */
	char msg[192];   /* a gzip error's text */
	const struct import_stream_handler *h;
	struct import_stream_event ev;
	int64_t rank, world; /* distributedInfo's, kept across several of them as before */
	int have_events;
	unsigned char raw[RAW_MAX + 2]; /* a kept string from its first backslash, and its quote */
};

/* byte classes */
#define C_WS 1    /* white space */
#define C_PLAIN 2 /* a string byte that needs no attention: 0x20-0x7f but '"' and '\\' */
#define C_DIGIT 4

/* clang-format off */
static const unsigned char cls[256] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	3, 2, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 2, 2, 2, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 2, 2, 2,
	2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
};
/* clang-format on */

/* Records the first error, at the current position; returns -1. */
static int fail(struct rd *r, const char *why)
{
	if (!r->why) {
		r->why = why;
		r->at = r->base + (uint64_t)(r->p - r->buf);
	}
	return -1;
}

/* The next chunk, once every byte before r->end is used: 1, 0 at the end of the input (the
 * buffer then holds only the sentinel), -1 on a gzip error. */
static int more(struct rd *r)
{
	r->base += (uint64_t)(r->end - r->buf);
	r->p = r->end = r->buf;
	r->buf[0] = 0;
	if (r->eof)
		return 0;
	int n = gzread(r->f, r->buf, CHUNK);
	if (n <= 0) {
		int e = Z_OK;
		const char *m = gzerror(r->f, &e);
		r->eof = 1;
		if (n < 0 || e != Z_OK) {
			snprintf(r->msg, sizeof(r->msg), "%s: %s",
				 n < 0 ? "bad gzip data" : "truncated or bad gzip data", m ? m : "?");
			return fail(r, r->msg);
		}
		return 0;
	}
	r->end = r->buf + n;
	memset(r->buf + n, 0, PAD);
	return 1;
}

/* -1 for an input that ends too soon (or the gzip error that ended it) */
static int truncated(struct rd *r) { return fail(r, TRUNCATED); }

/* The next byte that is not white space, not consumed; -1 at the end of the input. */
static int next(struct rd *r)
{
	for (;;) {
		const unsigned char *p = r->p;
		while (cls[*p] & C_WS)
			p++;
		r->p = p;
		if (p < r->end)
			return *p;
		if (more(r) <= 0)
			return truncated(r);
	}
}

/* The next byte, consumed; -1 at the end of the input. */
static int take(struct rd *r)
{
	if (r->p == r->end && more(r) <= 0)
		return truncated(r);
	return *r->p++;
}

/* After a backslash in a string: the rest of the escape, checked, its bytes appended to out
 * (when not NULL, at most cap - *n more; *n counts them). */
static int escape(struct rd *r, unsigned char *out, size_t cap, size_t *n)
{
	unsigned char e[5];
	int c = take(r);
	if (c < 0)
		return -1;
	e[0] = (unsigned char)c;
	size_t k = 1;
	if (c == 'u') {
		for (int i = 0; i < 4; i++) {
			int h = take(r);
			if (h < 0)
				return -1;
			if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) {
				r->p--;
				return fail(r, "malformed JSON: a non-hex character after \\u in a string");
			}
			e[k++] = (unsigned char)h;
		}
	} else if (!strchr("\"\\/bfnrt", c) || c == 0) {
		r->p--;
		return fail(r, "malformed JSON: an invalid escape (a character after \\ that may not be there)");
	}
	if (out)
		for (size_t i = 0; i < k; i++)
			if (*n < cap)
				out[(*n)++] = e[i];
	return 0;
}

/* After a byte >= 0x80 in a string: its continuation bytes, checked as yajl did (by count
 * only); the whole character in u[], its length returned, or -1. */
static int utf8_rest(struct rd *r, int lead, unsigned char *u)
{
	int need = (lead >> 5) == 0x6 ? 1 : (lead >> 4) == 0xe ? 2 : (lead >> 3) == 0x1e ? 3 : -1;
	if (need < 0) {
		r->p--;
		return fail(r, "malformed JSON: invalid UTF-8 in a string");
	}
	u[0] = (unsigned char)lead;
	for (int i = 1; i <= need; i++) {
		int c = take(r);
		if (c < 0)
			return -1;
		if ((c >> 6) != 0x2)
			return fail(r, "malformed JSON: invalid UTF-8 in a string");
		u[i] = (unsigned char)c;
	}
	return need + 1;
}

/* A control byte in a string, at r->p: the end of the chunk (1: go on) or an error. */
static int str_ctl(struct rd *r)
{
	if (r->p < r->end)
		return fail(r, "malformed JSON: a control character inside a string");
	return more(r) > 0 ? 1 : truncated(r);
}

/* A string, r->p after its opening quote, to after its closing quote: checked, not kept. */
static int str_skip(struct rd *r)
{
	for (;;) {
		const unsigned char *p = r->p;
		while (cls[*p] & C_PLAIN)
			p++;
		r->p = p + 1;
		int c = *p;
		if (c == '"')
			return 0;
		if (c == '\\') {
			if (escape(r, NULL, 0, NULL) < 0)
				return -1;
		} else if (c >= 0x80) {
			unsigned char u[4];
			if (utf8_rest(r, c, u) < 0)
				return -1;
		} else {
			r->p = p;
			if (str_ctl(r) < 0)
				return -1;
		}
	}
}

static void put(char *dst, size_t cap, size_t *n, const void *s, size_t len)
{
	if (len > cap - 1 - *n)
		len = cap - 1 - *n;
	memcpy(dst + *n, s, len);
	*n += len;
}

static unsigned hex4(const unsigned char *h)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		unsigned c = h[i];
		v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
	}
	return v;
}

/* Decodes the escaped tail s[0, len) of a string (s[len] is its closing quote, s[len + 1] a
 * zero) the way yajl_string_decode did, appending to dst; returns the decoded length (what
 * does not fit is counted, not written). A tail cut short at RAW_MAX decodes its head
 * right; s is read only up to s[len + 1]. */
static size_t unescape(const unsigned char *s, size_t len, char *dst, size_t cap, size_t *n)
{
	size_t out = 0, i = 0;
#define EMIT(b, k) (put(dst, cap, n, (b), (k)), out += (k))
	while (i < len) {
		if (s[i] != '\\') {
			size_t j = i;
			while (j < len && s[j] != '\\')
				j++;
			EMIT(s + i, j - i);
			i = j;
			continue;
		}
		unsigned char e = i + 1 <= len ? s[i + 1] : 0;
		char one;
		switch (e) {
		case 'r': one = '\r'; break;
		case 'n': one = '\n'; break;
		case '\\': one = '\\'; break;
		case '/': one = '/'; break;
		case '"': one = '"'; break;
		case 'f': one = '\f'; break;
		case 'b': one = '\b'; break;
		case 't': one = '\t'; break;
		case 'u': {
			if (i + 6 > len) { /* only in a tail cut short */
				i = len;
				continue;
			}
			unsigned cp = hex4(s + i + 2);
			i += 6;
			if ((cp & 0xFC00) == 0xD800) {
				if (i + 6 <= len && s[i] == '\\' && s[i + 1] == 'u') {
					unsigned lo = hex4(s + i + 2);
					cp = (((cp & 0x3F) << 10) | ((((cp >> 6) & 0xF) + 1) << 16) | (lo & 0x3FF));
					i += 6;
				} else {
					EMIT("?", 1);
					continue;
				}
			}
			unsigned char u[4];
			size_t k;
			if (cp < 0x80) {
				u[0] = (unsigned char)cp, k = 1;
			} else if (cp < 0x800) {
				u[0] = (unsigned char)(cp >> 6 | 0xC0), u[1] = (unsigned char)((cp & 0x3F) | 0x80),
				k = 2;
			} else if (cp < 0x10000) {
				u[0] = (unsigned char)(cp >> 12 | 0xE0);
				u[1] = (unsigned char)(((cp >> 6) & 0x3F) | 0x80);
				u[2] = (unsigned char)((cp & 0x3F) | 0x80), k = 3;
			} else if (cp < 0x200000) {
				u[0] = (unsigned char)(cp >> 18 | 0xF0);
				u[1] = (unsigned char)(((cp >> 12) & 0x3F) | 0x80);
				u[2] = (unsigned char)(((cp >> 6) & 0x3F) | 0x80);
				u[3] = (unsigned char)((cp & 0x3F) | 0x80), k = 4;
			} else {
				u[0] = '?', k = 1;
			}
			EMIT(u, k);
			continue;
		}
		default: one = '?'; break; /* only in a tail cut short */
		}
		EMIT(&one, 1);
		i += 2;
	}
#undef EMIT
	return out;
}

/* A string, r->p after its opening quote, to after its closing quote: checked and decoded,
 * its first cap - 1 bytes in dst (NUL-terminated); *len gets its decoded length, or at least
 * cap when it is longer. */
static int str_read(struct rd *r, char *dst, size_t cap, size_t *len)
{
	size_t n = 0, total = 0, nraw = 0;
	int esc = 0;
	for (;;) {
		const unsigned char *s = r->p, *p = s;
		while (cls[*p] & C_PLAIN)
			p++;
		if (p > s) {
			if (!esc) {
				put(dst, cap, &n, s, (size_t)(p - s));
				total += (size_t)(p - s);
			} else {
				size_t k = (size_t)(p - s);
				if (k > RAW_MAX - nraw)
					k = RAW_MAX - nraw;
				memcpy(r->raw + nraw, s, k);
				nraw += k;
			}
		}
		r->p = p + 1;
		int c = *p;
		if (c == '"')
			break;
		if (c == '\\') {
			esc = 1;
			if (nraw < RAW_MAX)
				r->raw[nraw++] = '\\';
			if (escape(r, r->raw, RAW_MAX, &nraw) < 0)
				return -1;
		} else if (c >= 0x80) {
			unsigned char u[4];
			int k = utf8_rest(r, c, u);
			if (k < 0)
				return -1;
			if (!esc) {
				put(dst, cap, &n, u, (size_t)k);
				total += (size_t)k;
			} else {
				for (int i = 0; i < k && nraw < RAW_MAX; i++)
					r->raw[nraw++] = u[i];
			}
		} else {
			r->p = p;
			if (str_ctl(r) < 0)
				return -1;
		}
	}
	if (esc) {
		r->raw[nraw] = '"';
		r->raw[nraw + 1] = 0;
		total += unescape(r->raw, nraw, dst, cap, &n);
		if (nraw == RAW_MAX && total < cap)
			total = cap;
	}
	dst[n] = 0;
	*len = total;
	return 0;
}

static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
			     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The value of a checked number s[0, n), n <= NUM_MAX: what strtod makes of it. A mantissa
 * of at most 19 digits under 2^53 and a power of ten within 10^±22 are exact doubles, so one
 * multiplication or division rounds right, as strtod does; the rest goes to strtod. */
static double num_value(const unsigned char *s, size_t n)
{
	uint64_t m = 0;
	int nd = 0, exact = 1, exp10 = 0, frac = 0, e = 0, eneg = 0;
	size_t i = *s == '-';
	for (; i < n && s[i] != 'e' && s[i] != 'E'; i++) {
		if (s[i] == '.') {
			frac = 1;
			continue;
		}
		if (nd < 19) {
			m = m * 10 + (uint64_t)(s[i] - '0');
			nd += m != 0;
		} else {
			exact = 0;
		}
		exp10 -= frac;
	}
	if (i < n) { /* the exponent: at most NUM_MAX digits, bounded anyway */
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			eneg = s[i++] == '-';
		for (; i < n; i++)
			if (e < 100000)
				e = e * 10 + (s[i] - '0');
		exp10 += eneg ? -e : e;
	}
	if (exact && m <= (UINT64_C(1) << 53) && exp10 >= -22 && exp10 <= 22) {
		double d = exp10 >= 0 ? (double)m * p10[exp10] : (double)m / p10[-exp10];
		return *s == '-' ? -d : d;
	}
	char tmp[NUM_MAX + 1];
	memcpy(tmp, s, n);
	tmp[n] = 0;
	return strtod(tmp, NULL);
}

/* The next byte of a number, refilling at the end of a chunk (0 at the end of the input). */
static inline int num_peek(struct rd *r)
{
	int c = *r->p;
	if (c == 0 && r->p == r->end && more(r) < 0)
		return -1;
	return *r->p;
}

/* A number across chunks, or a malformed one: byte by byte, its first NUM_MAX bytes kept. */
static int num_slow(struct rd *r, double *v)
{
	unsigned char tmp[NUM_MAX];
	size_t n = 0;
	int c = num_peek(r);
#define ADV()                                      \
	do {                                       \
		if (n < NUM_MAX)                   \
			tmp[n] = (unsigned char)c; \
		n++;                               \
		r->p++;                            \
		if ((c = num_peek(r)) < 0)         \
			return -1;                 \
	} while (0)
#define END(msg) (c == 0 && r->p == r->end ? truncated(r) : fail(r, "malformed JSON: " msg))
	if (c == '-')
		ADV();
	if (c == '0') {
		ADV();
	} else if (c >= '1' && c <= '9') {
		do
			ADV();
		while (cls[c] & C_DIGIT);
	} else {
		return END("a digit expected in a number");
	}
	if (c == '.') {
		ADV();
		if (!(cls[c] & C_DIGIT))
			return END("a digit expected after '.'");
		do
			ADV();
		while (cls[c] & C_DIGIT);
	}
	if (c == 'e' || c == 'E') {
		ADV();
		if (c == '+' || c == '-')
			ADV();
		if (!(cls[c] & C_DIGIT))
			return END("a digit expected in an exponent");
		do
			ADV();
		while (cls[c] & C_DIGIT);
	}
#undef END
#undef ADV
	if (v)
		*v = num_value(tmp, n < NUM_MAX ? n : NUM_MAX);
	return 0;
}

/* A number, r->p at its first byte ('-' or a digit): checked, and its value in *v when v is
 * not NULL (what strtod makes of its first NUM_MAX bytes, as before). */
static int num_read(struct rd *r, double *v)
{
	const unsigned char *s = r->p, *p = s;
	/* the common case: all of it in this chunk, well formed (the sentinel stops every loop) */
	if (*p == '-')
		p++;
	if (*p == '0') {
		p++;
	} else if (*p >= '1' && *p <= '9') {
		while (cls[*p] & C_DIGIT)
			p++;
	} else {
		return num_slow(r, v);
	}
	if (*p == '.') {
		if (!(cls[*++p] & C_DIGIT))
			return num_slow(r, v);
		while (cls[*p] & C_DIGIT)
			p++;
	}
	if (*p == 'e' || *p == 'E') {
		p++;
		if (*p == '+' || *p == '-')
			p++;
		if (!(cls[*p] & C_DIGIT))
			return num_slow(r, v);
		while (cls[*p] & C_DIGIT)
			p++;
	}
	if (p == r->end) /* it may go on in the next chunk */
		return num_slow(r, v);
	r->p = p;
	if (v)
		*v = num_value(s, (size_t)(p - s) < NUM_MAX ? (size_t)(p - s) : NUM_MAX);
	return 0;
}

/* true, false or null, r->p at its first byte */
static int lit_skip(struct rd *r, int c)
{
	const char *w = c == 't' ? "true" : c == 'f' ? "false" : "null";
	for (; *w; w++) {
		int b = take(r);
		if (b < 0)
			return -1;
		if (b != *w) {
			r->p--;
			return fail(r, "malformed JSON: an invalid literal (true, false and null are the words)");
		}
	}
	return 0;
}

static int skip_value(struct rd *r, int c, int depth);

/* '{' or '[' at r->p, with depth containers around it: consumed, and the next byte returned */
static int open_container(struct rd *r, int depth)
{
	if (depth >= MAX_DEPTH)
		return fail(r, "nesting deeper than 64 levels");
	r->p++;
	return next(r);
}

/* After a member or an element: 1 and the ',' consumed, 0 and the closing byte consumed, or
 * -1. */
static int after(struct rd *r, int close)
{
	int c = next(r);
	if (c == ',') {
		r->p++;
		return 1;
	}
	if (c == close) {
		r->p++;
		return 0;
	}
	return fail(r, close == '}' ? "malformed JSON: ',' or '}' expected after a value in an object"
				    : "malformed JSON: ',' or ']' expected after an element of an array");
}

static enum key classify(const unsigned char *k, size_t len, enum where w)
{
#define IS(s) (len == sizeof(s) - 1 && memcmp(k, s, len) == 0)
	switch (w) {
	case W_NONE: break;
	case W_TOP:
		if (IS("traceEvents"))
			return K_TRACEEVENTS;
		if (IS("distributedInfo"))
			return K_DIST;
		if (IS("otherData"))
			return K_OTHERDATA;
		break;
	case W_EVENT:
		switch (len) {
		case 2: return IS("ph") ? K_PH : IS("ts") ? K_TS : K_OTHER;
		case 3: return IS("cat") ? K_CAT : IS("dur") ? K_DUR : IS("pid") ? K_PID : IS("tid") ? K_TID : K_OTHER;
		case 4: return IS("name") ? K_NAME : IS("args") ? K_ARGS : K_OTHER;
		}
		break;
	case W_ARGS:
		switch (len) {
		case 4:
			return IS("step")   ? K_STEP
			       : IS("name") ? K_NAME
			       : IS("rank") ? K_RANK
			       : IS("iter") ? K_ITER
			       : IS("kind") ? K_KIND
					    : K_OTHER;
		case 5: return IS("group") ? K_GROUP : K_OTHER;
		case 6: return IS("dur_us") ? K_DUR_US : IS("detail") ? K_DETAIL : K_OTHER;
		case 11: return IS("start_known") ? K_START_KNOWN : K_OTHER;
		}
		break;
	case W_OTHER:
		switch (len) {
		case 2:
			return IS("tp")   ? K_TP
			       : IS("cp") ? K_CP
			       : IS("pp") ? K_PP
			       : IS("dp") ? K_DP
			       : IS("ep") ? K_EP
					  : K_OTHER;
		case 3: return IS("job") ? K_JOB : K_OTHER;
		case 5: return IS("world") ? K_WORLD : IS("order") ? K_ORDER : K_OTHER;
		case 12: return IS("job_start_us") ? K_JOB_START : K_OTHER;
		case 13: return IS("gpus_per_node") ? K_GPUS : K_OTHER;
		}
		break;
	case W_DIST:
		if (IS("rank"))
			return K_RANK;
		if (IS("world_size"))
			return K_WORLD;
		break;
	}
	return K_OTHER;
#undef IS
}

/* A member's key, c its first byte (r->p there), and the ':' after it: what it means, or -1.
 * The next byte, the value's first, is in *vc. */
static int key(struct rd *r, int c, enum where w, int *vc)
{
	if (c != '"')
		return fail(r, "malformed JSON: a key (a string) expected in an object");
	int k;
	const unsigned char *s = r->p + 1, *p = s;
	while (cls[*p] & C_PLAIN)
		p++;
	if (*p == '"') { /* the common case: no escape, in this chunk */
		k = (int)classify(s, (size_t)(p - s), w);
		r->p = p + 1;
	} else {
		char kb[KEY_MAX + 1];
		size_t len;
		r->p++;
		if (str_read(r, kb, sizeof(kb), &len) < 0)
			return -1;
		k = len < sizeof(kb) ? (int)classify((const unsigned char *)kb, len, w) : K_OTHER;
	}
	c = next(r);
	if (c != ':')
		return fail(r, "malformed JSON: ':' expected after a key");
	r->p++;
	if ((*vc = next(r)) < 0)
		return -1;
	return k;
}

/* an object or an array, r->p at its first byte, with depth containers around it: checked
 * and skipped */
static int skip_container(struct rd *r, int depth)
{
	int obj = *r->p == '{', close = obj ? '}' : ']';
	int c = open_container(r, depth);
	if (c < 0)
		return -1;
	if (c == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		if (obj && key(r, c, W_NONE, &c) < 0)
			return -1;
		if (skip_value(r, c, depth + 1) < 0)
			return -1;
		int a = after(r, close);
		if (a <= 0)
			return a;
		if ((c = next(r)) < 0)
			return -1;
	}
}

/* Any value, c its first byte (r->p there), with depth containers around it: checked and
 * skipped. */
static int skip_value(struct rd *r, int c, int depth)
{
	switch (c) {
	case '"': r->p++; return str_skip(r);
	case '{':
	case '[': return skip_container(r, depth);
	case 't':
	case 'f':
	case 'n': return lit_skip(r, c);
	default:
		if (c == '-' || (cls[c & 0xff] & C_DIGIT))
			return num_read(r, NULL);
		return fail(r, "malformed JSON: a value expected");
	}
}

/* a JSON number as an integer; -1 (absent) when it is out of range or not finite */
static int64_t to_i64(double v) { return v >= -9.0e18 && v <= 9.0e18 ? (int64_t)v : -1; }

static int is_num(int c) { return c == '-' || (cls[c & 0xff] & C_DIGIT); }

/* an object or array where an event field wants a scalar (checked after the depth, as before) */
static int wrong_type(struct rd *r, int c, int depth)
{
	if (depth >= MAX_DEPTH)
		return fail(r, "nesting deeper than 64 levels");
	r->p++;
	return fail(r, c == '{' ? "an event field has the wrong type (object)"
				: "an event field has the wrong type (array)");
}

/* args of an event, r->p at its '{', with depth containers around it: step and name read,
 * and the args of culprit's own trace */
static int read_args(struct rd *r, int depth)
{
	struct import_stream_event *e = &r->ev;
	int c = open_container(r, depth);
	if (c < 0)
		return -1;
	if (c == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		int k = key(r, c, W_ARGS, &c);
		size_t len;
		if (k < 0)
			return -1;
		if ((k == K_STEP || k == K_RANK || k == K_ITER || k == K_DUR_US) && is_num(c)) {
			double v;
			if (num_read(r, &v) < 0)
				return -1;
			*(k == K_STEP   ? &e->step
			  : k == K_RANK ? &e->rank
			  : k == K_ITER ? &e->iter
					: &e->dur_us) = to_i64(v);
		} else if (k == K_STEP && c != '{' && c != '[') {
			if (skip_value(r, c, depth + 1) < 0)
				return -1;
			return fail(r, "event field \"args.step\" is not a number");
		} else if ((k == K_NAME || k == K_KIND || k == K_GROUP || k == K_DETAIL) && c == '"') {
			r->p++;
			if (str_read(r,
				     k == K_NAME    ? e->arg_name
				     : k == K_KIND  ? e->kind
				     : k == K_GROUP ? e->group
						    : e->detail,
				     k == K_NAME    ? sizeof(e->arg_name)
				     : k == K_KIND  ? sizeof(e->kind)
				     : k == K_GROUP ? sizeof(e->group)
						    : sizeof(e->detail),
				     &len) < 0)
				return -1;
		} else if (k == K_START_KNOWN && c == 'f') {
			if (lit_skip(r, c) < 0)
				return -1;
			e->start_unknown = 1;
		} else if (skip_value(r, c, depth + 1) < 0) {
			return -1;
		}
		int a = after(r, '}');
		if (a <= 0)
			return a;
		if ((c = next(r)) < 0)
			return -1;
	}
}

/* the value of an event's member, c its first byte, with depth containers around it */
static int event_value(struct rd *r, int k, int c, int depth)
{
	struct import_stream_event *e = &r->ev;
	size_t len;
	double v;
	switch (k) {
	case K_PH:
	case K_CAT:
	case K_NAME:
		if (c == '"') {
			r->p++;
			if (k == K_PH)
				return str_read(r, e->ph, sizeof(e->ph), &len);
			if (k == K_CAT)
				return str_read(r, e->cat, sizeof(e->cat), &len);
			return str_read(r, e->name, sizeof(e->name), &len);
		}
		if (is_num(c)) {
			if (num_read(r, NULL) < 0)
				return -1;
			return fail(r, "event field \"ph\", \"cat\" or \"name\" is not a string");
		}
		if (k != K_CAT && (c == '{' || c == '['))
			return wrong_type(r, c, depth);
		return skip_value(r, c, depth);
	case K_TS:
	case K_DUR:
		if (is_num(c)) {
			if (num_read(r, &v) < 0)
				return -1;
			if (k == K_TS)
				e->ts = v, e->has_ts = 1;
			else
				e->dur = v, e->has_dur = 1;
			return 0;
		}
		if (c == '{' || c == '[')
			return wrong_type(r, c, depth);
		if (skip_value(r, c, depth) < 0)
			return -1;
		return fail(r,
			    k == K_TS ? "event field \"ts\" is not a number" : "event field \"dur\" is not a number");
	case K_PID:
	case K_TID:
		if (!is_num(c))
			return skip_value(r, c, depth);
		if (num_read(r, &v) < 0)
			return -1;
		*(k == K_PID ? &e->pid : &e->tid) = to_i64(v);
		return 0;
	case K_ARGS: return c == '{' ? read_args(r, depth) : skip_value(r, c, depth);
	}
	return skip_value(r, c, depth);
}

/* one event, r->p at its '{', with depth containers around it: read, then handed over */
static int read_event(struct rd *r, int depth)
{
	struct import_stream_event *e = &r->ev;
	e->ph[0] = e->cat[0] = e->name[0] = e->arg_name[0] = 0;
	e->kind[0] = e->group[0] = e->detail[0] = 0;
	e->has_ts = e->has_dur = e->start_unknown = 0;
	e->ts = e->dur = 0;
	e->pid = e->tid = -1;
	e->step = e->rank = e->iter = e->dur_us = -1;
	int c = open_container(r, depth);
	if (c < 0)
		return -1;
	if (c == '}') {
		r->p++;
	} else {
		for (;;) {
			int k = key(r, c, W_EVENT, &c);
			if (k < 0 || event_value(r, k, c, depth + 1) < 0)
				return -1;
			int a = after(r, '}');
			if (a < 0)
				return -1;
			if (a == 0)
				break;
			if ((c = next(r)) < 0)
				return -1;
		}
	}
	const char *why = NULL;
	if (r->h->event && r->h->event(r->h->ctx, e, &why) < 0)
		return fail(r, why ? why : "rejected");
	return 0;
}

/* the traceEvents array, r->p at its '[', with depth containers around it */
static int read_events(struct rd *r, int depth)
{
	r->have_events = 1;
	int c = open_container(r, depth);
	if (c < 0)
		return -1;
	if (c == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		if (c != '{') {
			if (c == '[') {
				if (depth + 1 >= MAX_DEPTH)
					return fail(r, "nesting deeper than 64 levels");
				r->p++;
			} else if (c == '"' || is_num(c) || c == 't' || c == 'f' || c == 'n') {
				if (skip_value(r, c, depth + 1) < 0)
					return -1;
			} else {
				return fail(r, "malformed JSON: a value expected");
			}
			return fail(r, "an element of traceEvents is not an object");
		}
		if (read_event(r, depth + 1) < 0)
			return -1;
		int a = after(r, ']');
		if (a <= 0)
			return a;
		if ((c = next(r)) < 0)
			return -1;
	}
}

/* distributedInfo, r->p at its '{' (in the top-level object): rank and world_size read */
static int read_dist(struct rd *r)
{
	int c = open_container(r, 1);
	if (c < 0)
		return -1;
	if (c == '}') {
		r->p++;
	} else {
		for (;;) {
			int k = key(r, c, W_DIST, &c);
			if (k < 0)
				return -1;
			if ((k == K_RANK || k == K_WORLD) && is_num(c)) {
				double v = 0;
				if (num_read(r, &v) < 0)
					return -1;
				*(k == K_RANK ? &r->rank : &r->world) = to_i64(v);
			} else if (skip_value(r, c, 2) < 0) {
				return -1;
			}
			int a = after(r, '}');
			if (a < 0)
				return -1;
			if (a == 0)
				break;
			if ((c = next(r)) < 0)
				return -1;
		}
	}
	const char *why = NULL;
	if (r->h->dist && r->h->dist(r->h->ctx, r->rank, r->world, &why) < 0)
		return fail(r, why ? why : "rejected");
	return 0;
}

/* otherData, r->p at its '{' (in the top-level object): the job and its topology read */
static int read_other(struct rd *r)
{
	struct import_stream_other o = {
		.world = -1, .tp = -1, .cp = -1, .pp = -1, .dp = -1, .ep = -1, .gpus_per_node = -1};
	int c = open_container(r, 1);
	if (c < 0)
		return -1;
	if (c == '}') {
		r->p++;
	} else {
		for (;;) {
			int k = key(r, c, W_OTHER, &c);
			size_t len;
			if (k < 0)
				return -1;
			if ((k == K_JOB || k == K_ORDER) && c == '"') {
				r->p++;
				if (str_read(r, k == K_JOB ? o.job : o.order,
					     k == K_JOB ? sizeof(o.job) : sizeof(o.order), &len) < 0)
					return -1;
			} else if (k != K_OTHER && k != K_JOB && k != K_ORDER && is_num(c)) {
				double v = 0;
				if (num_read(r, &v) < 0)
					return -1;
				*(k == K_JOB_START ? &o.job_start_us
				  : k == K_WORLD   ? &o.world
				  : k == K_TP      ? &o.tp
				  : k == K_CP      ? &o.cp
				  : k == K_PP      ? &o.pp
				  : k == K_DP      ? &o.dp
				  : k == K_EP      ? &o.ep
						   : &o.gpus_per_node) = to_i64(v);
			} else if (skip_value(r, c, 2) < 0) {
				return -1;
			}
			int a = after(r, '}');
			if (a < 0)
				return -1;
			if (a == 0)
				break;
			if ((c = next(r)) < 0)
				return -1;
		}
	}
	const char *why = NULL;
	if (r->h->other && r->h->other(r->h->ctx, &o, &why) < 0)
		return fail(r, why ? why : "rejected");
	return 0;
}

/* the document: an object with traceEvents (the first one counts) or a bare array of events */
static int read_doc(struct rd *r)
{
	int c = next(r);
	if (c < 0)
		return -1;
	if (c == '[')
		return read_events(r, 0);
	if (c != '{')
		return fail(r, "malformed JSON: the document is not an object or an array");
	c = open_container(r, 0);
	if (c < 0)
		return -1;
	if (c == '}') {
		r->p++;
		return 0;
	}
	for (;;) {
		int k = key(r, c, W_TOP, &c);
		if (k < 0)
			return -1;
		if (k == K_TRACEEVENTS && c == '[' && !r->have_events) {
			if (read_events(r, 1) < 0)
				return -1;
		} else if (k == K_DIST && c == '{') {
			if (read_dist(r) < 0)
				return -1;
		} else if (k == K_OTHERDATA && c == '{') {
			if (read_other(r) < 0)
				return -1;
		} else if (skip_value(r, c, 1) < 0) {
			return -1;
		}
		int a = after(r, '}');
		if (a <= 0)
			return a;
		if ((c = next(r)) < 0)
			return -1;
	}
}

/* after the document: white space only, to the end of the input */
static int read_end(struct rd *r)
{
	for (;;) {
		const unsigned char *p = r->p;
		while (cls[*p] & C_WS)
			p++;
		r->p = p;
		if (p < r->end)
			return fail(r, "malformed JSON: trailing garbage after the document");
		int m = more(r);
		if (m <= 0)
			return m;
	}
}

int import_stream_events(const char *path, const struct import_stream_handler *h, uint64_t *bytes, char *err,
			 size_t err_size)
{
	gzFile f = gz_open_read(path, 1 << 17);
	if (!f) {
		snprintf(err, err_size, "%s: could not open: %s", path, strerror(errno));
		return -1;
	}
	int rc = -1;
	struct rd *r = calloc(1, sizeof(*r));
	unsigned char *buf = malloc(CHUNK + PAD);
	if (!r || !buf) {
		snprintf(err, err_size, "%s: out of memory", path);
		goto out;
	}
	r->f = f;
	r->buf = buf;
	r->p = r->end = buf;
	buf[0] = 0;
	r->h = h;
	r->rank = r->world = -1;
	if (read_doc(r) < 0 || read_end(r) < 0) {
		snprintf(err, err_size, "%s: byte %llu: %s", path, (unsigned long long)r->at, r->why ? r->why : "?");
		goto out;
	}
	if (!r->have_events) {
		snprintf(err, err_size, "%s: no traceEvents array", path);
		goto out;
	}
	if (bytes)
		*bytes = r->base;
	rc = 0;
out:
	free(buf);
	free(r);
	gzclose(f);
	return rc;
}
