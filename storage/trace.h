/* trace.h: what a timeline export (GET /api/v1/jobs/{job}/trace) reads from PostgreSQL.
 *
 * storage_trace_load() runs on a query worker (storage/query.h, storage_query_submit_fn) and
 * fills a struct trace_data: the chosen ranks with their hosts and coordinates, their
 * iterations, phases and captured raw kernels as slices on the agents' clock, and the
 * incidents and out-of-band events of the time span as instants. Encoding it (Perfetto
 * protobuf, Chrome JSON) is server/trace_export.c's business. */
#ifndef CULPRIT_STORAGE_TRACE_H
#define CULPRIT_STORAGE_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

struct pg_conn;
struct storage_query_result;

enum trace_slice_type {
	TRACE_SLICE_ITER,   /* one iteration of a rank */
	TRACE_SLICE_PHASE,  /* a phase inside it */
	TRACE_SLICE_KERNEL, /* a captured raw kernel (its own track per rank and stream) */
};

struct trace_slice {
	uint32_t rank;
	uint32_t iter;
	int64_t start_us; /* us since the epoch (agents' clock) */
	int64_t dur_us;
	uint32_t name;       /* index into trace_data.names (unused for TRACE_SLICE_ITER) */
	uint8_t type;        /* enum trace_slice_type */
	uint8_t kind;        /* enum record_kind */
	uint8_t group;       /* enum record_group (phases) */
	uint8_t start_known; /* phases: 0 when the agent sent no start offset (placed after the previous) */
	uint32_t stream;     /* kernels */
};

struct trace_rank {
	uint32_t rank;
	uint32_t tp, cp, ep, dp, pp;
	char host[256];
	int known; /* 0: no ranks row (the job's agents never said Hello with it) */
};

struct trace_instant {
	int64_t ts_us; /* us since the epoch */
	char *name;    /* incident category / event kind (malloc'd) */
	char *detail;  /* summary / "source: detail" (malloc'd) */
	char *host;    /* an out-of-band event's host; NULL for an incident (job-wide) */
	int64_t id;    /* incident or event id */
};

/* What to read. ranks sorted ascending, no repeats. */
struct trace_request {
	char job[256];
	uint32_t *ranks;
	size_t n_ranks;
	int64_t from_iter, to_iter; /* -1: the last `span` iterations stored for these ranks */
	int64_t span;               /* iterations when a bound is absent */
	size_t max_slices;          /* more makes the load fail with too_many set */
};

struct trace_data {
	char job[256];
	uint32_t world;
	uint32_t tp, cp, pp, dp, ep, gpus_per_node; /* the job's layout (0 when not stored) */
	char order[32];                             /* its rank order ("" when not stored) */
	int64_t job_start_us; /* the job's first stored iteration start: the time origin */
	int64_t from_iter, to_iter;
	struct trace_rank *ranks; /* as requested, in rank order */
	size_t n_ranks;
	char **names;
	size_t n_names;
	struct trace_slice *slices;
	size_t n_slices, cap_slices;
	struct trace_instant *instants;
	size_t n_instants, cap_instants;
	int too_many; /* the request would have more than max_slices slices (nothing else is set) */
};

/* Fills d. 0 ok; 1 the job is not stored; -1 failed (r->failed, error and sqlstate set); 2
 * too many slices (d->too_many). Phases without a start offset are placed after the
 * previous phase of their iteration; slices are in no particular order. */
MUST_CHECK int storage_trace_load(struct pg_conn *conn, const struct trace_request *req, struct trace_data *d,
		       struct storage_query_result *r);
void storage_trace_free(struct trace_data *d);

#endif
