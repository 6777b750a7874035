/* cmp.h: qsort and bsearch comparators. */
#ifndef CULPRIT_CMP_H
#define CULPRIT_CMP_H

#include <stdint.h>

/* uint32_t ascending */
static inline int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

#endif
