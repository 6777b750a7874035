/* jsonl_parse.c: see jsonl_parse.h. */
#include "jsonl_parse.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "hex.h"

const char *const jkey_names[] = {
#define X(k) #k,
	JKEYS(X)
#undef X
};

#define JKEY_SLOTS 128
static unsigned char jkey_tab[JKEY_SLOTS]; /* enum jkey + 1, 0 empty */
static unsigned char jkey_len[JK_COUNT];

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

void jsonl_parse_init(void)
{
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

int jsonl_parse_line(struct jp *j, struct jobj *o)
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
