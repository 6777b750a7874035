/* agent.h: the agent library a training process links to stream its timings to culpritd
 * (docs/protocol.md, "The agent library").
 *
 *   struct agent_config cfg = { .server = "culprit:7433", .job = "J", .topo = {...},
 *                               .host = "node-12", .ranks = ranks, .n_ranks = 8 };
 *   struct agent *a = agent_new(&cfg);
 *   int32_t mlp = agent_intern(a, "mlp");
 *   agent_add_phases(a, &(struct record_phase){ .rank = 96, .iter = 7, .name = mlp, ... }, 1);
 *   ...
 *   agent_close(a, 10000);      // flush (at most 10 s), say Goodbye, free
 *
 * Records are appended from any thread into the current batch; a network thread seals a
 * batch when it is full or flush_interval_ms old, numbers it (1, 2, 3 ... per job and
 * agent_id, for the life of the agent), sends it, and keeps it until the server's Ack says
 * PostgreSQL committed it. On a lost connection the thread reconnects with exponential
 * backoff and jitter and resends everything after the durable sequence the server reports
 * in HelloAck; a resend is a no-op on the server.
 *
 * Buffer-full policy: unacknowledged batches are held up to max_unacked_bytes (a soft bound,
 * exceeded by at most one batch). When it is reached, an append call blocks until acks free
 * space, for at most append_timeout_ms (default 1 s: a training step must not stall on a
 * dead server for long); then it returns AGENT_EFULL and the records of that call not yet
 * appended are dropped and counted (agent_stats.records_dropped). Replay and the simulator
 * pass AGENT_WAIT_FOREVER, which never drops.
 *
 * Many agents may share one network thread (struct agent_loop: the simulator runs 1,620 on
 * one); by default each agent has its own. */
#ifndef CULPRIT_AGENT_H
#define CULPRIT_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "record.h"

#define AGENT_DEFAULT_PORT 7433
#define AGENT_MAX_NAME 255         /* bytes of a phase or kernel name */
#define AGENT_MAX_NAMES (1u << 20) /* distinct names per agent */
#define AGENT_MAX_RANKS 65536      /* ranks one agent serves */

/* Return values (negative) of the calls below. */
enum agent_error {
	AGENT_OK = 0,
	AGENT_EFULL = -1,     /* the unacknowledged buffer stayed full for append_timeout_ms */
	AGENT_EINVAL = -2,    /* a bad argument (unknown name id, kind, group, rank not served) */
	AGENT_ETIMEDOUT = -3, /* agent_flush/agent_close: not everything acknowledged in time */
	AGENT_ENOMEM = -4,
	AGENT_EREFUSED = -5, /* the server refused this agent before ever accepting it and the agent
			       * gave up (agent_config.give_up_refused); agent_stats.refusal says why */
};

#define AGENT_WAIT_FOREVER (-1) /* append_timeout_ms: block until there is space */
#define AGENT_NO_WAIT (-2)      /* append_timeout_ms: fail at once when full */

enum agent_log_level { AGENT_LOG_DEBUG = 0, AGENT_LOG_INFO, AGENT_LOG_WARNING, AGENT_LOG_ERROR };

/* Called on any thread; msg has no trailing newline and starts with "agent AGENT_ID: ". */
typedef void (*agent_log_fn)(void *arg, enum agent_log_level level, const char *msg);

struct agent_topology {
	uint32_t world, tp, cp, pp, dp, ep, gpus_per_node;
	const char *order; /* NULL or "": Megatron's default "tp-cp-ep-dp-pp" */
	const char *device; /* what the ranks run on: "gpu", "cpu"; NULL or "": not said */
};

struct agent_config {
	const char *server; /* "host:port" or "host" (port 7433); "[v6addr]:port" */
	const char *job;
	struct agent_topology topo;
	const char *agent_id; /* stable across restarts; NULL: the host name */
	const char *host;
	const uint32_t *ranks; /* the ranks this agent serves (copied) */
	size_t n_ranks;
	const char *token;          /* sent in Hello; NULL: $CULPRIT_TOKEN, else none */
	bool tls;                   /* TLS to the server, its certificate verified */
	const char *tls_ca;         /* PEM file of the CA to verify it with (implies tls); NULL: the
				        * system's CAs */
	uint32_t flush_interval_ms; /* 0: 200; a non-empty batch is sealed at this age */
	uint32_t max_batch_records; /* 0: 8192; records of all kinds in one batch */
	size_t max_unacked_bytes;   /* 0: 64 MiB; see the buffer-full policy above */
	int append_timeout_ms;      /* 0: 1000; AGENT_WAIT_FOREVER; AGENT_NO_WAIT */
	uint32_t backoff_min_ms;    /* 0: 100; first reconnect delay */
	uint32_t backoff_max_ms;    /* 0: 10000; delays double up to this, with jitter */
	uint32_t heartbeat_ms;      /* 0: 10000; a Heartbeat after this long without sending */
	uint32_t give_up_refused;   /* 0: never give up (a training job keeps trying). N: before
				        * its first accepted Hello the agent gives up after N
				        * connections in a row that the server ended before answering
				        * the Hello (closed at accept: over a connection limit), or at
				        * once when the server refuses the Hello (a bad token): every
				        * call then returns AGENT_EREFUSED. For tools (sim, replay) */
	struct agent_loop *loop;    /* NULL: a network thread of this agent's own */
	agent_log_fn log;           /* NULL: warnings and errors on stderr */
	void *log_arg;
};

