/* api_trace.h: the L5 deep dive routes: GET /api/v1/jobs/{job}/trace (api_trace.c) and
 * POST /api/v1/jobs/{job}/capture (capture.c). */
#ifndef CULPRIT_API_TRACE_H
#define CULPRIT_API_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

struct api_req;

#define TRACE_MAX_RANKS 256         /* ranks per trace */
#define TRACE_MAX_ITERATIONS 1000   /* iterations per trace (400 beyond) */
#define TRACE_DEFAULT_ITERATIONS 10 /* when from_iter or to_iter is absent */
#define TRACE_MAX_SLICES 200000     /* iterations + phases + kernels per trace (413 beyond) */

void api_trace(struct api_req *r);

/* Parses "10352-10359,10336" into sorted distinct ranks below world, at most max.
 * 0 ok; -1 malformed or too many; -2 a rank >= world (message in err). */
MUST_CHECK int api_parse_ranks(const char *s, uint32_t world, size_t max, uint32_t **out, size_t *n_out, char *err,
		    size_t err_size);

#endif
