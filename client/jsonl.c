/* jsonl.c: interchange JSONL reader (plain or gzip, through readahead.c) and writer (zlib). */
#include "jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "hex.h"
#include "hugemem.h"
#include "readahead.h"

/* --- reading ---
 *
 * A small validating parser for one flat JSON object a line (jansson allocates per value
 * and was 80% of `culprit diagnose`). Top-level scalars are decoded in place (strings
 * unescaped where they stand in the line, which the reader owns); nested arrays and
 * objects are validated only (their strings unescaped in place too: their text is not
 * kept), durs_us is decoded as it is read. Anything that is not JSON is an error. */

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
#define JKEYS(X)                                                                                                    \
	X(type)                                                                                                     \
	X(job) X(world) X(tp) X(cp) X(pp) X(dp) X(ep) X(gpus_per_node) X(order) X(rank) X(host) X(iter) X(start_us) \
		X(dur_us) X(name) X(kind) X(group) X(count) X(durs_us) X(sum_us) X(min_us) X(max_us) X(p50_us)      \
			X(p99_us) X(ts_us) X(source) X(detail) X(device)

enum jkey {
#define X(k) JK_##k,
	JKEYS(X)
#undef X
		JK_COUNT,
	JK_NONE = JK_COUNT,
	JK_FIRST, /* no key before (the first of an object) */
};
_Static_assert(JK_COUNT <= 32, "struct jobj.seen has a bit per key");

static const char *const jkey_names[] = {
#define X(k) #k,
	JKEYS(X)
#undef X
};

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

#define JKEY_SLOTS 128
static unsigned char jkey_tab[JKEY_SLOTS]; /* enum jkey + 1, 0 empty */
static unsigned char jkey_len[JK_COUNT];
static pthread_once_t jkey_once = PTHREAD_ONCE_INIT;

/* each key's name and closing quote as two words, and the masks of their bytes: a guess is
 * checked with two loads (the reader pads its blocks, readahead.h) */
static uint64_t jkey_word[JK_COUNT][2], jkey_mask[JK_COUNT][2];

static unsigned jkey_hash(const char *k, size_t len)
{
	unsigned h = (unsigned)len;
	h = h * 33 ^ (unsigned char)k[0];
	h = h * 33 ^ (unsigned char)k[len / 2];
	h = h * 33 ^ (unsigned char)k[len - 1];
	return h & (JKEY_SLOTS - 1);
}

static void shapes_init(void);

static void jkey_init(void)
{
	shapes_init();
	for (int i = 0; i < JK_COUNT; i++) {
		jkey_len[i] = (unsigned char)strlen(jkey_names[i]);
		char word[16] = {0}, mask[16] = {0};
		memcpy(word, jkey_names[i], jkey_len[i]);
		word[jkey_len[i]] = '"';
		memset(mask, 0xff, jkey_len[i] + 1u);
		memcpy(jkey_word[i], word, 16);
		memcpy(jkey_mask[i], mask, 16);
		unsigned h = jkey_hash(jkey_names[i], jkey_len[i]);
		while (jkey_tab[h])
			h = (h + 1) & (JKEY_SLOTS - 1);
		jkey_tab[h] = (unsigned char)(i + 1);
	}
}

static enum jkey jkey_find(const char *k, size_t len)
{
	if (len == 0)
		return JK_NONE;
	for (unsigned h = jkey_hash(k, len); jkey_tab[h]; h = (h + 1) & (JKEY_SLOTS - 1)) {
		int i = jkey_tab[h] - 1;
		if (jkey_len[i] == len && memcmp(jkey_names[i], k, len) == 0)
			return (enum jkey)i;
	}
	return JK_NONE;
}

struct jp {
	char *p, *end; /* the line, unescaped in place */
	const char *err;
};

static void jws(struct jp *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\r' || *j->p == '\n'))
		j->p++;
}

static int jfail(struct jp *j, const char *msg)
{
	if (!j->err)
		j->err = msg;
	return -1;
}

static int read_hex4(struct jp *j, uint32_t *out)
{
	if (j->end - j->p < 4)
		return jfail(j, "truncated \\u escape");
	uint32_t v = 0;
	for (int k = 0; k < 4; k++) {
		int h = hex_digit(j->p[k]);
		if (h < 0)
			return jfail(j, "invalid \\u escape");
		v = v * 16 + (uint32_t)h;
	}
	j->p += 4;
	*out = v;
	return 0;
}

/* cp as UTF-8 at *w, never longer than the \u escape (or two) it was written as */
static void put_utf8(char **w, uint32_t cp)
{
	char *o = *w;
	if (cp < 0x80) {
		o[0] = (char)cp;
		*w += 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		*w += 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		*w += 3;
	} else {
		o[0] = (char)(0xF0 | (cp >> 18));
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[3] = (char)(0x80 | (cp & 0x3F));
		*w += 4;
	}
}

/* The end of a run of characters from p that are not '"', '\\' or control characters, at most
 * end. Eight at a time: the line ends in a control character ('\n', '\r' or the zero bytes
 * that pad the block, readahead.h), so the words read stop there or before. */
static char *plain_run(char *p, char *end)
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

/* At the opening quote: the string unescaped in place, where it stands in the line, and
 * NUL-terminated (its text is never shorter than its value: the closing quote at least
 * makes room for the NUL). No copy for a string without escapes. */
static int jstring(struct jp *j, const char **out, size_t *len)
{
	char *start = ++j->p, *w = start;
	for (;;) {
		if (j->p >= j->end)
			return jfail(j, "unterminated string");
		unsigned char ch = (unsigned char)*j->p;
		if (ch == '"') {
			j->p++;
			break;
		}
		if (ch < 0x20)
			return jfail(j, "control character in string");
		if (ch != '\\') {
			/* a run of plain characters at once, moved only after an escape */
			char *q = plain_run(j->p + 1, j->end);
			if (w != j->p)
				memmove(w, j->p, (size_t)(q - j->p));
			w += q - j->p;
			j->p = q;
			continue;
		}
		j->p++;
		if (j->p >= j->end)
			return jfail(j, "unterminated string");
		char e = *j->p++;
		switch (e) {
		case '"':
		case '\\':
		case '/': *w++ = e; break;
		case 'b': *w++ = '\b'; break;
		case 'f': *w++ = '\f'; break;
		case 'n': *w++ = '\n'; break;
		case 'r': *w++ = '\r'; break;
		case 't': *w++ = '\t'; break;
		case 'u': {
			uint32_t cp = 0;
			if (read_hex4(j, &cp) < 0)
				return -1;
			if (cp >= 0xD800 && cp < 0xDC00 && j->end - j->p >= 6 && j->p[0] == '\\' && j->p[1] == 'u') {
				uint32_t lo;
				j->p += 2;
				if (read_hex4(j, &lo) < 0)
					return -1;
				if (lo < 0xDC00 || lo > 0xDFFF)
					return jfail(j, "invalid surrogate pair");
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			} else if (cp >= 0xD800 && cp < 0xE000) {
				return jfail(j, "lone surrogate");
			}
			if (cp == 0)
				return jfail(j, "NUL in string");
			put_utf8(&w, cp);
			break;
		}
		default: return jfail(j, "invalid escape");
		}
	}
	*w = 0;
	*out = start;
	*len = (size_t)(w - start);
	return 0;
}

static int jnumber_any(struct jp *j, struct jval *v);

/* A number: the usual one, an integer of up to 18 digits, read in one pass; any other
 * (a fraction, an exponent, a longer one, a malformed one) by jnumber_any */
static int jnumber(struct jp *j, struct jval *v)
{
	char *p = j->p, *end = j->end;
	int neg = p < end && *p == '-';
	char *d = p + neg;
	uint64_t acc = 0;
	for (p = d; p < end && (unsigned char)(*p - '0') < 10; p++)
		acc = acc * 10 + (uint64_t)(*p - '0');
	if (p == d || p - d > 18 || (*d == '0' && p - d > 1) || (p < end && (*p == '.' || *p == 'e' || *p == 'E')))
		return jnumber_any(j, v);
	j->p = p;
	v->t = JT_NUM;
	v->is_int = 1;
	v->i = neg ? -(int64_t)acc : (int64_t)acc;
	v->d = (double)v->i;
	return 0;
}

