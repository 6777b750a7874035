/* lease.h: which culpritd owns a job when several share one PostgreSQL (table job_leases,
 * migration 009; docs/operations.md, "Many instances").
 *
 * A lease row per job: owner, the owner's addresses, an expiry on the database's clock and a
 * fencing epoch raised by every acquisition. The statements are storage_query_fns: they run
 * on a query worker's connection, never on the event loop. The storage writer checks the
 * epoch in the transaction that writes a job's records (writer.c, "fencing"). */
#ifndef CULPRIT_STORAGE_LEASE_H
#define CULPRIT_STORAGE_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "query.h"
#include "attrs.h"

/* What a lease statement needs; the submitter's until its result was taken. */
struct storage_lease_req {
	char job[128];          /* acquire: the job */
	const char *owner;      /* this instance's id */
	const char *agent_addr; /* acquire: host:port agents are sent to */
	const char *api_url;    /* acquire: where REST clients are sent to */
	int lease_s;            /* acquire, renew: the lease lasts this long from now */
	uint32_t window_iters;  /* acquire: iterations of the job's window read back (storage/window.h) */
	uint64_t epoch;         /* release: the epoch given back */
	int agent_room;         /* acquire, renew: agent connections this instance takes now */
};

/* The answer to storage_lease_acquire (r->text points to one, r->len its size; one block,
 * free() frees it). */
struct storage_lease {
	int owned; /* 1: the lease is this instance's now, with epoch */
	uint64_t epoch;
	char owner[128]; /* owned == 0: who holds it, and where its agents are sent */
	char agent_addr[256];
	int agent_room;     /* the owner's agent_room (the last it wrote) */
	size_t n_incidents; /* owned == 1: the job's open incidents (storage_lease_incidents) */
	/* owned == 1 with an open incident (not a hang): the records of its window, from its first
	 * iteration on (at most window_iters); the taker frees it (NULL: none) */
	struct storage_window *window;
	size_t incidents_at; /* their fields in data */
	/* the acquisition's time (ms): waiting for the lease row (the previous owner's writes in
	 * flight), then reading back what the job had (sequences, incidents, window) */
	int64_t lock_ms, read_ms;
	/* owned == 1: the job's agents' durable sequences, "agent\tseq\n" lines, NUL; then the
	 * incidents' fields (storage/incidents.c's columns), each a byte 1 (0: NULL) and a string */
	char data[];
};
/* Calls cb for each open incident l carries, oldest first (what storage_open_incidents_load
 * gives at start-up, for the job taken over). */
struct storage_open_incident;
void storage_lease_incidents(const struct storage_lease *l,
			     void (*cb)(const struct storage_open_incident *inc, void *arg), void *arg);

/* Takes the lease of req->job when nobody holds it or it has expired (epoch + 1), and reads
 * what the new owner goes on from: the agents' durable sequences, the open incidents and the
 * records of the open incident's window; else
 * answers who holds it. ctx: struct storage_lease_req. */
void storage_lease_acquire(struct pg_conn *conn, void *ctx, struct storage_query_result *r);
/* Extends every lease req->owner holds; r->text: "job\tepoch\n" lines of those it still holds
 * (NULL: none). ctx: struct storage_lease_req. */
void storage_lease_renew(struct pg_conn *conn, void *ctx, struct storage_query_result *r);
/* Gives back req->job's lease of epoch req->epoch: it expires now (its job was forgotten:
 * the next Hello anywhere takes it at once); the row stays, with its epoch, which is never
 * handed out twice. The owner's writes still pass fencing until another takes it. ctx:
 * struct storage_lease_req. */
void storage_lease_release(struct pg_conn *conn, void *ctx, struct storage_query_result *r);
/* Synchronous, at the end of a clean stop (the loop and the writers are done): every lease
 * of owner expires now, so that other instances take its jobs at once. 0, or -1 with err. */
MUST_CHECK int storage_lease_release_all(const char *dsn, const char *owner, char *err, size_t err_size);

#endif
