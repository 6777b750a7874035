/* op.h: what the storage writers write, one operation at a time (storage/writer.h): a job,
 * an agent batch, or a report with its incident and alert outbox rows. An op and everything
 * it points to live in one allocation (an arena behind the op), freed at once. */
#ifndef CULPRIT_STORAGE_OP_H
#define CULPRIT_STORAGE_OP_H

#include <stddef.h>
#include <stdint.h>

#include "queue.h"
#include "record.h"

enum storage_op_type {
	STORAGE_OP_JOB,    /* create or update a job and its ranks (topology, hosts, coordinates) */
	STORAGE_OP_BATCH,  /* one agent batch: iterations, phases, kernels, raw kernels of a capture */
	STORAGE_OP_REPORT, /* a diagnosis report, its job's incident and alert outbox rows (storage/reports.c) */
};

/* One alert to deliver (STORAGE_OP_REPORT): a row of alert_outbox, inserted unless
 * (target, dedup_key) is already there. */
struct storage_outbox_row {
	char *target;
	char *dedup_key;
	char *payload; /* JSON text */
};

/* A job's incident as stored (STORAGE_OP_REPORT): a row of incidents, upserted by (job, key). */
struct storage_incident {
	char *key;
	char *category;
	char *state;      /* "open" or "resolved" */
	char *resolution; /* when resolved: "recovered" or "ended" (NULL: not said) */
	char *summary;
	uint32_t updates;
	int64_t opened_us, changed_us; /* epoch us */
	char *alert;                   /* JSON kept to re-send while open (NULL: keep the stored one) */
};

struct storage_topology {
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	char order[32];
};

/* Coordinates and host of one rank, as computed by the caller. */
struct storage_rank {
	uint32_t rank;
	uint32_t tp, cp, ep, dp, pp;
	const char *host;
};

/* One operation. All memory it points to belongs to the operation and is released with
 * storage_op_free() by the writer once done (allocate with storage_op_new, which gives one
 * arena for the op and everything it points to). */
struct storage_op {
	enum storage_op_type type;
	char *job;            /* job name */
	uint64_t lease_epoch; /* BATCH, REPORT: written only while the job's lease row has this epoch
	                       * and the writer's lease_owner (0: unchecked; see "fencing" in writer.c) */
	uint64_t source;      /* opaque producer id returned in done notifications (e.g. conn id) */
	/* STORAGE_OP_JOB */
	struct storage_topology topo;
	struct storage_rank *ranks;
	size_t n_ranks;
	/* STORAGE_OP_BATCH */
	char *agent; /* agent id: sequences are per (job, agent) */
	uint64_t seq;
	char **names;       /* the names the batch's records use ... */
	uint32_t *name_ids; /* ... and the producer's ids of them (NULL: names[i] has id i), which
	                     * the records' name fields hold; an id is the same name in every batch
	                     * of the job (the writer keeps id -> database id per batch) */
	size_t n_names;
	struct record_iter *iters;
	size_t n_iters;
	struct record_phase *phases;  /* ts of a phase = its iteration's start, see below */
	int64_t *phase_iter_start_us; /* per phase: its iteration's start (epoch us), for partitioning */
	size_t n_phases;
	struct record_kernel *kernels;
	int64_t *kernel_iter_start_us;
	size_t n_kernels;
	struct record_raw_kernel *raw_kernels; /* table raw_kernels (ts = the kernel's own start) */
	size_t n_raw_kernels;
	/* STORAGE_OP_REPORT (counts one record, no done item): in one transaction, the report
	 * (when report_json is set), the incident upsert by (job, incident_key) (when set), and
	 * the outbox rows. durable(durable_arg) is called on the writer thread after the commit. */
	char *report_json;
	uint32_t first_iter, last_iter;
	char *category;                   /* of the report */
	struct storage_incident incident; /* key NULL: none */
	struct storage_outbox_row *outbox;
	size_t n_outbox;
	void (*durable)(void *arg);
	void *durable_arg;
	/* private to the writer */
	struct queue_item link;
};

struct storage_op *storage_op_new(enum storage_op_type type, size_t arena_bytes);
void *storage_op_alloc(struct storage_op *op, size_t bytes); /* from the op's arena; NULL when exhausted */
char *storage_op_strdup(struct storage_op *op, const char *s);
void storage_op_free(struct storage_op *op);
/* What the op counts against the writer's queue: its records (a JOB or REPORT op: 1). */
size_t storage_op_records(const struct storage_op *op);

#endif