static int jnumber_any(struct jp *j, struct jval *v)
{
	const char *s = j->p;
	int is_int = 1;
	if (j->p < j->end && *j->p == '-')
		j->p++;
	if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9'))
		return jfail(j, "invalid number");
	if (*j->p == '0')
		j->p++;
	else
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	if (j->p < j->end && *j->p == '.') {
		is_int = 0;
		j->p++;
		if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9'))
			return jfail(j, "invalid number");
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
		is_int = 0;
		j->p++;
		if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
			j->p++;
		if (j->p >= j->end || !(*j->p >= '0' && *j->p <= '9'))
			return jfail(j, "invalid number");
		while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
			j->p++;
	}
	v->t = JT_NUM;
	v->is_int = 0;
	size_t n = (size_t)(j->p - s);
	if (is_int && n <= 19) {
		/* the usual case: a small integer, no strtod/strtoll */
		const char *q = s + (*s == '-');
		uint64_t acc = 0;
		for (; q < j->p; q++)
			acc = acc * 10 + (uint64_t)(*q - '0');
		if (acc <= (uint64_t)INT64_MAX) {
			v->is_int = 1;
			v->i = *s == '-' ? -(int64_t)acc : (int64_t)acc;
			v->d = (double)v->i;
			return 0;
		}
	}
	char tmp[64];
	if (n >= sizeof(tmp))
		return jfail(j, "number too long");
	memcpy(tmp, s, n);
	tmp[n] = 0;
	v->d = strtod(tmp, NULL);
	if (is_int) {
		errno = 0;
		long long ll = strtoll(tmp, NULL, 10);
		if (errno == 0) {
			v->is_int = 1;
			v->i = ll;
		}
	}
	return 0;
}

static int jlit(struct jp *j, const char *lit, size_t n)
{
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return jfail(j, "invalid literal");
	j->p += n;
	return 0;
}

/* After a member: 1 at ',' (another follows), 0 at close (the end), -1 otherwise. */
static int jnext(struct jp *j, char close)
{
	jws(j);
	if (j->p < j->end && (*j->p == ',' || *j->p == close))
		return *j->p++ == ',';
	return -1;
}

/* validates any value (its strings unescaped in place, as any) */
static int jskip(struct jp *j, int depth)
{
	if (depth > JMAX_DEPTH)
		return jfail(j, "nesting too deep");
	jws(j);
	if (j->p >= j->end)
		return jfail(j, "unexpected end of line");
	const char *s;
	size_t l;
	struct jval v;
	switch (*j->p) {
	case '"': return jstring(j, &s, &l);
	case 't': return jlit(j, "true", 4);
	case 'f': return jlit(j, "false", 5);
	case 'n': return jlit(j, "null", 4);
	case '[':
		j->p++;
		jws(j);
		if (j->p < j->end && *j->p == ']') {
			j->p++;
			return 0;
		}
		for (;;) {
			if (jskip(j, depth + 1) < 0)
				return -1;
			int more = jnext(j, ']');
			if (more <= 0)
				return more < 0 ? jfail(j, "expected ',' or ']'") : 0;
		}
	case '{':
		j->p++;
		jws(j);
		if (j->p < j->end && *j->p == '}') {
			j->p++;
			return 0;
		}
		for (;;) {
			jws(j);
			if (j->p >= j->end || *j->p != '"')
				return jfail(j, "expected a key");
			if (jstring(j, &s, &l) < 0)
				return -1;
			jws(j);
			if (j->p >= j->end || *j->p != ':')
				return jfail(j, "expected ':'");
			j->p++;
			if (jskip(j, depth + 1) < 0)
				return -1;
			int more = jnext(j, '}');
			if (more <= 0)
				return more < 0 ? jfail(j, "expected ',' or '}'") : 0;
		}
	default: return jnumber(j, &v);
	}
}

/* durs_us: an array of numbers decoded straight into o->durs; -1 (nothing consumed that
 * matters: the caller rewinds) when it is anything else */
static int jdurs(struct jp *j, struct jobj *o)
{
	o->ndurs = 0;
	j->p++; /* '[' */
	jws(j);
	if (j->p < j->end && *j->p == ']') {
		j->p++;
		return 0;
	}
	for (;;) {
		jws(j);
		struct jval x;
		if (j->p >= j->end || !((*j->p >= '0' && *j->p <= '9') || *j->p == '-') || jnumber(j, &x) < 0)
			return -1;
		if (!x.is_int && !(x.d > -9.2e18 && x.d < 9.2e18))
			return -1; /* no int64 holds it (as for any other integer field) */
		if (o->ndurs == o->durs_cap) {
			size_t nc = o->durs_cap ? o->durs_cap * 2 : 64;
			int64_t *d = realloc(o->durs, nc * sizeof(*d));
			if (!d)
				return -1;
			o->durs = d;
			o->durs_cap = nc;
		}
		o->durs[o->ndurs++] = x.is_int ? x.i : (int64_t)x.d;
		int more = jnext(j, ']');
		if (more <= 0)
			return more;
	}
}

/* The key expected after prev, when it stands there: its name and a closing quote (the
 * names have no escapes, none is over 15 bytes), compared a word at a time */
static int jkey_guess(struct jp *j, const struct jobj *o, enum jkey prev, enum jkey *key)
{
	enum jkey g = (enum jkey)o->next_key[prev];
	if (g >= JK_COUNT)
		return 0;
	size_t n = jkey_len[g];
	char *k = j->p + 1;
	if ((size_t)(j->end - k) <= n)
		return 0;
	uint64_t a, b;
	memcpy(&a, k, 8);
	memcpy(&b, k + 8, 8);
	if (((a ^ jkey_word[g][0]) & jkey_mask[g][0]) | ((b ^ jkey_word[g][1]) & jkey_mask[g][1]))
		return 0;
	*key = g;
	j->p = k + n + 1;
	return 1;
}

/* A key: the expected one, or the plain ones (no escapes) looked up where they stand */
static int jkey_parse(struct jp *j, struct jobj *o, enum jkey prev, enum jkey *key)
{
	if (jkey_guess(j, o, prev, key))
		return 0;
	char *q = j->p + 1;
	while (q < j->end && (unsigned char)*q >= 0x20 && *q != '"' && *q != '\\')
		q++;
	if (q < j->end && *q == '"') {
		*key = jkey_find(j->p + 1, (size_t)(q - j->p - 1));
		j->p = q + 1;
	} else {
		const char *k = NULL;
		size_t kl = 0;
		if (jstring(j, &k, &kl) < 0)
			return -1;
		*key = jkey_find(k, kl);
	}
	o->next_key[prev] = (unsigned char)*key;
	return 0;
}

static int jparse_line(struct jp *j, struct jobj *o)
{
	o->seen = 0;
	o->durs_ok = 0;
	jws(j);
	if (j->p >= j->end || *j->p != '{')
		return jfail(j, "not an object");
	j->p++;
	jws(j);
	if (j->p < j->end && *j->p == '}') {
		j->p++;
	} else {
		enum jkey key = JK_FIRST;
		for (;;) {
			jws(j);
			if (j->p >= j->end || *j->p != '"')
				return jfail(j, "expected a key");
			if (jkey_parse(j, o, key, &key) < 0)
				return -1;
			jws(j);
			if (j->p >= j->end || *j->p != ':')
				return jfail(j, "expected ':'");
			j->p++;
			jws(j);
			/* the value straight into its key's slot (a repeated key: the last one wins);
			 * a copy of a struct jval from the stack after it was written field by
			 * field stalled on store forwarding (a quarter of read_line) */
			struct jval *v = &o->v[key];
			v->is_int = 0;
			if (j->p >= j->end)
				return jfail(j, "unexpected end of line");
			char *start = j->p;
			switch (*j->p) {
			case '"':
				v->t = JT_STR;
				if (jstring(j, &v->s, &v->len) < 0)
					return -1;
				break;
			case '[':
				if (key == JK_durs_us && jdurs(j, o) == 0) {
					o->durs_ok = 1;
				} else {
					o->durs_ok = 0;
					j->p = start;
					if (jskip(j, 1) < 0)
						return -1;
				}
				v->t = JT_ARR;
				break;
			case '{':
				v->t = JT_OBJ;
				if (jskip(j, 1) < 0)
					return -1;
				break;
			case 't':
			case 'f':
				v->t = JT_BOOL;
				v->i = *j->p == 't';
				if (jlit(j, v->i ? "true" : "false", v->i ? 4 : 5) < 0)
					return -1;
				break;
			case 'n':
				v->t = JT_NULL;
				if (jlit(j, "null", 4) < 0)
					return -1;
				break;
			default:
				if (jnumber(j, v) < 0)
					return -1;
			}
			if (key != JK_NONE) {
				o->seen |= 1u << key;
				if (key == JK_durs_us && v->t != JT_ARR)
					o->durs_ok = 0;
			}
			int more = jnext(j, '}');
			if (more < 0)
				return jfail(j, "expected ',' or '}'");
			if (!more)
				break;
		}
	}
	jws(j);
	if (j->p != j->end)
		return jfail(j, "trailing characters after the object");
	return 0;
}

