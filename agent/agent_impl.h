/* agent_impl.h: what agent.c (records, batches, the queue, life cycle) and agent_loop.c
 * (connections and the network thread) share inside the agent library. Not installed, not
 * for users: see agent.h.
 *
 * Threads: appenders (any number) and one network thread (struct agent_loop, possibly
 * shared by many agents). Per agent, a.mu guards the batch being built, the queue of sealed
 * batches and the counters; the connection (struct agent_conn) belongs to the network thread
 * alone. Sealed batches are freed only by the network thread (on Ack or Reject) or by
 * agent_close after the agent left its loop, so the network thread may write a batch's bytes
 * without holding the lock. Lock order: loop.mu, then a.mu. */
#ifndef CULPRIT_AGENT_IMPL_H
#define CULPRIT_AGENT_IMPL_H

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "frame.h"
#include "attrs.h"

#define BATCH_SOFT_BYTES (1u << 20) /* seal when a batch's estimate reaches this */

enum conn_state {
	CONN_IDLE,       /* no socket; (re)connect at retry_at */
	CONN_CONNECTING, /* non-blocking connect in progress */
	CONN_TLS,        /* TLS handshake in progress (agent_tls.c) */
	CONN_HELLO,      /* Hello sent, waiting for HelloAck */
	CONN_STREAMING,  /* HelloAck accepted: batches flow */
	CONN_REFUSED,    /* gave up: refused before any accepted Hello (give_up_refused) */
};

struct batch {
	uint64_t seq;
	uint8_t *base; /* the Batch's fields after seq (packed once, at seal) */
	size_t len;    /* frame bytes without name definitions */
	size_t body_len;
	uint32_t n_records;
	uint32_t *ids; /* the agent name ids of its dictionary, defined on a connection at send */
	size_t n_ids;
	struct batch *next;
};

/* The batch being built: columns that protobuf-c packs directly. */
struct building {
	size_t iter_cap, ph_cap, k_cap, n_iter, n_phase, n_kernel;
	uint32_t *iter_rank, *iter_iter;
	int64_t *iter_start, *iter_dur;
	uint32_t *ph_rank, *ph_iter, *ph_name, *ph_kind, *ph_group;
	int64_t *ph_start, *ph_dur;
	uint32_t *k_rank, *k_iter, *k_name, *k_kind, *k_count;
	int64_t *k_sum, *k_min, *k_max, *k_p50, *k_p99;
	uint32_t *k_sketch_len;
	uint8_t *sketch; /* bytes of this batch's sketches */
	size_t sketch_len, sketch_cap;
	bool any_sketch;
	/* the agent name ids the batch uses (their definitions go with it on a connection
	 * that has not had them) */
	uint32_t *used_epoch, epoch; /* per name id: the batch (epoch) that last used it */
	size_t used_cap;
	uint32_t *name_ids;
	size_t n_names, names_cap;
	size_t est_bytes;
	long long started_ms;
	Culprit__V1__RawKernel *raw; /* raw kernels of a capture (agent_add_raw_kernels) */
	size_t n_raw, raw_cap;
};

struct ssl_st;
struct ssl_ctx_st;

#define AGENT_HOST_MAX 256
#define AGENT_MAX_REDIRECTS 4 /* redirects in a row followed at once; then after the backoff */

struct agent_conn {
	enum conn_state state;
	int fd;
	struct ssl_st *ssl;    /* NULL: plain TCP */
	short tls_want;        /* poll events TLS waits for before it can go on */
	int pidx;              /* index in the loop's pollfd array, -1 none */
	long long deadline_ms; /* connect or hello timeout */
	long long retry_at_ms; /* CONN_IDLE: when to try again */
	long long last_send_ms;
	uint32_t attempts; /* failed attempts since the last accepted Hello */
	uint32_t refusals; /* connections in a row the server ended before a HelloAck */
	unsigned int rnd;
	bool complaining; /* a failure was logged at warning; log the recovery */
	size_t addr_next; /* rotate through resolved addresses */
	uint8_t *ctrl;    /* a control frame being written (Hello, Heartbeat, Goodbye) */
	size_t ctrl_len, ctrl_off;
	struct batch *cur; /* batch being written, NULL none */
	size_t cur_off;    /* in hdr, then the batch's body, then defs */
	uint8_t hdr[32];   /* cur's frame header, with defs in its lengths */
	size_t hdr_len;
	uint8_t *defs; /* NameDefs cur carries: its names this connection lacks */
	size_t defs_len, defs_cap;
	uint32_t *known; /* per agent name id: the connection (epoch) that defined it */
	size_t known_cap;
	uint32_t epoch;          /* this connection's number */
	struct batch *last_sent; /* NULL: the next to send is the queue's head */
	uint8_t *rbuf;
	size_t rlen, rcap;
	uint32_t max_frame; /* the server's, from HelloAck */
	/* where connections go: the configured server, or the owner of the job it redirected to
	 * (many culpritd instances; kept until a connection there fails) */
	char host[AGENT_HOST_MAX], port[16];
	bool redirected;
	uint32_t redirects; /* redirects in a row without an accepted Hello */
};

