/* fanout.h: the records of one job, streamed as agents: one agent per node (host) by
 * default, or one per rank. Used by `culprit replay` and `culprit sim --server`.
 *
 * Agents are created lazily, on the first record of one of their ranks, so that host
 * assignments made before (fanout_set_host) decide which ranks an agent serves. A node
 * agent's id is its host name; a rank agent's is "HOST/rank-N". All agents share a few
 * network threads. Appends block while an agent's buffer is full (AGENT_WAIT_FOREVER):
 * nothing is dropped, the producer is slowed to the server's pace. Single-threaded: one
 * producer calls everything. */
#ifndef CULPRIT_FANOUT_H
#define CULPRIT_FANOUT_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "record.h"
#include "attrs.h"

struct fanout_config {
	const char *server;          /* HOST:PORT */
	const char *token;           /* NULL: none */
	bool tls;                    /* TLS to the server (agent_config.tls) */
	const char *tls_ca;          /* CA file (implies tls); NULL: the system's. Must outlive the fanout */
	bool per_rank;               /* one agent per rank instead of per node */
	uint32_t loops;              /* network threads (0: one per 512 expected agents, 2 to 32) */
	uint32_t flush_interval_ms;  /* 0: 200 */
	uint32_t max_batch_records;  /* 0: 4096 */
	size_t max_unacked_bytes;    /* per agent; 0: 4 MiB */
	const char *progress_prefix; /* fanout_close prints progress once a second with it (NULL: not) */
	agent_log_fn log;            /* NULL: warnings on stderr, at most one line per second */
	void *log_arg;
};

struct fanout_job {
	const char *job;
	struct agent_topology topo;
};

struct jsonl_job;
/* The job of an interchange file's job line (pointing into it). */
struct fanout_job fanout_job_of(const struct jsonl_job *j);

struct fanout_stats {
	uint64_t agents;
	uint64_t connected;
	uint64_t records; /* appended */
	uint64_t acked_batches, sealed_batches, rejected_batches, rejected_records, dropped_records;
	uint64_t resent_batches; /* sent more than once */
	uint64_t connects;
	uint64_t disconnects;
	uint64_t unacked_bytes, unacked_batches; /* held by the agents, not yet acknowledged */
	char refusal[512];                       /* fanout_close: why the server refused the agents ("" if not) */
};

struct fanout;

/* NULL with a message in err on a bad job or configuration. */
struct fanout *fanout_new(const struct fanout_config *cfg, const struct fanout_job *job, char *err, size_t err_size);
/* Assigns a rank to a host (default "node-<rank / gpus_per_node>"). -1 with *why when the
 * rank is out of range or its agent already exists with another host. */
MUST_CHECK int fanout_set_host(struct fanout *f, uint32_t rank, const char *host, const char **why);
/* Records of one (rank, iteration) are held until a record of another one arrives (or
 * fanout_kick / fanout_close) and then appended together with agent_add_iteration, so that
 * the server sees phases with their iteration. 0, or -1 with *why (rank out of range, agent
 * could not be created, or an invalid record in the group just sent: a record's error is
 * reported by the call after it). */
MUST_CHECK int fanout_iter(struct fanout *f, const struct record_iter *r, const char **why);
MUST_CHECK int fanout_phase(struct fanout *f, const struct record_phase *r, const char *name, const char **why);
/* A kernel; durs (may be NULL) are individual durations: when given, count and the summary
 * fields are computed from them. */
MUST_CHECK int fanout_kernel(struct fanout *f, const struct record_kernel *r, const char *name, const int64_t *durs, size_t ndurs,
		  const char **why);
/* One rank's iteration with its phases and kernels, in one batch (agent_add_iteration).
 * pnames[i] / knames[i] name phase i / kernel i; kdurs/kndurs (may be NULL) as for
 * fanout_kernel. */
MUST_CHECK int fanout_rank_iter(struct fanout *f, const struct record_iter *it, const struct record_phase *ph,
		     const char *const *pnames, size_t nph, const struct record_kernel *k, const char *const *knames,
		     const int64_t *const *kdurs, const size_t *kndurs, size_t nk, const char **why);
/* Calls cb with the latest Command of every agent that has one (client/sim_capture.c). */
void fanout_each_command(struct fanout *f, void (*cb)(void *arg, const struct agent_command *cmd), void *arg);
/* Raw kernels of one rank (an on-demand capture), names[i] naming r[i]. 0 or -1 with *why. */
MUST_CHECK int fanout_raw_kernels(struct fanout *f, const struct record_raw_kernel *r, const char *const *names, size_t n,
		       const char **why);
/* Seals every agent's batch (does not wait). */
void fanout_kick(struct fanout *f);
void fanout_get_stats(struct fanout *f, struct fanout_stats *st);
const char *fanout_job_name(const struct fanout *f);
/* One progress line on stderr: "PREFIX: N records in S s (R/s), A agents (C connected), ..." */
void fanout_print_progress(struct fanout *f, const char *prefix, double secs);
/* Flushes every agent (timeout_ms for all together; < 0: no limit), closes them, frees.
 * Final counters in *st (may be NULL). 0 when everything was acknowledged, -1 otherwise.
 * Agents the server refuses before accepting any Hello (closed at accept 3 times in a row:
 * a connection limit; or a refused Hello) give up at once: the appends fail with a message
 * saying so, and fanout_close stops waiting (st->refusal says why). */
MUST_CHECK int fanout_close(struct fanout *f, int timeout_ms, struct fanout_stats *st);
/* fanout_close on a path that has failed already: what was not acknowledged is not told. */
void fanout_abandon(struct fanout *f, int timeout_ms);

#endif