static const struct jval *jget(const struct jobj *o, enum jkey key)
{
	return o->seen & (1u << key) ? &o->v[key] : NULL;
}

static int get_u32(const struct jobj *o, enum jkey key, int required, uint32_t def, uint32_t *out, const char **why)
{
	const struct jval *v = jget(o, key);
	if (!v) {
		if (required) {
			*why = jkey_names[key];
			return -2;
		}
		*out = def;
		return 0;
	}
	if (v->t != JT_NUM || !v->is_int || v->i < 0 || v->i > UINT32_MAX) {
		*why = jkey_names[key];
		return -3;
	}
	*out = (uint32_t)v->i;
	return 0;
}

static int get_i64(const struct jobj *o, enum jkey key, int required, int64_t def, int64_t *out, const char **why)
{
	const struct jval *v = jget(o, key);
	if (!v || v->t == JT_NULL) {
		if (required) {
			*why = jkey_names[key];
			return -2;
		}
		*out = def;
		return 0;
	}
	if (v->t != JT_NUM || !(v->is_int || (v->d > -9.2e18 && v->d < 9.2e18))) {
		*why = jkey_names[key];
		return -3;
	}
	*out = v->is_int ? v->i : (int64_t)v->d;
	return 0;
}

static const char *get_str(const struct jobj *o, enum jkey key)
{
	const struct jval *v = jget(o, key);
	return v && v->t == JT_STR ? v->s : NULL;
}

/* field problems: -2 missing, -3 wrong type */
static void field_msg(char *buf, size_t len, int rc, const char *key)
{
	snprintf(buf, len, "%s field \"%s\"", rc == -2 ? "missing" : "invalid", key);
}

/* a string field's value is s (compared by length first) */
static int str_is(const struct jval *v, const char *s, size_t len)
{
	return v->len == len && memcmp(v->s, s, len) == 0;
}
#define STR_IS(v, lit) str_is(v, lit, sizeof(lit) - 1)

/* A record decoded from a line, handed to the handler later, in the file's order. A phase's
 * or kernel's name is the read's interned copy (struct names), its other strings lie in its
 * block's text, a kernel's durations (or its summary) in the block's durs. 56 bytes: the
 * applying thread reads each from the other core's cache (a whole record_kernel made them
 * 112). */
enum drec_type { D_JOB, D_HOST, D_ITER, D_PHASE, D_KERNEL, D_EVENT };

struct djob { /* a job line but its name (the drec's) */
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	uint8_t device; /* 0: not said, 1: gpu, 2: cpu */
	const char *order;
};

struct dkernel { /* a kernel line but its name (the drec's) */
	uint32_t rank, iter, count;
	uint8_t kind;
	uint8_t summary;    /* no durations: sum, min, max, p50, p99 at the block's durs + durs */
	size_t durs, ndurs; /* the durations at the block's durs + durs */
};

struct drec {
	enum drec_type type;
	uint32_t line;    /* in its block, from 1 */
	const char *name; /* a phase's or kernel's name, a host line's or event's host, the job */
	union {
		struct djob job;
		uint32_t rank; /* host */
		struct record_iter iter;
		struct record_phase phase;
		struct dkernel kernel;
		struct {
			const char *kind, *source, *detail;
			int64_t ts_us;
		} event;
	} u;
};

_Static_assert(sizeof(void *) != 8 || sizeof(struct drec) == 56, "a decoded record is 56 bytes");

/* a kernel's summary in the block's durs: sum, min, max, p50, p99 */
#define KERNEL_SUMMARY 5

/* The record of a line (1), or an unknown type, ignored (forward compatibility) (0), or
 * -1 with msg set. A kernel's durations (o->durs), or its summary (sum, when summary is
 * set), are copied into the block by the caller. */
