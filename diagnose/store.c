/* store.c: per-job ring of recent iterations per rank, name dictionary, kernel sketches. */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "hugemem.h"

/* string interning: ids in insertion order, open addressing on a power-of-two table */
struct intern {
	char **str;
	uint32_t n, cap;
	uint32_t *tab; /* id + 1, 0 empty */
	uint32_t tabcap;
	/* a guess tried before the table: names come in the same order record after record (the
	 * phases and kernels of a rank's iteration), so the one asked after id last time is
	 * likely asked after it again. after[id + 1]: that one's id + 1 ([0]: after none), 0 no
	 * guess; last: the id + 1 asked last */
	uint32_t *after;
	uint32_t last;
};

/* A window's baseline kept past the ring (store_keep): cell [rank * STORE_KEEP_ITERS + iter %
 * STORE_KEEP_ITERS], room for max_phases a cell; the job's completion of each iteration */
struct keep {
	uint32_t first, last; /* the iterations kept (nothing while tag is NULL) */
	uint32_t *tag, *dur, *pdur;
	uint32_t jtag[STORE_KEEP_ITERS], jcount[STORE_KEEP_ITERS];
	int64_t jstart[STORE_KEEP_ITERS], jend[STORE_KEEP_ITERS];
};

struct store {
	struct topo topo;
	struct store_config cfg;
	char *job;
	char device[8]; /* "gpu", "cpu", or "" when not said */
	struct intern names;
	struct intern hosts;
	uint32_t *host_of; /* per rank: host id or STORE_NO_SLOT */

	/* name id -> phase / kernel slot */
	uint32_t *phase_of_name, *kernel_of_name, map_cap;
	uint32_t nphase, *phase_name;
	uint8_t *phase_kind, *phase_group;
	/* per phase slot: the sum and count of its start offsets within the iteration (both
	 * halved when the count reaches STORE_START_HALVE: an average that follows a change) */
	double *pstart_sum;
	uint32_t *pstart_n;
	uint32_t lead_slot; /* the untracked time before a rank's first phase, or STORE_NO_SLOT */
	uint32_t nkernel, *kernel_name;
	uint8_t *kernel_kind;

	/* ring: [rank * R + iter % R] */
	uint32_t R;    /* slots per rank: cfg.ring_iters, or fewer while a one-shot fill grows it */
	uint32_t *tag; /* iter + 1, 0 empty */
	uint32_t *dur;
	uint32_t *pdur; /* [(rank * R + slot) * P + phase], room for max_phases a cell */
	uint32_t P;     /* phases a cell: max_phases, or fewer while a one-shot fill widens it */

	uint32_t *last_p1; /* per rank: last iteration + 1 */
	int64_t *last_end;
	int64_t latest;
	uint32_t ranks_seen; /* ranks with a last iteration */

	/* job completion, [iter % R] */
	uint32_t *jtag, *jcount;
	double *jsum;
	int64_t *jstart, *jend; /* earliest start, latest end of the iteration over its ranks */
	uint32_t next;
	int started, handed, flushing;
	uint32_t max_iter;
	int any;

	/* kernels: [(k * W + rank) * NB + block % NB], slot-major: the pages of the slots no
	 * kernel took are never touched (13 of the 16 by default at 3 kernels: 82 MiB of 110 at
	 * 100,000 ranks; kernels_alloc) */
	uint32_t nb;
	uint32_t *ks;   /* the number + 1 of the cell's sketch, 0 none */
	uint32_t *ktag; /* block + 1 */
	struct sketch scratch;
	/* the sketches, STORE_SK_CHUNK to an array, numbered in the order made, and their
	 * buckets lent from slabs of STORE_BIN_SLAB (sketch_lend): a few allocations of 4 MiB
	 * instead of two per sketch, each 16 bytes over its size in the heap (2.4 M sketches at
	 * 100,000 ranks x 3 kernels). A sketch that outgrows its lent buckets takes its own. */
	struct sketch **sk_chunk;
	uint32_t nsk, sk_chunk_cap;
	uint32_t **bin_slab;
	size_t nslab, bin_slab_cap, bin_used; /* buckets used of the last slab */
	int frozen;                           /* a snapshot: it takes no more kernel records */

	struct store_event *events;
	size_t nevents, events_cap;
	uint64_t dropped;

	struct keep keep;
};

static int intern_grow(struct intern *in)
{
	uint32_t cap = in->tabcap ? in->tabcap * 2 : 64;
	uint32_t *tab = calloc(cap, sizeof(*tab));
	if (!tab)
		return -1;
	for (uint32_t i = 0; i < in->n; i++) {
		uint32_t h = (uint32_t)hash_str(in->str[i]) & (cap - 1);
		while (tab[h])
			h = (h + 1) & (cap - 1);
		tab[h] = i + 1;
	}
	free(in->tab);
	in->tab = tab;
	in->tabcap = cap;
	return 0;
}

static int64_t intern_find(const struct intern *in, const char *s)
{
	if (!in->tabcap)
		return -1;
	uint32_t h = (uint32_t)hash_str(s) & (in->tabcap - 1);
	while (in->tab[h]) {
		if (strcmp(in->str[in->tab[h] - 1], s) == 0)
			return in->tab[h] - 1;
		h = (h + 1) & (in->tabcap - 1);
	}
	return -1;
}

static int64_t intern_add(struct intern *in, const char *s)
{
	uint32_t g = in->after ? in->after[in->last] : 0;
	if (g && strcmp(in->str[g - 1], s) == 0) {
		in->last = g;
		return g - 1;
	}
	int64_t id = intern_find(in, s);
	if (id < 0) {
		if ((in->n + 1) * 2 > in->tabcap && intern_grow(in) < 0)
			return -1;
		if (in->n == in->cap) {
			uint32_t cap = in->cap ? in->cap * 2 : 16;
			char **str = realloc(in->str, cap * sizeof(*str));
			if (!str)
				return -1;
			in->str = str;
			size_t had = in->after ? in->cap + 1 : 0;
			uint32_t *after = realloc(in->after, (cap + 1) * sizeof(*after));
			if (!after)
				return -1;
			memset(after + had, 0, (cap + 1 - had) * sizeof(*after));
			in->after = after;
			in->cap = cap;
		}
		char *copy = strdup(s);
		if (!copy)
			return -1;
		in->str[in->n] = copy;
		uint32_t h = (uint32_t)hash_str(s) & (in->tabcap - 1);
		while (in->tab[h])
			h = (h + 1) & (in->tabcap - 1);
		in->tab[h] = in->n + 1;
		id = in->n++;
	}
	if (in->after) { /* always, once a name is in: allocated with the first */
		in->after[in->last] = (uint32_t)id + 1;
		in->last = (uint32_t)id + 1;
	}
	return id;
}

