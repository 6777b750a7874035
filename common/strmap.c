/* strmap.c: see strmap.h. */
#include "strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hash.h"

static size_t key_hash(const char *s)
{
	uint64_t h = hash_str(s);

	return (size_t)(h ^ (h >> 29));
}

static struct strmap_entry *lookup(const struct strmap *m, const char *key, size_t h)
{
	if (m->cap == 0)
		return NULL;
	for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct strmap_entry *e = &m->slots[i];

		if (!e->key)
			return NULL;
		if (e->hash == h && strcmp(e->key, key) == 0)
			return e;
	}
}

void *strmap_get(const struct strmap *m, const char *key)
{
	struct strmap_entry *e = lookup(m, key, key_hash(key));

	return e ? e->value : NULL;
}

struct strmap_entry *strmap_find(const struct strmap *m, const char *key) { return lookup(m, key, key_hash(key)); }

static void place(struct strmap_entry *slots, size_t cap, struct strmap_entry e)
{
	size_t i = e.hash & (cap - 1);

	while (slots[i].key)
		i = (i + 1) & (cap - 1);
	slots[i] = e;
}

static int grow(struct strmap *m)
{
	size_t cap = m->cap ? m->cap * 2 : 16;
	struct strmap_entry *slots = calloc(cap, sizeof(*slots));

	if (!slots)
		return -1;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			place(slots, cap, m->slots[i]);
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return 0;
}

/* The entry of key, made when missing (its value zero); NULL when out of memory. */
static struct strmap_entry *entry(struct strmap *m, const char *key)
{
	size_t h = key_hash(key), i;
	struct strmap_entry *e = lookup(m, key, h);
	char *k;

	if (e)
		return e;
	if ((m->len + 1) * 4 > m->cap * 3 && grow(m) < 0)
		return NULL;
	if (!(k = strdup(key)))
		return NULL;
	for (i = h & (m->cap - 1); m->slots[i].key; i = (i + 1) & (m->cap - 1))
		;
	m->slots[i] = (struct strmap_entry){.key = k, .hash = h};
	m->len++;
	return &m->slots[i];
}

int strmap_put(struct strmap *m, const char *key, void *value)
{
	struct strmap_entry *e = entry(m, key);

	if (!e)
		return -1;
	e->value = value;
	return 0;
}

int strmap_put_num(struct strmap *m, const char *key, int64_t num)
{
	struct strmap_entry *e = entry(m, key);

	if (!e)
		return -1;
	e->num = num;
	return 0;
}

void *strmap_del(struct strmap *m, const char *key)
{
	struct strmap_entry *e = lookup(m, key, key_hash(key));
	void *value;
	size_t i, j;

	if (!e)
		return NULL;
	value = e->value;
	free(e->key);
	i = (size_t)(e - m->slots);
	m->slots[i].key = NULL;
	m->len--;
	/* backward shift: move later entries of the run into the hole when their home allows */
	for (j = (i + 1) & (m->cap - 1); m->slots[j].key; j = (j + 1) & (m->cap - 1)) {
		size_t home = m->slots[j].hash & (m->cap - 1);

		if (((j - home) & (m->cap - 1)) >= ((j - i) & (m->cap - 1))) {
			m->slots[i] = m->slots[j];
			m->slots[j].key = NULL;
			i = j;
		}
	}
	return value;
}

void strmap_each(const struct strmap *m, void (*fn)(const char *key, void *value, void *arg), void *arg)
{
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].key)
			fn(m->slots[i].key, m->slots[i].value, arg);
}

void strmap_free(struct strmap *m)
{
	for (size_t i = 0; i < m->cap; i++)
		free(m->slots[i].key);
	free(m->slots);
	m->slots = NULL;
	m->cap = m->len = 0;
}
