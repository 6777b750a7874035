/* strmap.h: a string-keyed hash table (open addressing, linear probing, backward-shift
 * deletion) of pointers or of 64-bit integers. Keys are copied; pointed-to values are the
 * caller's. The one map of the code base (culpritd's jobs, tokens, the writer's caches). */
#ifndef CULPRIT_STRMAP_H
#define CULPRIT_STRMAP_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

struct strmap_entry {
	char *key; /* NULL: a free slot */
	union {
		void *value; /* strmap_put, strmap_get */
		int64_t num; /* strmap_put_num, strmap_find(...)->num */
	};
	size_t hash;
};

struct strmap {
	struct strmap_entry *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void *strmap_get(const struct strmap *m, const char *key);
/* The entry of key, or NULL: for maps of integers, where 0 is a value like any other. */
struct strmap_entry *strmap_find(const struct strmap *m, const char *key);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
MUST_CHECK int strmap_put(struct strmap *m, const char *key, void *value);
MUST_CHECK int strmap_put_num(struct strmap *m, const char *key, int64_t num);
/* Removes key; returns its value or NULL. */
void *strmap_del(struct strmap *m, const char *key);
/* Calls fn for every entry (do not modify the map from fn). */
void strmap_each(const struct strmap *m, void (*fn)(const char *key, void *value, void *arg), void *arg);
/* Frees the table and its keys (not the values); the map is empty and usable again. */
void strmap_free(struct strmap *m);

#endif
