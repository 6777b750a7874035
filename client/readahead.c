/* readahead.c: a file read on a thread into a ring of blocks (see readahead.h); gzip is
 * inflated by ISA-L's igzip, about three times zlib's speed. */
#include "readahead.h"

#include <errno.h>
#include <isa-l/igzip_lib.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "hugemem.h"

struct gzFile_s *gz_open_read(const char *path, unsigned max_buf)
{
	int fd = strcmp(path, "-") == 0 ? dup(0) : open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	unsigned b = max_buf;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (off_t)b)
		b = st.st_size < 8192 ? 8192 : (unsigned)st.st_size;
	gzFile f = gzdopen(fd, "rb");
	if (!f) {
		close(fd);
		errno = ENOMEM; /* zlib's only way to fail here */
		return NULL;
	}
	gzbuffer(f, b);
	return f;
}

struct readahead {
	int fd;
	bool sniffed; /* the first bytes read: gzip or plain decided */
	bool gzip;    /* inflated by ISA-L; else the bytes as read */
	bool in_eof;  /* read() said end of file */
	bool done;    /* the last gzip member ended */
	bool failed;  /* err set: the next block is -1 */
	uint8_t *in;  /* input bytes (compressed, or plain ones read to sniff) */
	unsigned in_cap;
	uint8_t *next; /* input not yet used: next, avail */
	unsigned avail;
	struct inflate_state *inf; /* gzip only */
	char *carry;               /* the thread's: the start of a line a block cut, for the next block */
	size_t clen, ccap;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *ring;                  /* the blocks' buffers, one after another (allocated when first filled) */
	char *buf[READAHEAD_BLOCKS]; /* in ring, or of its own (own) after a long line */
	size_t cap[READAHEAD_BLOCKS];
	bool own[READAHEAD_BLOCKS];
	unsigned block;                /* bytes read a block: READAHEAD_BLOCK, less for a small file */
	ssize_t len[READAHEAD_BLOCKS]; /* filled block: bytes, 0 end, -1 error */
	unsigned head, count;          /* the oldest block not given back; blocks filled and not given back */
	unsigned out;                  /* of those, held by the reader (from head on) */
	bool stop;
	struct readahead_hooks hooks; /* under mu */
	char err[160];
};

/* Keeps the unused input and reads more after it: -1 on a read error (err set). */
static int in_more(struct readahead *r)
{
	if (r->avail && r->next != r->in)
		memmove(r->in, r->next, r->avail);
	r->next = r->in;
	ssize_t k;
	do
		k = read(r->fd, r->in + r->avail, r->in_cap - r->avail);
	while (k < 0 && errno == EINTR);
	if (k < 0) {
		snprintf(r->err, sizeof(r->err), "could not read: %s", strerror(errno));
		return -1;
	}
	if (k == 0)
		r->in_eof = true;
	r->avail += (unsigned)k;
	return 0;
}

static const char *isal_message(int rc)
{
	switch (rc) {
	case ISAL_INVALID_BLOCK: return "bad gzip data (invalid deflate block)";
	case ISAL_INVALID_SYMBOL: return "bad gzip data (invalid code)";
	case ISAL_INVALID_LOOKBACK: return "bad gzip data (invalid distance too far back)";
	case ISAL_INVALID_WRAPPER: return "bad gzip data (invalid gzip header)";
	case ISAL_UNSUPPORTED_METHOD: return "bad gzip data (unknown compression method)";
	case ISAL_INCORRECT_CHECKSUM: return "bad gzip data (incorrect data check)";
	default: return "bad gzip data";
	}
}

/* The first bytes decide, as zlib's gzread does: gzip when they are 1f 8b, else plain. */
static int sniff(struct readahead *r)
{
	r->sniffed = true;
	while (r->avail < 2 && !r->in_eof)
		if (in_more(r) < 0)
			return -1;
	if (r->avail < 2 || r->in[0] != 0x1f || r->in[1] != 0x8b)
		return 0;
	if (!(r->inf = malloc(sizeof(*r->inf)))) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return -1;
	}
	isal_inflate_init(r->inf);
	r->inf->crc_flag = ISAL_GZIP;
	r->gzip = true;
	return 0;
}

/* After a gzip member: another one follows (a concatenated .gz), or the end. Bytes after
 * the last member that are not a gzip header are ignored, as zlib does. */
static int next_member(struct readahead *r)
{
	while (r->avail < 2 && !r->in_eof)
		if (in_more(r) < 0)
			return -1;
	if (r->avail < 2 || r->next[0] != 0x1f || r->next[1] != 0x8b) {
		r->done = true;
		return 0;
	}
	isal_inflate_reset(r->inf);
	r->inf->crc_flag = ISAL_GZIP;
	return 0;
}

