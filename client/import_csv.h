/* import_csv.h: per-worker iteration times as CSV, alibaba-pai style: a header naming the
 * columns `worker`, `time` (the iteration, sampled) and `batch_time_norm` (or `batch_time`,
 * `dur_ms`), other columns ignored. Each distinct `time`, in increasing order, becomes one
 * iteration; each worker one rank (a DP group of all workers, one per node "worker-N").
 * The value becomes the iteration time in ms and a phase "batch" of kind mixed... see
 * docs/importers.md for why it is reported as compute. Small files: rows are kept. */
#ifndef CULPRIT_IMPORT_CSV_H
#define CULPRIT_IMPORT_CSV_H

#include <stddef.h>

#include "import_common.h"
#include "jsonl.h"
#include "attrs.h"

MUST_CHECK int import_csv_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		    size_t err_size);

#endif
