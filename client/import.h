/* import.h: reading real trace formats into the same records as the interchange file.
 *
 * Every importer feeds a struct jsonl_handler (jsonl.h): the sink the JSONL reader feeds
 * too, so `culprit diagnose` and `culprit replay` take every format through one interface.
 * Formats (docs/importers.md):
 *   jsonl   the interchange file (jsonl.h)
 *   kineto  PyTorch profiler traces, one file per rank (import_kineto.h)
 *   chrome  Chrome-trace timelines of many ranks, bytedance-whatif style (import_chrome.h)
 *   csv     per-worker iteration times, alibaba-pai style (import_csv.h)
 * Large JSON is streamed by a scanner made for traces (import_stream.h); nothing builds a
 * document tree. Options and warnings shared with the importers: import_common.h. */
#ifndef CULPRIT_IMPORT_H
#define CULPRIT_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "import_common.h"
#include "jsonl.h"
#include "attrs.h"

enum import_format {
	IMPORT_AUTO = 0,
	IMPORT_JSONL,
	IMPORT_KINETO,
	IMPORT_CHROME,
	IMPORT_CSV,
};

/* "auto", "jsonl", ... ; -1 when unknown. */
int import_format_parse(const char *s);
const char *import_format_name(enum import_format f);
/* Detects the format of path (plain or gzip) from its first bytes; IMPORT_AUTO when it
 * cannot tell or the file is a known non-trace (a PyTorch execution trace, a memory-profiler
 * timeline): err says which. */
enum import_format import_detect(const char *path, char *err, size_t err_size);

/* paths[0..n) with every directory replaced by its trace files (names ending in .json,
 * .jsonl or .csv, each optionally .gz), in natural order (rank-2 before rank-10); other
 * files of a directory are skipped with one warning. *out is one allocation (free() it);
 * -1 with err when a directory cannot be read or holds no trace file. */
MUST_CHECK int import_expand(const char *const *paths, size_t n, const struct import_options *opt, char ***out, size_t *nout,
		  char *err, size_t err_size);

/* Reads paths[0..n) of format fmt (IMPORT_AUTO: detected per file) into h. The formats
 * that describe one rank per file (kineto) emit one job line, from the first file.
 * Returns 0, or -1 with "path: position: message" in err. */
MUST_CHECK int import_read(enum import_format fmt, const char *const *paths, size_t n, const struct import_options *opt,
		const struct jsonl_handler *h, char *err, size_t err_size);

#endif