/* Up to cap bytes of the file into buf, fewer only at its end or before an error: the bytes,
 * 0 at the end, -1 on an error (err set). An error after some bytes is kept for the next
 * call, so that the lines before it are read first (zlib's gzread did the same). */
static ssize_t get(struct readahead *r, char *buf, size_t cap)
{
	size_t got = 0;
	if (r->failed || (!r->sniffed && sniff(r) < 0))
		return -1;
	if (!r->gzip) {
		size_t n = r->avail < cap ? r->avail : cap;
		memcpy(buf, r->next, n);
		r->next += n;
		r->avail -= (unsigned)n;
		got = n;
		while (got < cap && !r->in_eof) {
			ssize_t k = read(r->fd, buf + got, cap - got);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0) {
				snprintf(r->err, sizeof(r->err), "could not read: %s", strerror(errno));
				r->failed = true;
				break;
			}
			if (k == 0)
				r->in_eof = true;
			got += (size_t)k;
		}
		return got ? (ssize_t)got : r->failed ? -1 : 0;
	}
	struct inflate_state *s = r->inf;
	while (got < cap && !r->done) {
		if (!r->avail && !r->in_eof && in_more(r) < 0) {
			r->failed = true;
			break;
		}
		unsigned before = r->avail;
		s->next_in = r->next;
		s->avail_in = r->avail;
		s->next_out = (uint8_t *)buf + got;
		s->avail_out = (uint32_t)(cap - got);
		int rc = isal_inflate(s);
		size_t made = (size_t)((char *)s->next_out - (buf + got));
		got += made;
		r->next = s->next_in;
		r->avail = s->avail_in;
		if (rc < 0) {
			snprintf(r->err, sizeof(r->err), "%s", isal_message(rc));
			r->failed = true;
			break;
		}
		if (s->block_state == ISAL_BLOCK_FINISH) {
			if (next_member(r) < 0) {
				r->failed = true;
				break;
			}
		} else if (!made && r->avail == before && r->in_eof) {
			snprintf(r->err, sizeof(r->err), "truncated gzip data (unexpected end of file)");
			r->failed = true;
			break;
		}
	}
	return got ? (ssize_t)got : r->failed ? -1 : 0;
}

/* Block i filled with whole lines: the carried start of a line, then the file's bytes up to
 * the last newline (the rest is carried to the next block); the file's last line when it
 * has no newline. Its length, 0 at the end, -1 on an error (err set). */
static ssize_t fill_block(struct readahead *r, unsigned i)
{
	if (!r->ring) { /* READAHEAD_BLOCKS of a block each, on large pages */
		if (!(r->ring = hugemem_alloc((size_t)READAHEAD_BLOCKS * r->block, 0))) {
			snprintf(r->err, sizeof(r->err), "out of memory");
			return -1;
		}
		for (unsigned k = 0; k < READAHEAD_BLOCKS; k++) {
			r->buf[k] = r->ring + (size_t)k * r->block;
			r->cap[k] = r->block - READAHEAD_PAD;
		}
	}
	size_t want = r->clen + r->block / 2; /* half a block read at least after a line carried */
	if (r->cap[i] < want) {
		if (r->own[i])
			free(r->buf[i]);
		r->own[i] = true;
		r->cap[i] = want;
		if (!(r->buf[i] = malloc(r->cap[i] + READAHEAD_PAD))) {
			r->cap[i] = 0;
			snprintf(r->err, sizeof(r->err), "out of memory");
			return -1;
		}
	}
	char *buf = r->buf[i];
	size_t len = r->clen;
	if (len)
		memcpy(buf, r->carry, len);
	r->clen = 0;
	for (;;) {
		ssize_t n = get(r, buf + len, r->cap[i] - len);
		if (n < 0)
			return -1; /* a line cut by an error is not read */
		if (n == 0) {
			memset(buf + len, 0, READAHEAD_PAD);
			return (ssize_t)len;
		}
		char *nl = memrchr(buf + len, '\n', (size_t)n);
		len += (size_t)n;
		if (nl) {
			size_t keep = (size_t)(nl + 1 - buf), rest = len - keep;
			if (rest > r->ccap) {
				char *c = realloc(r->carry, rest);
				if (!c) {
					snprintf(r->err, sizeof(r->err), "out of memory");
					return -1;
				}
				r->carry = c;
				r->ccap = rest;
			}
			if (rest) /* no carry buffer before the first cut line */
				memcpy(r->carry, nl + 1, rest);
			r->clen = rest;
			memset(buf + keep, 0, READAHEAD_PAD);
			return (ssize_t)keep;
		}
		if (len >= READAHEAD_MAX_LINE) {
			snprintf(r->err, sizeof(r->err), "line longer than %u MiB", READAHEAD_MAX_LINE >> 20);
			return -1;
		}
		/* no newline yet: a longer line, a larger block */
		char *b = r->own[i] ? realloc(r->buf[i], r->cap[i] * 2 + READAHEAD_PAD)
				    : malloc(r->cap[i] * 2 + READAHEAD_PAD);
		if (!b) {
			snprintf(r->err, sizeof(r->err), "out of memory");
			return -1;
		}
		if (!r->own[i])
			memcpy(b, buf, len);
		r->own[i] = true;
		r->buf[i] = buf = b;
		r->cap[i] *= 2;
	}
}