static void intern_free(struct intern *in)
{
	for (uint32_t i = 0; i < in->n; i++)
		free(in->str[i]);
	free(in->str);
	free(in->tab);
	free(in->after);
	memset(in, 0, sizeof(*in));
}

static int intern_copy(struct intern *dst, const struct intern *src)
{
	memset(dst, 0, sizeof(*dst));
	for (uint32_t i = 0; i < src->n; i++)
		if (intern_add(dst, src->str[i]) < 0)
			return -1;
	return 0;
}

static void *dup_array(const void *p, size_t bytes)
{
	if (!p)
		return NULL;
	void *q = malloc(bytes ? bytes : 1);
	if (q)
		memcpy(q, p, bytes);
	return q;
}

/* An array of the ring or the kernels, zeroed when zero: with huge, on 2 MiB pages
 * (hugemem.h: a first touch of 4 KiB pages was a fifth of `culprit diagnose`'s CPU) and
 * zeroed at once; without, from calloc or malloc, whose pages are touched (and zeroed by
 * the system) only where used. Freed with free(). */
static void *big_alloc(size_t n, size_t size, int zero, int huge)
{
	if (!huge)
		return zero ? calloc(n, size) : malloc(n * size);
	return hugemem_alloc(n * size, zero);
}

static size_t ring_cells(const struct store *s) { return (size_t)s->topo.world * s->R; }

static size_t kcells(const struct store *s) { return (size_t)s->topo.world * s->cfg.max_kernels * s->nb; }

/* the kernel cell of (rank, kernel slot, block): by block, then slot, so that the cells in
 * use lie together (the first slots of the blocks being filled: a one-shot fill of 12
 * iterations and 3 kernels touches 6 of the 144 rows of cells) */
static size_t kcell(const struct store *s, uint32_t rank, uint32_t k, uint32_t block)
{
	return ((size_t)(block % s->nb) * s->cfg.max_kernels + k) * s->topo.world + rank;
}

#define STORE_SK_SHIFT 16
#define STORE_SK_CHUNK (1u << STORE_SK_SHIFT) /* sketches per array: 4 MiB */
#define STORE_BIN_SLAB ((size_t)1 << 20)      /* buckets per slab: 4 MiB */
/* buckets lent to a new sketch: 8 hold a kernel's durations within 17% of one another (the
 * sketch's buckets are 2% wide). case5's 77,760 sketches use 3 or 4 but for 12,960 that
 * outgrow any small loan: 16 left 4 MB of the 5 MB lent unused, 8 leave 1.5 of 2.5 */
#define STORE_SK_BINS 8

/* the sketch arena on large pages: in a one-shot fill of a job whose kernel cells could fill
 * an array (12,960 ranks: 1.9 M cells); a small job's arena stays on pages touched as used */
static int arena_huge(const struct store *s) { return s->cfg.one_shot && kcells(s) >= STORE_SK_CHUNK; }

static struct sketch *sk_at(const struct store *s, uint32_t num)
{
	return &s->sk_chunk[num >> STORE_SK_SHIFT][num & (STORE_SK_CHUNK - 1)];
}

/* A new empty sketch, its number in *num; NULL when out of memory. */
static struct sketch *sk_new(struct store *s, uint32_t *num)
{
	if (s->nsk % STORE_SK_CHUNK == 0) {
		uint32_t c = s->nsk / STORE_SK_CHUNK;
		if (c == s->sk_chunk_cap) {
			uint32_t cap = c ? c * 2 : 16;
			struct sketch **p = realloc(s->sk_chunk, cap * sizeof(*p));
			if (!p)
				return NULL;
			s->sk_chunk = p;
			s->sk_chunk_cap = cap;
		}
		s->sk_chunk[c] = big_alloc(STORE_SK_CHUNK, sizeof(struct sketch), 0, arena_huge(s));
		if (!s->sk_chunk[c])
			return NULL;
	}
	*num = s->nsk;
	struct sketch *sk = sk_at(s, s->nsk++);
	sketch_init(sk);
	return sk;
}

/* n buckets (n <= STORE_BIN_SLAB) from the last slab or a new one; NULL when out of memory */
static uint32_t *bins_new(struct store *s, size_t n)
{
	if (!s->nslab || s->bin_used + n > STORE_BIN_SLAB) {
		if (s->nslab == s->bin_slab_cap) {
			size_t cap = s->bin_slab_cap ? s->bin_slab_cap * 2 : 16;
			uint32_t **p = realloc(s->bin_slab, cap * sizeof(*p));
			if (!p)
				return NULL;
			s->bin_slab = p;
			s->bin_slab_cap = cap;
		}
		uint32_t *slab = big_alloc(STORE_BIN_SLAB, sizeof(*slab), 0, arena_huge(s));
		if (!slab)
			return NULL;
		s->bin_slab[s->nslab++] = slab;
		s->bin_used = 0;
	}
	uint32_t *b = s->bin_slab[s->nslab - 1] + s->bin_used;
	s->bin_used += n;
	return b;
}

/* the kernel arrays, on the first kernel record (4 bytes a cell each), from calloc: their
 * untouched pages are never zeroed (a file with 3 kernels touches 3 of the 16 slots'
 * cells). Not on large pages, even in a one-shot fill: case5's cells in use are two runs of
 * 152 KiB an array, which touched 4 MiB of large pages, and a first touch costs by the byte
 * where memory comes back from the host (hugemem.h). */
static int kernels_alloc(struct store *s)
{
	size_t n = kcells(s);
	if (n >= UINT32_MAX)
		return -1;
	s->ks = calloc(n, sizeof(*s->ks));
	s->ktag = calloc(n, sizeof(*s->ktag));
	if (s->ks && s->ktag)
		return 0;
	free(s->ks);
	free(s->ktag);
	s->ks = s->ktag = NULL; /* both or neither: the readers test ks alone */
	return -1;
}