static int decode_line(const struct jobj *o, struct drec *d, int64_t sum[KERNEL_SUMMARY], char *msg, size_t msglen)
{
	const char *why = NULL;
	int rc = 0;
	const struct jval *type = jget(o, JK_type);
	if (!type || type->t != JT_STR) {
		snprintf(msg, msglen, "missing field \"type\"");
		return -1;
	}
#define U32(key, req, def, dst)                                        \
	do {                                                           \
		if ((rc = get_u32(o, key, req, def, dst, &why)) < 0) { \
			field_msg(msg, msglen, rc, why);               \
			return -1;                                     \
		}                                                      \
	} while (0)
#define I64(key, req, def, dst)                                        \
	do {                                                           \
		if ((rc = get_i64(o, key, req, def, dst, &why)) < 0) { \
			field_msg(msg, msglen, rc, why);               \
			return -1;                                     \
		}                                                      \
	} while (0)
	if (STR_IS(type, "job")) {
		struct djob *j = &d->u.job;
		d->type = D_JOB;
		memset(j, 0, sizeof(*j));
		d->name = get_str(o, JK_job);
		j->order = get_str(o, JK_order);
		U32(JK_world, 1, 0, &j->world);
		U32(JK_tp, 0, 1, &j->tp);
		U32(JK_cp, 0, 1, &j->cp);
		U32(JK_pp, 0, 1, &j->pp);
		U32(JK_dp, 0, 0, &j->dp);
		U32(JK_ep, 0, 1, &j->ep);
		U32(JK_gpus_per_node, 0, 8, &j->gpus_per_node);
		/* what the ranks run on; another word is not said (a device of a later format) */
		const char *dev = get_str(o, JK_device);
		j->device = !dev ? 0 : strcmp(dev, "cpu") == 0 ? 2 : strcmp(dev, "gpu") == 0 ? 1 : 0;
		if (!j->dp && j->tp && j->cp && j->pp)
			j->dp = j->world / (j->tp * j->cp * j->pp);
	} else if (STR_IS(type, "host")) {
		d->type = D_HOST;
		U32(JK_rank, 1, 0, &d->u.rank);
		if (!(d->name = get_str(o, JK_host))) {
			snprintf(msg, msglen, "missing field \"host\"");
			return -1;
		}
	} else if (STR_IS(type, "iter")) {
		struct record_iter *r = &d->u.iter;
		d->type = D_ITER;
		U32(JK_rank, 1, 0, &r->rank);
		U32(JK_iter, 1, 0, &r->iter);
		I64(JK_start_us, 0, 0, &r->start_us);
		I64(JK_dur_us, 1, 0, &r->dur_us);
		if (r->dur_us < 0) {
			snprintf(msg, msglen, "negative dur_us");
			return -1;
		}
	} else if (STR_IS(type, "phase")) {
		struct record_phase *r = &d->u.phase;
		d->type = D_PHASE;
		memset(r, 0, sizeof(*r));
		U32(JK_rank, 1, 0, &r->rank);
		U32(JK_iter, 1, 0, &r->iter);
		I64(JK_start_us, 0, RECORD_NO_START, &r->start_us);
		I64(JK_dur_us, 1, 0, &r->dur_us);
		const char *kind = get_str(o, JK_kind), *group = get_str(o, JK_group);
		d->name = get_str(o, JK_name);
		if (!d->name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", d->name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind), g = group ? record_group_parse(group) : 0;
		if (k < 0 || g < 0) {
			snprintf(msg, msglen, "unknown %s \"%s\"", k < 0 ? "kind" : "group", k < 0 ? kind : group);
			return -1;
		}
		r->kind = (uint8_t)k;
		r->group = (uint8_t)g;
	} else if (STR_IS(type, "kernel")) {
		struct dkernel *r = &d->u.kernel;
		d->type = D_KERNEL;
		memset(r, 0, sizeof(*r));
		U32(JK_rank, 1, 0, &r->rank);
		U32(JK_iter, 1, 0, &r->iter);
		U32(JK_count, 0, 0, &r->count);
		const char *kind = get_str(o, JK_kind);
		d->name = get_str(o, JK_name);
		if (!d->name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", d->name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind);
		if (k < 0) {
			snprintf(msg, msglen, "unknown kind \"%s\"", kind);
			return -1;
		}
		r->kind = (uint8_t)k;
		const struct jval *dv = jget(o, JK_durs_us);
		if (dv) {
			if (dv->t != JT_ARR || !o->durs_ok) {
				snprintf(msg, msglen, "invalid field \"durs_us\"");
				return -1;
			}
			r->ndurs = o->ndurs;
			if (!r->count)
				r->count = (uint32_t)o->ndurs;
		} else {
			r->summary = 1;
			I64(JK_sum_us, 0, 0, &sum[0]);
			I64(JK_min_us, 1, 0, &sum[1]);
			I64(JK_max_us, 1, 0, &sum[2]);
			I64(JK_p50_us, 1, 0, &sum[3]);
			I64(JK_p99_us, 0, sum[2], &sum[4]);
		}
	} else if (STR_IS(type, "event")) {
		d->type = D_EVENT;
		I64(JK_ts_us, 0, 0, &d->u.event.ts_us);
		d->name = get_str(o, JK_host);
		d->u.event.kind = get_str(o, JK_kind);
		if (!d->name || !d->u.event.kind) {
			snprintf(msg, msglen, "missing field \"%s\"", d->name ? "kind" : "host");
			return -1;
		}
		d->u.event.source = get_str(o, JK_source);
		d->u.event.detail = get_str(o, JK_detail);
	} else {
		return 0;
	}
	return 1;
#undef U32
#undef I64
}

/* The names of phases and kernels, interned for one read. A decoder hands each record the
 * table's copy of its name, so the thread that applies the records reads a few strings that
 * stay in its cache instead of a line another core wrote (that miss, in store_intern_name's
 * strcmp, was a quarter of its time). Each decoder remembers the names it met last; the
 * shared table is locked only for a name the decoder has not met. A copy stays where it is
 * until the read ends. */
struct name {
	struct name *next;
	uint32_t hash, len;
	uint64_t a, z; /* the first and last 8 bytes, as name_intern reads them */
	char s[];
};

struct names {
	pthread_mutex_t mu;
	struct name **tab; /* chains; cap a power of two */
	size_t cap, n;
};

#define NAME_SEEN_BITS 8
#define NAME_SEEN (1u << NAME_SEEN_BITS) /* a decoder's memory of names */

static uint32_t name_hash(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static bool name_is(const struct name *x, uint32_t hash, const char *s, size_t len)
{
	return x->hash == hash && x->len == len && memcmp(x->s, s, len) == 0;
}

/* the table's copy of s, or NULL when out of memory */
static const char *name_intern(struct names *t, struct name **seen, const char *s, size_t len)
{
	/* the decoder's memory by the length and the first and last 8 bytes (the block's
	 * padding covers a word past a short name): no hash of the whole name for one met
	 * before (that hash was a tenth of a decoder's time) */
	uint64_t a, z;
	memcpy(&a, s, 8);
	memcpy(&z, s + (len > 8 ? len - 8 : 0), 8);
	if (len < 8)
		a = z = a & ((1ull << (len * 8)) - 1);
	/* two ways: two names that share a slot (sm90_gemm and another of case5's 11 did) no
	 * longer evict each other on every line; a name of up to 16 bytes is its two words */
	struct name **m = &seen[(((a ^ (z >> 7) ^ len) * 0x9E3779B97F4A7C15ull) >> (64 - NAME_SEEN_BITS)) & ~1u];
	for (int w = 0; w < 2; w++)
		if (m[w] && m[w]->a == a && m[w]->z == z && m[w]->len == len &&
		    (len <= 16 || memcmp(m[w]->s + 8, s + 8, len - 16) == 0))
			return m[w]->s;
	uint32_t hash = name_hash(s, len);
	pthread_mutex_lock(&t->mu);
	struct name *x = NULL;
	if (t->cap)
		for (x = t->tab[hash & (t->cap - 1)]; x && !name_is(x, hash, s, len); x = x->next)
			;
	if (!x && t->n == t->cap / 2) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct name **tab = calloc(cap, sizeof(*tab));
		if (!tab) {
			pthread_mutex_unlock(&t->mu);
			return NULL;
		}
		for (size_t i = 0; i < t->cap; i++)
			for (struct name *y = t->tab[i], *next; y; y = next) {
				next = y->next;
				y->next = tab[y->hash & (cap - 1)];
				tab[y->hash & (cap - 1)] = y;
			}
		free(t->tab);
		t->tab = tab;
		t->cap = cap;
	}
	if (!x && (x = malloc(sizeof(*x) + len + 1))) {
		x->hash = hash;
		x->len = (uint32_t)len;
		x->a = a;
		x->z = z;
		memcpy(x->s, s, len);
		x->s[len] = 0;
		x->next = t->tab[hash & (t->cap - 1)];
		t->tab[hash & (t->cap - 1)] = x;
		t->n++;
	}
	pthread_mutex_unlock(&t->mu);
	if (!x)
		return NULL;
	m[1] = m[0]; /* the older of the two goes */
	m[0] = x;
	return x->s;
}

static void names_free(struct names *t)
{
	for (size_t i = 0; i < t->cap; i++)
		for (struct name *x = t->tab[i], *next; x; x = next) {
			next = x->next;
			free(x);
		}
	free(t->tab);
}

/* A block of whole lines from readahead, and what its lines decode to. The blocks' records
 * and durations start in one allocation on large pages (blocks_mem); either that outgrows its
 * part moves to an array of its own (durations of 4 KiB pages grown by realloc were 500 page
 * faults of a 260 MB file). */
struct block {
	bool decoded;
	uint64_t lines;   /* lines in the block */
	struct drec *rec; /* one per record line, in order */
	size_t nrec, rec_cap;
	int64_t *durs; /* the kernels' durations */
	size_t ndurs, durs_cap;
	bool rec_own, durs_own; /* moved out of the blocks' allocation */
	uint32_t err_line;      /* a line that could not be decoded (0: none), the block's end */
	char err[240];
};

/* One allocation for the records and durations of n blocks of size bytes each: a record a
 * line of 100 bytes, a duration 32 bytes of text; NULL when out of memory. */
static char *blocks_mem(struct block *blocks, unsigned n, size_t size)
{
	size_t recs = size / 100 + 64, durs = size / 32 + 64;
	size_t per = (recs * sizeof(struct drec) + durs * sizeof(int64_t) + 63) & ~(size_t)63;
	char *mem = hugemem_alloc(per * n, 0);
	for (unsigned i = 0; mem && i < n; i++) {
		struct block *b = &blocks[i];
		b->rec = (struct drec *)(void *)(mem + per * i);
		b->rec_cap = recs;
		b->durs = (int64_t *)(void *)(mem + per * i + recs * sizeof(struct drec));
		b->durs_cap = durs;
	}
	return mem;
}

static void block_free(struct block *b)
{
	if (b->rec_own)
		free(b->rec);
	if (b->durs_own)
		free(b->durs);
}

/* room in b->durs for need more durations: 0, or -1 when out of memory */
static int durs_room(struct block *b, size_t need)
{
	if (b->ndurs + need <= b->durs_cap)
		return 0;
	size_t c = b->durs_cap; /* blocks_mem gave it room for some */
	while (c < b->ndurs + need)
		c *= 2;
	int64_t *x = b->durs_own ? realloc(b->durs, c * sizeof(*x)) : malloc(c * sizeof(*x));
	if (!x)
		return -1;
	if (!b->durs_own) /* all of it, as realloc: a line being matched has some past ndurs */
		memcpy(x, b->durs, b->durs_cap * sizeof(*x));
	b->durs = x;
	b->durs_cap = c;
	b->durs_own = true;
	return 0;
}

/* --- the writer's lines, read by their shape ---
 *
 * Most lines of a large file are phases, kernels and iterations as jsonl_write_* writes
 * them: keys in its order, no spaces, strings without escapes, integers. Such a line is
 * matched against its shape (its literal text a word at a time, its fields in between)
 * and decoded straight into its record, without the general parser (which was half of a
 * decoder's time, finding each key and dispatching on it). A line that differs in any byte
 * (other spacing or key order, an escape, a fraction, a leading zero, a number out of range,
 * anything malformed) is left untouched for the general parser, so it decodes, or fails
 * with its message, exactly as before: the shape only ever accepts lines the general
 * parser reads to the same record. */
enum field { F_END, F_STR, F_U32, F_I64, F_INTS };

struct step {
	const char *lit; /* literal text before the field */
	uint8_t len;
	uint8_t field;
	uint64_t word[3], mask[3]; /* lit a word at a time (no literal is over 24 bytes) */
};

#define LIT(s) s, sizeof(s) - 1
static struct step shape_phase[] = {
	{LIT("{\"type\":\"phase\",\"job\":\""), F_STR, {0}, {0}}, {LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},			 {LIT(",\"name\":\""), F_STR, {0}, {0}},
	{LIT("\",\"kind\":\""), F_STR, {0}, {0}},		 {LIT("\",\"group\":\""), F_STR, {0}, {0}},
	{LIT("\",\"start_us\":"), F_I64, {0}, {0}},		 {LIT(",\"dur_us\":"), F_I64, {0}, {0}},
	{LIT("}"), F_END, {0}, {0}},
};
static struct step shape_kernel[] = {
	{LIT("{\"type\":\"kernel\",\"job\":\""), F_STR, {0}, {0}}, {LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},			  {LIT(",\"name\":\""), F_STR, {0}, {0}},
	{LIT("\",\"kind\":\""), F_STR, {0}, {0}},		  {LIT("\",\"count\":"), F_U32, {0}, {0}},
	{LIT(",\"durs_us\":"), F_INTS, {0}, {0}},		  {LIT("}"), F_END, {0}, {0}},
};
static struct step shape_iter[] = {
	{LIT("{\"type\":\"iter\",\"job\":\""), F_STR, {0}, {0}}, {LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},			{LIT(",\"start_us\":"), F_I64, {0}, {0}},
	{LIT(",\"dur_us\":"), F_I64, {0}, {0}},			{LIT("}"), F_END, {0}, {0}},
};
#undef LIT
#define SHAPE_FIELDS 8

static void shape_init(struct step *st, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char word[24] = {0}, mask[24] = {0};
		memcpy(word, st[i].lit, st[i].len);
		memset(mask, 0xff, st[i].len);
		memcpy(st[i].word, word, sizeof(word));
		memcpy(st[i].mask, mask, sizeof(mask));
	}
}

static void shapes_init(void)
{
	shape_init(shape_phase, sizeof(shape_phase) / sizeof(shape_phase[0]));
	shape_init(shape_kernel, sizeof(shape_kernel) / sizeof(shape_kernel[0]));
	shape_init(shape_iter, sizeof(shape_iter) / sizeof(shape_iter[0]));
}

/* An integer as jnumber reads it in one pass (up to 18 digits, no leading zero, a sign only
 * when neg may be), followed by none of ".eE": the end of its digits, or NULL. The digits
 * stop at the block's end without a test of it: zero bytes pad the block (readahead.h). */
__attribute__((always_inline)) static inline char *shape_int(char *p, char *end, int neg, int64_t *out)
{
	int minus = neg && *p == '-';
	char *d = p + minus, *q = d;
	uint64_t acc = 0;
	for (unsigned c; (c = (unsigned char)*q - '0') < 10; q++)
		acc = acc * 10 + c;
	size_t n = (size_t)(q - d);
	if (n - 1 >= 18 || (*d == '0' && n > 1) || *q == '.' || *q == 'e' || *q == 'E' || q > end)
		return NULL;
	*out = minus ? -(int64_t)acc : (int64_t)acc;
	return q;
}

/* The line from p against a shape, the block ending at end: its strings (start and length)
 * and numbers in order, an F_INTS array appended to b->durs (*nints of them). The line's end
 * (its newline, or the block's end) when the shape matches all of it, else NULL. No field
 * or literal of a shape takes a newline, so a match never runs past the line. With stop,
 * only the steps before it are matched, and the end of their text is returned. */
static char *shape_match(const struct step *st, char *p, char *end, struct block *b, const char **str, size_t *len,
			 int64_t *num, size_t *nints, const struct step *stop)
{
	size_t ns = 0, nn = 0;
	for (;; st++) {
		if (st == stop) /* matched so far: where stop's literal would start */
			return p;
		if ((size_t)(end - p) < st->len)
			return NULL;
		for (unsigned w = 0; w * 8 < st->len; w++) { /* the block's padding covers the last word */
			uint64_t x;
			memcpy(&x, p + w * 8, 8);
			if ((x ^ st->word[w]) & st->mask[w])
				return NULL;
		}
		p += st->len;
		switch (st->field) {
		case F_END: return p == end || *p == '\n' ? p : NULL;
		case F_STR: {
			char *q = plain_run(p, end);
			if (q == end || *q != '"')
				return NULL;
			str[ns] = p;
			len[ns++] = (size_t)(q - p);
			p = q;
			break;
		}
		case F_U32:
		case F_I64:
			if (!(p = shape_int(p, end, st->field == F_I64, &num[nn])) ||
			    (st->field == F_U32 && num[nn] > (int64_t)UINT32_MAX))
				return NULL;
			nn++;
			break;
		case F_INTS:
			if (p == end || *p++ != '[')
				return NULL;
			*nints = 0;
			if (p < end && *p == ']') {
				p++;
				break;
			}
			for (;;) {
				int64_t v;
				if (!(p = shape_int(p, end, 1, &v)))
					return NULL;
				if (durs_room(b, *nints + 1) < 0)
					return NULL; /* the general parser says out of memory */
				b->durs[b->ndurs + (*nints)++] = v;
				if (p < end && *p == ',') {
					p++;
					continue;
				}
				if (p == end || *p++ != ']')
					return NULL;
				break;
			}
			break;
		}
	}
}

/* a kind or group, NUL-terminated where it stands (over its closing quote) for
 * record_*_parse */
static int shape_word(const char *s, size_t len, int group)
{
	((char *)s)[len] = 0;
	return group ? record_group_parse(s) : record_kind_parse(s);
}

/* puts back the closing quote of a string shape_word ended */
static void shape_unword(const char *s, size_t len) { ((char *)s)[len] = '"'; }

/* A number shape_match found, read alone: it stored each 8 bytes at a time, and a wider load
 * of two (as the compiler pairs the copies of adjacent fields) cannot take them from the
 * stores in flight and waits for both to reach the cache: that stall was two fifths of a
 * decoder's own time. */
static int64_t num_get(const int64_t *num, size_t i) { return ((const volatile int64_t *)num)[i]; }

/* --- a decoder's memory of the lines' text ---
 *
 * The lines of a large file repeat their text but for the numbers: a phase's or kernel's
 * head (its type and job, up to its rank) is the same on every line, and its middle (name,
 * kind and group, up to its next number) is one of a few. A decoder remembers the last head
 * of each, and the middles it met by the first bytes of their name. A line whose head and
 * middle are the same bytes as ones met before is matched in its numbers only, its name,
 * kind and group those decoded when they were first met: the shape checked those bytes then,
 * and the same bytes decode to the same record. Any other line takes the whole shape. */
#define SPAN_WORDS 16 /* a span of up to 128 bytes */
#define MID_BITS 6    /* 64 middles of each, two a slot */

struct span {
	uint32_t len; /* bytes; 0: none */
	uint8_t kind, group;
	const char *name;       /* a middle's, interned */
	uint64_t tail;          /* the bytes of the last word that are the text's */
	uint64_t w[SPAN_WORDS]; /* the text, zero past len */
};

struct reading;

struct decoder_mem { /* a decoding thread's own */
	struct reading *g;
	struct jobj obj;
	struct name *seen[NAME_SEEN];
	struct span head[2];                /* phases', kernels' */
	struct span mid[2][1u << MID_BITS]; /* by their name's first bytes */
};

/* the text at p (the block ending at end) begins with span x */
static bool span_at(const struct span *x, const char *p, const char *end)
{
	if (!x->len || (size_t)(end - p) < x->len)
		return false;
	size_t n = x->len / 8, r = x->len % 8;
	uint64_t w;
	for (size_t i = 0; i < n; i++) {
		memcpy(&w, p + i * 8, 8);
		if (w != x->w[i])
			return false;
	}
	if (!r)
		return true;
	memcpy(&w, p + n * 8, 8); /* the block's padding covers the word */
	return (w & x->tail) == x->w[n];
}

/* x becomes the text [from, to) with a quote at q1 and q2 (where shape_word ended a string),
 * unless it is longer than a span */
static void span_keep(struct span *x, const char *from, const char *to, const char *q1, const char *q2)
{
	size_t n = (size_t)(to - from);
	if (n > sizeof(x->w))
		return;
	memset(x->w, 0, sizeof(x->w));
	memcpy(x->w, from, n);
	if (q1)
		((char *)x->w)[q1 - from] = '"';
	if (q2)
		((char *)x->w)[q2 - from] = '"';
	x->tail = 0;
	memset(&x->tail, 0xff, n % 8);
	x->len = (uint32_t)n;
}

/* the slot pair of a middle at p (at its `,"name":"`) */
static struct span *mid_slot(struct decoder_mem *m, int kernel, const char *p)
{
	uint64_t a, z;
	memcpy(&a, p + 9, 8);
	memcpy(&z, p + 17, 8);
	return &m->mid[kernel][(((a ^ (z >> 5)) * 0x9E3779B97F4A7C15ull) >> (64 - MID_BITS)) & ~1u];
}

/* remembers the middle [from, to) of the line of record d (a block ending at end), with a
 * quote at q1 and q2 (where shape_word ended a string); the older of its slot pair goes */
static void mid_keep(struct decoder_mem *m, int kernel, const char *from, const char *to, const char *end,
		     const char *q1, const char *q2, const struct drec *d)
{
	if (end - from < 25) /* mid_slot reads 16 bytes of the name */
		return;
	struct span *x = mid_slot(m, kernel, from);
	x[1] = x[0];
	x->len = 0;
	span_keep(x, from, to, q1, q2);
	x->name = d->name;
	x->kind = kernel ? d->u.kernel.kind : d->u.phase.kind;
	x->group = kernel ? 0 : d->u.phase.group;
}

/* d a phase of the numbers a shape matched: rank, iteration, start, duration */
static void put_phase(struct drec *d, const int64_t *num, uint8_t kind, uint8_t group)
{
	struct record_phase *r = &d->u.phase;
	memset(r, 0, sizeof(*r));
	d->type = D_PHASE;
	r->rank = (uint32_t)num_get(num, 0);
	r->iter = (uint32_t)num_get(num, 1);
	r->start_us = num_get(num, 2);
	r->dur_us = num_get(num, 3);
	r->kind = kind;
	r->group = group;
}

/* d a kernel of the numbers a shape matched (rank, iteration, count) and its nints durations,
 * the last ones in b->durs */
static void put_kernel(struct drec *d, struct block *b, const int64_t *num, size_t nints, uint8_t kind)
{
	struct dkernel *r = &d->u.kernel;
	memset(r, 0, sizeof(*r));
	d->type = D_KERNEL;
	r->rank = (uint32_t)num_get(num, 0);
	r->iter = (uint32_t)num_get(num, 1);
	r->count = num_get(num, 2) ? (uint32_t)num_get(num, 2) : (uint32_t)nints;
	r->kind = kind;
	r->durs = b->ndurs;
	r->ndurs = nints;
	b->ndurs += nints;
}

/* A phase or kernel line (p[9] 'p' or 'k') whose head and middle were met before: its record
 * and end, as decode_shaped gives them, or NULL: not one */
static char *decode_known(struct decoder_mem *m, char *p, char *end, struct drec *d, struct block *b)
{
	int kernel = p[9] == 'k';
	const struct step *sh = kernel ? shape_kernel : shape_phase;
	unsigned last = kernel ? 5 : 6; /* the step whose literal ends the middle */
	const struct span *h = &m->head[kernel];
	if (!span_at(h, p, end))
		return NULL;
	const char *str[SHAPE_FIELDS];
	size_t len[SHAPE_FIELDS], nints = 0;
	int64_t num[SHAPE_FIELDS];
	/* the rank and iteration, from the literal before the rank (the head's last bytes) */
	char *q = shape_match(sh + 1, p + h->len - sh[1].len, end, b, str, len, num, &nints, sh + 3);
	if (!q || end - q < 25)
		return NULL;
	struct span *x = mid_slot(m, kernel, q);
	if (!span_at(x, q, end) && !span_at(++x, q, end))
		return NULL;
	char *le = shape_match(sh + last, q + x->len - sh[last].len, end, b, str, len, num + 2, &nints, NULL);
	if (!le)
		return NULL;
	d->name = x->name;
	if (kernel)
		put_kernel(d, b, num, nints, x->kind);
	else
		put_phase(d, num, x->kind, x->group);
	return le;
}

/* The record of a line of the writer's shape, from p in a block ending at end: the line's
 * end (its newline or the block's end; a phase's or kernel's name interned in t), or NULL:
 * not one, the line as it was. A phase's or kernel's head and middle are remembered in m. */
static char *decode_shaped(struct decoder_mem *m, struct names *t, char *p, char *end, struct drec *d, struct block *b)
{
	static const char none[] = "";
	const char *str[SHAPE_FIELDS] = {none, none, none, none, none, none, none, none}; /* set by a match */
	size_t len[SHAPE_FIELDS] = {0}, nints = 0;
	int64_t num[SHAPE_FIELDS] = {0};
	char *le;
	if (end - p < 10 || memcmp(p, "{\"type\":\"", 9) != 0)
		return NULL;
	if ((p[9] == 'p' || p[9] == 'k') && (le = decode_known(m, p, end, d, b)))
		return le;
	switch (p[9]) {
	case 'p': {
		if (!(le = shape_match(shape_phase, p, end, b, str, len, num, &nints, NULL)))
			return NULL;
		int k = shape_word(str[2], len[2], 0), g = shape_word(str[3], len[3], 1);
		if (k < 0 || g < 0 || !(d->name = name_intern(t, m->seen, str[1], len[1]))) {
			/* the general parser names it (or runs out of memory too) */
			shape_unword(str[2], len[2]);
			shape_unword(str[3], len[3]);
			return NULL;
		}
		put_phase(d, num, (uint8_t)k, (uint8_t)g);
		span_keep(&m->head[0], p, str[0] + len[0] + shape_phase[1].len, NULL, NULL);
		mid_keep(m, 0, str[1] - shape_phase[3].len, str[3] + len[3] + shape_phase[6].len, end, str[2] + len[2],
			 str[3] + len[3], d);
		return le;
	}
	case 'k': {
		if (!(le = shape_match(shape_kernel, p, end, b, str, len, num, &nints, NULL)))
			return NULL;
		int k = shape_word(str[2], len[2], 0);
		if (k < 0 || !(d->name = name_intern(t, m->seen, str[1], len[1]))) {
			shape_unword(str[2], len[2]);
			return NULL;
		}
		put_kernel(d, b, num, nints, (uint8_t)k);
		span_keep(&m->head[1], p, str[0] + len[0] + shape_kernel[1].len, NULL, NULL);
		mid_keep(m, 1, str[1] - shape_kernel[3].len, str[2] + len[2] + shape_kernel[5].len, end,
			 str[2] + len[2], NULL, d);
		return le;
	}
	case 'i': {
		if (!(le = shape_match(shape_iter, p, end, b, str, len, num, &nints, NULL)) || num[3] < 0)
			return NULL; /* a negative duration: the general parser's message */
		d->type = D_ITER;
		d->u.iter.rank = (uint32_t)num_get(num, 0);
		d->u.iter.iter = (uint32_t)num_get(num, 1);
		d->u.iter.start_us = num_get(num, 2);
		d->u.iter.dur_us = num_get(num, 3);
		return le;
	}
	}
	return NULL;
}

/* Decodes the lines of data[0..n) into b, until the end or the first bad line; phases' and
 * kernels' names interned in t (seen: the decoder's memory of it). */
static void decode_block(struct block *b, char *data, size_t n, struct decoder_mem *m, struct names *t)
{
	struct jobj *o = &m->obj;
	int64_t sum[KERNEL_SUMMARY]; /* a summary kernel's, until copied into the block */
	b->nrec = b->ndurs = 0;
	b->lines = 0;
	b->err_line = 0;
	for (char *p = data, *end = data + n; p < end;) {
		b->lines++;
		if (b->nrec == b->rec_cap) {
			size_t c = hugemem_size(b->rec_cap * 2 * sizeof(struct drec)) / sizeof(struct drec);
			struct drec *r = hugemem_alloc(c * sizeof(*r), 0);
			if (!r) {
				b->err_line = (uint32_t)b->lines;
				snprintf(b->err, sizeof(b->err), "out of memory");
				return;
			}
			memcpy(r, b->rec, b->nrec * sizeof(*r));
			if (b->rec_own)
				free(b->rec);
			b->rec = r;
			b->rec_cap = c;
			b->rec_own = true;
		}
		struct drec *d = &b->rec[b->nrec];
		size_t name_len = 0;
		char *ls = p, *le = decode_shaped(m, t, p, end, d, b);
		bool shaped = le;
		if (shaped) {
			p = le < end ? le + 1 : end;
		} else {
			char *nl = memchr(p, '\n', (size_t)(end - p)), *q = p;
			le = nl ? nl : end;
			p = nl ? nl + 1 : end;
			while (le > q && le[-1] == '\r')
				le--;
			while (q < le && (*q == ' ' || *q == '\t'))
				q++;
			if (q == le)
				continue;
			struct jp jp = {q, le, NULL};
			if (jparse_line(&jp, o) < 0) {
				b->err_line = (uint32_t)b->lines;
				snprintf(b->err, sizeof(b->err), "malformed JSON: %s (column %zu)",
					 jp.err ? jp.err : "?", (size_t)(jp.p - ls) + 1);
				return;
			}
			int rc = decode_line(o, d, sum, b->err, sizeof(b->err));
			if (rc < 0) {
				b->err_line = (uint32_t)b->lines;
				return;
			}
			if (!rc)
				continue;
			name_len = o->v[JK_name].len;
		}
		d->line = (uint32_t)b->lines;
		if (!shaped && (d->type == D_PHASE || d->type == D_KERNEL) &&
		    !(d->name = name_intern(t, m->seen, d->name, name_len))) {
			b->err_line = (uint32_t)b->lines;
			snprintf(b->err, sizeof(b->err), "out of memory");
			return;
		}
		if (!shaped && d->type == D_KERNEL) { /* its durations, or its summary */
			struct dkernel *k = &d->u.kernel;
			/* o->durs is set whenever ndurs is; clang-analyzer cannot see it */
			size_t nd = k->summary ? KERNEL_SUMMARY : o->durs ? k->ndurs : 0;
			if (durs_room(b, nd) < 0) {
				b->err_line = (uint32_t)b->lines;
				snprintf(b->err, sizeof(b->err), "out of memory");
				return;
			}
			if (nd)
				memcpy(b->durs + b->ndurs, k->summary ? sum : o->durs, nd * sizeof(*b->durs));
			k->durs = b->ndurs;
			b->ndurs += nd;
		}
		b->nrec++;
	}
}

/* Hands a decoded record to the handler: 0, or -1 with *why set. */
static int apply(const struct drec *d, const struct block *b, const struct jsonl_handler *h, const char **why)
{
	switch (d->type) {
	case D_JOB: {
		const struct djob *j = &d->u.job;
		static const char *const device[] = {NULL, "gpu", "cpu"};
		struct jsonl_job job = {d->name, j->world,         j->tp,   j->cp,
					j->pp,   j->dp,            j->ep,   j->gpus_per_node,
					j->order, device[j->device]};
		return h->job ? h->job(h->ctx, &job, why) : 0;
	}
	case D_HOST: return h->host ? h->host(h->ctx, d->u.rank, d->name, why) : 0;
	case D_ITER: return h->iter ? h->iter(h->ctx, &d->u.iter, why) : 0;
	case D_PHASE: return h->phase ? h->phase(h->ctx, &d->u.phase, d->name, why) : 0;
	case D_KERNEL: {
		const struct dkernel *k = &d->u.kernel;
		if (!h->kernel)
			return 0;
		struct record_kernel r = {.rank = k->rank, .iter = k->iter, .count = k->count, .kind = k->kind};
		const int64_t *v = b->durs + k->durs;
		if (k->summary) {
			r.sum_us = v[0];
			r.min_us = v[1];
			r.max_us = v[2];
			r.p50_us = v[3];
			r.p99_us = v[4];
			return h->kernel(h->ctx, &r, d->name, NULL, 0, why);
		}
		return h->kernel(h->ctx, &r, d->name, k->ndurs ? v : NULL, k->ndurs, why);
	}
	case D_EVENT:
		return h->event ? h->event(h->ctx, d->name, d->u.event.kind, d->u.event.ts_us, d->u.event.source,
					   d->u.event.detail, why)
				: 0;
	}
	return 0;
}

/* The reading: readahead's thread reads (and inflates) blocks of whole lines; blocks are
 * decoded, each whole, into records (the parsing and checking, most of the time); the
 * caller's thread hands the records to the handler in the file's order, block by block, and
 * gives each block back when done. The decoding is done by whichever thread would wait
 * otherwise: the caller's, while the block it wants next is not decoded; readahead's, while
 * every block is held (readahead_hooks); and decoder threads (jsonl_decoders) on the CPUs
 * these two leave, none on two cores. (A decoder thread there made three busy threads on
 * two cores: the one decoding the block the caller wanted next was often descheduled, and
 * the caller waited 40-130 ms of a 0.2 s read, readahead 10-100 ms.) Block k of the file is
 * blocks[k % N]: readahead lends at most N blocks, so block k - N was given back before
 * block k is lent. */
#define JSONL_DECODERS_MAX 4
#define JSONL_MEM_READER (JSONL_DECODERS_MAX + 1) /* readahead's thread's decoder_mem */

int jsonl_decoders;

struct reading {
	struct readahead *ra;
	pthread_mutex_t fetch; /* a decoder takes the next block and its number together */
	uint64_t fetched;
	pthread_mutex_t mu; /* the blocks' decoded flags and the end */
	pthread_cond_t cv;
	uint64_t filled; /* blocks readahead filled: the caller waits for a change */
	bool ended;      /* readahead said end or error: there is no block end_at */
	uint64_t end_at;
	ssize_t end_rc; /* 0 end of file, -1 error (readahead_error) */
	struct names names;
	struct block blocks[READAHEAD_BLOCKS];
	struct decoder_mem mem[JSONL_DECODERS_MAX + 2]; /* the caller's, the decoders', readahead's */
	char *blocks_mem;                               /* where the blocks' records start */
};

/* Takes the next block from readahead and decodes it: 1, or 0 when wait is not set and the
 * next block is not read yet or another thread is taking one, or -1 at the end (the end
 * recorded for the applying thread). */
static int decode_next(struct reading *g, struct decoder_mem *m, bool wait)
{
	if (wait)
		pthread_mutex_lock(&g->fetch);
	else if (pthread_mutex_trylock(&g->fetch) != 0)
		return 0;
	char *data = NULL;
	ssize_t n = readahead_next(g->ra, &data, wait);
	uint64_t k = g->fetched;
	if (n > 0)
		g->fetched++;
	pthread_mutex_unlock(&g->fetch);
	if (n == READAHEAD_NOT_YET)
		return 0;
	if (n <= 0) {
		pthread_mutex_lock(&g->mu);
		if (!g->ended) {
			g->ended = true;
			g->end_at = k;
			g->end_rc = n;
		}
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
		return -1;
	}
	struct block *b = &g->blocks[k % READAHEAD_BLOCKS];
	decode_block(b, data, (size_t)n, m, &g->names);
	pthread_mutex_lock(&g->mu);
	b->decoded = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return 1;
}

/* readahead's thread has filled a block: the caller may wait for one to decode */
static void on_filled(void *arg)
{
	struct reading *g = arg;
	pthread_mutex_lock(&g->mu);
	g->filled++;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* readahead's thread while every block is held: decodes the next one nobody took */
static int on_idle(void *arg)
{
	struct reading *g = arg;
	return decode_next(g, &g->mem[JSONL_MEM_READER], false) > 0;
}

static void *decoder(void *arg)
{
	struct decoder_mem *m = arg;
	while (decode_next(m->g, m, true) > 0)
		;
	return NULL;
}

int jsonl_read(const char *path, const struct jsonl_handler *h, uint64_t *lines, char *err, size_t errlen)
{
	struct reading *g = calloc(1, sizeof(*g));
	if (!g) {
		snprintf(err, errlen, "%s: out of memory", path);
		return -1;
	}
	if (!(g->ra = readahead_open(path))) {
		snprintf(err, errlen, "%s: could not open: %s", path, strerror(errno ? errno : ENOENT));
		free(g);
		return -1;
	}
	if (!(g->blocks_mem = blocks_mem(g->blocks, READAHEAD_BLOCKS, readahead_block(g->ra)))) {
		snprintf(err, errlen, "%s: out of memory", path);
		readahead_close(g->ra);
		free(g);
		return -1;
	}
	pthread_once(&jkey_once, jkey_init);
	pthread_mutex_init(&g->fetch, NULL);
	pthread_mutex_init(&g->mu, NULL);
	pthread_mutex_init(&g->names.mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	for (int i = 0; i <= JSONL_MEM_READER; i++)
		g->mem[i].g = g;
	struct readahead_hooks hooks = {on_filled, on_idle, g};
	readahead_set_hooks(g->ra, &hooks);
	/* decoder threads on the CPUs the caller's thread and readahead's leave (both decode too) */
	long cpus = jsonl_decoders > 0 ? jsonl_decoders : jsonl_decoders < 0 ? 0 : sysconf(_SC_NPROCESSORS_ONLN) - 2;
	int want = cpus < 1 ? 0 : cpus > JSONL_DECODERS_MAX ? JSONL_DECODERS_MAX : (int)cpus, nthr = 0;
	pthread_t thr[JSONL_DECODERS_MAX];
	while (nthr < want && pthread_create(&thr[nthr], NULL, decoder, &g->mem[nthr + 1]) == 0)
		nthr++; /* fewer when one cannot start: the others decode */
	int rc = 0;
	uint64_t line = 0; /* lines before block k */
	for (uint64_t k = 0; !rc; k++) {
		struct block *b = &g->blocks[k % READAHEAD_BLOCKS];
		pthread_mutex_lock(&g->mu);
		while (!b->decoded && !(g->ended && g->end_at == k)) {
			bool ended = g->ended;
			uint64_t filled = g->filled;
			pthread_mutex_unlock(&g->mu);
			int got = ended ? 0 : decode_next(g, &g->mem[0], false);
			pthread_mutex_lock(&g->mu);
			/* nothing to decode: wait for a block decoded or filled since */
			if (got == 0 && !b->decoded && !(g->ended && g->end_at == k) && g->filled == filled)
				pthread_cond_wait(&g->cv, &g->mu);
		}
		bool done = !b->decoded;
		ssize_t end_rc = g->end_rc;
		pthread_mutex_unlock(&g->mu);
		if (done) {
			if (end_rc < 0) {
				snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, line + 1, readahead_error(g->ra));
				rc = -1;
			}
			break;
		}
		const char *why = NULL;
		for (size_t i = 0; i < b->nrec; i++) {
			if (apply(&b->rec[i], b, h, &why) < 0) {
				line += b->rec[i].line;
				snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, line, why ? why : "rejected");
				rc = -1;
				break;
			}
		}
		if (!rc && b->err_line) {
			line += b->err_line;
			snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, line, b->err);
			rc = -1;
		}
		if (!rc)
			line += b->lines;
		pthread_mutex_lock(&g->mu);
		b->decoded = false;
		pthread_mutex_unlock(&g->mu);
		readahead_release(g->ra);
	}
	readahead_cancel(g->ra);
	for (int i = 0; i < nthr; i++)
		pthread_join(thr[i], NULL);
	readahead_close(g->ra); /* its thread, which may be decoding, joined */
	for (int i = 0; i <= JSONL_MEM_READER; i++)
		free(g->mem[i].obj.durs);
	pthread_mutex_destroy(&g->fetch);
	pthread_mutex_destroy(&g->mu);
	pthread_mutex_destroy(&g->names.mu);
	pthread_cond_destroy(&g->cv);
	names_free(&g->names);
	for (unsigned i = 0; i < READAHEAD_BLOCKS; i++)
		block_free(&g->blocks[i]);
	free(g->blocks_mem);
	free(g);
	if (lines)
		*lines = line;
	return rc;
}

