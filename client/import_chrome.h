/* import_chrome.h: Chrome-trace timelines holding many ranks, bytedance-whatif style:
 * process id = DP rank, thread names "PP rank X, TP rank Y, {compute, pp-comm, tp-comm,
 * dp-comm, misc}", args.step = the iteration. Layout (pp, tp) from opt or from the
 * meta-<trial>.yaml beside a timeline-<trial>.json[.gz] (keys pp_size, tp_size, dp_size).
 * Per (rank, step): an iteration spanning its events, phases "forward-compute",
 * "backward-compute", ... by event name with the kind of their thread. Streamed; the
 * per-(rank, step, phase) sums are kept until the end (small). */
#ifndef CULPRIT_IMPORT_CHROME_H
#define CULPRIT_IMPORT_CHROME_H

#include <stddef.h>

#include "import_common.h"
#include "jsonl.h"
#include "attrs.h"

MUST_CHECK int import_chrome_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		       size_t err_size);

#endif