struct store *store_create(const struct topo *t, const struct store_config *cfg)
{
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->topo = *t;
	s->lead_slot = STORE_NO_SLOT;
	if (cfg)
		s->cfg = *cfg;
	if (!s->cfg.ring_iters)
		s->cfg.ring_iters = 64;
	if (!s->cfg.max_phases)
		s->cfg.max_phases = 16;
	if (s->cfg.max_phases > 255)
		s->cfg.max_phases = 255;
	if (!s->cfg.max_kernels)
		s->cfg.max_kernels = 16;
	if (!s->cfg.kernel_block_iters)
		s->cfg.kernel_block_iters = 8;
	if (!(s->cfg.quorum > 0 && s->cfg.quorum <= 1))
		s->cfg.quorum = 0.95;
	s->nb = (s->cfg.ring_iters + s->cfg.kernel_block_iters - 1) / s->cfg.kernel_block_iters + 1;
	/* a one-shot fill starts small (a divisor of ring_iters, so that two iterations share a
	 * slot of the full ring only when they share one of each smaller ring: ring_grow) */
	s->R = s->cfg.ring_iters;
	while (s->cfg.one_shot && s->R % 2 == 0 && s->R / 2 >= STORE_RING_FIRST)
		s->R /= 2;
	/* and with STORE_PHASES_FIRST phases a cell, widened as more are named (phases_widen) */
	s->P = s->cfg.one_shot && s->cfg.max_phases > STORE_PHASES_FIRST ? STORE_PHASES_FIRST : s->cfg.max_phases;
	size_t cells = ring_cells(s), R = s->cfg.ring_iters, P = s->cfg.max_phases;
	s->tag = big_alloc(cells, sizeof(*s->tag), 1, 1);
	s->dur = big_alloc(cells, sizeof(*s->dur), 0, 1);
	s->pdur = big_alloc(cells * P, sizeof(*s->pdur), 0, 1);
	s->last_p1 = calloc(t->world, sizeof(*s->last_p1));
	s->last_end = calloc(t->world, sizeof(*s->last_end));
	s->host_of = malloc(t->world * sizeof(*s->host_of));
	s->jtag = calloc(R, sizeof(*s->jtag));
	s->jcount = calloc(R, sizeof(*s->jcount));
	s->jsum = calloc(R, sizeof(*s->jsum));
	s->jstart = calloc(R, sizeof(*s->jstart));
	s->jend = calloc(R, sizeof(*s->jend));
	s->phase_name = calloc(P, sizeof(*s->phase_name));
	s->phase_kind = calloc(P, 1);
	s->phase_group = calloc(P, 1);
	s->pstart_sum = calloc(P, sizeof(*s->pstart_sum));
	s->pstart_n = calloc(P, sizeof(*s->pstart_n));
	s->kernel_name = calloc(s->cfg.max_kernels, sizeof(*s->kernel_name));
	s->kernel_kind = calloc(s->cfg.max_kernels, 1);
	sketch_init(&s->scratch);
	if (!s->tag || !s->dur || !s->pdur || !s->last_p1 || !s->last_end || !s->host_of || !s->jtag || !s->jcount ||
	    !s->jsum || !s->jstart || !s->jend || !s->phase_name || !s->phase_kind || !s->phase_group ||
	    !s->pstart_sum || !s->pstart_n || !s->kernel_name || !s->kernel_kind) {
		store_destroy(s);
		return NULL;
	}
	for (size_t r = 0; r < t->world; r++)
		s->host_of[r] = STORE_NO_SLOT;
	return s;
}

void store_destroy(struct store *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nsk; i++)
		sketch_free(sk_at(s, i)); /* the buckets of one that outgrew its lent ones */
	for (uint32_t c = 0; (size_t)c * STORE_SK_CHUNK < s->nsk; c++)
		free(s->sk_chunk[c]);
	free(s->sk_chunk);
	for (size_t i = 0; i < s->nslab; i++)
		free(s->bin_slab[i]);
	free(s->bin_slab);
	free(s->ks);
	free(s->ktag);
	sketch_free(&s->scratch);
	for (size_t i = 0; i < s->nevents; i++) {
		free(s->events[i].host);
		free(s->events[i].kind);
		free(s->events[i].source);
		free(s->events[i].detail);
	}
	free(s->events);
	intern_free(&s->names);
	intern_free(&s->hosts);
	free(s->job);
	free(s->host_of);
	free(s->phase_of_name);
	free(s->kernel_of_name);
	free(s->phase_name);
	free(s->phase_kind);
	free(s->phase_group);
	free(s->pstart_sum);
	free(s->pstart_n);
	free(s->kernel_name);
	free(s->kernel_kind);
	free(s->tag);
	free(s->dur);
	free(s->pdur);
	free(s->last_p1);
	free(s->last_end);
	free(s->jtag);
	free(s->jcount);
	free(s->jsum);
	free(s->jstart);
	free(s->jend);
	free(s->keep.tag);
	free(s->keep.dur);
	free(s->keep.pdur);
	free(s);
}

/* the kernel sketches of src into the fresh snapshot s: made in src's order, so they keep
 * their numbers, each with exactly its buckets (one malloc per sketch made copying 12,960
 * ranks take 130 ms) */
static int copy_kernels(struct store *s, const struct store *src)
{
	if (!src->ks)
		return 0;
	/* the cells of the slots in use come first in each block; the others stay untouched */
	size_t n = kcells(src), used = (size_t)src->topo.world * src->nkernel;
	s->ks = calloc(n, sizeof(*s->ks));
	s->ktag = calloc(n, sizeof(*s->ktag));
	if (!s->ks || !s->ktag)
		return -1;
	for (uint32_t b = 0; b < src->nb; b++) {
		size_t at = kcell(src, 0, 0, b);
		memcpy(s->ks + at, src->ks + at, used * sizeof(*s->ks));
		memcpy(s->ktag + at, src->ktag + at, used * sizeof(*s->ktag));
	}
	for (uint32_t i = 0; i < src->nsk; i++) {
		const struct sketch *from = sk_at(src, i);
		uint32_t num;
		struct sketch *to = sk_new(s, &num);
		if (!to)
			return -1;
		*to = *from;
		to->bins = NULL;
		to->cap = to->lent = 0;
		if (from->n) { /* a sketch of zeros only may have no bins at all */
			if (!(to->bins = bins_new(s, from->n)))
				return -1;
			memcpy(to->bins, from->bins, from->n * sizeof(uint32_t));
			to->cap = from->n;
			to->lent = 1;
		}
	}
	return 0;
}

