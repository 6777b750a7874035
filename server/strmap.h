/* strmap.h: a string-keyed hash table of pointers (open addressing, linear probing,
 * backward-shift deletion). Keys are copied; values are the caller's. */
#ifndef CULPRIT_STRMAP_H
#define CULPRIT_STRMAP_H

#include <stddef.h>

struct strmap_entry {
	char *key;
	void *value;
	size_t hash;
};

struct strmap {
	struct strmap_entry *slots;
	size_t cap; /* power of two, or 0 */
	size_t len;
};

void *strmap_get(const struct strmap *m, const char *key);
/* Inserts or replaces; returns 0, or -1 when out of memory. */
int strmap_put(struct strmap *m, const char *key, void *value);
/* Removes key; returns its value or NULL. */
void *strmap_del(struct strmap *m, const char *key);
/* Calls fn for every entry (do not modify the map from fn). */
void strmap_each(const struct strmap *m, void (*fn)(const char *key, void *value, void *arg), void *arg);
/* Frees the table and its keys (not the values). */
void strmap_free(struct strmap *m);

#endif