static void *fill(void *arg)
{
	struct readahead *r = arg;
	unsigned tail = 0;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->count == READAHEAD_BLOCKS) {
			struct readahead_hooks h = r->hooks;
			if (h.idle) {
				pthread_mutex_unlock(&r->mu);
				int did = h.idle(h.arg);
				pthread_mutex_lock(&r->mu);
				if (did)
					continue;
			}
			if (!r->stop && r->count == READAHEAD_BLOCKS)
				pthread_cond_wait(&r->cv, &r->mu);
		}
		bool stop = r->stop;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			return NULL;
		/* block tail is free: neither filled nor held */
		ssize_t n = fill_block(r, tail);
		pthread_mutex_lock(&r->mu);
		r->len[tail] = n;
		r->count++;
		pthread_cond_broadcast(&r->cv);
		struct readahead_hooks h = r->hooks;
		pthread_mutex_unlock(&r->mu);
		if (h.filled)
			h.filled(h.arg);
		if (n <= 0)
			return NULL;
		tail = (tail + 1) % READAHEAD_BLOCKS;
	}
}

struct readahead *readahead_open(const char *path)
{
	struct readahead *r = calloc(1, sizeof(*r));
	if (!r)
		return NULL;
	bool in = strcmp(path, "-") == 0;
	if ((r->fd = in ? dup(0) : open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		free(r);
		return NULL;
	}
	/* a small file is read in a block of its size (its buffer holds the file, a byte more and
	 * the padding; gzip: in a few blocks), with a small input buffer */
	struct stat st;
	r->block = READAHEAD_BLOCK;
	r->in_cap = 1u << 18;
	if (!in && fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < READAHEAD_BLOCK) {
		r->block = st.st_size < 65536 ? 65536 : (unsigned)st.st_size + 1 + READAHEAD_PAD;
		if (st.st_size < (off_t)r->in_cap)
			r->in_cap = st.st_size < 8192 ? 8192 : (unsigned)st.st_size;
	}
	if (!(r->in = malloc(r->in_cap))) {
		close(r->fd);
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->next = r->in;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (pthread_create(&r->thr, NULL, fill, r) != 0) {
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		close(r->fd);
		free(r->in);
		free(r);
		errno = EAGAIN;
		return NULL;
	}
	return r;
}

ssize_t readahead_next(struct readahead *r, char **data, bool wait)
{
	pthread_mutex_lock(&r->mu);
	while (wait && !r->stop && r->out == r->count)
		pthread_cond_wait(&r->cv, &r->mu);
	ssize_t n = r->stop ? -1 : READAHEAD_NOT_YET;
	if (!r->stop && r->out < r->count) {
		unsigned i = (r->head + r->out) % READAHEAD_BLOCKS;
		n = r->len[i];
		if (n > 0) {
			*data = r->buf[i];
			r->out++;
		}
	}
	pthread_mutex_unlock(&r->mu);
	return n;
}

void readahead_set_hooks(struct readahead *r, const struct readahead_hooks *hooks)
{
	pthread_mutex_lock(&r->mu);
	r->hooks = *hooks;
	pthread_cond_broadcast(&r->cv); /* the thread may be waiting with work for idle */
	pthread_mutex_unlock(&r->mu);
}

void readahead_release(struct readahead *r)
{
	pthread_mutex_lock(&r->mu);
	r->head = (r->head + 1) % READAHEAD_BLOCKS;
	r->out--;
	r->count--;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

void readahead_cancel(struct readahead *r)
{
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

size_t readahead_block(const struct readahead *r) { return r->block; }

const char *readahead_error(const struct readahead *r) { return r->err[0] ? r->err : "read error"; }

void readahead_close(struct readahead *r)
{
	if (!r)
		return;
	readahead_cancel(r);
	pthread_join(r->thr, NULL);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	for (unsigned i = 0; i < READAHEAD_BLOCKS; i++)
		if (r->own[i])
			free(r->buf[i]);
	free(r->ring);
	close(r->fd);
	free(r->in);
	free(r->inf);
	free(r->carry);
	free(r);
}
