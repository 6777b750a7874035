/* store.h: the per-job window store — the last N iterations of every rank, in memory.
 *
 * Online use (culpritd): create one store per job from its topology, intern the names of
 * each batch's dictionary (store_intern_name), add records as they arrive in any order
 * across ranks (O(1) amortized each, no allocation on the hot path except the first kernel
 * sketch of a (rank, kernel, block)), then after each batch drain store_next_complete()
 * into an l1 detector (l1.h) and run diagnose_run() (diagnose.h) when it asks for it.
 *
 * Memory: a ring of cfg.ring_iters slots per rank, each slot 8 bytes + 4 bytes per phase
 * slot (cfg.max_phases; a one-shot store's as many as are named, from 8, touched as used),
 * plus 8 bytes per (rank, kernel slot in use, block) once kernels come and the sketches
 * themselves (64 bytes and their buckets, 32 while they fit the 8 lent from the store's
 * slabs). 100,000 ranks x 64 iterations x 16 phases = 461 MB (store_memory() reports the
 * exact figure).
 *
 * Concurrency: the store is not locked. diagnose_run() only reads it; while it runs nobody
 * may call store_add_* / store_intern_name / store_set_host / store_add_event on the same
 * store. culpritd diagnoses off its event loop and holds what comes for the job while the
 * diagnosis runs (server/held.h); a private copy made with store_snapshot() is the other way. */
#ifndef CULPRIT_STORE_H
#define CULPRIT_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "sketch.h"
#include "topo.h"

#define STORE_ABSENT UINT32_MAX /* a duration not (yet) reported */
#define STORE_NO_SLOT UINT32_MAX
#define STORE_RING_FIRST 16 /* the fewest slots a one-shot ring starts with */
#define STORE_PHASES_FIRST 8 /* the phases a one-shot ring's cell starts with */

struct store_config {
	uint32_t ring_iters;         /* iterations kept per rank (default 64) */
	uint32_t max_phases;         /* distinct phase names per job (default 16) */
	uint32_t max_kernels;        /* distinct kernel names per job (default 16) */
	uint32_t kernel_block_iters; /* iterations pooled in one kernel sketch (default 8) */
	double quorum;               /* fraction of ranks that completes an iteration (0.95) */
	int live;                    /* a live stream, where each rank reports its iterations in
				       * order: an iteration some ranks reported, but not a quorum, is
				       * skipped once a later one is complete (its other reports are not
				       * coming: stored before a restart of the server, not resent).
				       * 0 for files, whose records may come in any order */
	int one_shot;                /* a file filled once (culprit diagnose), not a live job: the
				       * kernel arrays, and the sketch arena of a job that can fill it,
				       * on 2 MiB pages too (hugemem.h; the ring always is), and the
				       * ring starts at a quarter of ring_iters
				       * (STORE_RING_FIRST slots at least) and doubles when a rank's
				       * iterations need it, so a short file does not touch the whole
				       * ring (12 iterations of 12,960 ranks: 13 of its 53 MB). A live
				       * job keeps the full ring: a doubling copies it, a stall of the
				       * event loop */
};

struct store_event {
	char *host;
	char *kind;
	char *source;
	char *detail;
	int64_t ts_us;
};

struct store;

/* Defaults for every zero field of cfg (cfg may be NULL). Returns NULL when out of memory. */
struct store *store_create(const struct topo *t, const struct store_config *cfg);
void store_destroy(struct store *s);
/* Deep copy (for a diagnosis off the event loop); NULL when out of memory. The copy takes
 * no kernel records (store_add_kernel drops them): it is meant to be read. */
struct store *store_snapshot(const struct store *s);
size_t store_memory(const struct store *s);

const struct topo *store_topo(const struct store *s);
const struct store_config *store_config(const struct store *s);
void store_set_job(struct store *s, const char *job);
const char *store_job(const struct store *s);
/* What the ranks run on: "gpu", "cpu", or "" when the job did not say (any other word is
 * taken as not said). The actions' words follow it. */
void store_set_device(struct store *s, const char *device);
const char *store_device(const struct store *s);

/* Name dictionary of the job: returns the id of name (interning it), -1 when out of memory. */
int store_intern_name(struct store *s, const char *name);
const char *store_name(const struct store *s, uint32_t id);
/* The id of a name already interned, or -1; the number of names interned. */
int store_find_name(const struct store *s, const char *name);
uint32_t store_name_count(const struct store *s);

/* Host of a rank (default "node-<rank / gpus_per_node>"). 0, or -1 (bad rank / memory). */
int store_set_host(struct store *s, uint32_t rank, const char *host);
/* Writes the host name of rank into buf. */
const char *store_host(const struct store *s, uint32_t rank, char *buf, size_t len);
/* Whether a host record named rank's host (else store_host's name is the default, made up
 * from the rank order: no action may name it as if it were a machine). */
int store_host_known(const struct store *s, uint32_t rank);
/* A number per host, equal for the ranks of one host (named, or the default node). */
uint32_t store_host_id(const struct store *s, uint32_t rank);

/* Records. Names in phase/kernel records are ids from store_intern_name. Returns 0 when
 * stored, 1 when dropped (too old for the ring, rank out of range, no phase/kernel slot
 * left), -1 when out of memory. A kernel's distribution comes from rec->sketch when
 * present, else from durs[0..ndurs) when given, else from its summary fields. */
