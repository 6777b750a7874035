/* record.h: the records every part of culprit passes around (their file form: docs/format.md).
 *
 * Plain structs, no pointers to owned memory except where stated. Names (phase and kernel
 * names) are not stored in records: a record carries an index into a name dictionary that
 * travels beside the records (a batch's dictionary on the wire, a job's in memory). */
#ifndef CULPRIT_RECORD_H
#define CULPRIT_RECORD_H

#include <stdint.h>

/* What a phase or kernel spends its time on. Values are on the wire and in the database. */
enum record_kind {
	RECORD_KIND_COMPUTE = 0,
	RECORD_KIND_COMM = 1,
	RECORD_KIND_HOST = 2,
	RECORD_KIND_MIXED = 3,
};
#define RECORD_KIND_COUNT 4

/* The collective a phase belongs to. Values are on the wire and in the database. */
enum record_group {
	RECORD_GROUP_NONE = 0,
	RECORD_GROUP_TP = 1,
	RECORD_GROUP_CP = 2,
	RECORD_GROUP_EP = 3,
	RECORD_GROUP_DP = 4,
	RECORD_GROUP_PP = 5,
};
#define RECORD_GROUP_COUNT 6

/* Marks an absent optional start offset. */
#define RECORD_NO_START INT64_MIN

/* One iteration (training step) of one rank. start_us is microseconds since the Unix epoch
 * on the agent's clock (importers of files shift their own clocks onto that scale). */
struct record_iter {
	uint32_t rank;
	uint32_t iter;
	int64_t start_us;
	int64_t dur_us;
};

/* One phase of one iteration. start_us is relative to the iteration's start, or
 * RECORD_NO_START. */
struct record_phase {
	uint32_t rank;
	uint32_t iter;
	uint32_t name; /* index into the name dictionary */
	uint8_t kind;  /* enum record_kind */
	uint8_t group; /* enum record_group */
	int64_t start_us;
	int64_t dur_us;
};

/* Summary of one kernel name on one rank over one iteration. The sketch is the serialized
 * mergeable duration sketch of diagnose/sketch.h; it points into memory owned by whoever
 * holds the batch (NULL with sketch_len 0 when only the summary fields are known). */
struct record_kernel {
	uint32_t rank;
	uint32_t iter;
	uint32_t name; /* index into the name dictionary */
	uint8_t kind;  /* enum record_kind: compute or comm */
	uint32_t count;
	int64_t sum_us;
	int64_t min_us;
	int64_t max_us;
	int64_t p50_us;
	int64_t p99_us;
	const uint8_t *sketch;
	uint32_t sketch_len;
};

/* The kind of a kernel by its name when the sender leaves it out: comm for a NCCL kernel
 * (the name holds "nccl" in any case), compute otherwise. */
enum record_kind record_kernel_kind_of(const char *name);

/* p50_us and p99_us of a kernel whose sender left them to be read off its sketch, which
 * record_kernel_quantiles does (culpritd's storage writer, off the event loop). */
#define RECORD_QUANTILES_FROM_SKETCH (-1)

struct sketch;
/* Sets k's p50_us and p99_us, which the wire may leave out: from its sketch when it has one
 * (scratch is an initialized sketch to decode into; may be NULL for a kernel without one),
 * otherwise exactly from count, min, max and sum (up to 3 values: the lower median and the
 * top value; past 3, the mean and the top).
 * 0, or -1 when the sketch does not decode (or memory ran out): the summary gave them. */
int record_kernel_quantiles(struct record_kernel *k, struct sketch *scratch);

/* One raw kernel execution, sent only during an on-demand capture (Batch.raw_kernels).
 * start_us is microseconds since the Unix epoch on the agent's clock. */
struct record_raw_kernel {
	uint32_t rank;
	uint32_t iter;
	uint32_t name;   /* index into the name dictionary */
	uint8_t kind;    /* enum record_kind */
	uint32_t stream; /* the CUDA stream (or any small id of the queue it ran on) */
	int64_t start_us;
	int64_t dur_us;
};

const char *record_kind_name(enum record_kind kind);
const char *record_group_name(enum record_group group);
/* Parse "compute", "comm", ... ; returns -1 when unknown. */
int record_kind_parse(const char *s);
/* Parse "", "tp", "cp", "ep", "dp", "pp" ("" and "none" are RECORD_GROUP_NONE); -1 when unknown. */
int record_group_parse(const char *s);

#endif