/* --- writing --- */

struct jsonl_writer {
	FILE *fp;
	gzFile gz;
	char buf[1 << 16];
	size_t len;
	int failed;
};

struct jsonl_writer *jsonl_writer_open(const char *path, int gz, char *err, size_t errlen)
{
	struct jsonl_writer *w = calloc(1, sizeof(*w));
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (gz)
		w->gz = gzopen(path, "wb3");
	else
		w->fp = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
	if (!w->gz && !w->fp) {
		snprintf(err, errlen, "could not open \"%s\": %s", path, strerror(errno));
		free(w);
		return NULL;
	}
	return w;
}

static void flush_buf(struct jsonl_writer *w)
{
	if (!w->len)
		return;
	if (w->gz) {
		if (gzwrite(w->gz, w->buf, (unsigned)w->len) != (int)w->len)
			w->failed = 1;
	} else if (fwrite(w->buf, 1, w->len, w->fp) != w->len) {
		w->failed = 1;
	}
	w->len = 0;
}

int jsonl_writer_close(struct jsonl_writer *w)
{
	flush_buf(w);
	int failed = w->failed;
	if (w->gz)
		failed |= gzclose(w->gz) != Z_OK;
	else if (w->fp == stdout)
		failed |= fflush(w->fp) != 0;
	else
		failed |= fclose(w->fp) != 0;
	free(w);
	return failed ? -1 : 0;
}