struct store *store_snapshot(const struct store *src)
{
	struct store *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	*s = *src;
	/* reset every owned pointer, then copy */
	s->job = NULL;
	memset(&s->names, 0, sizeof(s->names));
	memset(&s->hosts, 0, sizeof(s->hosts));
	s->ks = NULL;
	s->ktag = NULL;
	s->sk_chunk = NULL;
	s->nsk = s->sk_chunk_cap = 0;
	s->bin_slab = NULL;
	s->nslab = s->bin_slab_cap = s->bin_used = 0;
	s->frozen = 0;
	s->events = NULL;
	s->nevents = s->events_cap = 0;
	sketch_init(&s->scratch);
	/* cells: the ring as it is (grown or not); R: the completion arrays, always ring_iters */
	size_t cells = ring_cells(src), R = src->cfg.ring_iters, P = src->cfg.max_phases;
	size_t W = src->topo.world, K = src->cfg.max_kernels;
	s->tag = dup_array(src->tag, cells * sizeof(*s->tag));
	s->dur = dup_array(src->dur, cells * sizeof(*s->dur));
	s->pdur = malloc(cells * P * sizeof(*s->pdur)); /* room to widen, as the source's */
	if (s->pdur)
		memcpy(s->pdur, src->pdur, cells * src->P * sizeof(*s->pdur));
	s->last_p1 = dup_array(src->last_p1, W * sizeof(*s->last_p1));
	s->last_end = dup_array(src->last_end, W * sizeof(*s->last_end));
	s->host_of = dup_array(src->host_of, W * sizeof(*s->host_of));
	s->jtag = dup_array(src->jtag, R * sizeof(*s->jtag));
	s->jcount = dup_array(src->jcount, R * sizeof(*s->jcount));
	s->jsum = dup_array(src->jsum, R * sizeof(*s->jsum));
	s->jstart = dup_array(src->jstart, R * sizeof(*s->jstart));
	s->jend = dup_array(src->jend, R * sizeof(*s->jend));
	s->phase_of_name = dup_array(src->phase_of_name, src->map_cap * sizeof(uint32_t));
	s->kernel_of_name = dup_array(src->kernel_of_name, src->map_cap * sizeof(uint32_t));
	s->phase_name = dup_array(src->phase_name, P * sizeof(uint32_t));
	s->phase_kind = dup_array(src->phase_kind, P);
	s->phase_group = dup_array(src->phase_group, P);
	s->pstart_sum = dup_array(src->pstart_sum, P * sizeof(*s->pstart_sum));
	s->pstart_n = dup_array(src->pstart_n, P * sizeof(*s->pstart_n));
	s->kernel_name = dup_array(src->kernel_name, K * sizeof(uint32_t));
	s->kernel_kind = dup_array(src->kernel_kind, K);
	s->keep.tag = s->keep.dur = s->keep.pdur = NULL;
	if (src->keep.tag) {
		size_t kc = W * STORE_KEEP_ITERS;
		s->keep.tag = dup_array(src->keep.tag, kc * sizeof(uint32_t));
		s->keep.dur = dup_array(src->keep.dur, kc * sizeof(uint32_t));
		s->keep.pdur = dup_array(src->keep.pdur, kc * P * sizeof(uint32_t));
	}
	int bad = (src->keep.tag && (!s->keep.tag || !s->keep.dur || !s->keep.pdur)) || !s->tag || !s->dur || !s->pdur || !s->last_p1 || !s->last_end || !s->host_of || !s->jtag ||
		  !s->jcount || !s->jsum || !s->jstart || !s->jend || !s->phase_name || !s->phase_kind ||
		  !s->phase_group || !s->pstart_sum || !s->pstart_n || !s->kernel_name || !s->kernel_kind ||
		  (src->map_cap && (!s->phase_of_name || !s->kernel_of_name));
	if (!bad && src->job)
		bad = !(s->job = strdup(src->job));
	if (!bad)
		bad = intern_copy(&s->names, &src->names) < 0 || intern_copy(&s->hosts, &src->hosts) < 0;
	if (!bad)
		bad = copy_kernels(s, src) < 0;
	s->frozen = 1;
	for (size_t i = 0; !bad && i < src->nevents; i++) {
		const struct store_event *e = &src->events[i];
		bad = store_add_event(s, e->host, e->kind, e->ts_us, e->source, e->detail) < 0;
	}
	if (bad) {
		store_destroy(s);
		return NULL;
	}
	return s;
}

size_t store_memory(const struct store *s)
{
	size_t cells = ring_cells(s), W = s->topo.world;
	size_t m = sizeof(*s) + cells * (2 * sizeof(uint32_t) + s->P * sizeof(uint32_t));
	m += s->cfg.max_phases * (sizeof(double) + sizeof(uint32_t));
	m += W * (sizeof(uint32_t) * 2 + sizeof(int64_t));
	if (s->keep.tag)
		m += W * STORE_KEEP_ITERS * (2 + s->cfg.max_phases) * sizeof(uint32_t);
	if (s->ks) {
		/* the cells of slots no kernel took are untouched pages */
		m += (size_t)s->topo.world * s->nkernel * s->nb * (sizeof(*s->ks) + sizeof(*s->ktag));
		m += (size_t)s->nsk * sizeof(struct sketch) + s->sk_chunk_cap * sizeof(*s->sk_chunk);
		if (s->nslab)
			m += ((s->nslab - 1) * STORE_BIN_SLAB + s->bin_used) * sizeof(uint32_t);
		m += s->bin_slab_cap * sizeof(*s->bin_slab);
		for (uint32_t i = 0; i < s->nsk; i++) {
			const struct sketch *sk = sk_at(s, i);
			if (!sk->lent)
				m += sk->cap * sizeof(uint32_t);
		}
	}
	return m;
}

const struct topo *store_topo(const struct store *s) { return &s->topo; }

const struct store_config *store_config(const struct store *s) { return &s->cfg; }

void store_set_job(struct store *s, const char *job)
{
	char *j = strdup(job ? job : "");
	if (j) {
		free(s->job);
		s->job = j;
	}
}

const char *store_job(const struct store *s) { return s->job ? s->job : ""; }

void store_set_device(struct store *s, const char *device)
{
	snprintf(s->device, sizeof(s->device), "%s",
		 device && (strcmp(device, "cpu") == 0 || strcmp(device, "gpu") == 0) ? device : "");
}

