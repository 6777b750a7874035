/* fuzz_trace_ranks.c: libFuzzer driver for the ranks parameter of GET .../trace and the
 * string form of POST .../capture's ranks (api_parse_ranks in server/api_trace.c).
 *   CC=clang cmake -S . -B build/fuzz -DCULPRIT_FUZZ=ON && cmake --build build/fuzz --target fuzz_trace_ranks
 *   build/fuzz/tests/fuzz/fuzz_trace_ranks -max_total_time=60 tests/fuzz/corpus/trace_ranks */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	uint32_t *r = NULL;
	size_t n = 0;
	char err[256] = "";
	int rc;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	rc = api_parse_ranks(s, 12960, TRACE_MAX_RANKS, &r, &n, err, sizeof(err));
	if (rc == 0) {
		/* 1..max distinct ranks of the job, ascending */
		if (!r || n == 0 || n > TRACE_MAX_RANKS)
			__builtin_trap();
		for (size_t i = 0; i < n; i++)
			if (r[i] >= 12960 || (i && r[i - 1] >= r[i]))
				__builtin_trap();
	} else if ((rc != -1 && rc != -2) || r || n || !err[0]) {
		__builtin_trap();
	}
	free(r);
	free(s);
	return 0;
}
