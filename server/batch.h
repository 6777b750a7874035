/* batch.h: an agent's Batch on its way in (docs/protocol.md): its checks against the
 * protocol's and the job's rules, the agent's name ids on a connection, and its conversion
 * into the storage op that the job's window and the storage writer both take, every name
 * translated once, from the agent's name id or the batch's dictionary index to the job's id.
 * Nothing here does I/O; ingest.c calls it on the event loop. */
#ifndef CULPRIT_BATCH_H
#define CULPRIT_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "culprit.pb-c.h"
#include "attrs.h"

struct job;
struct storage_op;

/* What a batch's values are checked against besides the protocol's fixed bounds. */
struct batch_limits {
	int64_t now_us;   /* iteration starts lie in 2000-01-01 .. now_us + one day */
	int64_t job_iter; /* the job's highest iteration so far, -1 with none (then the batch's lowest) */
	uint32_t window;  /* iterations may lie up to window + BATCH_MAX_ITER_JUMP above job_iter */
};

#define BATCH_MAX_ITER_JUMP 1000000
#define BATCH_MAX_ITER INT32_MAX /* iteration numbers: what the database stores (integer) */
#define BATCH_MIN_START_US 946684800000000LL   /* 2000-01-01: a start before is no clock we believe */
#define BATCH_MAX_AHEAD_US (86400LL * 1000000) /* nor one more than a day ahead of ours */
#define BATCH_MAX_RAW 65536                    /* raw kernels in one batch (Reject beyond) */
#define BATCH_MAX_STREAM 65535                 /* stream ids of raw kernels */

/* Checks a batch against the protocol's and the job's rules for an agent serving ranks
 * (sorted), its phase, kernel and raw kernel names indexing a dictionary of n_dict names
 * (SIZE_MAX: they are the agent's name ids, checked by batch_names_get): 0, or -1 with the
 * reason (sent back in a Reject) in err. Pure; fuzzed (tests/fuzz/fuzz_frame.c). */
MUST_CHECK int batch_validate(const uint32_t *ranks, size_t n_ranks, const Culprit__V1__Batch *b, size_t n_dict,
		   const struct batch_limits *lim, char *err, size_t err_size);

/* The name ids an agent defined on one connection (NameDef), each the job's id of its name:
 * open addressing sized by the ids used, not by the largest (12 bytes an id, about 16 with
 * the free slots). Zeroed: empty. */
struct batch_name_slot {
	uint32_t id;     /* UINT32_MAX: empty */
	uint32_t job_id; /* the job's id of the name */
	uint32_t epoch;  /* the last batch (batch_name_ids.epoch) that used it */
};
struct batch_name_ids {
	struct batch_name_slot *slots;
	size_t cap, n; /* slots (a power of two, or 0), ids held */
	uint32_t epoch;
};
void batch_name_ids_free(struct batch_name_ids *t);
/* Takes a batch's name definitions, interning the names in job (before anything else: they
 * hold for the connection even when the batch is a resend or is refused). -1 with the reason
 * in err; *full when the reason is that the job holds max_names names. */
MUST_CHECK int batch_take_name_defs(struct batch_name_ids *t, struct job *job, uint32_t max_names, const Culprit__V1__Batch *b,
			 bool *full, char *err, size_t err_size);

/* A batch's names, the job's ids of them: its records name them by index of the batch's own
 * dictionary (ids[index]), or without one by the agent's name ids, looked up once into refs
 * (its phases', kernels' and raw kernels' in that order). ids and strs list the names for the
 * writer: the dictionary's, or the distinct names of those name ids. */
struct batch_names {
	uint32_t *ids;
	const char **strs;
	size_t n;
	bool own_dict;
	uint32_t *refs;
};
/* The batch's names: its dictionary's checked (interned by batch_names_intern once the batch
 * is valid); or, when it has none, the names of the agent's name ids that its records use,
 * each of which must be defined in t. -1 with the reason in err. */
int batch_names_get(struct batch_name_ids *t, const struct job *job, const Culprit__V1__Batch *b,
		    struct batch_names *bn, char *err, size_t err_size);
/* Interns a valid batch's own dictionary in job. -1: out of memory, or *full when the job
 * already has max_names other names. */
MUST_CHECK int batch_names_intern(struct batch_names *bn, struct job *job, uint32_t max_names, bool *full);
void batch_names_free(struct batch_names *bn);

/* The storage op of a valid batch (bn interned) of agent's: its records name the job's ids,
 * its names are bn's. NULL out of memory. */
struct storage_op *batch_to_op(const Culprit__V1__Batch *b, const struct batch_names *bn, const struct job *job,
			       const char *agent, uint64_t source);

#endif
