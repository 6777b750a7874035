/* hash.h: the string hash of culprit's hash tables (64-bit FNV-1a). */
#ifndef CULPRIT_HASH_H
#define CULPRIT_HASH_H

#include <stdint.h>

static inline uint64_t hash_str(const char *s)
{
	uint64_t h = UINT64_C(1469598103934665603);

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return h;
}

#endif
