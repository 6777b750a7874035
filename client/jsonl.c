/* jsonl.c: interchange JSONL reader (plain or gzip, through readahead.c) and writer (zlib). */
#include "jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "hex.h"
#include "readahead.h"

/* --- reading ---
 *
 * A small validating parser for one flat JSON object a line (jansson allocates per value
 * and was 80% of `culprit diagnose`). Top-level scalars are decoded in place (strings
 * unescaped into a scratch buffer); nested arrays and objects are validated and kept as
 * spans, durs_us is decoded from its span. Anything that is not JSON is an error. */

enum jt { JT_NULL, JT_BOOL, JT_NUM, JT_STR, JT_ARR, JT_OBJ };

struct jval {
	enum jt t;
	const char *s; /* JT_STR: unescaped, NUL-terminated; JT_ARR/JT_OBJ: raw span */
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
			X(p99_us) X(ts_us) X(source) X(detail)

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

static unsigned jkey_hash(const char *k, size_t len)
{
	unsigned h = (unsigned)len;
	h = h * 33 ^ (unsigned char)k[0];
	h = h * 33 ^ (unsigned char)k[len / 2];
	h = h * 33 ^ (unsigned char)k[len - 1];
	return h & (JKEY_SLOTS - 1);
}

static void jkey_init(void)
{
	for (int i = 0; i < JK_COUNT; i++) {
		jkey_len[i] = (unsigned char)strlen(jkey_names[i]);
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
	const char *p, *end, *base;
	char *scratch;
	size_t spos;
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

static void put_utf8(struct jp *j, uint32_t cp)
{
	char *o = j->scratch + j->spos;
	if (cp < 0x80) {
		o[0] = (char)cp;
		j->spos += 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		j->spos += 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		j->spos += 3;
	} else {
		o[0] = (char)(0xF0 | (cp >> 18));
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[3] = (char)(0x80 | (cp & 0x3F));
		j->spos += 4;
	}
}

/* at the opening quote; the result is NUL-terminated in scratch (never longer than the
 * raw text: every escape is at least as long as its UTF-8) */
static int jstring(struct jp *j, const char **out, size_t *len)
{
	j->p++;
	size_t start = j->spos;
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
			/* a run of plain characters at once */
			const char *q = j->p + 1;
			while (q < j->end && (unsigned char)*q >= 0x20 && *q != '"' && *q != '\\')
				q++;
			memcpy(j->scratch + j->spos, j->p, (size_t)(q - j->p));
			j->spos += (size_t)(q - j->p);
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
		case '/': j->scratch[j->spos++] = e; break;
		case 'b': j->scratch[j->spos++] = '\b'; break;
		case 'f': j->scratch[j->spos++] = '\f'; break;
		case 'n': j->scratch[j->spos++] = '\n'; break;
		case 'r': j->scratch[j->spos++] = '\r'; break;
		case 't': j->scratch[j->spos++] = '\t'; break;
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
			put_utf8(j, cp);
			break;
		}
		default: return jfail(j, "invalid escape");
		}
	}
	j->scratch[j->spos++] = 0;
	*out = j->scratch + start;
	*len = j->spos - start - 1;
	return 0;
}

static int jnumber(struct jp *j, struct jval *v)
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

/* validates any value; strings nested in arrays/objects are unescaped into scratch too */
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
 * names have no escapes), compared byte by byte (a few bytes: no call of memcmp) */
