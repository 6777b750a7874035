/* trace_export.h: a job's timeline (storage/trace.h) as a Perfetto trace (protobuf, the
 * subset in schema/perfetto_trace.proto) or a Chrome JSON trace. Pure: data in, bytes out;
 * runs on a query worker thread.
 *
 * Tracks: one process per host (pid 1, 2, ... in rank order), one thread per rank under it
 * (its iterations, and its phases nested inside them), one track per rank and CUDA stream
 * for captured kernels, instants for incidents (job-wide) and out-of-band events (on their
 * host). Slices on one track always nest strictly: a child that ends after its parent is
 * clipped to the parent's end, and an iteration that starts before the previous one of its
 * rank ends cuts that one short (it is not its child): the clipped slice keeps its measured
 * duration in the args, with clipped=true. */
#ifndef CULPRIT_TRACE_EXPORT_H
#define CULPRIT_TRACE_EXPORT_H

#include <stddef.h>

#include "trace.h"
#include "attrs.h"

enum trace_format {
	TRACE_FORMAT_PERFETTO,
	TRACE_FORMAT_CHROME,
};

/* Sorts d's slices and clips them to nest, then encodes. 0 with *out (malloc'd) and *len,
 * or -1 out of memory. Perfetto timestamps are ns since the Unix epoch (the agents' clock);
 * Chrome `ts` is us since the job's start (d->job_start_us). */
MUST_CHECK int trace_export(struct trace_data *d, enum trace_format f, char **out, size_t *len);

/* Thread and process ids used in both formats. */
int trace_export_tid(uint32_t rank);
int trace_export_kernel_tid(uint32_t rank, uint32_t stream);

#endif
