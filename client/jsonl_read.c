/* jsonl_read.c: the interchange reader (jsonl.h): readahead's blocks of lines decoded
 * (jsonl_decode.h) on the threads that would wait otherwise, the records handed over in the
 * file's order. */
#include "jsonl.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonl_decode.h"
#include "jsonl_parse.h"
#include "readahead.h"

/* The reading: readahead's thread reads (and inflates) blocks of whole lines; blocks are
 * decoded, each whole, into records (the parsing and checking, most of the time); the
 * caller's thread hands the records to the handler in the file's order, block by block, and
 * gives each block back when done. The decoding is done by whichever thread would wait
 * otherwise: the caller's, while the block it wants next is not decoded; readahead's, while
 * every block is held (readahead_hooks); and decoder threads (jsonl_decoders) on the CPUs
 * these two leave, none on two cores. (A decoder thread there made three busy threads on
 * two cores: the one decoding the block the caller wanted next was often descheduled, and
 * the caller waited 40-130 ms of a 0.2 s read, readahead 10-100 ms.) Block k of the file is
 * blocks[k % N]: readahead lends at most N blocks, so block k - N was given back before
 * block k is lent. */
#define JSONL_DECODERS_MAX 4
#define JSONL_MEM_READER (JSONL_DECODERS_MAX + 1) /* readahead's thread's decoder_mem */

int jsonl_decoders;

static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
	jsonl_parse_init();
	jsonl_decode_init();
}

struct reading {
	struct readahead *ra;
	pthread_mutex_t fetch; /* a decoder takes the next block and its number together */
	uint64_t fetched;
	pthread_mutex_t mu; /* the blocks' decoded flags and the end */
	pthread_cond_t cv;
	uint64_t filled; /* blocks readahead filled: the caller waits for a change */
	bool ended;      /* readahead said end or error: there is no block end_at */
	uint64_t end_at;
	ssize_t end_rc; /* 0 end of file, -1 error (readahead_error) */
	struct names names;
	struct block blocks[READAHEAD_BLOCKS];
	struct decoder_mem mem[JSONL_DECODERS_MAX + 2]; /* the caller's, the decoders', readahead's */
	char *blocks_mem;                               /* where the blocks' records start */
};

/* Takes the next block from readahead and decodes it: 1, or 0 when wait is not set and the
 * next block is not read yet or another thread is taking one, or -1 at the end (the end
 * recorded for the applying thread). */
static int decode_next(struct reading *g, struct decoder_mem *m, bool wait)
{
	if (wait)
		pthread_mutex_lock(&g->fetch);
	else if (pthread_mutex_trylock(&g->fetch) != 0)
		return 0;
	char *data = NULL;
	ssize_t n = readahead_next(g->ra, &data, wait);
	uint64_t k = g->fetched;
	if (n > 0)
		g->fetched++;
	pthread_mutex_unlock(&g->fetch);
	if (n == READAHEAD_NOT_YET)
		return 0;
	if (n <= 0) {
		pthread_mutex_lock(&g->mu);
		if (!g->ended) {
			g->ended = true;
			g->end_at = k;
			g->end_rc = n;
		}
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
		return -1;
	}
	struct block *b = &g->blocks[k % READAHEAD_BLOCKS];
	jsonl_decode_block(b, data, (size_t)n, m, &g->names);
	pthread_mutex_lock(&g->mu);
	b->decoded = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return 1;
}