static void emit(struct jsonl_writer *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(struct jsonl_writer *w, const char *fmt, ...)
{
	for (int tries = 0; tries < 2; tries++) {
		va_list ap;
		va_start(ap, fmt);
		int n = vsnprintf(w->buf + w->len, sizeof(w->buf) - w->len, fmt, ap);
		va_end(ap);
		if (n < 0) {
			w->failed = 1;
			return;
		}
		if (w->len + (size_t)n < sizeof(w->buf)) {
			w->len += (size_t)n;
			return;
		}
		flush_buf(w);
	}
	w->failed = 1; /* a line longer than the buffer */
}

/* JSON string body with escapes; s must be short (names, hosts) */
static const char *esc(const char *s, char *buf, size_t len)
{
	size_t o = 0;
	for (; s && *s && o + 7 < len; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			buf[o++] = '\\';
			buf[o++] = (char)c;
		} else if (c < 0x20) {
			o += (size_t)snprintf(buf + o, len - o, "\\u%04x", c);
		} else {
			buf[o++] = (char)c;
		}
	}
	buf[o] = 0;
	return buf;
}

void jsonl_write_job(struct jsonl_writer *w, const struct jsonl_job *j)
{
	char a[256], b[64];
	int cpu = j->device && strcmp(j->device, "cpu") == 0, gpu = j->device && strcmp(j->device, "gpu") == 0;
	emit(w,
	     "{\"type\":\"job\",\"job\":\"%s\",\"world\":%u,\"tp\":%u,\"cp\":%u,\"pp\":%u,\"dp\":%u,"
	     "\"ep\":%u,\"order\":\"%s\",\"gpus_per_node\":%u%s}\n",
	     esc(j->job, a, sizeof(a)), j->world, j->tp, j->cp, j->pp, j->dp, j->ep,
	     esc(j->order ? j->order : "tp-cp-ep-dp-pp", b, sizeof(b)), j->gpus_per_node,
	     cpu ? ",\"device\":\"cpu\"" : gpu ? ",\"device\":\"gpu\"" : "");
}

