/* readahead.h: a file (plain or gzip, "-" for standard input) read on a thread of its own
 * into blocks of whole lines, so that reading and inflating the next blocks overlap the
 * parsing of these. Gzip (one member or several concatenated, told from the first bytes as
 * zlib does) is inflated by ISA-L's igzip, CRC checked. At most READAHEAD_BLOCKS blocks are
 * held, filled or lent out (a bounded queue: when the readers are behind, the thread does
 * their idle work, readahead_hooks, or waits); a block fills its buffer, READAHEAD_BLOCK
 * bytes (a small file: its size), less the line its end cuts, which starts the next
 * block. The buffers are one allocation on 2 MiB pages (hugemem.h); a block that starts with
 * a long cut line, or holds a line longer than a block, gets a larger buffer of its own, up
 * to READAHEAD_MAX_LINE. Used by the JSONL reader. */
#ifndef CULPRIT_READAHEAD_H
#define CULPRIT_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define READAHEAD_BLOCK (1u << 20)
#define READAHEAD_BLOCKS 4
#define READAHEAD_MAX_LINE (64u << 20)
#define READAHEAD_PAD 16 /* zero bytes after every block: a parser may read words past a line */

/* Opens path ("-": standard input) for reading, plain or gzip, with zlib's buffers sized to
 * the file and at most max_buf: a small file does not pay for large buffers on every open.
 * NULL (errno set) when it cannot be opened; close with gzclose. */
struct gzFile_s *gz_open_read(const char *path, unsigned max_buf);

struct readahead;

/* NULL (errno set) when path cannot be opened or the thread not started. */
struct readahead *readahead_open(const char *path);
/* Work for the reading thread, set once its reader is ready for it (either may be NULL), each
 * called with arg and no lock held: filled after each block it fills (and at the end), idle
 * while every block is held (the readers are behind), until a block is given back or idle
 * says it found nothing to do (0). The JSONL reader decodes blocks there (and so starts no
 * decoder thread of its own on two cores). */
struct readahead_hooks {
	void (*filled)(void *arg);
	int (*idle)(void *arg);
	void *arg;
};
void readahead_set_hooks(struct readahead *r, const struct readahead_hooks *hooks);
/* The next block: its bytes in *data, whole lines (the file's last one may have no newline),
 * followed by READAHEAD_PAD zero bytes, lent until given back with readahead_release
 * (several may be lent at once); 0 at the end of the file, -1 on a read or gzip error
 * (readahead_error says which) or once cancelled. Without wait, READAHEAD_NOT_YET when the
 * next block is still being read. Thread-safe: callers get the blocks in the file's order. */
#define READAHEAD_NOT_YET (-2)
ssize_t readahead_next(struct readahead *r, char **data, bool wait);
/* Gives back the oldest block lent. */
void readahead_release(struct readahead *r);
/* Ends the reading early: readahead_next returns -1 from now on, in any thread waiting in it
 * too. */
void readahead_cancel(struct readahead *r);
/* The bytes a block holds but for the line its end cuts: READAHEAD_BLOCK, or a small file's
 * size. */
size_t readahead_block(const struct readahead *r);
/* The error that ended the file ("truncated gzip data (unexpected end of file)", ...). */
const char *readahead_error(const struct readahead *r);
void readahead_close(struct readahead *r);

#endif
