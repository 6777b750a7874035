/* fuzz_import: libFuzzer driver for one importer, chosen at compile time by FUZZ_FORMAT
 * (IMPORT_KINETO, IMPORT_CHROME, IMPORT_CSV). The input goes through a memfd so the
 * importer reads it by path, gzip detection and all, as it reads real files. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "import.h"

#ifndef FUZZ_FORMAT
#define FUZZ_FORMAT IMPORT_AUTO
#endif

static int s_job(void *c, const struct jsonl_job *j, const char **w)
{
	(void)c, (void)w;
	return j->world ? 0 : -1;
}
static int s_host(void *c, uint32_t r, const char *h, const char **w)
{
	(void)c, (void)r, (void)w;
	return h ? 0 : -1;
}
static int s_iter(void *c, const struct record_iter *r, const char **w)
{
	(void)c, (void)r, (void)w;
	return 0;
}
static int s_phase(void *c, const struct record_phase *r, const char *n, const char **w)
{
	(void)c, (void)w;
	return n && r->kind < 4 ? 0 : -1;
}
static int s_kernel(void *c, const struct record_kernel *r, const char *n, const int64_t *d, size_t nd, const char **w)
{
	(void)c, (void)r, (void)w;
	int64_t sum = 0;
	for (size_t i = 0; i < nd; i++)
		sum += d[i]; /* every duration readable */
	return n && sum != INT64_MIN ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static char path[64];
	if (fd < 0) {
		fd = memfd_create("fuzz_import", 0);
		if (fd < 0)
			abort();
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	}
	if (ftruncate(fd, 0) < 0 || pwrite(fd, data, size, 0) != (ssize_t)size)
		abort();
	struct jsonl_handler h = {NULL, s_job, s_host, s_iter, s_phase, s_kernel, NULL};
	const char *p = path;
	char err[1024];
	(void)import_read(FUZZ_FORMAT, &p, 1, NULL, &h, err, sizeof(err));
	return 0;
}