const char *store_device(const struct store *s) { return s->device; }

int store_intern_name(struct store *s, const char *name)
{
	int64_t id = intern_add(&s->names, name);
	if (id < 0)
		return -1;
	if ((uint32_t)id >= s->map_cap) {
		uint32_t cap = s->map_cap ? s->map_cap * 2 : 64;
		while (cap <= (uint32_t)id)
			cap *= 2;
		uint32_t *p = realloc(s->phase_of_name, cap * sizeof(*p));
		if (!p)
			return -1;
		s->phase_of_name = p;
		uint32_t *k = realloc(s->kernel_of_name, cap * sizeof(*k));
		if (!k)
			return -1;
		s->kernel_of_name = k;
		for (uint32_t i = s->map_cap; i < cap; i++)
			p[i] = k[i] = STORE_NO_SLOT;
		s->map_cap = cap;
	}
	return (int)id;
}

int store_find_name(const struct store *s, const char *name) { return (int)intern_find(&s->names, name); }

uint32_t store_name_count(const struct store *s) { return s->names.n; }

const char *store_name(const struct store *s, uint32_t id) { return id < s->names.n ? s->names.str[id] : "?"; }

int store_set_host(struct store *s, uint32_t rank, const char *host)
{
	if (rank >= s->topo.world)
		return -1;
	int64_t id = intern_add(&s->hosts, host);
	if (id < 0)
		return -1;
	s->host_of[rank] = (uint32_t)id;
	return 0;
}

const char *store_host(const struct store *s, uint32_t rank, char *buf, size_t len)
{
	if (rank < s->topo.world && s->host_of[rank] != STORE_NO_SLOT)
		snprintf(buf, len, "%s", s->hosts.str[s->host_of[rank]]);
	else
		snprintf(buf, len, "node-%u", topo_node(&s->topo, rank));
	return buf;
}

int store_host_known(const struct store *s, uint32_t rank)
{
	return rank < s->topo.world && s->host_of[rank] != STORE_NO_SLOT;
}

uint32_t store_host_id(const struct store *s, uint32_t rank)
{
	if (rank < s->topo.world && s->host_of[rank] != STORE_NO_SLOT)
		return s->host_of[rank];
	return 0x80000000u | topo_node(&s->topo, rank);
}

/* Doubles the ring of a one-shot fill: every held cell to the slot of its iteration in the
 * larger ring. The ring grows before any cell is taken for another iteration (claim), and
 * its size divides ring_iters, so it holds what the full ring would: iterations that share
 * a slot of the full ring share one of every smaller ring. -1 when out of memory. */
static int ring_grow(struct store *s)
{
	size_t R = s->R, R2 = 2 * R, W = s->topo.world, P = s->P;
	uint32_t *tag = big_alloc(W * R2, sizeof(*tag), 1, 1), *dur = big_alloc(W * R2, sizeof(*dur), 0, 1);
	uint32_t *pdur = big_alloc(W * R2 * s->cfg.max_phases, sizeof(*pdur), 0, 1);
	if (!tag || !dur || !pdur) {
		free(tag);
		free(dur);
		free(pdur);
		return -1;
	}
	for (size_t from = 0; from < W * R; from++) {
		uint32_t t = s->tag[from];
		if (!t)
			continue;
		size_t to = from / R * R2 + (t - 1) % R2;
		tag[to] = t;
		dur[to] = s->dur[from];
		memcpy(pdur + to * P, s->pdur + from * P, P * sizeof(*pdur));
	}
	free(s->tag);
	free(s->dur);
	free(s->pdur);
	s->tag = tag;
	s->dur = dur;
	s->pdur = pdur;
	s->R = (uint32_t)R2;
	return 0;
}

/* the ring cell of (rank, iter), claiming it for iter when it holds an older one; SIZE_MAX
 * when it holds a newer one, STORE_NO_CELL when the ring could not grow */
#define STORE_NO_CELL (SIZE_MAX - 1)
static size_t claim(struct store *s, uint32_t rank, uint32_t iter)
{
	size_t R = s->R, P = s->P;
	size_t idx = (size_t)rank * R + iter % R;
	if (s->tag[idx] == iter + 1)
		return idx;
	if (s->tag[idx] && R < s->cfg.ring_iters)
		return ring_grow(s) < 0 ? STORE_NO_CELL : claim(s, rank, iter);
	if (s->tag[idx] > iter + 1)
		return SIZE_MAX;
	s->tag[idx] = iter + 1;
	s->dur[idx] = STORE_ABSENT;
	uint32_t *p = s->pdur + idx * P;
	for (size_t i = 0; i < P; i++)
		p[i] = STORE_ABSENT;
	if (!s->any || iter > s->max_iter)
		s->max_iter = iter;
	s->any = 1;
	return idx;
}

static uint32_t clamp_us(int64_t v)
{
	if (v < 0)
		return 0;
	return v >= (int64_t)STORE_ABSENT ? STORE_ABSENT - 1 : (uint32_t)v;
}

int store_add_iter(struct store *s, const struct record_iter *rec)
{
	if (rec->rank >= s->topo.world || rec->iter >= UINT32_MAX - 1) {
		s->dropped++;
		return 1;
	}
	size_t idx = claim(s, rec->rank, rec->iter);
	if (idx == STORE_NO_CELL)
		return -1;
	if (idx == SIZE_MAX) {
		s->dropped++;
		return 1;
	}
	int fresh = s->dur[idx] == STORE_ABSENT;
	s->dur[idx] = clamp_us(rec->dur_us);
	if (rec->iter + 1 > s->last_p1[rec->rank]) {
		s->ranks_seen += !s->last_p1[rec->rank];
		s->last_p1[rec->rank] = rec->iter + 1;
		s->last_end[rec->rank] = rec->start_us + rec->dur_us;
		if (s->last_end[rec->rank] > s->latest)
			s->latest = s->last_end[rec->rank];
	}
	/* job completion */
	if (!s->started || (!s->handed && rec->iter < s->next)) {
		s->next = rec->iter;
		s->started = 1;
	}
	uint32_t R = s->cfg.ring_iters, j = rec->iter % R;
	if (s->jtag[j] != rec->iter + 1) {
		if (s->jtag[j] > rec->iter + 1)
			return 0;
		s->jtag[j] = rec->iter + 1;
		s->jcount[j] = 0;
		s->jsum[j] = 0;
		s->jstart[j] = rec->start_us;
		s->jend[j] = rec->start_us + rec->dur_us;
	}
	if (fresh) {
		s->jcount[j]++;
		s->jsum[j] += rec->dur_us / 1000.0;
	}
	if (rec->start_us < s->jstart[j])
		s->jstart[j] = rec->start_us;
	if (rec->start_us + rec->dur_us > s->jend[j])
		s->jend[j] = rec->start_us + rec->dur_us;
	return 0;
}

