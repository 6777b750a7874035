/* fuzz_event_body.c: libFuzzer driver for the POST /api/v1/events body (server/event_body.c).
 *   CC=clang cmake -S . -B build/fuzz -DCULPRIT_FUZZ=ON && cmake --build build/fuzz --target fuzz_event_body
 *   build/fuzz/tests/fuzz/fuzz_event_body -max_total_time=60 tests/fuzz/corpus/event_body */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "event_body.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct event_body b;
	char err[512];
	int st = event_body_parse((const char *)data, size, 1, &b, err, sizeof(err));

	if (st == 0) {
		/* every accepted event is complete and within its bounds */
		for (size_t i = 0; i < b.n; i++) {
			const struct event_in *e = &b.ev[i];

			if (!e->host || !e->kind || !e->source || !e->detail || !e->host[0] || !e->kind[0] ||
			    strlen(e->host) > EVENT_HOST_MAX || strlen(e->kind) > EVENT_KIND_MAX || e->ts_us <= 0 ||
			    e->ts_us > EVENT_TS_MAX)
				__builtin_trap();
		}
		event_body_free(&b);
	} else if (b.root || b.ev || !err[0]) {
		__builtin_trap();
	}
	return 0;
}
