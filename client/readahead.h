/* readahead.h: a file (plain or gzip, "-" for standard input) read in large blocks by a
 * thread of its own, so that inflating the next block overlaps parsing this one. Gzip (one
 * member or several concatenated, told from the first bytes as zlib does) is inflated by
 * ISA-L's igzip, CRC checked. At most
 * READAHEAD_BLOCKS blocks of READAHEAD_BLOCK bytes are held (a bounded queue: the thread
 * waits when the reader is behind); a small file gets smaller blocks. Used by the JSONL
 * reader. */
#ifndef CULPRIT_READAHEAD_H
#define CULPRIT_READAHEAD_H

#include <stddef.h>
#include <sys/types.h>

#define READAHEAD_BLOCK (1u << 20)
#define READAHEAD_BLOCKS 4

/* Opens path ("-": standard input) for reading, plain or gzip, with zlib's buffers sized to
 * the file and at most max_buf: a small file does not pay for large buffers on every open.
 * NULL (errno set) when it cannot be opened; close with gzclose. */
struct gzFile_s *gz_open_read(const char *path, unsigned max_buf);

struct readahead;

/* NULL (errno set) when path cannot be opened or the thread not started. */
struct readahead *readahead_open(const char *path);
/* The next block: its bytes in *data (valid until the next call), 0 at the end of the file,
 * -1 on a read or gzip error (readahead_error says which). */
ssize_t readahead_next(struct readahead *r, const char **data);
/* The error that ended the file ("truncated gzip data (unexpected end of file)", ...). */
const char *readahead_error(const struct readahead *r);
void readahead_close(struct readahead *r);

#endif
