/* jobs.h: the jobs culpritd knows: topology and, through diagnose/'s engine, each job's
 * in-memory window of recent iterations (names, hosts, records) and its L1 detector. */
#ifndef CULPRIT_JOBS_H
#define CULPRIT_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "held.h"
#include "incident.h"
#include "record.h"
#include "topo.h"
#include "attrs.h"

struct server;

/* A job's topology as its agents state it in Hello. */
struct job_topology {
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	char order[32];
	char device[8]; /* "gpu", "cpu", "" (not said; agents may differ in saying it) */
};

struct job {
	char name[128];
	struct job_topology wire_topo; /* as agents state it (compared on every Hello) */
	struct topo topo;
	struct engine *engine;
	uint64_t records;
	uint64_t dropped; /* records the window could not hold (too old, too many names) */

	/* online diagnosis */
	int due;                 /* a diagnosis should run (window opened or grew) */
	int diagnosing;          /* one is running off the loop: it reads the window in place */
	struct held held;        /* what came for the window meanwhile, given to it after */
	struct l2 l2;            /* L2's memory, kept between diagnoses (the worker's while one runs) */
	uint32_t last_diag_iter; /* store_max_iter when the last one was submitted */
	int64_t wait_since_us;   /* since when a due one waits for ranks not heard from (wall; 0: none) */
	uint32_t wait_iter;      /* ... in this iteration */
	uint64_t diagnoses;
	char *latest_report; /* JSON text of the latest report (NULL: none yet) */
	struct incident incident;

	/* hang check: the job's clock runs on from its median rank's last iteration end at wall speed */
	uint32_t live_agents;      /* connections of this job past Hello */
	int64_t clock_end_us;      /* the median rank's last iteration end (the agents' clock) */
	int64_t clock_wall_us;     /* when it last moved (ours) */
	int64_t hang_now_us;       /* job time of a due hang diagnosis (0: none) */
	int64_t next_hang_diag_us; /* no hang diagnosis before this (wall) */
	int64_t *heard_us;         /* [rank]: when its agent's connection last delivered a batch (wall) */
	int64_t alone_since_us;    /* since when no agent has been connected (wall; 0: some are): set by ingest */
	int deposed;               /* another instance took its lease: forgotten soon, its incident left alone */
	int goodbye;               /* the last agent to leave said Goodbye (set by ingest) */
	int64_t ended_us;          /* when it ended (its agents left, the last saying Goodbye; wall; 0: live) */
};

/* The job called name, created from topo when new. NULL with err when topo is invalid,
 * differs from the job's, or out of memory. */
struct job *jobs_get_or_create(struct server *s, const char *name, const struct job_topology *topo, char *err,
			       size_t err_size);
/* Job-wide id of a name (interned on first use); JOBS_NAMES_FULL when it is new and the job
 * already has max_names names, UINT32_MAX out of memory. */
#define JOBS_NAMES_FULL (UINT32_MAX - 1)
uint32_t jobs_intern(struct job *job, const char *name, uint32_t max_names);
/* The name of a job name id (from jobs_intern). */
const char *jobs_name(const struct job *job, uint32_t id);
/* Hosts of ranks, as an agent's Hello states them. */
void jobs_set_hosts(struct job *job, const uint32_t *ranks, size_t n, const char *host);
/* An event on one of the job's hosts (POST /api/v1/events); 0, or -1 when the job has
 * max events or memory is out. */
MUST_CHECK int jobs_add_event(struct job *job, const char *host, const char *kind, int64_t ts_us, const char *source,
		   const char *detail, size_t max);
/* Adds a batch's records to the job's window (names already mapped to job ids) and lets
 * L1 look at the iterations that completed. While a diagnosis reads the window, these (and
 * hosts, events and new names) are held and given to it when the diagnosis is back. */
void jobs_add_records(struct server *s, struct job *job, const struct record_iter *iters, size_t n_iters,
		      const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
		      size_t n_kernels);
/* Submits the due diagnoses (after batches, and from the periodic tick). */
void jobs_diagnose_due(struct server *s, struct job *job);
/* Once a second: ends the jobs whose agents all left, the last saying Goodbye (their open
 * incidents resolved as ended), forgets the jobs without agents for job_retire_s (resolving
 * their open incidents the same way), and resolves incidents a previous culpritd left open
 * whose jobs have not come back within job_retire_s of started_us. */
void jobs_retire(struct server *s, int64_t wall_now_us, int64_t started_us);
/* A batch came in on the connection serving ranks (their agent is sending). */
void jobs_heard(struct job *job, const uint32_t *ranks, size_t n, int64_t wall_now_us);
/* The periodic hang check: opens a hang incident when ranks are overdue by several baseline
 * iterations while agents are still connected, and there is evidence they stopped: their
 * connections have delivered nothing for HANG_CONFIRM_S and the job's other ranks wait
 * (its median rank has not moved for as long). Resolves it when every rank reports again. */
void jobs_check_hang(struct server *s, struct job *job, int64_t wall_now_us);
/* Takes the finished diagnoses: latest reports, incidents. Runs on the loop. */
void jobs_diagnosis_results(struct server *s);
/* Start-up (before the loop runs): reads the incidents a previous culpritd left open; each
 * continues when its job's first agent says Hello (same key, its L1 window resumed from the
 * stored report's baseline), and resolves when the fault ends. 0, or -1 (logged). */
MUST_CHECK int jobs_load_incidents(struct server *s);
void jobs_free_all(struct server *s);
/* Many instances (cluster.c): the job's lease is another's (forgotten by the next
 * jobs_retire, its incident not resolved); the job's lease was taken by this instance: what
 * was in memory of it goes, the open incidents l carries continue when the job is made, with
 * the records of their window read back (l->window is taken). */
struct storage_lease;
void jobs_lost(struct server *s, const char *name);
void jobs_taken_over(struct server *s, const char *name, struct storage_lease *l);

#endif
