/* import_kineto.h: PyTorch profiler (Kineto) traces, one file per rank, plain or gzip.
 * Rank and world from distributedInfo; ProfilerStep#N = iteration N; GPU kernels split
 * into compute and NCCL communication by name (ncclKernel_*, ncclDevKernel_*, any name
 * containing "nccl"); per step: one phase "gpu_compute" (sum of compute kernels), one
 * phase per collective "nccl_<Type>#<i>" (comm, DP group), kernels with their raw
 * durations. Timestamps are the trace's own (Kineto writes Unix microseconds, a shared
 * clock when the hosts are synchronised). A trace without kernels (a CPU job) gets its
 * phases from its CPU operators: "cpu_compute", "data_wait". Events are streamed; only
 * kernels and steps (and, until the first kernel, CPU operators) are kept until the end of
 * each file (about 32 bytes each). */
#ifndef CULPRIT_IMPORT_KINETO_H
#define CULPRIT_IMPORT_KINETO_H

#include <stddef.h>
#include <stdint.h>

#include "import_common.h"
#include "jsonl.h"
#include "attrs.h"

/* Collective type of an NCCL kernel name into out ("AllReduce", "SendRecv", ...);
 * returns 0 when the name is not an NCCL kernel. */
int import_kineto_nccl_type(const char *name, char *out, size_t cap);

struct import_kineto_stats {
	uint64_t bytes; /* uncompressed JSON */
	uint64_t steps, kernels;
};

MUST_CHECK int import_kineto_read(const char *const *paths, size_t n, const struct import_options *opt,
		       const struct jsonl_handler *h, char *err, size_t err_size);
/* The same with figures for the benchmark (st may be NULL). */
MUST_CHECK int import_kineto_read_stats(const char *const *paths, size_t n, const struct import_options *opt,
			     const struct jsonl_handler *h, struct import_kineto_stats *st, char *err, size_t err_size);

#endif
