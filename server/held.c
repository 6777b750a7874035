/* held.c: see held.h. */
#include "held.h"

#include <stdlib.h>
#include <string.h>

enum held_type { HELD_BATCH = 1, HELD_HOSTS, HELD_EVENT };

struct entry {
	uint32_t type;
	uint32_t n[3];   /* batch: iters, phases, kernels; hosts: ranks; event: string count (4) */
	int64_t ts_us;   /* event */
	uint64_t size;   /* the payload's bytes, padded to 8 */
};

#define ALIGN8(x) (((x) + 7) & ~(size_t)7)

/* Room for an entry of type with payload bytes; its payload, or NULL (h unchanged). */
static unsigned char *add_entry(struct held *h, uint32_t type, size_t payload, struct entry **out)
{
	size_t need = sizeof(struct entry) + ALIGN8(payload);
	struct entry *e;

	if (payload > HELD_MAX_BYTES || held_bytes(h) + need > HELD_MAX_BYTES)
		return NULL;
	if (h->len + need > h->cap) {
		size_t cap = h->cap ? h->cap : 65536;
		unsigned char *b;

		while (cap < h->len + need)
			cap *= 2;
		if (!(b = realloc(h->buf, cap)))
			return NULL;
		h->buf = b;
		h->cap = cap;
	}
	e = (struct entry *)(h->buf + h->len);
	memset(e, 0, sizeof(*e));
	e->type = type;
	e->size = ALIGN8(payload);
	h->len += need;
	*out = e;
	return (unsigned char *)(e + 1);
}

int held_batch(struct held *h, const struct record_iter *iters, size_t n_iters, const struct record_phase *phases,
	       size_t n_phases, const struct record_kernel *kernels, size_t n_kernels)
{
	size_t bytes = n_iters * sizeof(*iters) + n_phases * sizeof(*phases) + n_kernels * sizeof(*kernels), off;
	struct record_kernel *k;
	struct entry *e;
	unsigned char *p;

	for (size_t i = 0; i < n_kernels; i++)
		bytes += kernels[i].sketch_len;
	if (n_iters > UINT32_MAX || n_phases > UINT32_MAX || n_kernels > UINT32_MAX ||
	    !(p = add_entry(h, HELD_BATCH, bytes, &e)))
		return -1;
	e->n[0] = (uint32_t)n_iters;
	e->n[1] = (uint32_t)n_phases;
	e->n[2] = (uint32_t)n_kernels;
	if (n_iters)
		memcpy(p, iters, n_iters * sizeof(*iters));
	off = n_iters * sizeof(*iters);
	if (n_phases)
		memcpy(p + off, phases, n_phases * sizeof(*phases));
	off += n_phases * sizeof(*phases);
	k = (struct record_kernel *)(p + off);
	if (n_kernels)
		memcpy(k, kernels, n_kernels * sizeof(*kernels));
	off += n_kernels * sizeof(*kernels);
	/* the sketches follow the kernels, in their order; the pointers are set on release */
	for (size_t i = 0; i < n_kernels; i++) {
		if (kernels[i].sketch_len)
			memcpy(p + off, kernels[i].sketch, kernels[i].sketch_len);
		off += kernels[i].sketch_len;
		k[i].sketch = NULL;
	}
	return 0;
}

/* Strings (each may be NULL) one after the other: a byte saying whether it is there, then
 * its bytes and NUL. */
static size_t strings_size(const char *const *s, size_t n)
{
	size_t bytes = 0;

	for (size_t i = 0; i < n; i++)
		bytes += 1 + (s[i] ? strlen(s[i]) + 1 : 0);
	return bytes;
}

static void strings_put(unsigned char *p, const char *const *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = s[i] ? strlen(s[i]) + 1 : 0;

		*p++ = s[i] != NULL;
		if (len)
			memcpy(p, s[i], len);
		p += len;
	}
}

static const char *strings_next(const unsigned char **p)
{
	const char *s = (const char *)*p + 1;

	if (*(*p)++ == 0)
		return NULL;
	*p += strlen(s) + 1;
	return s;
}

