/* readahead.c: gzread on a thread into a ring of blocks (see readahead.h). */
#include "readahead.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>


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
		return NULL;
	}
	gzbuffer(f, b);
	return f;
}

struct readahead {
	gzFile f;
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	char *buf[READAHEAD_BLOCKS];   /* allocated when first filled */
	unsigned block;                /* bytes: READAHEAD_BLOCK, less for a small file */
	ssize_t len[READAHEAD_BLOCKS]; /* filled block: bytes, 0 end, -1 error */
	unsigned head, count;          /* next block to read out; blocks filled and not yet read */
	bool held;                     /* the reader holds block head (until its next call) */
	bool stop;
	char err[160];
};

static void *fill(void *arg)
{
	struct readahead *r = arg;
	unsigned tail = 0;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->count == READAHEAD_BLOCKS)
			pthread_cond_wait(&r->cv, &r->mu);
		bool stop = r->stop;
		pthread_mutex_unlock(&r->mu);
		if (stop)
			return NULL;
		/* block tail is free: neither filled nor held */
		int n = -1;
		if (!r->buf[tail] && !(r->buf[tail] = malloc(r->block)))
			snprintf(r->err, sizeof(r->err), "out of memory");
		else
			n = gzread(r->f, r->buf[tail], r->block);
		if (n <= 0 && !r->err[0]) {
			int e = Z_OK;
			const char *m = gzerror(r->f, &e);
			if (n < 0 || (e != Z_OK && e != Z_STREAM_END)) {
				snprintf(r->err, sizeof(r->err), "%s", m && *m ? m : "read error");
				n = -1;
			}
		}
		pthread_mutex_lock(&r->mu);
		r->len[tail] = n;
		r->count++;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
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
	if (!(r->f = gz_open_read(path, 1 << 18))) {
		free(r);
		return NULL;
	}
	/* a small file is read in a block of its size (gzip: in a few) */
	struct stat st;
	r->block = READAHEAD_BLOCK;
	if (strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < READAHEAD_BLOCK)
		r->block = st.st_size < 65536 ? 65536 : (unsigned)st.st_size + 1;
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	if (pthread_create(&r->thr, NULL, fill, r) != 0) {
		pthread_mutex_destroy(&r->mu);
		pthread_cond_destroy(&r->cv);
		gzclose(r->f);
		free(r);
		errno = EAGAIN;
		return NULL;
	}
	return r;
}

ssize_t readahead_next(struct readahead *r, const char **data)
{
	pthread_mutex_lock(&r->mu);
	if (r->held) {
		/* give the block read last back to the thread */
		r->held = false;
		r->head = (r->head + 1) % READAHEAD_BLOCKS;
		r->count--;
		pthread_cond_broadcast(&r->cv);
	}
	while (r->count == 0)
		pthread_cond_wait(&r->cv, &r->mu);
	ssize_t n = r->len[r->head];
	if (n > 0) {
		*data = r->buf[r->head];
		r->held = true;
	}
	pthread_mutex_unlock(&r->mu);
	return n;
}

const char *readahead_error(const struct readahead *r) { return r->err[0] ? r->err : "read error"; }

void readahead_close(struct readahead *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	pthread_join(r->thr, NULL);
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cv);
	for (unsigned i = 0; i < READAHEAD_BLOCKS; i++)
		free(r->buf[i]);
	gzclose(r->f);
	free(r);
}
