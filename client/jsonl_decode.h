/* jsonl_decode.h: the interchange reader's lines decoded into records (client/jsonl_read.c
 * runs it on its threads): a block of whole lines at a time, the lines the writer writes
 * matched by their shape, any other parsed as JSON (jsonl_parse.h); phases' and kernels'
 * names interned once per read. Internal to client/jsonl_*.c. */
#ifndef CULPRIT_JSONL_DECODE_H
#define CULPRIT_JSONL_DECODE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jsonl.h"
#include "jsonl_parse.h"
#include "record.h"
#include "attrs.h"

/* A record decoded from a line, handed to the handler later, in the file's order. A phase's
 * or kernel's name is the read's interned copy (struct names), its other strings lie in its
 * block's text, a kernel's durations (or its summary) in the block's durs. 56 bytes: the
 * applying thread reads each from the other core's cache (a whole record_kernel made them
 * 112). */
enum drec_type { D_JOB, D_HOST, D_ITER, D_PHASE, D_KERNEL, D_EVENT };

struct djob { /* a job line but its name (the drec's) */
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	uint8_t device; /* 0: not said, 1: gpu, 2: cpu */
	const char *order;
};

struct dkernel { /* a kernel line but its name (the drec's) */
	uint32_t rank, iter, count;
	uint8_t kind;
	uint8_t summary;    /* no durations: sum, min, max, p50, p99 at the block's durs + durs */
	size_t durs, ndurs; /* the durations at the block's durs + durs */
};

struct drec {
	enum drec_type type;
	uint32_t line;    /* in its block, from 1 */
	const char *name; /* a phase's or kernel's name, a host line's or event's host, the job */
	union {
		struct djob job;
		uint32_t rank; /* host */
		struct record_iter iter;
		struct record_phase phase;
		struct dkernel kernel;
		struct {
			const char *kind, *source, *detail;
			int64_t ts_us;
		} event;
	} u;
};

_Static_assert(sizeof(void *) != 8 || sizeof(struct drec) == 56, "a decoded record is 56 bytes");

/* The names of a read's phases and kernels, each kept once, shared by its decoders. */
struct name {
	struct name *next;
	uint32_t hash, len;
	uint64_t a, z; /* the first and last 8 bytes, as name_intern reads them */
	char s[];
};

struct names {
	pthread_mutex_t mu;
	struct name **tab; /* chains; cap a power of two */
	size_t cap, n;
};

#define NAME_SEEN_BITS 8
#define NAME_SEEN (1u << NAME_SEEN_BITS) /* a decoder's memory of names */

/* A block of whole lines from readahead, and what its lines decode to. The blocks' records
 * and durations start in one allocation on large pages (blocks_mem); either that outgrows its
 * part moves to an array of its own (durations on 4 KiB pages grown by realloc would take
 * hundreds of page faults). */
struct block {
	bool decoded;
	uint64_t lines;   /* lines in the block */
	struct drec *rec; /* one per record line, in order */
	size_t nrec, rec_cap;
	int64_t *durs; /* the kernels' durations */
	size_t ndurs, durs_cap;
	bool rec_own, durs_own; /* moved out of the blocks' allocation */
	uint32_t err_line;      /* a line that could not be decoded (0: none), the block's end */
	char err[240];
};

/* a decoder's memory of the lines' text (jsonl_decode.c) */
#define SPAN_WORDS 16 /* a span of up to 128 bytes */
#define MID_BITS 6    /* 64 middles of each, two a slot */

struct span {
	uint32_t len; /* bytes; 0: none */
	uint8_t kind, group;
	const char *name;       /* a middle's, interned */
	uint64_t tail;          /* the bytes of the last word that are the text's */
	uint64_t w[SPAN_WORDS]; /* the text, zero past len */
};

struct reading;

struct decoder_mem { /* a decoding thread's own */
	struct reading *g;
	struct jobj obj;
	struct name *seen[NAME_SEEN];
	struct span head[2];                /* phases', kernels' */
	struct span mid[2][1u << MID_BITS]; /* by their name's first bytes */
};

/* The tables of the shapes; once, before any block is decoded. */
void jsonl_decode_init(void);
/* One allocation for the records and durations of n blocks of size bytes each: a record a
 * line of 100 bytes, a duration 32 bytes of text; NULL when out of memory. */
char *jsonl_blocks_mem(struct block *blocks, unsigned n, size_t size);
void jsonl_block_free(struct block *b);
void jsonl_names_free(struct names *t);
/* Decodes the lines of data[0..n) into b, until the end or the first bad line (b->err_line,
 * b->err); phases' and kernels' names interned in t (m->seen: the decoder's memory of it). */
void jsonl_decode_block(struct block *b, char *data, size_t n, struct decoder_mem *m, struct names *t);
/* Hands a decoded record to the handler: 0, or -1 with *why set. */
MUST_CHECK int jsonl_apply(const struct drec *d, const struct block *b, const struct jsonl_handler *h, const char **why);

#endif