struct agent_stats {
	uint64_t records_appended;
	uint64_t records_dropped;  /* refused by a full buffer (AGENT_EFULL) */
	uint64_t records_rejected; /* in batches the server refused (Reject) */
	uint64_t batches_sealed;
	uint64_t batches_acked; /* committed (or found already committed) by the server */
	uint64_t batches_rejected;
	uint64_t batches_sent;   /* frames written, resends included */
	uint64_t batches_resent; /* of which written again after a reconnect */
	uint64_t connects;       /* accepted HelloAcks */
	uint64_t disconnects;
	uint64_t durable_seq; /* highest sequence the server has acknowledged */
	uint64_t next_seq;    /* the sequence the next sealed batch gets */
	size_t unacked_bytes;
	size_t unacked_batches;
	bool connected;    /* a HelloAck accepted on the current connection */
	bool refused;      /* gave up (AGENT_EREFUSED) */
	char refusal[200]; /* why, when refused */
};

/* The latest Command the server sent (culprit sim acts on captures: client/sim_capture.c). */
struct agent_command {
	uint64_t id;
	uint32_t kind; /* Culprit__V1__Command__Kind: 0 none, 1 capture */
	uint32_t iterations;
	uint32_t max_events;
	size_t n_ranks;
	uint32_t *ranks; /* owned by the caller after agent_command(): free() it */
};

/* A network thread serving many agents. Free only after every agent on it is closed. */
struct agent_loop *agent_loop_new(void);
void agent_loop_free(struct agent_loop *loop);

/* NULL on a bad configuration (logged) or out of memory. Starts connecting at once;
 * records may be appended before the server is reachable. */
struct agent *agent_new(const struct agent_config *cfg);

/* A name's id for record_phase.name / record_kernel.name: stable for the agent's life,
 * the same id for the same string. -1 when empty, too long or the table is full. */
int32_t agent_intern(struct agent *a, const char *name);

/* Append records (any thread). Ranks must be among those the agent serves, names interned,
 * kind and group valid, a phase's start_us RECORD_NO_START or >= 0. A kernel's sketch bytes
 * are copied. Returns 0, AGENT_EINVAL (nothing of the call appended), or AGENT_EFULL (the
 * records before the full buffer are kept, the rest dropped and counted). */
int agent_add_iters(struct agent *a, const struct record_iter *r, size_t n);
int agent_add_phases(struct agent *a, const struct record_phase *r, size_t n);
int agent_add_kernels(struct agent *a, const struct record_kernel *r, size_t n);

/* One rank's finished iteration: its iteration record and that iteration's phases and
 * kernels (same rank and iter, else AGENT_EINVAL), appended atomically: they travel in one
 * batch (which may then exceed max_batch_records), so the server always sees a phase with
 * its iteration. The call to prefer from a training loop. Returns as agent_add_*. */
int agent_add_iteration(struct agent *a, const struct record_iter *it, const struct record_phase *ph, size_t nph,
			const struct record_kernel *k, size_t nk);

/* Raw kernel executions of an on-demand capture (agent_command(): kind 1), sent in
 * Batch.raw_kernels; names interned as for kernels, start_us since the epoch. The caller
 * keeps to the capture's ranks, iterations and max_events. Returns as agent_add_*. */
int agent_add_raw_kernels(struct agent *a, const struct record_raw_kernel *r, size_t n);
/* Seals the current batch and waits until everything appended before the call is
 * acknowledged (or rejected). timeout_ms < 0: no limit. 0 or AGENT_ETIMEDOUT. */
int agent_flush(struct agent *a, int timeout_ms);

/* Flushes for at most timeout_ms (< 0: no limit), says Goodbye, frees the agent.
 * Returns 0 when everything appended was acknowledged, AGENT_ETIMEDOUT otherwise. */
int agent_close(struct agent *a, int timeout_ms);

void agent_get_stats(struct agent *a, struct agent_stats *out);
/* sizeof(struct agent_config) and sizeof(struct agent_stats) in this library: a binding that
 * declares the structs itself (python/culprit_agent) checks them before any call */
size_t agent_config_size(void);
size_t agent_stats_size(void);

/* The latest Command received; false when none yet. */
bool agent_command(struct agent *a, struct agent_command *out);

const char *agent_strerror(int err);

#endif