struct agent {
	/* configuration (immutable after agent_new) */
	char *server_host, *server_port, *job, *agent_id, *host, *token, *order, *device;
	struct ssl_ctx_st *tls; /* NULL: plain TCP; shared with other agents (agent_tls.c) */
	struct agent_topology topo;
	uint32_t *ranks; /* sorted */
	size_t n_ranks;
	uint32_t flush_ms, max_records, backoff_min, backoff_max, heartbeat_ms, give_up_refused;
	size_t max_unacked;
	int append_timeout;
	agent_log_fn log;
	void *log_arg;
	struct agent_loop *loop;
	bool own_loop;

	pthread_mutex_t mu;
	pthread_cond_t cv; /* space freed, batches done */
	/* names (append-only; strings never move) */
	char **name_str;
	size_t n_names, names_cap;
	int32_t *name_hash; /* open addressing, -1 empty */
	size_t hash_cap;
	struct building b;
	/* sealed, unacknowledged batches in sequence order */
	struct batch *head, *tail;
	size_t q_bytes, q_batches;
	uint64_t next_seq;
	uint64_t sealed_total, done_total; /* batches; done = acked or rejected */
	bool ever_accepted;
	uint64_t max_sent_seq; /* highest sequence written whole (resend accounting) */
	size_t batch_bytes;    /* seal at this estimate: 1 MiB, less when the server's
				     * max_frame (HelloAck) is smaller */
	struct agent_stats st;
	bool have_cmd;
	struct agent_command cmd;
	bool closing, detached;

	struct agent_conn c;     /* network thread only */
	struct agent *loop_next; /* in the loop's list */
};

struct agent_loop {
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;    /* an agent was detached */
	struct agent *agents; /* attached */
	size_t n_agents;
	bool stop;
	int wake_rd, wake_wr;
	atomic_bool wake_pending;
	struct pollfd *pfd;
	size_t pfd_cap;
};

/* agent.c */
void agent_log(struct agent *a, enum agent_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* a.mu held: */
size_t agent_building_records(const struct agent *a);
MUST_CHECK int agent_seal(struct agent *a);
/* Before bt goes out on the connection (a.mu held): its frame header (c.hdr) and the name
 * definitions this connection has not had yet (c.defs), which it then counts as had.
 * 0, -1 out of memory. */
MUST_CHECK int agent_batch_frame(struct agent *a, struct batch *bt);
void agent_queue_ack(struct agent *a, uint64_t durable);
void agent_queue_reject(struct agent *a, uint64_t seq, const char *reason);
void agent_rebase(struct agent *a, uint64_t durable);
/* "host:port", "host" (AGENT_DEFAULT_PORT), "[v6]:port" -> host, port; 0 or -1. */
MUST_CHECK int agent_parse_addr(const char *s, char *host, size_t host_size, char *port, size_t port_size);

/* agent_tls.c */
/* Takes a reference to the shared client context for ca (NULL: the system's CAs). */
MUST_CHECK int agent_tls_init(struct agent *a, const char *ca, char *err, size_t err_size);
void agent_tls_release(struct agent *a);
/* network thread: */
MUST_CHECK int agent_tls_start(struct agent *a, char *err, size_t err_size);     /* 0, or -1 with err */
MUST_CHECK int agent_tls_handshake(struct agent *a, char *err, size_t err_size); /* 1 done, 0 wait (c.tls_want), -1 err */
void agent_tls_close(struct agent_conn *c, bool notify);
/* recv(2) and send(2) through TLS when c->ssl: -1 with errno EAGAIN to wait for c->tls_want */
ssize_t agent_io_recv(struct agent_conn *c, void *buf, size_t n);
ssize_t agent_io_send(struct agent_conn *c, const void *buf, size_t n);

/* agent_loop.c */
void agent_loop_wake(struct agent_loop *l);
void agent_loop_attach(struct agent_loop *l, struct agent *a);
/* Asks the loop to drop a (Goodbye, close) and waits until it did. */
void agent_loop_detach(struct agent_loop *l, struct agent *a);

#endif