int held_hosts(struct held *h, const uint32_t *ranks, size_t n, const char *host)
{
	const char *str[1] = {host};
	size_t bytes = n * sizeof(*ranks) + strings_size(str, 1);
	struct entry *e;
	unsigned char *p;

	if (n > UINT32_MAX || !(p = add_entry(h, HELD_HOSTS, bytes, &e)))
		return -1;
	e->n[0] = (uint32_t)n;
	if (n)
		memcpy(p, ranks, n * sizeof(*ranks));
	strings_put(p + n * sizeof(*ranks), str, 1);
	return 0;
}

int held_event(struct held *h, const char *host, const char *kind, int64_t ts_us, const char *source,
	       const char *detail)
{
	const char *str[4] = {host, kind, source, detail};
	struct entry *e;
	unsigned char *p = add_entry(h, HELD_EVENT, strings_size(str, 4), &e);

	if (!p)
		return -1;
	e->ts_us = ts_us;
	strings_put(p, str, 4);
	h->events++;
	return 0;
}

int held_find_name(const struct held *h, const char *name)
{
	const struct strmap_entry *e = strmap_find(&h->name_ids, name);

	return e ? (int)e->num : -1;
}

int held_add_name(struct held *h, const char *name)
{
	char *copy;

	if (h->nnames == h->names_cap) {
		size_t cap = h->names_cap ? 2 * h->names_cap : 16;
		char **a = realloc(h->names, cap * sizeof(*a));

		if (!a)
			return -1;
		h->names = a;
		h->names_cap = cap;
	}
	if (!(copy = strdup(name)))
		return -1;
	if (strmap_put_num(&h->name_ids, name, (int64_t)h->nnames) < 0) {
		free(copy);
		return -1;
	}
	h->names[h->nnames] = copy;
	return (int)h->nnames++;
}

static void release_batch(const struct entry *e, unsigned char *p, const struct held_sink *sink)
{
	struct record_iter *iters = (struct record_iter *)p;
	struct record_phase *phases = (struct record_phase *)(iters + e->n[0]);
	struct record_kernel *kernels = (struct record_kernel *)(phases + e->n[1]);
	const uint8_t *sk = (const uint8_t *)(kernels + e->n[2]);

	for (uint32_t i = 0; i < e->n[2]; i++) {
		kernels[i].sketch = kernels[i].sketch_len ? sk : NULL;
		sk += kernels[i].sketch_len;
	}
	sink->batch(sink->arg, iters, e->n[0], phases, e->n[1], kernels, e->n[2]);
}

void held_release(struct held *h, const struct held_sink *sink)
{
	struct held mine = *h;
	size_t off = 0;

	/* the sink may hold again (a diagnosis it submits): into a fresh hold */
	memset(h, 0, sizeof(*h));
	for (size_t i = 0; i < mine.nnames; i++)
		sink->name(sink->arg, mine.names[i]);
	while (off < mine.len) {
		struct entry *e = (struct entry *)(mine.buf + off);
		unsigned char *p = (unsigned char *)(e + 1);
		const unsigned char *q;

		switch (e->type) {
		case HELD_BATCH:
			release_batch(e, p, sink);
			break;
		case HELD_HOSTS:
			q = p + (size_t)e->n[0] * sizeof(uint32_t);
			sink->hosts(sink->arg, (const uint32_t *)p, e->n[0], strings_next(&q));
			break;
		case HELD_EVENT: {
			const char *host, *kind, *source;

			q = p;
			host = strings_next(&q);
			kind = strings_next(&q);
			source = strings_next(&q);
			sink->event(sink->arg, host, kind, e->ts_us, source, strings_next(&q));
			break;
		}
		}
		off += sizeof(*e) + e->size;
	}
	held_free(&mine);
}

size_t held_bytes(const struct held *h)
{
	return h->len + h->nnames * 64; /* a name: its copy, its slot and its map entry, about */
}

void held_free(struct held *h)
{
	for (size_t i = 0; i < h->nnames; i++)
		free(h->names[i]);
	free(h->names);
	strmap_free(&h->name_ids);
	free(h->buf);
	memset(h, 0, sizeof(*h));
}
