/* capture.h: on-demand raw kernel capture (docs/protocol.md "Command", docs/api.md).
 *
 * POST /api/v1/jobs/{job}/capture sends a Command CAPTURE to the connected agents serving
 * the chosen ranks; they answer with Batch.raw_kernels for the next iterations, which
 * ingest checks (server/batch.c) and the storage writer stores in table raw_kernels with
 * their batch.
 * Everything here runs on the event loop. */
#ifndef CULPRIT_CAPTURE_H
#define CULPRIT_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "culprit.pb-c.h"

struct api_req;

#define CAPTURE_MAX_RANKS 256            /* ranks per capture */
#define CAPTURE_MAX_ITERATIONS 100       /* iterations per capture */
#define CAPTURE_DEFAULT_MAX_EVENTS 20000 /* raw kernels per capture and agent, unless asked */
#define CAPTURE_MAX_EVENTS 200000        /* the most a request may ask */
/* POST /api/v1/jobs/{job}/capture */
void api_capture(struct api_req *r);

#endif
