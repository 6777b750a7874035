/* import_common.h: what the format importers (import_kineto.c, import_chrome.c,
 * import_csv.c) and their dispatcher (import.c) share: the options, their warnings, and the
 * report of a record the sink refused. */
#ifndef CULPRIT_IMPORT_COMMON_H
#define CULPRIT_IMPORT_COMMON_H

#include <stddef.h>
#include <stdint.h>

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
void import_warn(const struct import_options *opt, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A record the sink (struct jsonl_handler) refused: "path: why" in err ("path: rejected"
 * when why is NULL). Returns -1. */
int import_rejected(const char *path, const char *why, char *err, size_t err_size);

#endif