void jsonl_write_host(struct jsonl_writer *w, const char *job, uint32_t rank, const char *host)
{
	char a[256], b[256];
	emit(w, "{\"type\":\"host\",\"job\":\"%s\",\"rank\":%u,\"host\":\"%s\"}\n", esc(job, a, sizeof(a)), rank,
	     esc(host, b, sizeof(b)));
}

void jsonl_write_iter(struct jsonl_writer *w, const char *job, const struct record_iter *r)
{
	char a[256];
	emit(w,
	     "{\"type\":\"iter\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"start_us\":%" PRId64 ",\"dur_us\":%" PRId64
	     "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, r->start_us, r->dur_us);
}

void jsonl_write_phase(struct jsonl_writer *w, const char *job, const struct record_phase *r, const char *name)
{
	char a[256], b[256], st[48] = "";
	if (r->start_us != RECORD_NO_START)
		snprintf(st, sizeof(st), ",\"start_us\":%" PRId64, r->start_us);
	emit(w,
	     "{\"type\":\"phase\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\",\"kind\":\"%s\","
	     "\"group\":\"%s\"%s,\"dur_us\":%" PRId64 "}\n",
	     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
	     record_group_name(r->group), st, r->dur_us);
}

void jsonl_write_kernel(struct jsonl_writer *w, const char *job, const struct record_kernel *r, const char *name,
			const int64_t *durs, size_t ndurs)
{
	char a[256], b[256], list[1024];
	size_t o = 0;
	if (durs && ndurs) {
		list[o++] = '[';
		for (size_t i = 0; i < ndurs && o + 24 < sizeof(list); i++)
			o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%" PRId64, i ? "," : "", durs[i]);
		list[o++] = ']';
		list[o] = 0;
		emit(w,
		     "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
		     "\"kind\":\"%s\",\"count\":%u,\"durs_us\":%s}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
		     r->count, list);
	} else {
		emit(w,
		     "{\"type\":\"kernel\",\"job\":\"%s\",\"rank\":%u,\"iter\":%u,\"name\":\"%s\","
		     "\"kind\":\"%s\",\"count\":%u,\"sum_us\":%" PRId64 ",\"min_us\":%" PRId64 ",\"max_us\":%" PRId64
		     ",\"p50_us\":%" PRId64 ",\"p99_us\":%" PRId64 "}\n",
		     esc(job, a, sizeof(a)), r->rank, r->iter, esc(name, b, sizeof(b)), record_kind_name(r->kind),
		     r->count, r->sum_us, r->min_us, r->max_us, r->p50_us, r->p99_us);
	}
}

void jsonl_write_event(struct jsonl_writer *w, const char *job, const char *host, const char *kind, int64_t ts_us,
		       const char *source, const char *detail)
{
	char a[256], b[256], c[256], d[256], e[512];
	emit(w,
	     "{\"type\":\"event\",\"job\":\"%s\",\"host\":\"%s\",\"kind\":\"%s\",\"ts_us\":%" PRId64
	     ",\"source\":\"%s\",\"detail\":\"%s\"}\n",
	     esc(job, a, sizeof(a)), esc(host, b, sizeof(b)), esc(kind, c, sizeof(c)), ts_us, esc(source, d, sizeof(d)),
	     esc(detail, e, sizeof(e)));
}
