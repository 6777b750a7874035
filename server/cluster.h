/* cluster.h: several culpritd instances on one PostgreSQL (docs/operations.md, "Many
 * instances"). Each job is owned by one instance through a lease row (storage/lease.c); a
 * Hello for a job another instance owns is answered with a redirect to it, a Hello for a job
 * nobody owns (or whose lease expired) takes its lease. The lease statements run on a query
 * worker of the cluster's own; the loop only submits and takes results.
 *
 * Without advertise_agent_addr there is no cluster (s->cluster NULL): the instance owns
 * every job and nothing here runs. */
#ifndef CULPRIT_CLUSTER_H
#define CULPRIT_CLUSTER_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

struct server;

struct storage_lease;

/* What a lease's change does to the agents' connections and the jobs (main.c gives ingest's
 * and jobs' functions): a Hello that waited for its job's lease goes on; when this instance
 * takes a job's lease, each agent's durable sequence is the database's, and the job's open
 * incidents (l) continue; when the lease is another's, the job's connections close and the
 * job is forgotten. */
struct cluster_calls {
	void (*resume)(struct server *s, uint64_t conn_id);
	void (*progress)(struct server *s, const char *job, const char *agent, uint64_t durable_seq);
	void (*taken_over)(struct server *s, const char *job, struct storage_lease *l);
	void (*lost)(struct server *s, const char *job);
};

/* Before the writer starts (it needs cluster_owner for fencing). 0, or -1 (logged). */
MUST_CHECK int cluster_start(struct server *s, const struct cluster_calls *calls);
/* At the end of a clean stop, after the writers: stops the worker and gives back every lease
 * of this instance (they expire now: other instances take its jobs on their next Hello). */
void cluster_stop(struct server *s);
/* This instance's id in job_leases. */
const char *cluster_owner(const struct server *s);

enum cluster_answer {
	CLUSTER_OWNED,    /* this instance owns the job: go on (*epoch set) */
	CLUSTER_WAIT,     /* being looked up: calls->resume(conn_id) follows */
	CLUSTER_REDIRECT, /* another instance owns it: *to is its agent address */
	CLUSTER_RELAY,    /* another instance owns it and takes no more agents: relay to *to */
	CLUSTER_BUSY,     /* the lease cannot be looked up now (database, queue full): retry later */
};
enum cluster_answer cluster_hello(struct server *s, const char *job, uint64_t conn_id, uint64_t *epoch,
				  const char **to);
/* The epoch of the job's lease while this instance owns it; 0 without a cluster or lease. */
uint64_t cluster_epoch(const struct server *s, const char *job);
/* The job was forgotten (its agents left): its lease is given back. */
void cluster_release(struct server *s, const char *job);
/* The writer refused a job's records: its lease is another's now. */
void cluster_lost(struct server *s, const char *job);

#endif