static int jkey_guess(struct jp *j, const struct jobj *o, enum jkey prev, enum jkey *key)
{
	enum jkey g = (enum jkey)o->next_key[prev];
	if (g >= JK_COUNT)
		return 0;
	size_t n = jkey_len[g];
	const char *k = j->p + 1, *name = jkey_names[g];
	if ((size_t)(j->end - k) <= n || k[n] != '"')
		return 0;
	for (size_t c = 0; c < n; c++)
		if (k[c] != name[c])
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
	const char *q = j->p + 1;
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
	pthread_once(&jkey_once, jkey_init);
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
			const char *start = j->p;
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
				v->s = start;
				v->len = (size_t)(j->p - start);
				break;
			case '{':
				v->t = JT_OBJ;
				if (jskip(j, 1) < 0)
					return -1;
				v->s = start;
				v->len = (size_t)(j->p - start);
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

static int handle_line(const struct jobj *o, const struct jsonl_handler *h, char *msg, size_t msglen)
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
		struct jsonl_job j;
		memset(&j, 0, sizeof(j));
		j.job = get_str(o, JK_job);
		j.order = get_str(o, JK_order);
		U32(JK_world, 1, 0, &j.world);
		U32(JK_tp, 0, 1, &j.tp);
		U32(JK_cp, 0, 1, &j.cp);
		U32(JK_pp, 0, 1, &j.pp);
		U32(JK_dp, 0, 0, &j.dp);
		U32(JK_ep, 0, 1, &j.ep);
		U32(JK_gpus_per_node, 0, 8, &j.gpus_per_node);
		if (!j.dp && j.tp && j.cp && j.pp)
			j.dp = j.world / (j.tp * j.cp * j.pp);
		if (h->job && h->job(h->ctx, &j, &why) < 0)
			goto handler;
	} else if (STR_IS(type, "host")) {
		uint32_t rank;
		U32(JK_rank, 1, 0, &rank);
		const char *host = get_str(o, JK_host);
		if (!host) {
			snprintf(msg, msglen, "missing field \"host\"");
			return -1;
		}
		if (h->host && h->host(h->ctx, rank, host, &why) < 0)
			goto handler;
	} else if (STR_IS(type, "iter")) {
		struct record_iter r;
		U32(JK_rank, 1, 0, &r.rank);
		U32(JK_iter, 1, 0, &r.iter);
		I64(JK_start_us, 0, 0, &r.start_us);
		I64(JK_dur_us, 1, 0, &r.dur_us);
		if (r.dur_us < 0) {
			snprintf(msg, msglen, "negative dur_us");
			return -1;
		}
		if (h->iter && h->iter(h->ctx, &r, &why) < 0)
			goto handler;
	} else if (STR_IS(type, "phase")) {
		struct record_phase r;
		memset(&r, 0, sizeof(r));
		U32(JK_rank, 1, 0, &r.rank);
		U32(JK_iter, 1, 0, &r.iter);
		I64(JK_start_us, 0, RECORD_NO_START, &r.start_us);
		I64(JK_dur_us, 1, 0, &r.dur_us);
		const char *name = get_str(o, JK_name), *kind = get_str(o, JK_kind);
		const char *group = get_str(o, JK_group);
		if (!name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind), g = group ? record_group_parse(group) : 0;
		if (k < 0 || g < 0) {
			snprintf(msg, msglen, "unknown %s \"%s\"", k < 0 ? "kind" : "group", k < 0 ? kind : group);
			return -1;
		}
		r.kind = (uint8_t)k;
		r.group = (uint8_t)g;
		if (h->phase && h->phase(h->ctx, &r, name, &why) < 0)
			goto handler;
	} else if (STR_IS(type, "kernel")) {
		struct record_kernel r;
		memset(&r, 0, sizeof(r));
		U32(JK_rank, 1, 0, &r.rank);
		U32(JK_iter, 1, 0, &r.iter);
		U32(JK_count, 0, 0, &r.count);
		const char *name = get_str(o, JK_name), *kind = get_str(o, JK_kind);
		if (!name || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind);
		if (k < 0) {
			snprintf(msg, msglen, "unknown kind \"%s\"", kind);
			return -1;
		}
		r.kind = (uint8_t)k;
		const struct jval *d = jget(o, JK_durs_us);
		size_t nd = 0;
		if (d) {
			if (d->t != JT_ARR || !o->durs_ok) {
				snprintf(msg, msglen, "invalid field \"durs_us\"");
				return -1;
			}
			nd = o->ndurs;
			if (!r.count)
				r.count = (uint32_t)nd;
		} else {
			I64(JK_sum_us, 0, 0, &r.sum_us);
			I64(JK_min_us, 1, 0, &r.min_us);
			I64(JK_max_us, 1, 0, &r.max_us);
			I64(JK_p50_us, 1, 0, &r.p50_us);
			I64(JK_p99_us, 0, r.max_us, &r.p99_us);
		}
		if (h->kernel && h->kernel(h->ctx, &r, name, nd ? o->durs : NULL, nd, &why) < 0)
			goto handler;
	} else if (STR_IS(type, "event")) {
		int64_t ts;
		I64(JK_ts_us, 0, 0, &ts);
		const char *host = get_str(o, JK_host), *kind = get_str(o, JK_kind);
		if (!host || !kind) {
			snprintf(msg, msglen, "missing field \"%s\"", host ? "kind" : "host");
			return -1;
		}
		if (h->event &&
		    h->event(h->ctx, host, kind, ts, get_str(o, JK_source), get_str(o, JK_detail), &why) < 0)
			goto handler;
	}
	/* unknown types are ignored (forward compatibility) */
	return 0;
handler:
	snprintf(msg, msglen, "%s", why ? why : "rejected");
	return -1;
#undef U32
#undef I64
}

#define JSONL_MAX_LINE (64u << 20)

struct reader {
	const char *path;
	const struct jsonl_handler *h;
	uint64_t line;
	char *scratch;
	size_t scratch_cap;
	struct jobj obj;
	char *err;
	size_t errlen;
};

