/* capture.h: on-demand raw kernel capture (docs/protocol.md "Command", docs/api.md).
 *
 * POST /api/v1/jobs/{job}/capture sends a Command CAPTURE to the connected agents serving
 * the chosen ranks; they answer with Batch.raw_kernels for the next iterations, which
 * ingest validates here and the storage writer stores in table raw_kernels with their batch.
 * Everything here runs on the event loop. */
#ifndef CULPRIT_CAPTURE_H
#define CULPRIT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "culprit.pb-c.h"

struct api_req;
struct storage_op;

#define CAPTURE_MAX_RANKS 256             /* ranks per capture */
#define CAPTURE_MAX_ITERATIONS 100        /* iterations per capture */
#define CAPTURE_DEFAULT_MAX_EVENTS 20000  /* raw kernels per capture and agent, unless asked */
#define CAPTURE_MAX_EVENTS 200000         /* the most a request may ask */
#define CAPTURE_MAX_RAW_PER_BATCH 65536   /* raw kernels in one batch (Reject beyond) */
#define CAPTURE_MAX_STREAM 65535          /* stream ids */

/* The raw kernels of a batch against the protocol's rules (n_names: the batch's dictionary,
 * which their names index by then; ranks: the agent's, sorted; starts from 2000 to a day
 * after now_us): 0, or -1 with the reason in err (the batch is rejected). */
int capture_validate_raw(const Culprit__V1__Batch *b, size_t n_names, const uint32_t *ranks, size_t n_ranks,
			 int64_t now_us, char *err, size_t size);

/* POST /api/v1/jobs/{job}/capture */
void api_capture(struct api_req *r);

#endif