/* Widens every ring cell of a one-shot fill by a phase, in place: pdur has room for
 * max_phases a cell, its pages touched only as used. The held cells move from the last one
 * down, each to its wider place, the new phase absent; a cell moves only to a place at or
 * after its own, over none not yet moved. A fill's phases are mostly named by its first
 * records, while few cells are held (at most max_phases widenings of the whole ring). */
static void phases_widen(struct store *s)
{
	uint32_t from = s->P, to = from + 1;
	for (size_t c = ring_cells(s); c-- > 0;) {
		if (!s->tag[c])
			continue;
		uint32_t *p = s->pdur + c * to;
		memmove(p, s->pdur + c * from, from * sizeof(*p));
		for (uint32_t i = from; i < to; i++)
			p[i] = STORE_ABSENT;
	}
	s->P = to;
}

/* a new phase slot (the caller has checked nphase < max_phases), its cells made room for */
static uint32_t phase_slot_new(struct store *s)
{
	if (s->nphase == s->P)
		phases_widen(s);
	return s->nphase++;
}

/* The phase slot of STORE_LEAD_PHASE, made on first use (STORE_NO_SLOT when none is left) */
static uint32_t lead_slot(struct store *s)
{
	if (s->lead_slot != STORE_NO_SLOT)
		return s->lead_slot;
	if (s->nphase == s->cfg.max_phases)
		return STORE_NO_SLOT;
	int name = store_intern_name(s, STORE_LEAD_PHASE);
	if (name < 0 || s->phase_of_name[name] != STORE_NO_SLOT)
		return STORE_NO_SLOT; /* out of memory, or an agent sends a phase of that name */
	uint32_t slot = phase_slot_new(s);
	s->phase_of_name[name] = slot;
	s->phase_name[slot] = (uint32_t)name;
	s->phase_kind[slot] = RECORD_KIND_HOST;
	s->phase_group[slot] = RECORD_GROUP_NONE;
	s->lead_slot = slot;
	return slot;
}

/* Counts a start offset of phase slot: O(1), two numbers a slot. Halving both at a
 * bound keeps the sum exact in a double and lets a phase that moved in the step (a new
 * schedule after a restart) move its typical start within about a million records. */
#define STORE_START_HALVE (1u << 20)
static void start_add(struct store *s, uint32_t slot, int64_t start_us)
{
	if (s->pstart_n[slot] == STORE_START_HALVE) {
		s->pstart_sum[slot] /= 2;
		s->pstart_n[slot] /= 2;
	}
	s->pstart_sum[slot] += (double)start_us;
	s->pstart_n[slot]++;
}

int store_add_phase(struct store *s, const struct record_phase *rec)
{
	if (rec->rank >= s->topo.world || rec->name >= s->names.n || rec->iter >= UINT32_MAX - 1) {
		s->dropped++;
		return 1;
	}
	uint32_t slot = s->phase_of_name[rec->name];
	if (slot == STORE_NO_SLOT) {
		if (s->nphase == s->cfg.max_phases) {
			s->dropped++;
			return 1;
		}
		slot = phase_slot_new(s);
		s->phase_of_name[rec->name] = slot;
		s->phase_name[slot] = rec->name;
		s->phase_kind[slot] = rec->kind;
		s->phase_group[slot] = rec->group;
	}
	size_t idx = claim(s, rec->rank, rec->iter);
	if (idx == STORE_NO_CELL)
		return -1;
	if (idx == SIZE_MAX) {
		s->dropped++;
		return 1;
	}
	uint32_t *p = &s->pdur[idx * s->P + slot];
	uint32_t v = clamp_us(rec->dur_us);
	/* the same phase twice in one iteration (e.g. per micro-batch): durations add up */
	*p = *p == STORE_ABSENT ? v : clamp_us((int64_t)*p + v);
	if (rec->start_us != RECORD_NO_START && rec->start_us >= 0)
		start_add(s, slot, rec->start_us);
	if (rec->start_us != RECORD_NO_START && rec->start_us >= 0 && slot != s->lead_slot) {
		/* the earliest start of the iteration's phases: time no phase covers, before
		 * the first one (a data loader nobody timed, a host stall); made with the first
		 * start offset, so that a phase at the iteration's start counts from the first */
		uint32_t ls = lead_slot(s);
		if (ls != STORE_NO_SLOT) {
			uint32_t *q = &s->pdur[idx * s->P + ls], a = clamp_us(rec->start_us);
			*q = *q == STORE_ABSENT || a < *q ? a : *q;
		}
	}
	return 0;
}

static int add_summary(struct sketch *sk, const struct record_kernel *rec)
{
	uint64_t n = rec->count ? rec->count : 1;
	if (n == 1)
		return sketch_add(sk, (double)(rec->max_us ? rec->max_us : rec->sum_us), 1);
	if (n == 2)
		return sketch_add(sk, (double)rec->min_us, 1) | sketch_add(sk, (double)rec->max_us, 1);
	uint64_t tail = n / 100;
	uint64_t mid = n - 2 - tail;
	int rc = sketch_add(sk, (double)rec->min_us, 1) | sketch_add(sk, (double)rec->max_us, 1);
	rc |= sketch_add(sk, (double)rec->p50_us, mid);
	if (tail)
		rc |= sketch_add(sk, (double)rec->p99_us, tail);
	return rc;
}

