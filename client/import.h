/* import.h: reading real trace formats into the same records as the interchange file.
 *
 * Every importer feeds a struct jsonl_handler (jsonl.h): the sink the JSONL reader feeds
 * too, so `culprit diagnose` and `culprit replay` take every format through one interface.
 * Formats (docs/importers.md):
 *   jsonl   the interchange file (jsonl.h)
 *   kineto  PyTorch profiler traces, one file per rank (import_kineto.h)
 *   chrome  Chrome-trace timelines of many ranks, bytedance-whatif style (import_chrome.h)
 *   csv     per-worker iteration times, alibaba-pai style (import_csv.h)
 * Large JSON is streamed through yajl callbacks; nothing builds a document tree. */
#ifndef CULPRIT_IMPORT_H
#define CULPRIT_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"

enum import_format {
	IMPORT_AUTO = 0,
	IMPORT_JSONL,
	IMPORT_KINETO,
	IMPORT_CHROME,
	IMPORT_CSV,
};

struct import_options {
	const char *job;  /* job name for formats without one (default: the format's name) */
	const char *meta; /* chrome: the layout file (meta-*.yaml); default: beside the input */
	uint32_t pp, tp;  /* chrome: layout by flags, 0 = from meta */
	/* warnings about a file that is read anyway (a guessed rank, no step annotations);
	 * NULL: not told */
	void (*warn)(void *ctx, const char *msg);
	void *warn_ctx;
};

/* A warn callback printing "PREFIX: warning: MSG" on stderr, ctx the prefix (a string). */
void import_warn_stderr(void *prefix, const char *msg);
/* Passes a formatted warning to opt->warn (opt may be NULL). */
void import_warn(const struct import_options *opt, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "auto", "jsonl", ... ; -1 when unknown. */
int import_format_parse(const char *s);
const char *import_format_name(enum import_format f);
/* Detects the format of path (plain or gzip) from its first bytes; IMPORT_AUTO when it
 * cannot tell or the file is a known non-trace (a PyTorch execution trace, a memory-profiler
 * timeline): err says which. */
enum import_format import_detect(const char *path, char *err, size_t errlen);

/* paths[0..n) with every directory replaced by its trace files (names ending in .json,
 * .jsonl or .csv, each optionally .gz), in natural order (rank-2 before rank-10); other
 * files of a directory are skipped with one warning. *out is one allocation (free() it);
 * -1 with err when a directory cannot be read or holds no trace file. */
int import_expand(const char *const *paths, size_t n, const struct import_options *opt, char ***out,
		  size_t *nout, char *err, size_t errlen);

/* Reads paths[0..n) of format fmt (IMPORT_AUTO: detected per file) into h. The formats
 * that describe one rank per file (kineto) emit one job line, from the first file.
 * Returns 0, or -1 with "path: position: message" in err. */
int import_read(enum import_format fmt, const char *const *paths, size_t n,
		const struct import_options *opt, const struct jsonl_handler *h, char *err,
		size_t errlen);

/* --- shared by the JSON trace importers: one Chrome-trace event at a time --- */

#define IMPORT_NAME_MAX 512

struct import_event {
	char ph[8];
	char cat[64];
	char name[IMPORT_NAME_MAX];
	char arg_name[128]; /* args.name (metadata events) */
	double ts, dur;
	int has_ts, has_dur;
	int64_t pid, tid; /* -1 when absent or not a number */
	int64_t step;     /* args.step, -1 when absent */
};

struct import_stream_handler {
	void *ctx;
	/* each returns 0, or -1 with *why set (a static or ctx-owned message) */
	int (*event)(void *ctx, const struct import_event *ev, const char **why);
	/* distributedInfo.rank / world_size, when present */
	int (*dist)(void *ctx, int64_t rank, int64_t world, const char **why);
};

/* Streams the traceEvents of path (an object with "traceEvents" or a bare array). Returns
 * 0, or -1 with "path: byte N: message" in err. *bytes (may be NULL) gets the
 * uncompressed size read. */
int import_stream_events(const char *path, const struct import_stream_handler *h,
			 uint64_t *bytes, char *err, size_t errlen);

#endif
