/* hash.h: the string hash of culprit's hash tables (64-bit FNV-1a). */
#ifndef CULPRIT_HASH_H
#define CULPRIT_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t hash_str(const char *s)
{
	uint64_t h = UINT64_C(1469598103934665603);

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return h;
}

static inline uint64_t hash_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = UINT64_C(1469598103934665603);

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * UINT64_C(1099511628211);
	return h;
}

#endif
