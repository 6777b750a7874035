/* jsonl_decode.c: see jsonl_decode.h. */
#include "jsonl_decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hugemem.h"

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

/* a kernel's summary in the block's durs: sum, min, max, p50, p99 */
#define KERNEL_SUMMARY 5

/* The record of a line (1), or an unknown type, ignored (forward compatibility) (0), or
 * -1 with msg set. A kernel's durations (o->durs), or its summary (sum, when summary is
 * set), are copied into the block by the caller. */
static int decode_line(const struct jobj *o, struct drec *d, int64_t sum[KERNEL_SUMMARY], char *err, size_t err_size)
{
	const char *why = NULL;
	int rc = 0;
	const struct jval *type = jget(o, JK_type);
	if (!type || type->t != JT_STR) {
		snprintf(err, err_size, "missing field \"type\"");
		return -1;
	}
#define U32(key, req, def, dst)                                        \
	do {                                                           \
		if ((rc = get_u32(o, key, req, def, dst, &why)) < 0) { \
			field_msg(err, err_size, rc, why);             \
			return -1;                                     \
		}                                                      \
	} while (0)
#define I64(key, req, def, dst)                                        \
	do {                                                           \
		if ((rc = get_i64(o, key, req, def, dst, &why)) < 0) { \
			field_msg(err, err_size, rc, why);             \
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
			snprintf(err, err_size, "missing field \"host\"");
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
			snprintf(err, err_size, "negative dur_us");
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
			snprintf(err, err_size, "missing field \"%s\"", d->name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind), g = group ? record_group_parse(group) : 0;
		if (k < 0 || g < 0) {
			snprintf(err, err_size, "unknown %s \"%s\"", k < 0 ? "kind" : "group", k < 0 ? kind : group);
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
			snprintf(err, err_size, "missing field \"%s\"", d->name ? "kind" : "name");
			return -1;
		}
		int k = record_kind_parse(kind);
		if (k < 0) {
			snprintf(err, err_size, "unknown kind \"%s\"", kind);
			return -1;
		}
		r->kind = (uint8_t)k;
		const struct jval *dv = jget(o, JK_durs_us);
		if (dv) {
			if (dv->t != JT_ARR || !o->durs_ok) {
				snprintf(err, err_size, "invalid field \"durs_us\"");
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
			snprintf(err, err_size, "missing field \"%s\"", d->name ? "kind" : "host");
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
	 * before (that hash would be a tenth of a decoder's time) */
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

void jsonl_names_free(struct names *t)
{
	for (size_t i = 0; i < t->cap; i++)
		for (struct name *x = t->tab[i], *next; x; x = next) {
			next = x->next;
			free(x);
		}
	free(t->tab);
}

/* One allocation for the records and durations of n blocks of size bytes each: a record a
 * line of 100 bytes, a duration 32 bytes of text; NULL when out of memory. */
char *jsonl_blocks_mem(struct block *blocks, unsigned n, size_t size)
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

void jsonl_block_free(struct block *b)
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
	{LIT("{\"type\":\"phase\",\"job\":\""), F_STR, {0}, {0}},
	{LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},
	{LIT(",\"name\":\""), F_STR, {0}, {0}},
	{LIT("\",\"kind\":\""), F_STR, {0}, {0}},
	{LIT("\",\"group\":\""), F_STR, {0}, {0}},
	{LIT("\",\"start_us\":"), F_I64, {0}, {0}},
	{LIT(",\"dur_us\":"), F_I64, {0}, {0}},
	{LIT("}"), F_END, {0}, {0}},
};
static struct step shape_kernel[] = {
	{LIT("{\"type\":\"kernel\",\"job\":\""), F_STR, {0}, {0}},
	{LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},
	{LIT(",\"name\":\""), F_STR, {0}, {0}},
	{LIT("\",\"kind\":\""), F_STR, {0}, {0}},
	{LIT("\",\"count\":"), F_U32, {0}, {0}},
	{LIT(",\"durs_us\":"), F_INTS, {0}, {0}},
	{LIT("}"), F_END, {0}, {0}},
};
static struct step shape_iter[] = {
	{LIT("{\"type\":\"iter\",\"job\":\""), F_STR, {0}, {0}},
	{LIT("\",\"rank\":"), F_U32, {0}, {0}},
	{LIT(",\"iter\":"), F_U32, {0}, {0}},
	{LIT(",\"start_us\":"), F_I64, {0}, {0}},
	{LIT(",\"dur_us\":"), F_I64, {0}, {0}},
	{LIT("}"), F_END, {0}, {0}},
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

void jsonl_decode_init(void)
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
void jsonl_decode_block(struct block *b, char *data, size_t n, struct decoder_mem *m, struct names *t)
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
			if (jsonl_parse_line(&jp, o) < 0) {
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
int jsonl_apply(const struct drec *d, const struct block *b, const struct jsonl_handler *h, const char **why)
{
	switch (d->type) {
	case D_JOB: {
		const struct djob *j = &d->u.job;
		static const char *const device[] = {NULL, "gpu", "cpu"};
		struct jsonl_job job = {d->name,  j->world,         j->tp, j->cp, j->pp, j->dp, j->ep, j->gpus_per_node,
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
