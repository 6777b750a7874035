/* import_stream.h: the traceEvents of a JSON trace (Kineto or Chrome), one event at a time,
 * for the importers that read them (import_kineto.c, import_chrome.c). Streamed over gzread
 * chunks by a scanner of its own that reads only the keys below and checks the rest as
 * strict JSON; nothing builds a document tree. */
#ifndef CULPRIT_IMPORT_STREAM_H
#define CULPRIT_IMPORT_STREAM_H

#include <stddef.h>
#include <stdint.h>

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
};

struct import_stream_handler {
	void *ctx;
	/* each returns 0, or -1 with *why set (a static or ctx-owned message) */
	int (*event)(void *ctx, const struct import_stream_event *ev, const char **why);
	/* distributedInfo.rank / world_size, when present */
	int (*dist)(void *ctx, int64_t rank, int64_t world, const char **why);
};

/* Streams the traceEvents of path (an object with "traceEvents" or a bare array). Returns
 * 0, or -1 with "path: byte N: message" in err. *bytes (may be NULL) gets the
 * uncompressed size read. */
int import_stream_events(const char *path, const struct import_stream_handler *h, uint64_t *bytes, char *err,
			 size_t errlen);

#endif