/* One line (without its newline); 0, or -1 with the error in r->err. */
static int read_line(struct reader *r, const char *buf, size_t len)
{
	r->line++;
	while (len && buf[len - 1] == '\r')
		len--;
	size_t i = 0;
	while (i < len && (buf[i] == ' ' || buf[i] == '\t'))
		i++;
	if (i == len)
		return 0;
	if (len + 1 > r->scratch_cap) {
		char *ns = realloc(r->scratch, len + 1);
		if (!ns) {
			snprintf(r->err, r->errlen, "%s:%" PRIu64 ": out of memory", r->path, r->line);
			return -1;
		}
		r->scratch = ns;
		r->scratch_cap = len + 1;
	}
	struct jp jp = {buf + i, buf + len, buf, r->scratch, 0, NULL};
	if (jparse_line(&jp, &r->obj) < 0) {
		snprintf(r->err, r->errlen, "%s:%" PRIu64 ": malformed JSON: %s (column %zu)", r->path, r->line,
			 jp.err ? jp.err : "?", (size_t)(jp.p - buf) + 1);
		return -1;
	}
	char msg[200];
	if (handle_line(&r->obj, r->h, msg, sizeof(msg)) < 0) {
		snprintf(r->err, r->errlen, "%s:%" PRIu64 ": %s", r->path, r->line, msg);
		return -1;
	}
	return 0;
}

/* Appends data[0..n) to the line carried over from the previous block. */
static int carry_add(struct reader *r, char **carry, size_t *clen, size_t *ccap, const char *data, size_t n)
{
	if (*clen + n > JSONL_MAX_LINE) {
		snprintf(r->err, r->errlen, "%s:%" PRIu64 ": line longer than %u MiB", r->path, r->line + 1,
			 JSONL_MAX_LINE >> 20);
		return -1;
	}
	if (*clen + n > *ccap) {
		size_t c = *ccap ? *ccap : 1 << 16;
		while (c < *clen + n)
			c *= 2;
		char *nc = realloc(*carry, c);
		if (!nc) {
			snprintf(r->err, r->errlen, "%s:%" PRIu64 ": out of memory", r->path, r->line + 1);
			return -1;
		}
		*carry = nc;
		*ccap = c;
	}
	if (n) /* an empty carry has no buffer yet */
		memcpy(*carry + *clen, data, n);
	*clen += n;
	return 0;
}

int jsonl_read(const char *path, const struct jsonl_handler *h, uint64_t *lines, char *err, size_t errlen)
{
	struct readahead *ra = readahead_open(path);
	if (!ra) {
		snprintf(err, errlen, "%s: could not open: %s", path, strerror(errno ? errno : ENOENT));
		return -1;
	}
	struct reader r = {.path = path, .h = h, .err = err, .errlen = errlen};
	char *carry = NULL;
	size_t clen = 0, ccap = 0;
	int rc = 0;
	/* lines are parsed in place in the blocks; one that spans two is carried over */
	while (!rc) {
		const char *data;
		ssize_t n = readahead_next(ra, &data);
		if (n < 0) {
			snprintf(err, errlen, "%s:%" PRIu64 ": %s", path, r.line + 1, readahead_error(ra));
			rc = -1;
			break;
		}
		if (n == 0) {
			if (clen)
				rc = read_line(&r, carry, clen);
			break;
		}
		const char *p = data, *end = data + n;
		if (clen) {
			const char *nl = memchr(p, '\n', (size_t)n);
			if (carry_add(&r, &carry, &clen, &ccap, p, (size_t)((nl ? nl : end) - p)) < 0) {
				rc = -1;
				break;
			}
			if (!nl)
				continue;
			rc = read_line(&r, carry, clen);
			clen = 0;
			p = nl + 1;
		}
		while (!rc && p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl) {
				rc = carry_add(&r, &carry, &clen, &ccap, p, (size_t)(end - p));
				break;
			}
			rc = read_line(&r, p, (size_t)(nl - p));
			p = nl + 1;
		}
	}
	if (lines)
		*lines = r.line;
	free(carry);
	free(r.scratch);
	free(r.obj.durs);
	readahead_close(ra);
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
	emit(w,
	     "{\"type\":\"job\",\"job\":\"%s\",\"world\":%u,\"tp\":%u,\"cp\":%u,\"pp\":%u,\"dp\":%u,"
	     "\"ep\":%u,\"order\":\"%s\",\"gpus_per_node\":%u}\n",
	     esc(j->job, a, sizeof(a)), j->world, j->tp, j->cp, j->pp, j->dp, j->ep,
	     esc(j->order ? j->order : "tp-cp-ep-dp-pp", b, sizeof(b)), j->gpus_per_node);
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