/* readahead's thread has filled a block: the caller may wait for one to decode */
static void on_filled(void *arg)
{
	struct reading *g = arg;
	pthread_mutex_lock(&g->mu);
	g->filled++;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* readahead's thread while every block is held: decodes the next one nobody took */
static int on_idle(void *arg)
{
	struct reading *g = arg;
	return decode_next(g, &g->mem[JSONL_MEM_READER], false) > 0;
}

static void *decoder(void *arg)
{
	struct decoder_mem *m = arg;
	while (decode_next(m->g, m, true) > 0)
		;
	return NULL;
}

int jsonl_read(const char *path, const struct jsonl_handler *h, uint64_t *lines, char *err, size_t err_size)
{
	struct reading *g = calloc(1, sizeof(*g));
	if (!g) {
		snprintf(err, err_size, "%s: out of memory", path);
		return -1;
	}
	if (!(g->ra = readahead_open(path))) {
		snprintf(err, err_size, "%s: could not open: %s", path, strerror(errno ? errno : ENOENT));
		free(g);
		return -1;
	}
	if (!(g->blocks_mem = jsonl_blocks_mem(g->blocks, READAHEAD_BLOCKS, readahead_block(g->ra)))) {
		snprintf(err, err_size, "%s: out of memory", path);
		readahead_close(g->ra);
		free(g);
		return -1;
	}
	pthread_once(&tables_once, tables_init);
	pthread_mutex_init(&g->fetch, NULL);
	pthread_mutex_init(&g->mu, NULL);
	pthread_mutex_init(&g->names.mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	for (int i = 0; i <= JSONL_MEM_READER; i++)
		g->mem[i].g = g;
	struct readahead_hooks hooks = {on_filled, on_idle, g};
	readahead_set_hooks(g->ra, &hooks);
	/* decoder threads on the CPUs the caller's thread and readahead's leave (both decode too) */
	long cpus = jsonl_decoders > 0 ? jsonl_decoders : jsonl_decoders < 0 ? 0 : sysconf(_SC_NPROCESSORS_ONLN) - 2;
	int want = cpus < 1 ? 0 : cpus > JSONL_DECODERS_MAX ? JSONL_DECODERS_MAX : (int)cpus, nthr = 0;
	pthread_t thr[JSONL_DECODERS_MAX];
	while (nthr < want && pthread_create(&thr[nthr], NULL, decoder, &g->mem[nthr + 1]) == 0)
		nthr++; /* fewer when one cannot start: the others decode */
	int rc = 0;
	uint64_t line = 0; /* lines before block k */
	for (uint64_t k = 0; !rc; k++) {
		struct block *b = &g->blocks[k % READAHEAD_BLOCKS];
		pthread_mutex_lock(&g->mu);
		while (!b->decoded && !(g->ended && g->end_at == k)) {
			bool ended = g->ended;
			uint64_t filled = g->filled;
			pthread_mutex_unlock(&g->mu);
			int got = ended ? 0 : decode_next(g, &g->mem[0], false);
			pthread_mutex_lock(&g->mu);
			/* nothing to decode: wait for a block decoded or filled since */
			if (got == 0 && !b->decoded && !(g->ended && g->end_at == k) && g->filled == filled)
				pthread_cond_wait(&g->cv, &g->mu);
		}
		bool done = !b->decoded;
		ssize_t end_rc = g->end_rc;
		pthread_mutex_unlock(&g->mu);
		if (done) {
			if (end_rc < 0) {
				snprintf(err, err_size, "%s:%" PRIu64 ": %s", path, line + 1, readahead_error(g->ra));
				rc = -1;
			}
			break;
		}
		const char *why = NULL;
		for (size_t i = 0; i < b->nrec; i++) {
			if (jsonl_apply(&b->rec[i], b, h, &why) < 0) {
				line += b->rec[i].line;
				snprintf(err, err_size, "%s:%" PRIu64 ": %s", path, line, why ? why : "rejected");
				rc = -1;
				break;
			}
		}
		if (!rc && b->err_line) {
			line += b->err_line;
			snprintf(err, err_size, "%s:%" PRIu64 ": %s", path, line, b->err);
			rc = -1;
		}
		if (!rc)
			line += b->lines;
		pthread_mutex_lock(&g->mu);
		b->decoded = false;
		pthread_mutex_unlock(&g->mu);
		readahead_release(g->ra);
	}
	readahead_cancel(g->ra);
	for (int i = 0; i < nthr; i++)
		pthread_join(thr[i], NULL);
	readahead_close(g->ra); /* its thread, which may be decoding, joined */
	for (int i = 0; i <= JSONL_MEM_READER; i++)
		free(g->mem[i].obj.durs);
	pthread_mutex_destroy(&g->fetch);
	pthread_mutex_destroy(&g->mu);
	pthread_mutex_destroy(&g->names.mu);
	pthread_cond_destroy(&g->cv);
	jsonl_names_free(&g->names);
	for (unsigned i = 0; i < READAHEAD_BLOCKS; i++)
		jsonl_block_free(&g->blocks[i]);
	free(g->blocks_mem);
	free(g);
	if (lines)
		*lines = line;
	return rc;
}
