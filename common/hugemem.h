/* hugemem.h: arrays of a megabyte or more on 2 MiB pages.
 *
 * On the VMs culprit was measured on, the first touch of a 4 KiB page costs about 10 us (a
 * page fault and an exit to the hypervisor): touching 64 MiB took 170-230 ms on 4 KiB pages
 * and 4-106 ms on 2 MiB pages; `culprit diagnose` of a 260 MB file spent a fifth of its CPU
 * in 11,000 page faults. hugemem_alloc asks the kernel for large pages (MADV_HUGEPAGE, honoured when
 * transparent huge pages are "madvise" or "always"); where it has none the memory is
 * ordinary pages. Freed with free(). */
#ifndef CULPRIT_HUGEMEM_H
#define CULPRIT_HUGEMEM_H

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGEMEM_PAGE ((size_t)2 << 20)
#define HUGEMEM_MIN ((size_t)1 << 20) /* from here on, whole large pages */

/* the bytes hugemem_alloc(bytes) gives: whole large pages from HUGEMEM_MIN on */
static inline size_t hugemem_size(size_t bytes)
{
	return bytes < HUGEMEM_MIN ? bytes : (bytes + HUGEMEM_PAGE - 1) & ~(HUGEMEM_PAGE - 1);
}

/* hugemem_size(bytes) bytes aligned on a cache line (a large page from HUGEMEM_MIN on),
 * zeroed when zero is set; NULL when out of memory */
static inline void *hugemem_alloc(size_t bytes, int zero)
{
	size_t n = hugemem_size(bytes ? bytes : 1);
	int huge = n >= HUGEMEM_MIN;
	void *p = NULL;
	if (posix_memalign(&p, huge ? HUGEMEM_PAGE : 64, n) != 0)
		return NULL;
	if (huge)
		(void)madvise(p, n, MADV_HUGEPAGE);
	if (zero)
		memset(p, 0, n);
	return p;
}

#endif