int store_add_iter(struct store *s, const struct record_iter *rec);
int store_add_phase(struct store *s, const struct record_phase *rec);
int store_add_kernel(struct store *s, const struct record_kernel *rec, const int64_t *durs, size_t ndurs);
int store_add_event(struct store *s, const char *host, const char *kind, int64_t ts_us, const char *source,
		    const char *detail);
size_t store_event_count(const struct store *s);
const struct store_event *store_event_at(const struct store *s, size_t i);
uint64_t store_dropped(const struct store *s);

/* Completion: iterations are handed out in order once a quorum of ranks reported them.
 * Returns 1 and fills *iter and *mean_ms (mean iteration time over the reporting ranks),
 * or 0 when the next iteration is not complete yet. Cheap: call after every batch. An
 * iteration that fell out of the ring unreported is skipped; a jump of the iteration
 * numbers (1, then 2^31) costs O(ring_iters), however far it goes. */
int store_next_complete(struct store *s, uint32_t *iter, double *mean_ms);
/* End of input (offline): hands out the remaining iterations that have any report. */
void store_flush(struct store *s);

/* A phase the store makes itself, of kind host, when phases carry start offsets: the time
 * from a rank's iteration start to its first phase (time no phase covers, where a data
 * loader nobody timed or a host stall shows). */
#define STORE_LEAD_PHASE "(before the first phase)"

/* Phase slots: phases are stored by slot; each slot has the name, kind and group of the
 * first record seen with that name. */
uint32_t store_phase_count(const struct store *s);
uint32_t store_phase_name(const struct store *s, uint32_t slot);
uint8_t store_phase_kind(const struct store *s, uint32_t slot);
uint8_t store_phase_group(const struct store *s, uint32_t slot);
/* The phase's typical start within its iteration, in microseconds: the mean of the start
 * offsets its records carried (over ranks and iterations, the older halved away past a
 * million), or -1 when none carried one. Orders the phases of a step (diagnose.c). */
double store_phase_start(const struct store *s, uint32_t slot);
uint32_t store_kernel_count(const struct store *s);
uint32_t store_kernel_name(const struct store *s, uint32_t slot);
uint8_t store_kernel_kind(const struct store *s, uint32_t slot);

/* Read access for the diagnosis. The slot of (rank, iter) holds that iteration only when
 * store_has_iter() says so. Durations are microseconds, STORE_ABSENT when missing. */
int store_has_iter(const struct store *s, uint32_t rank, uint32_t iter);
uint32_t store_iter_dur(const struct store *s, uint32_t rank, uint32_t iter);
uint32_t store_phase_dur(const struct store *s, uint32_t rank, uint32_t iter, uint32_t slot);
/* The durations of (rank, iter) by phase slot, or NULL when the ring does not hold it. */
const uint32_t *store_slot_phases(const struct store *s, uint32_t rank, uint32_t iter);
/* Where (rank, iter)'s phase durations would be, whatever the slot holds (a prefetch hint). */
const void *store_slot_addr(const struct store *s, uint32_t rank, uint32_t iter);
/* The raw ring, for scans over every rank (L2): cell (rank, iter) is rank * ring + iter % ring;
 * it holds iter when tag[cell] == iter + 1, its phase durations at pdur + cell * phases. */
struct store_ring {
	const uint32_t *tag;
	const uint32_t *pdur;
	uint32_t ring, phases;
};
void store_ring_view(const struct store *s, struct store_ring *out);
/* A window's baseline outlives the ring: store_keep copies iterations [first, last] (at most
 * STORE_KEEP_ITERS, those the ring holds) aside, and every reader above but the raw ring
 * view finds them there once the ring has dropped them (a fault that lasts longer than the
 * ring is still compared with the level before it). The copy replaces the one before; it
 * costs STORE_KEEP_ITERS x (8 + 4 x max_phases) bytes a rank, allocated at the first
 * call. Returns 0, -1 for a range too long or out of memory. store_kept: the range kept,
 * 0 when none. */
#define STORE_KEEP_ITERS 8
int store_keep(struct store *s, uint32_t first, uint32_t last);
int store_kept(const struct store *s, uint32_t *first, uint32_t *last);
/* Highest iteration seen of any rank; 0 with nothing seen (check store_any). */
uint32_t store_max_iter(const struct store *s);
int store_any(const struct store *s);
/* Per-rank last report: iteration, its end (start + dur, us). Returns 0 if never seen. */
int store_rank_last(const struct store *s, uint32_t rank, uint32_t *iter, int64_t *end_us);
/* Ranks that reported an iteration so far, and the ranks that reported iteration iter (0
 * when the ring no longer holds it): a live job's ranks not heard from in an iteration the
 * quorum completed are the difference (server/jobs.c waits for them before a diagnosis). */
uint32_t store_ranks_seen(const struct store *s);
uint32_t store_iter_ranks(const struct store *s, uint32_t iter);
/* Wall-clock span of an iteration over its ranks (earliest start, latest end); 0 when the
 * ring no longer holds it. */
int store_iter_span(const struct store *s, uint32_t iter, int64_t *start_us, int64_t *end_us);
/* Latest end time (us) of any rank's iteration: "now" for offline input. */
int64_t store_latest_us(const struct store *s);

/* Pool into out the kernel sketches of (rank, kernel slot) whose blocks lie within
 * [first, last]. Returns the number of sketches merged, -1 when out of memory. */
int store_kernel_pool(const struct store *s, uint32_t rank, uint32_t kslot, uint32_t first, uint32_t last,
		      struct sketch *out);

#endif