int store_add_kernel(struct store *s, const struct record_kernel *rec, const int64_t *durs, size_t ndurs)
{
	if (s->frozen || rec->rank >= s->topo.world || rec->name >= s->names.n || rec->iter >= UINT32_MAX - 1) {
		s->dropped++;
		return 1;
	}
	if (!s->ks && kernels_alloc(s) < 0)
		return -1;
	uint32_t k = s->kernel_of_name[rec->name];
	if (k == STORE_NO_SLOT) {
		if (s->nkernel == s->cfg.max_kernels) {
			s->dropped++;
			return 1;
		}
		k = s->nkernel++;
		s->kernel_of_name[rec->name] = k;
		s->kernel_name[k] = rec->name;
		s->kernel_kind[k] = rec->kind;
	}
	uint32_t block = rec->iter / s->cfg.kernel_block_iters;
	size_t idx = kcell(s, rec->rank, k, block);
	if (s->ktag[idx] > block + 1) {
		s->dropped++;
		return 1;
	}
	if (!s->ks[idx]) {
		uint32_t num, *bins = bins_new(s, STORE_SK_BINS);
		struct sketch *fresh = bins ? sk_new(s, &num) : NULL;
		if (!fresh)
			return -1;
		sketch_lend(fresh, bins, STORE_SK_BINS);
		s->ks[idx] = num + 1;
	}
	struct sketch *sk = sk_at(s, s->ks[idx] - 1);
	if (s->ktag[idx] != block + 1) {
		sketch_reset(sk);
		s->ktag[idx] = block + 1;
	}
	int rc;
	if (rec->sketch && rec->sketch_len) {
		if (sketch_deserialize(&s->scratch, rec->sketch, rec->sketch_len) < 0) {
			s->dropped++;
			return 1;
		}
		sketch_set_summary(&s->scratch, (double)rec->min_us, (double)rec->max_us, (double)rec->sum_us);
		rc = sketch_merge(sk, &s->scratch);
	} else if (durs && ndurs) {
		rc = sketch_add_ints(sk, durs, ndurs);
	} else {
		rc = add_summary(sk, rec) ? -1 : 0;
	}
	/* a sketch that outgrew its lent buckets moves back onto the slabs: a small array of its
	 * own each (12,960 of case5's) grew the heap by 600 pages, each a page fault. The buckets
	 * it leaves stay unused: about as many as it holds at most, as from its second move on
	 * each at least doubles them (up to SKETCH_MAX_BINS) */
	uint32_t *bins;
	if (!rc && !sk->lent && (bins = bins_new(s, sk->cap)))
		sketch_move(sk, bins, sk->cap);
	return rc;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int store_add_event(struct store *s, const char *host, const char *kind, int64_t ts_us, const char *source,
		    const char *detail)
{
	if (s->nevents == s->events_cap) {
		size_t cap = s->events_cap ? s->events_cap * 2 : 8;
		struct store_event *e = realloc(s->events, cap * sizeof(*e));
		if (!e)
			return -1;
		s->events = e;
		s->events_cap = cap;
	}
	struct store_event *e = &s->events[s->nevents];
	e->host = dup_or_empty(host);
	e->kind = dup_or_empty(kind);
	e->source = dup_or_empty(source);
	e->detail = dup_or_empty(detail);
	e->ts_us = ts_us;
	if (!e->host || !e->kind || !e->source || !e->detail) {
		free(e->host);
		free(e->kind);
		free(e->source);
		free(e->detail);
		return -1;
	}
	s->nevents++;
	return 0;
}

size_t store_event_count(const struct store *s) { return s->nevents; }

const struct store_event *store_event_at(const struct store *s, size_t i)
{
	return i < s->nevents ? &s->events[i] : NULL;
}

uint64_t store_dropped(const struct store *s) { return s->dropped; }

int store_next_complete(struct store *s, uint32_t *iter, double *mean_ms)
{
	if (!s->started)
		return 0;
	uint32_t R = s->cfg.ring_iters;
	double need = s->flushing ? 1 : s->cfg.quorum * s->topo.world;
	while (s->next <= s->max_iter) {
		/* the ring holds max_iter - R + 1 .. max_iter at most: everything older is lost,
		 * skipped in one step (an iteration jump costs O(1), not O(jump)) */
		if (s->max_iter - s->next >= R) {
			s->next = s->max_iter - R + 1;
			continue;
		}
		uint32_t j = s->next % R;
		if (s->jtag[j] == s->next + 1 && s->jcount[j] >= need && s->jcount[j] > 0) {
			*iter = s->next;
			*mean_ms = s->jsum[j] / s->jcount[j];
			s->next++;
			s->handed = 1;
			return 1;
		}
		/* lost: the ring moved past it, or (flushing) nobody reported it */
		if (s->jtag[j] > s->next + 1 || (s->flushing && s->jtag[j] != s->next + 1)) {
			s->next++;
			continue;
		}
		/* a later iteration is complete: this one is skipped when nobody reported it
		 * (iteration numbers with gaps: agents that sample every k-th iteration) or, in a
		 * live stream, when too few did and the rest will not: there ranks report their
		 * iterations in order, so a rank that reported the later one is done with this one
		 * (its records of it were stored before a restart of the server, not sent again) */
		if (s->jtag[j] != s->next + 1 || s->cfg.live) {
			uint32_t skip = 0;
			for (uint32_t k = 1; k < R && s->next + k <= s->max_iter; k++) {
				uint32_t jk = (s->next + k) % R;
				if (s->jtag[jk] == s->next + k + 1 && s->jcount[jk] >= need) {
					skip = k;
					break;
				}
			}
			if (skip) {
				s->next += skip;
				continue;
			}
		}
		return 0;
	}
	return 0;
}

void store_flush(struct store *s) { s->flushing = 1; }

uint32_t store_phase_count(const struct store *s) { return s->nphase; }

uint32_t store_phase_name(const struct store *s, uint32_t slot) { return s->phase_name[slot]; }

uint8_t store_phase_kind(const struct store *s, uint32_t slot) { return s->phase_kind[slot]; }

uint8_t store_phase_group(const struct store *s, uint32_t slot) { return s->phase_group[slot]; }

double store_phase_start(const struct store *s, uint32_t slot)
{
	if (slot >= s->nphase || !s->pstart_n[slot])
		return -1;
	return s->pstart_sum[slot] / s->pstart_n[slot];
}

uint32_t store_kernel_count(const struct store *s) { return s->nkernel; }

uint32_t store_kernel_name(const struct store *s, uint32_t slot) { return s->kernel_name[slot]; }

uint8_t store_kernel_kind(const struct store *s, uint32_t slot) { return s->kernel_kind[slot]; }

/* the kept cell of (rank, iter) (store_keep), or SIZE_MAX */
static size_t kept_cell(const struct store *s, uint32_t rank, uint32_t iter)
{
	size_t k = (size_t)rank * STORE_KEEP_ITERS + iter % STORE_KEEP_ITERS;
	return s->keep.tag && s->keep.tag[k] == iter + 1 ? k : SIZE_MAX;
}

int store_has_iter(const struct store *s, uint32_t rank, uint32_t iter)
{
	return s->tag[(size_t)rank * s->R + iter % s->R] == iter + 1 || kept_cell(s, rank, iter) != SIZE_MAX;
}

uint32_t store_iter_dur(const struct store *s, uint32_t rank, uint32_t iter)
{
	size_t idx = (size_t)rank * s->R + iter % s->R, k;
	if (s->tag[idx] == iter + 1)
		return s->dur[idx];
	return (k = kept_cell(s, rank, iter)) != SIZE_MAX ? s->keep.dur[k] : STORE_ABSENT;
}

uint32_t store_phase_dur(const struct store *s, uint32_t rank, uint32_t iter, uint32_t slot)
{
	const uint32_t *d = store_slot_phases(s, rank, iter);
	return d ? d[slot] : STORE_ABSENT;
}

const uint32_t *store_slot_phases(const struct store *s, uint32_t rank, uint32_t iter)
{
	size_t idx = (size_t)rank * s->R + iter % s->R, k;
	if (s->tag[idx] == iter + 1)
		return s->pdur + idx * s->P;
	return (k = kept_cell(s, rank, iter)) != SIZE_MAX ? s->keep.pdur + k * s->cfg.max_phases : NULL;
}

int store_keep(struct store *s, uint32_t first, uint32_t last)
{
	size_t W = s->topo.world, P = s->cfg.max_phases, kc = W * STORE_KEEP_ITERS;
	if (last < first || last - first + 1 > STORE_KEEP_ITERS)
		return -1;
	if (!s->keep.tag) {
		s->keep.tag = malloc(kc * sizeof(uint32_t));
		s->keep.dur = malloc(kc * sizeof(uint32_t));
		s->keep.pdur = malloc(kc * P * sizeof(uint32_t));
		if (!s->keep.tag || !s->keep.dur || !s->keep.pdur) {
			free(s->keep.tag);
			free(s->keep.dur);
			free(s->keep.pdur);
			s->keep.tag = s->keep.dur = s->keep.pdur = NULL;
			return -1;
		}
	}
	memset(s->keep.tag, 0, kc * sizeof(uint32_t));
	memset(s->keep.jtag, 0, sizeof(s->keep.jtag));
	for (uint32_t it = first; it <= last; it++) {
		uint32_t j = it % s->cfg.ring_iters, kj = it % STORE_KEEP_ITERS;
		if (s->jtag[j] == it + 1) {
			s->keep.jtag[kj] = it + 1;
			s->keep.jcount[kj] = s->jcount[j];
			s->keep.jstart[kj] = s->jstart[j];
			s->keep.jend[kj] = s->jend[j];
		}
	}
	for (size_t r = 0; r < W; r++) /* rank by rank: each one's cells are together */
		for (uint32_t it = first; it <= last; it++) {
			size_t idx = r * s->R + it % s->R, k = r * STORE_KEEP_ITERS + it % STORE_KEEP_ITERS;
			if (s->tag[idx] != it + 1)
				continue;
			s->keep.tag[k] = it + 1;
			s->keep.dur[k] = s->dur[idx];
			memcpy(s->keep.pdur + k * P, s->pdur + idx * s->P, s->P * sizeof(uint32_t));
			memset(s->keep.pdur + k * P + s->P, 0xff, (P - s->P) * sizeof(uint32_t));
		}
	s->keep.first = first;
	s->keep.last = last;
	return 0;
}

int store_kept(const struct store *s, uint32_t *first, uint32_t *last)
{
	if (!s->keep.tag)
		return 0;
	*first = s->keep.first;
	*last = s->keep.last;
	return 1;
}

const void *store_slot_addr(const struct store *s, uint32_t rank, uint32_t iter)
{
	size_t idx = (size_t)rank * s->R + iter % s->R;
	return s->pdur + idx * s->P;
}

void store_ring_view(const struct store *s, struct store_ring *out)
{
	out->tag = s->tag;
	out->pdur = s->pdur;
	out->ring = s->R;
	out->phases = s->P;
}

uint32_t store_max_iter(const struct store *s) { return s->max_iter; }

int store_any(const struct store *s) { return s->any; }

int store_rank_last(const struct store *s, uint32_t rank, uint32_t *iter, int64_t *end_us)
{
	if (rank >= s->topo.world || !s->last_p1[rank])
		return 0;
	*iter = s->last_p1[rank] - 1;
	*end_us = s->last_end[rank];
	return 1;
}

uint32_t store_ranks_seen(const struct store *s) { return s->ranks_seen; }

uint32_t store_iter_ranks(const struct store *s, uint32_t iter)
{
	uint32_t j = iter % s->cfg.ring_iters, k = iter % STORE_KEEP_ITERS;
	if (s->jtag[j] == iter + 1)
		return s->jcount[j];
	return s->keep.tag && s->keep.jtag[k] == iter + 1 ? s->keep.jcount[k] : 0;
}

int store_iter_span(const struct store *s, uint32_t iter, int64_t *start_us, int64_t *end_us)
{
	uint32_t j = iter % s->cfg.ring_iters, k = iter % STORE_KEEP_ITERS;
	if (s->jtag[j] == iter + 1) {
		*start_us = s->jstart[j];
		*end_us = s->jend[j];
		return 1;
	}
	if (!s->keep.tag || s->keep.jtag[k] != iter + 1)
		return 0;
	*start_us = s->keep.jstart[k];
	*end_us = s->keep.jend[k];
	return 1;
}

int64_t store_latest_us(const struct store *s) { return s->latest; }

int store_kernel_pool(const struct store *s, uint32_t rank, uint32_t kslot, uint32_t first, uint32_t last,
		      struct sketch *out)
{
	if (!s->ks || kslot >= s->nkernel || rank >= s->topo.world)
		return 0;
	uint32_t B = s->cfg.kernel_block_iters;
	int merged = 0;
	for (uint32_t b = first / B; b <= last / B; b++) {
		size_t idx = kcell(s, rank, kslot, b);
		if (s->ktag[idx] != b + 1 || !s->ks[idx])
			continue;
		if (sketch_merge(out, sk_at(s, s->ks[idx] - 1)) < 0)
			return -1;
		merged++;
	}
	return merged;
}
