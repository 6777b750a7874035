/* jsonl.h: the interchange file (docs/format.md): one JSON object a line,
 * plain or gzip-compressed (detected from the bytes, not the name). Reading calls a
 * handler per record; writing formats records (used by `culprit sim --out`). */
#ifndef CULPRIT_JSONL_H
#define CULPRIT_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "attrs.h"

struct jsonl_job {
	const char *job;
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	const char *order;
	const char *device; /* "gpu", "cpu", or NULL: not said */
};

/* Each callback returns 0 to go on, or -1 with *why set to a static message (the reader
 * reports it with the file and line). Names are passed as strings; the name fields of the
 * records are 0. Any callback may be NULL (the line is skipped). */
struct jsonl_handler {
	void *ctx;
	int (*job)(void *ctx, const struct jsonl_job *job, const char **why);
	int (*host)(void *ctx, uint32_t rank, const char *host, const char **why);
	int (*iter)(void *ctx, const struct record_iter *rec, const char **why);
	int (*phase)(void *ctx, const struct record_phase *rec, const char *name, const char **why);
	int (*kernel)(void *ctx, const struct record_kernel *rec, const char *name, const int64_t *durs, size_t ndurs,
		      const char **why);
	int (*event)(void *ctx, const char *host, const char *kind, int64_t ts_us, const char *source,
		     const char *detail, const char **why);
};

/* Reads path ("-" is stdin). Returns 0, or -1 with "path:line: message" (or "path: ...")
 * in err. Blank lines are skipped; unknown fields and unknown types are ignored. *lines
 * (may be NULL) gets the number of lines read. */
MUST_CHECK int jsonl_read(const char *path, const struct jsonl_handler *h, uint64_t *lines, char *err, size_t err_size);

/* The threads started to decode a read's lines: 0 (the default) for two fewer than the CPUs
 * (the caller's thread, which applies the records, and readahead's take one each, and decode
 * when they would wait: none on two cores), -1 for none; at most 4. The result does not
 * depend on it. */
extern int jsonl_decoders;

/* Writer: gzip when gz is set. */
struct jsonl_writer;
struct jsonl_writer *jsonl_writer_open(const char *path, int gz, char *err, size_t err_size);
/* Closes and reports a write error (0 or -1). */
MUST_CHECK int jsonl_writer_close(struct jsonl_writer *w);
void jsonl_write_job(struct jsonl_writer *w, const struct jsonl_job *job);
void jsonl_write_host(struct jsonl_writer *w, const char *job, uint32_t rank, const char *host);
void jsonl_write_iter(struct jsonl_writer *w, const char *job, const struct record_iter *rec);
void jsonl_write_phase(struct jsonl_writer *w, const char *job, const struct record_phase *rec, const char *name);
void jsonl_write_kernel(struct jsonl_writer *w, const char *job, const struct record_kernel *rec, const char *name,
			const int64_t *durs, size_t ndurs);
void jsonl_write_event(struct jsonl_writer *w, const char *job, const char *host, const char *kind, int64_t ts_us,
		       const char *source, const char *detail);

#endif
