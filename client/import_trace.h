/* import_trace.h: the Chrome JSON that `culprit trace --format chrome` writes, read back for
 * `culprit diagnose`. Its events carry their rank and iteration in args (cat "iteration",
 * "phase", "kernel"; durations args.dur_us, phases' kind and group), its threads are named
 * "rank N (tp A cp B ep C dp D pp E)" in a process named after their host, its out-of-band
 * events are instants of cat "event", and otherData holds the job's name and layout. The
 * captured raw kernels of a (rank, iteration, name) become one kernel summary. */
#ifndef CULPRIT_IMPORT_TRACE_H
#define CULPRIT_IMPORT_TRACE_H

#include <stddef.h>

#include "import_common.h"
#include "jsonl.h"
#include "attrs.h"

/* 0, or -1 with "path: ..." in err. */
MUST_CHECK int import_trace_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		      size_t err_size);

#endif
