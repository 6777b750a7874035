/* import_stream.h: the traceEvents of a JSON trace (Kineto or Chrome), one event at a time,
 * for the importers that read them (import_kineto.c, import_chrome.c). Streamed over gzread
 * chunks by a scanner of its own that reads only the keys below and checks the rest as
 * strict JSON; nothing builds a document tree. */
#ifndef CULPRIT_IMPORT_STREAM_H
#define CULPRIT_IMPORT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

#define IMPORT_STREAM_NAME_MAX 512

struct import_stream_event {
	char ph[8];
	char cat[64];
	char name[IMPORT_STREAM_NAME_MAX];
	char arg_name[128]; /* args.name (metadata events) */
	double ts, dur;
	int has_ts, has_dur;
	int64_t pid, tid; /* -1 when absent or not a number */
	int64_t step;     /* args.step, -1 when absent */
	/* the args of culprit's own Chrome trace (`culprit trace --format chrome`): rank, iter
	 * and dur_us (-1 when absent), kind, group and detail ("" when absent), start_known */
	int64_t rank, iter, dur_us;
	char kind[16], group[16], detail[256];
	int start_unknown; /* args.start_known is false */
};

/* The top-level otherData of culprit's own Chrome trace: the job and its topology. */
struct import_stream_other {
	char job[256];
	char order[32];
	int64_t job_start_us;                             /* 0 when absent */
	int64_t world, tp, cp, pp, dp, ep, gpus_per_node; /* -1 when absent */
};

struct import_stream_handler {
	void *ctx;
	/* each returns 0, or -1 with *why set (a static or ctx-owned message) */
	int (*event)(void *ctx, const struct import_stream_event *ev, const char **why);
	/* distributedInfo.rank / world_size, when present */
	int (*dist)(void *ctx, int64_t rank, int64_t world, const char **why);
	/* otherData, when present (NULL: not read) */
	int (*other)(void *ctx, const struct import_stream_other *o, const char **why);
};

/* Streams the traceEvents of path (an object with "traceEvents" or a bare array). Returns
 * 0, or -1 with "path: byte N: message" in err. *bytes (may be NULL) gets the
 * uncompressed size read. */
MUST_CHECK int import_stream_events(const char *path, const struct import_stream_handler *h, uint64_t *bytes, char *err,
			 size_t err_size);

#endif
