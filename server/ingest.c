/* ingest.c: the agent listener and the per-connection state machine (see ingest.h).
 *
 * Frames are parsed as they arrive with three outcomes kept apart (need more, malformed,
 * ok). A malformed frame or a message out of place closes that connection only, with one
 * log line (peer and a hex sample) and a counter; so does a Batch whose seq is neither the
 * next one nor a resend (docs/protocol.md, "Sequences"). An invalid batch (absurd values
 * included: iterations far ahead, clocks before 2000, wrapped counts, undecodable sketches)
 * is refused with a Reject carrying the reason, and the connection stays. Accepted batches go to the job's window and
 * to the storage writer; Acks carry only what the writer reports committed. When the
 * writer's queue is full the connection keeps its batch and stops being read until the
 * writer makes room (backpressure to the agent through TCP). */
#include "clock.h"
#include "ingest.h"

#include <arpa/inet.h>
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "auth.h"
#include "cluster.h"
#include "batch.h"
#include "frame.h"
#include "jobs.h"
#include "relay.h"
#include "log.h"
#include "listen.h"
#include "server.h"
#include "sketch.h"
#include "text.h"
#include "tls.h"
#include "writer.h"
#include "cmp.h"

#define MAX_OUTPUT (1u << 20)       /* unsent bytes to one agent before we give up on it */
#define MAX_RESUME_GAP 65536        /* sequences a Hello's resume_seq may skip (batches rejected unrecorded) */
#define MAX_UNPACK_FACTOR 16        /* a frame may cost this many times its size to unpack ... */
#define MAX_UNPACK_FLOOR (1u << 20) /* ... or this many bytes */
#define RELAY_CONNS 64              /* many instances: connections beyond max_connections kept for relays */
#define RELAY_SLACK 1024            /* a Relay around a max_frame agent frame */
#define INPUT_TRIM_BYTES (16u << 20) /* input bytes freed before memory goes back to the system */
#define HELLO_NAME_MAX 127          /* bytes of a job, an agent id, a host */
#define HELLO_ORDER_MAX 31          /* bytes of a topology's rank order */
#define HELLO_TOKEN_MAX 4096        /* bytes of a token */
#define GOODBYE_REASON_MAX 1024     /* bytes of a Goodbye's reason */
#define HELLO_GPUS_PER_NODE_MAX 65536u

enum conn_state { CONN_HELLO, CONN_LEASE, CONN_REFUSING, CONN_ACTIVE, CONN_BLOCKED, CONN_CLOSING };

struct conn {
	uint64_t id;
	enum conn_state state;
	struct server *srv;
	struct bufferevent *bev;
	char peer[64];
	char addr[48];
	struct job *job;
	char agent[128];
	char host[128];
	uint32_t *ranks; /* sorted */
	size_t n_ranks;
	uint64_t acked_seq;          /* highest Ack sent */
	struct batch_name_ids names; /* the agent's name ids defined on this connection */
	size_t in_held;              /* bytes in the input buffer (counted in s->input_held) */
	bool paused;                 /* not read: over its share of max_input_buffer_bytes ("input budget") */
	bool goodbye;                /* the agent said Goodbye: it leaves in order */
	int64_t frame_since_ms;      /* clock_mono_ms() of its unfinished frame's first byte (in_held > 0) */
	struct storage_op *pending;  /* refused by a full writer queue, resubmitted on wake */
	frame_envelope *parked;      /* LEASE: the Hello, handled again when the job's lease is known */
	uint64_t lease_epoch;        /* of the job's lease when Hello was accepted (0: no cluster) */
	struct timespec blocked_since;
	struct conn *blocked_next;
	struct conn *closing_next;
	unsigned char token_digest[AUTH_DIGEST]; /* of the Hello's token: SIGHUP checks it again */
	/* relays (docs/operations.md, "Many instances"). On the owner: a relay connection (relay,
	 * relay_job) carries the agents of relay_job another instance relays; each is a virtual
	 * connection (bev NULL, parent_id the relay connection's id) whose frames come from and go
	 * to Relay messages. On the relaying instance: an agent relayed through up. */
	bool relay;
	char relay_job[128];
	struct strmap virt; /* relay: agent id -> struct conn */
	uint64_t parent_id; /* virtual: its relay connection */
	struct relay *up;   /* relayed: the relay to the job's owner */
	bool held;          /* not read: a virtual connection of its is blocked, or its relay is full */
};

/* ---- state ---- */

static uint64_t *state_gauge(struct conn *c, enum conn_state st)
{
	struct server *s = c->srv;

	if (c->parent_id)
		return st == CONN_CLOSING ? NULL : &s->m.agents_via_relay;
	if (c->relay && (st == CONN_ACTIVE || st == CONN_BLOCKED))
		return &s->m.relay_conns;
	switch (st) {
	case CONN_HELLO:
	case CONN_LEASE:
	case CONN_REFUSING: return &s->m.conns_hello;
	case CONN_ACTIVE: return &s->m.conns_active;
	case CONN_BLOCKED: return &s->m.conns_blocked;
	case CONN_CLOSING: return NULL;
	}
	return NULL;
}

/* Not read now: paused for the input budget, or a state that does not read. */
static bool conn_unread(const struct conn *c)
{
	return c->paused || c->held || (c->state != CONN_HELLO && c->state != CONN_ACTIVE);
}

/* Stops or resumes reading a connection for its relay (see held). */
static void conn_hold(struct conn *c, bool hold)
{
	bool unread = conn_unread(c);

	c->held = hold;
	if (conn_unread(c) != unread) {
		if (unread)
			c->srv->input_unread -= c->in_held;
		else
			c->srv->input_unread += c->in_held;
	}
	if (hold)
		bufferevent_disable(c->bev, EV_READ);
	else if (!conn_unread(c))
		bufferevent_enable(c->bev, EV_READ);
}

static void conn_set_state(struct conn *c, enum conn_state to)
{
	struct server *s = c->srv;
	enum conn_state from = c->state;
	uint64_t *g;
	bool unread = conn_unread(c);

	switch (from) {
	case CONN_HELLO:
		assert(to == CONN_LEASE || to == CONN_ACTIVE || to == CONN_REFUSING || to == CONN_CLOSING);
		break;
	case CONN_LEASE: assert(to == CONN_ACTIVE || to == CONN_REFUSING || to == CONN_CLOSING); break;
	case CONN_REFUSING: assert(to == CONN_CLOSING); break;
	case CONN_ACTIVE: assert(to == CONN_BLOCKED || to == CONN_REFUSING || to == CONN_CLOSING); break;
	case CONN_BLOCKED: assert(to == CONN_ACTIVE || to == CONN_CLOSING); break;
	case CONN_CLOSING: assert(!"a closing connection changes state no more"); break;
	}
	if ((g = state_gauge(c, from)))
		(*g)--;
	if ((g = state_gauge(c, to)))
		(*g)++;
	if ((from == CONN_HELLO || from == CONN_LEASE) && to == CONN_ACTIVE && c->job) {
		c->job->live_agents++;
		c->job->alone_since_us = 0;
		c->job->ended_us = 0; /* live (again) */
	}
	if ((from == CONN_ACTIVE || from == CONN_BLOCKED) && (to == CONN_REFUSING || to == CONN_CLOSING) && c->job &&
	    --c->job->live_agents == 0) {
		c->job->alone_since_us = clock_wall_us(); /* job_retire_s counts from here */
		c->job->goodbye = c->goodbye;             /* the job ended (jobs_retire) */
	}
	if (to == CONN_BLOCKED) {
		clock_gettime(CLOCK_MONOTONIC, &c->blocked_since);
		s->m.backpressure_events++;
	}
	if (from == CONN_BLOCKED) {
		struct timespec now;

		clock_gettime(CLOCK_MONOTONIC, &now);
		s->m.backpressure_us += (uint64_t)((now.tv_sec - c->blocked_since.tv_sec) * 1000000 +
						   (now.tv_nsec - c->blocked_since.tv_nsec) / 1000);
	}
	c->state = to;
	if (conn_unread(c) != unread) {
		if (unread)
			s->input_unread -= c->in_held;
		else
			s->input_unread += c->in_held;
	}
}

/* ---- input budget ----
 *
 * All connections together hold about max_input_buffer_bytes of frames received and not yet
 * processed at most. Over it, a connection that grows is no longer read when it holds more
 * than its share: the budget divided among the connections holding an unfinished frame. An
 * agent whose frames are within its share (honest batches: a few hundred KiB at most, against
 * 640 KiB each when 400 connections hold most of a 4 MiB frame) is read as before; those
 * holding the most wait, and are read again when the total is back under half the budget.
 * Growth past the budget comes only from connections within their share: the total stays
 * under twice the budget (plus one read each).
 *
 * An unfinished frame has frame_timeout_s from its first byte, paused or not (not while the
 * connection waits for culpritd: writer queue full, its relay held, its job's lease looked
 * up). A paused connection is not read, so neither its peer's close nor libevent's idle
 * timeout reaches it: ingest_tick looks at each once a second (the frame's deadline, and the
 * socket's TCP state: a peer that closed or reset). Memory that leaves the input buffers goes
 * back to the system (malloc_trim) once MiBs of it are free. */

static void conn_close(struct conn *c, enum metrics_close_reason why);

static void input_pause(struct conn *c)
{
	struct server *s = c->srv;

	if (conn_unread(c))
		return;
	if (!s->input_over)
		log_warning("agent connections hold %llu bytes of unfinished frames, over max_input_buffer_bytes "
			    "(%lld); not reading from those over their share (%llu bytes each)",
			    (unsigned long long)s->m.input_held, (long long)s->cfg.max_input_buffer_bytes,
			    (unsigned long long)(s->cfg.max_input_buffer_bytes /
						 (s->input_holders ? s->input_holders : 1)));
	s->input_over = true;
	s->input_unread += c->in_held;
	c->paused = true;
	bufferevent_disable(c->bev, EV_READ);
	s->m.input_paused++;
}

static void input_resume_all(struct server *s)
{
	s->input_over = false;
	log_info("agent connections hold %llu bytes of unfinished frames, under half of max_input_buffer_bytes "
		 "again; reading from all",
		 (unsigned long long)s->m.input_held);
	for (size_t i = 0; i < s->n_slots; i++) {
		struct conn *c = s->slots[i];

		if (!c || !c->paused)
			continue;
		c->paused = false;
		if (!conn_unread(c)) {
			s->input_unread -= c->in_held;
			bufferevent_enable(c->bev, EV_READ);
		}
	}
}

static void input_maybe_resume(struct server *s)
{
	if (s->input_over && s->m.input_held <= (uint64_t)s->cfg.max_input_buffer_bytes / 2)
		input_resume_all(s);
}

/* Keeps the totals as a connection's input buffer grows and shrinks, starts the deadline of
 * an unfinished frame, and applies the budget. A buffer read whole is parsed at once (its
 * read watermark is a whole frame): what stays is a frame's beginning. */
static void input_cb(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	struct server *s = c->srv;
	uint64_t budget = (uint64_t)s->cfg.max_input_buffer_bytes;
	bool unread = conn_unread(c);
	size_t before = c->in_held;

	(void)buf;
	s->m.bytes_in += info->n_added;
	c->in_held += info->n_added;
	c->in_held -= info->n_deleted;
	s->m.input_held += info->n_added;
	s->m.input_held -= info->n_deleted;
	s->input_freed += info->n_deleted;
	if (unread) {
		s->input_unread += info->n_added;
		s->input_unread -= info->n_deleted;
	}
	if (!before != !c->in_held)
		s->input_holders += c->in_held ? 1 : -1;
	/* a frame's first bytes, or what follows a frame just taken: the next frame's */
	if (c->in_held && (!before || info->n_deleted))
		c->frame_since_ms = clock_mono_ms();
	if (info->n_added && s->m.input_held > budget && c->in_held > budget / s->input_holders)
		input_pause(c);
	else if (info->n_deleted)
		input_maybe_resume(s);
}

/* ---- closing and reclaiming ---- */

static void unlink_blocked(struct server *s, struct conn *c)
{
	struct conn **pp = &s->blocked_head, *prev = NULL;

	for (; *pp; prev = *pp, pp = &(*pp)->blocked_next)
		if (*pp == c) {
			*pp = c->blocked_next;
			if (s->blocked_tail == c)
				s->blocked_tail = prev;
			c->blocked_next = NULL;
			return;
		}
}

static void per_addr_adjust(struct server *s, const char *addr, int delta)
{
	intptr_t n = (intptr_t)strmap_get(&s->per_addr, addr) + delta;

	if (n <= 0)
		strmap_del(&s->per_addr, addr);
	else if (strmap_put(&s->per_addr, addr, (void *)n) < 0)
		log_warning("out of memory counting connections of %s", addr);
}

static char *agent_key(const char *job, const char *agent, char *buf, size_t size)
{
	snprintf(buf, size, "%s\x1f%s", job, agent);
	return buf;
}

static struct conn *conn_by_id(struct server *s, uint64_t id);
static void relay_send(struct conn *relay, const char *agent, const uint8_t *frame, size_t len);

static void collect_virt(const char *agent, void *value, void *arg)
{
	struct conn ***at = arg;

	(void)agent;
	*(*at)++ = value;
}

/* A relay connection closes: so do its virtual connections. */
static void close_virtual(struct conn *relay, enum metrics_close_reason why)
{
	struct conn **all = malloc((relay->virt.len + 1) * sizeof(*all)), **at = all;

	if (!all)
		return; /* they close when their frames find no relay (conn_free) */
	strmap_each(&relay->virt, collect_virt, &at);
	strmap_free(&relay->virt);
	for (struct conn **v = all; v < at; v++)
		conn_close(*v, why);
	free(all);
}

/* The other end of a relayed agent hears that its connection ended. */
static void relay_gone(struct conn *c)
{
	struct conn *parent;

	if (c->up) {
		relay_agent_gone(c->up, c->agent, c->id);
		c->up = NULL;
	}
	if (c->parent_id && (parent = conn_by_id(c->srv, c->parent_id)) && strmap_get(&parent->virt, c->agent) == c) {
		strmap_del(&parent->virt, c->agent);
		relay_send(parent, c->agent, NULL, 0);
	}
}

static void conn_close(struct conn *c, enum metrics_close_reason why)
{
	struct server *s = c->srv;

	if (c->state == CONN_CLOSING)
		return;
	if (c->state == CONN_BLOCKED)
		unlink_blocked(s, c);
	conn_set_state(c, CONN_CLOSING);
	relay_gone(c);
	if (c->relay)
		close_virtual(c, why);
	s->m.closed[why]++;
	if (c->job) {
		char key[300];
		struct agent_progress *p = strmap_get(&s->agents, agent_key(c->job->name, c->agent, key, sizeof(key)));

		if (p && p->conn_id == c->id) {
			p->conn_id = 0;
			/* an agent that never sent a batch leaves nothing to remember (Hello floods
			 * with new agent ids must not grow the map) */
			if (p->durable_seq == 0 && p->last_seq == 0) {
				strmap_del(&s->agents, key);
				free(p);
			}
		}
	}
	if (c->bev)
		bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	c->closing_next = s->closing;
	s->closing = c;
	event_active(s->reclaim, 0, 0);
}

static void conn_free(struct conn *c)
{
	struct server *s = c->srv;
	uint32_t slot = (uint32_t)c->id;

	if (c->bev) {
		evbuffer_remove_cb(bufferevent_get_input(c->bev), input_cb, c);
		s->m.input_held -= c->in_held;
		s->input_unread -= c->in_held; /* closing: not read */
		s->input_freed += c->in_held;
		s->input_holders -= c->in_held > 0;
		input_maybe_resume(s);
		bufferevent_free(c->bev);
		per_addr_adjust(s, c->addr, -1);
	}
	strmap_free(&c->virt);
	s->slots[slot] = NULL;
	s->generations[slot]++;
	s->free_slots[s->n_free++] = slot;
	storage_op_free(c->pending);
	if (c->parked)
		frame_free(c->parked);
	free(c->ranks);
	batch_name_ids_free(&c->names);
	free(c);
}

static void reclaim_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;

	(void)fd;
	(void)what;
	while (s->closing) {
		struct conn *c = s->closing;

		s->closing = c->closing_next;
		conn_free(c);
	}
}

static void protocol_error(struct conn *c, const char *why, const uint8_t *sample, size_t len)
{
	static struct log_limit limit = {.what = "protocol violations"};
	char hex[80];

	if (log_limit_allow(&limit)) {
		frame_hex_sample(sample, len, hex, sizeof(hex));
		log_warning("agent %s: protocol violation: %s (first bytes: %s); closing the connection", c->peer, why,
			    hex);
	}
	c->srv->m.frames_malformed++;
	conn_close(c, CLOSE_PROTOCOL);
}

static struct conn *conn_by_id(struct server *s, uint64_t id)
{
	uint32_t slot = (uint32_t)id;

	if (slot >= s->n_slots || s->generations[slot] != (uint32_t)(id >> 32))
		return NULL;
	return s->slots[slot];
}

/* ---- sending ---- */

static int conn_send(struct conn *c, const frame_envelope *env);

/* A frame to the agent of a virtual connection, through its relay (len 0: it ended). */
static void relay_send(struct conn *relay, const char *agent, const uint8_t *frame, size_t len)
{
	frame_envelope env;
	Culprit__V1__Relay rel;

	if (relay->state == CONN_CLOSING)
		return;
	frame_relay(&env, &rel, agent, frame, len);
	conn_send(relay, &env);
}

static int virtual_send(struct conn *c, const frame_envelope *env)
{
	struct conn *parent = conn_by_id(c->srv, c->parent_id);
	size_t need = frame_packed_size(env);
	uint8_t *buf = malloc(need);

	if (!buf || !parent) {
		free(buf);
		conn_close(c, CLOSE_NOMEM);
		return -1;
	}
	frame_pack(env, buf);
	relay_send(parent, c->agent, buf + FRAME_HEADER, need - FRAME_HEADER);
	free(buf);
	return parent->state == CONN_CLOSING ? -1 : 0;
}

static int conn_send(struct conn *c, const frame_envelope *env)
{
	struct server *s = c->srv;
	size_t need = frame_packed_size(env);

	if (c->parent_id)
		return virtual_send(c, env);

	if (need > s->scratch_size) {
		uint8_t *p = realloc(s->scratch, need);

		if (!p) {
			conn_close(c, CLOSE_NOMEM);
			return -1;
		}
		s->scratch = p;
		s->scratch_size = need;
	}
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) > MAX_OUTPUT) {
		log_warning("agent %s: does not read what culpritd sends; closing the connection", c->peer);
		conn_close(c, CLOSE_PROTOCOL);
		return -1;
	}
	if (bufferevent_write(c->bev, s->scratch, frame_pack(env, s->scratch)) < 0) {
		conn_close(c, CLOSE_NOMEM);
		return -1;
	}
	return 0;
}

static void send_hello_ack(struct conn *c, int accepted, const char *reason, uint64_t durable, const char *redirect)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__HelloAck ack = CULPRIT__V1__HELLO_ACK__INIT;

	ack.accepted = accepted;
	ack.reason = (char *)(reason ? reason : "");
	ack.server_time_us = clock_wall_us();
	ack.durable_seq = durable;
	ack.max_frame = (uint32_t)c->srv->cfg.max_frame;
	ack.redirect = (char *)(redirect ? redirect : "");
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK;
	env.hello_ack = &ack;
	conn_send(c, &env);
}

/* Acks up to seq, unless already said on this connection (again is for a resend). */
static void send_ack(struct conn *c, uint64_t seq, int again)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Ack ack = CULPRIT__V1__ACK__INIT;

	if (seq <= c->acked_seq && !again)
		return;
	ack.durable_seq = seq;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	if (conn_send(c, &env) == 0) {
		c->acked_seq = seq;
		c->srv->m.acks_sent++;
	}
}

static void send_reject(struct conn *c, uint64_t seq, const char *reason)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Reject rej = CULPRIT__V1__REJECT__INIT;

	rej.seq = seq;
	rej.reason = (char *)reason;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_REJECT;
	env.reject = &rej;
	conn_send(c, &env);
}

/* Closes after what is queued for the agent (a refusal) has been written. */
static void close_after_write_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	conn_close(c, CLOSE_REFUSED);
}

static void refusing_event_cb(struct bufferevent *bev, short what, void *arg)
{
	(void)bev;
	(void)what;
	conn_close(arg, CLOSE_REFUSED);
}

/* Stops reading, lets what is queued for the agent (a refusal) drain, then closes. */
static void close_after_write(struct conn *c)
{
	struct timeval tv = {2, 0};

	if (c->state == CONN_CLOSING)
		return;
	if (c->parent_id) { /* what it was told is on the relay's connection already */
		conn_close(c, CLOSE_REFUSED);
		return;
	}
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_setcb(c->bev, NULL, close_after_write_cb, refusing_event_cb, c);
	bufferevent_set_timeouts(c->bev, NULL, &tv);
	conn_set_state(c, CONN_REFUSING);
}

/* Refuses Hello without a log line (the caller logs). */
static void send_refusal(struct conn *c, const char *reason)
{
	send_hello_ack(c, 0, reason, 0, NULL);
	close_after_write(c);
}

static void refuse_hello(struct conn *c, const char *reason)
{
	static struct log_limit limit = {.what = "refused hellos"};

	if (log_limit_allow(&limit))
		log_info("agent %s: hello refused: %s", c->peer, LOG_ESC(reason));
	send_refusal(c, reason);
}

/* ---- Hello ---- */

/* What a relay does to the connections of the agents it relays (relay.h): writes the owner's
 * frames to them, closes them, reads them again. */
static void relayed_deliver(struct server *s, uint64_t conn_id, const uint8_t *frame, size_t len);
static void relayed_close(struct server *s, uint64_t conn_id);
static void relayed_release(struct server *s, uint64_t conn_id);
static const struct relay_calls relayed = {relayed_deliver, relayed_close, relayed_release};

/* Many instances: the owner of h's job has no room for its agent: it is relayed there. */
static void relay_hello(struct conn *c, const Culprit__V1__Hello *h, const char *to)
{
	struct timeval idle = {(time_t)c->srv->cfg.idle_timeout_s, 0};

	snprintf(c->agent, sizeof(c->agent), "%s", h->agent_id);
	if (!(c->up = relay_agent(c->srv, &relayed, c->id, h, to))) {
		conn_close(c, CLOSE_NOMEM);
		return;
	}
	conn_set_state(c, CONN_ACTIVE);
	bufferevent_set_timeouts(c->bev, &idle, NULL);
	log_debug("agent %s: job \"%s\" agent \"%s\": relayed to its owner at %s", c->peer, LOG_ESC(h->job),
		  LOG_ESC(c->agent), to);
}

/* Many instances: 1 when this instance owns h's job (c->lease_epoch set); else the Hello
 * waits for the lease lookup (parked, not read meanwhile), is redirected to the owner or
 * refused for now. */
static bool job_here(struct conn *c, const Culprit__V1__Hello *h)
{
	struct server *s = c->srv;
	const char *to = NULL;

	switch (cluster_hello(s, h->job, c->id, &c->lease_epoch, &to)) {
	case CLUSTER_OWNED: return true;
	case CLUSTER_WAIT:
		if (c->parent_id)
			break; /* a relayed agent does not wait (its relay's frames go on): it retries */
		conn_set_state(c, CONN_LEASE);
		bufferevent_disable(c->bev, EV_READ);
		return false;
	case CLUSTER_RELAY:
		if (!h->relay && !c->parent_id && !s->tls) {
			relay_hello(c, h, to);
			return false;
		}
		/* relays do not chain; with TLS, agents are redirected (see relay.h) */
		/* fall through */
	case CLUSTER_REDIRECT: {
		static struct log_limit limit = {.what = "redirected hellos"};

		if (log_limit_allow(&limit))
			log_info("agent %s: job \"%s\" is owned by the instance at %s; redirected", c->peer,
				 LOG_ESC(h->job), to);
		s->m.hellos_redirected++;
		send_hello_ack(c, 0, "another culpritd owns this job", 0, to);
		close_after_write(c);
		return false;
	}
	case CLUSTER_BUSY: break;
	}
	refuse_hello(c, "the job's lease cannot be looked up now; retry");
	return false;
}

/* Another instance relays agents of h's job, which this one owns, over this connection. */
static void relay_conn_hello(struct conn *c, const Culprit__V1__Hello *h)
{
	struct server *s = c->srv;
	struct timeval idle = {(time_t)s->cfg.idle_timeout_s, 0};

	if (c->parent_id || !s->cluster || s->cfg.max_relayed_agents == 0) {
		refuse_hello(c, "this culpritd takes no relays");
		return;
	}
	if (!job_here(c, h))
		return;
	c->relay = true;
	snprintf(c->relay_job, sizeof(c->relay_job), "%s", h->job);
	conn_set_state(c, CONN_ACTIVE);
	bufferevent_set_timeouts(c->bev, &idle, NULL);
	log_info("agent %s: relays agents of job \"%s\"", c->peer, LOG_ESC(h->job));
	send_hello_ack(c, 1, NULL, 0, NULL);
}

/* Every string of a Hello is text (common/text.h) within its bounds: 0, else 1 with the
 * reason the agent is told in err (the field, what is wrong, the rule). */
static int hello_text_bad(const Culprit__V1__Hello *h, char *err, size_t err_size)
{
	const struct {
		const char *name, *value;
		size_t min, max;
	} f[] = {
		{"job", h->job, 1, HELLO_NAME_MAX},
		{"agent_id", h->agent_id, h->relay ? 0 : 1, HELLO_NAME_MAX}, /* a relay's Hello has none */
		{"host", h->host, 0, HELLO_NAME_MAX},
		{"token", h->token, 0, HELLO_TOKEN_MAX},
		{"topology.order", h->topology ? h->topology->order : NULL, 0, HELLO_ORDER_MAX},
	};

	for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
		const char *why = text_check_str(f[i].value, f[i].min, f[i].max);

		if (why) {
			snprintf(err, err_size,
				 "hello field %s %s (job and agent_id: 1 to %d bytes, host up to %d, topology.order up "
				 "to "
				 "%d, token up to %d; UTF-8 without control characters)",
				 f[i].name, why, HELLO_NAME_MAX, HELLO_NAME_MAX, HELLO_ORDER_MAX, HELLO_TOKEN_MAX);
			return 1;
		}
	}
	return 0;
}

/* The Hello's form: a protocol version this server speaks, its strings text within bounds. */
static bool hello_valid(struct conn *c, const Culprit__V1__Hello *h)
{
	char err[256];

	if (h->protocol_version != FRAME_PROTOCOL_VERSION) {
		snprintf(err, sizeof(err), "unsupported protocol version %u (this server speaks %u)",
			 h->protocol_version, FRAME_PROTOCOL_VERSION);
		refuse_hello(c, err);
		return false;
	}
	if (hello_text_bad(h, err, sizeof(err))) {
		refuse_hello(c, err);
		return false;
	}
	return true;
}

/* Whether this agent may be heard at all: its relay's agent id, room among the connections,
 * its address under the failed-token limit, its token. */
static bool hello_admit(struct conn *c, const Culprit__V1__Hello *h)
{
	struct server *s = c->srv;
	char err[256];
	int64_t wait_ms;

	if (c->parent_id && strcmp(h->agent_id, c->agent) != 0) {
		refuse_hello(c, "a relayed hello's agent_id is not its relay's");
		return false;
	}
	if (s->cluster && !c->parent_id &&
	    metrics_open_connections(&s->m) > (uint64_t)s->cfg.max_connections + s->m.relay_conns) {
		/* the connections kept for relays (RELAY_CONNS) take no agent */
		static struct log_limit limit = {.what = "hellos over max_connections"};

		s->m.over_limit[LIMIT_CONNECTIONS]++;
		if (log_limit_allow(&limit))
			log_warning(
				"agent %s: over max_connections (%lld) with the connections kept for relays; closing",
				c->peer, (long long)s->cfg.max_connections);
		conn_close(c, CLOSE_LIMIT);
		return false;
	}
	if (!c->parent_id && (wait_ms = auth_limit_wait_ms(&s->auth_limit, c->addr, s->cfg.auth_failures_per_addr,
							   clock_mono_ms())) > 0) {
		/* its address failed too many token checks: this one is not even made */
		s->m.auth_limited[0]++;
		snprintf(err, sizeof(err), "too many failed token checks from this address; retry in %lld s",
			 (long long)(wait_ms + 999) / 1000);
		refuse_hello(c, err);
		return false;
	}
	auth_token_digest(h->token, c->token_digest);
	if (!auth_agent_digest(s->auth, h->job, c->token_digest)) {
		/* the same answer for an unknown job and a bad token */
		auth_agent_refused(s, c->peer, h->job, h->agent_id); /* logs, rate-limited */
		if (!c->parent_id) /* a relay's address is another culpritd's */
			auth_limit_failed(&s->auth_limit, c->addr, s->cfg.auth_failures_per_addr, clock_mono_ms());
		send_refusal(c, AUTH_FAILED_REASON);
		return false;
	}
	return true;
}

/* The job's topology into topo and the agent's ranks into c->ranks (sorted), each within
 * the job and the settings' bounds. */
static bool hello_topology(struct conn *c, const Culprit__V1__Hello *h, struct job_topology *topo)
{
	struct server *s = c->srv;
	char err[256];

	if (!h->topology) {
		refuse_hello(c, "hello carries no topology");
		return false;
	}
	topo->world = h->topology->world;
	topo->tp = h->topology->tp;
	topo->cp = h->topology->cp;
	topo->pp = h->topology->pp;
	topo->dp = h->topology->dp;
	topo->ep = h->topology->ep;
	topo->gpus_per_node = h->topology->gpus_per_node;
	snprintf(topo->order, sizeof(topo->order), "%s", h->topology->order); /* fits: hello_text_bad */
	if (topo->gpus_per_node > HELLO_GPUS_PER_NODE_MAX) { /* the database's integer would wrap it */
		snprintf(err, sizeof(err), "topology.gpus_per_node %u is over %u", topo->gpus_per_node,
			 HELLO_GPUS_PER_NODE_MAX);
		refuse_hello(c, err);
		return false;
	}
	if (strcmp(h->topology->device, "gpu") == 0 || strcmp(h->topology->device, "cpu") == 0)
		strcpy(topo->device, h->topology->device);
	if (h->n_ranks == 0 || h->n_ranks > (size_t)s->cfg.max_ranks_per_agent) {
		snprintf(err, sizeof(err), "an agent serves 1 to %lld ranks, not %zu",
			 (long long)s->cfg.max_ranks_per_agent, h->n_ranks);
		refuse_hello(c, err);
		return false;
	}
	c->ranks = malloc(h->n_ranks * sizeof(uint32_t));
	if (!c->ranks) {
		conn_close(c, CLOSE_NOMEM);
		return false;
	}
	memcpy(c->ranks, h->ranks, h->n_ranks * sizeof(uint32_t));
	c->n_ranks = h->n_ranks;
	qsort(c->ranks, c->n_ranks, sizeof(uint32_t), cmp_u32);
	for (size_t i = 0; i < c->n_ranks; i++) {
		if (c->ranks[i] >= topo->world || (i && c->ranks[i] == c->ranks[i - 1])) {
			snprintf(err, sizeof(err), "rank %u is outside the job (world %u) or listed twice", c->ranks[i],
				 topo->world);
			refuse_hello(c, err);
			return false;
		}
	}
	if (topo->world > (uint64_t)s->cfg.max_world) {
		snprintf(err, sizeof(err), "world %u is over max_world (%lld)", topo->world,
			 (long long)s->cfg.max_world);
		refuse_hello(c, err);
		return false;
	}
	return true;
}

/* The job the agent joins, made on its first Hello: NULL when another instance owns it, the
 * lease is being looked up, or there is no room for it. */
static struct job *hello_job(struct conn *c, const Culprit__V1__Hello *h, const struct job_topology *topo)
{
	struct server *s = c->srv;
	char err[256];
	struct job *job;

	if (s->cluster && !job_here(c, h))
		return NULL;
	if (!strmap_get(&s->jobs, h->job) && s->jobs.len >= (size_t)s->cfg.max_jobs) {
		snprintf(err, sizeof(err), "culpritd keeps at most %lld jobs (max_jobs)", (long long)s->cfg.max_jobs);
		refuse_hello(c, err);
		return NULL;
	}
	job = jobs_get_or_create(s, h->job, topo, err, sizeof(err));
	if (!job)
		refuse_hello(c, err);
	return job;
}

/* The agent's progress (its durable sequence, kept across connections), this connection
 * made its only one; NULL when refused (a resume_seq too far ahead) or out of memory. */
static struct agent_progress *hello_progress(struct conn *c, const Culprit__V1__Hello *h)
{
	struct server *s = c->srv;
	struct agent_progress *p;
	char err[256], key[300];

	agent_key(c->job->name, c->agent, key, sizeof(key));
	p = strmap_get(&s->agents, key);
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p || strmap_put(&s->agents, key, p) < 0) {
			free(p);
			conn_close(c, CLOSE_NOMEM);
			return NULL;
		}
	}
	/* a resume_seq past what culpritd knows: batches were rejected just before it restarted
	 * (that is not recorded); a few are believed, more are a violation */
	if (p->last_seq < p->durable_seq)
		p->last_seq = p->durable_seq;
	if (h->resume_seq > p->last_seq + 1) {
		if (h->resume_seq - p->last_seq - 1 > MAX_RESUME_GAP) {
			snprintf(err, sizeof(err), "resume_seq %llu is more than %d past the last sequence %llu",
				 (unsigned long long)h->resume_seq, MAX_RESUME_GAP, (unsigned long long)p->last_seq);
			if (!p->conn_id && p->last_seq == 0) { /* made for this Hello */
				strmap_del(&s->agents, key);
				free(p);
			}
			refuse_hello(c, err);
			return NULL;
		}
		p->last_seq = h->resume_seq - 1;
	}
	if (p->conn_id) {
		struct conn *old = conn_by_id(s, p->conn_id);

		p->conn_id = c->id; /* first: closing the old one must not forget the agent */
		if (old && old != c) {
			log_info("agent %s: replaces the connection %s of agent \"%s\"", c->peer, old->peer,
				 LOG_ESC(c->agent));
			conn_close(old, CLOSE_REPLACED);
		}
	}
	p->conn_id = c->id;
	return p;
}

/* The ranks' hosts and coordinates to the database: worth a retry on the next Hello, not
 * worth blocking this one for. */
static void store_hosts(struct conn *c)
{
	struct server *s = c->srv;
	const struct job *job = c->job;
	const struct job_topology *t = &job->wire_topo;
	struct storage_op *op;
	char *host;

	if (!s->writer)
		return;
	op = storage_op_new(STORAGE_OP_JOB, 256 + c->n_ranks * (sizeof(struct storage_rank)) + strlen(c->host) + 1);
	if (!op)
		return;
	op->job = storage_op_strdup(op, job->name);
	op->topo = (struct storage_topology){.world = t->world,
					     .tp = t->tp,
					     .cp = t->cp,
					     .pp = t->pp,
					     .dp = t->dp,
					     .ep = t->ep,
					     .gpus_per_node = t->gpus_per_node};
	snprintf(op->topo.order, sizeof op->topo.order, "%s", t->order);
	op->ranks = storage_op_alloc(op, c->n_ranks * sizeof(struct storage_rank));
	host = storage_op_strdup(op, c->host);
	if (op->job && op->ranks && host) {
		for (size_t i = 0; i < c->n_ranks; i++) {
			struct topo_coords xy = topo_coords(&job->topo, c->ranks[i]);

			op->ranks[i] = (struct storage_rank){.rank = c->ranks[i],
							     .tp = xy.tp,
							     .cp = xy.cp,
							     .ep = xy.ep,
							     .dp = xy.dp,
							     .pp = xy.pp,
							     .host = host};
		}
		op->n_ranks = c->n_ranks;
		op->source = c->id;
	}
	if (!op->job || !op->ranks || !host || storage_writer_submit(s->writer, op) < 0) {
		log_warning("agent %s: hosts of job \"%s\" not stored now (writer queue full)", c->peer, job->name);
		storage_op_free(op);
	}
}

/* The connection joins its job: its agent's progress, its hosts stored, the HelloAck. */
static void hello_attach(struct conn *c, const Culprit__V1__Hello *h, struct job *job)
{
	struct timeval idle = {(time_t)c->srv->cfg.idle_timeout_s, 0};
	struct agent_progress *p;

	c->job = job;
	snprintf(c->agent, sizeof(c->agent), "%s", h->agent_id);
	snprintf(c->host, sizeof(c->host), "%s", h->host[0] ? h->host : c->addr);
	jobs_set_hosts(job, c->ranks, c->n_ranks, c->host);
	if (!(p = hello_progress(c, h)))
		return;
	c->acked_seq = p->durable_seq;
	store_hosts(c);
	conn_set_state(c, CONN_ACTIVE);
	if (c->bev)
		bufferevent_set_timeouts(c->bev, &idle, NULL);
	log_debug("agent %s: hello: job \"%s\" agent \"%s\" host \"%s\", %zu ranks, durable %llu", c->peer,
		  LOG_ESC(job->name), LOG_ESC(c->agent), LOG_ESC(c->host), c->n_ranks,
		  (unsigned long long)p->durable_seq);
	send_hello_ack(c, 1, NULL, p->durable_seq, NULL);
}

/* Hello: validate its form, admit the agent, check its topology, find or make its job,
 * attach the connection to it. Each step refuses or closes the connection itself. */
static void handle_hello(struct conn *c, const Culprit__V1__Hello *h)
{
	struct job_topology topo = {0};
	struct job *job;

	if (!hello_valid(c, h))
		return;
	if (h->relay) {
		relay_conn_hello(c, h);
		return;
	}
	if (hello_admit(c, h) && hello_topology(c, h, &topo) && (job = hello_job(c, h, &topo)))
		hello_attach(c, h, job);
}

/* ---- Batch ---- */

static int serves(const struct conn *c, uint32_t rank)
{
	return bsearch(&rank, c->ranks, c->n_ranks, sizeof(uint32_t), cmp_u32) != NULL;
}

static void block(struct conn *c)
{
	struct server *s = c->srv;

	conn_set_state(c, CONN_BLOCKED);
	if (c->bev)
		bufferevent_disable(c->bev, EV_READ);
	c->blocked_next = NULL;
	if (s->blocked_tail)
		s->blocked_tail->blocked_next = c;
	else
		s->blocked_head = c;
	s->blocked_tail = c;
}

/* The job holds max_names_per_job names and this batch brings more: the batch is refused with
 * the reason and the connection closed (its name ids would no longer be what the agent
 * thinks), counted, logged a few times a second at most. */
static void names_over_limit(struct conn *c, uint64_t seq, size_t n_records)
{
	static struct log_limit limit = {.what = "connections over max_names_per_job"};
	struct server *s = c->srv;
	char why[128];

	snprintf(why, sizeof(why), "the job has max_names_per_job (%lld) names", (long long)s->cfg.max_names_per_job);
	if (log_limit_allow(&limit))
		log_warning("agent %s: job \"%s\": %s; refusing its new names and closing the connection", c->peer,
			    c->job->name, why);
	s->m.names_over_limit++;
	s->m.batches_rejected++;
	s->m.records_rejected += n_records;
	send_reject(c, seq, why);
	close_after_write(c);
}

/* A refused batch's log line, a few a second at most (an agent can send them at will). */
static void log_batch_refused(const struct conn *c, uint64_t seq, const char *why)
{
	static struct log_limit limit = {.what = "refused batches"};

	if (log_limit_allow(&limit))
		log_info("agent %s: batch %llu refused: %s", c->peer, (unsigned long long)seq, LOG_ESC(why));
}

/* Refuses a batch with a Reject saying why; its sequence is consumed. */
static void refuse_batch(struct conn *c, uint64_t seq, size_t n_records, const char *why)
{
	struct agent_progress *p;
	char key[300];

	log_batch_refused(c, seq, why);
	c->srv->m.batches_rejected++;
	c->srv->m.records_rejected += n_records;
	p = strmap_get(&c->srv->agents, agent_key(c->job->name, c->agent, key, sizeof(key)));
	if (p && seq > p->last_seq)
		p->last_seq = seq;
	send_reject(c, seq, why);
}

static void handle_batch(struct conn *c, Culprit__V1__Batch *b)
{
	struct server *s = c->srv;
	char err[256], key[300];
	struct agent_progress *p = strmap_get(&s->agents, agent_key(c->job->name, c->agent, key, sizeof(key)));
	size_t n_records = b->n_iter_rank + b->n_phase_rank + b->n_kernel_name;
	struct batch_names bn = {0};
	struct storage_op *op;
	const struct store *st = engine_store(c->job->engine);
	struct batch_limits lim = {.now_us = clock_wall_us(),
				   .job_iter = store_any(st) ? (int64_t)store_max_iter(st) : -1,
				   .window = (uint32_t)s->cfg.window_iters};
	uint32_t max_names = (uint32_t)s->cfg.max_names_per_job;
	bool full = false;

	if (!p) {
		conn_close(c, CLOSE_NOMEM); /* the agent is remembered from its Hello on */
		return;
	}
	/* 1 .. last + 1: a resend (durable: acknowledged again; in flight: stored once) or the
	 * next batch. Anything else (0, 2^64 - 1, a jump ahead) would make the agent's own
	 * batches look like resends from then on: a protocol violation, nothing stored. */
	if (b->seq == 0 || b->seq > p->last_seq + 1 || b->seq > INT64_MAX) {
		snprintf(err, sizeof(err), "batch sequence %llu out of order (the next is %llu)",
			 (unsigned long long)b->seq, (unsigned long long)p->last_seq + 1);
		protocol_error(c, err, NULL, 0);
		return;
	}
	if (batch_take_name_defs(&c->names, c->job, max_names, b, &full, err, sizeof(err)) < 0 ||
	    (b->seq > p->durable_seq && batch_names_get(&c->names, c->job, b, &bn, err, sizeof(err)) < 0)) {
		if (full)
			names_over_limit(c, b->seq, n_records);
		else
			refuse_batch(c, b->seq, n_records, err);
		return;
	}
	if (b->seq <= p->durable_seq) {
		/* a resend of something already durable: a no-op, acknowledged again */
		s->m.batches_duplicate++;
		send_ack(c, p->durable_seq, 1);
		return;
	}
	if (batch_validate(c->ranks, c->n_ranks, b, bn.own_dict ? bn.n : SIZE_MAX, &lim, err, sizeof(err)) < 0) {
		refuse_batch(c, b->seq, n_records, err);
		batch_names_free(&bn);
		return;
	}
	op = batch_names_intern(&bn, c->job, max_names, &full) == 0 ? batch_to_op(b, &bn, c->job, c->agent, c->id)
								    : NULL;
	batch_names_free(&bn);
	if (op)
		op->lease_epoch = c->lease_epoch;
	if (!op) {
		if (full) {
			names_over_limit(c, b->seq, n_records);
			return;
		}
		log_warning("agent %s: out of memory for a batch of %zu records", c->peer, n_records);
		conn_close(c, CLOSE_NOMEM);
		return;
	}
	jobs_add_records(s, c->job, op->iters, op->n_iters, op->phases, op->n_phases, op->kernels, op->n_kernels);
	jobs_heard(c->job, c->ranks, c->n_ranks, clock_wall_us());
	if (b->seq > p->last_seq)
		p->last_seq = b->seq;
	s->m.batches_ok++;
	s->m.records_in[0] += b->n_iter_rank;
	s->m.records_in[1] += b->n_phase_rank;
	s->m.records_in[2] += b->n_kernel_name;
	s->m.records_in[3] += b->n_raw_kernels;

	if (!s->writer) {
		/* without storage, received is as durable as it gets */
		if (b->seq > p->durable_seq)
			p->durable_seq = b->seq;
		send_ack(c, b->seq, 0);
		storage_op_free(op);
		return;
	}
	if (storage_writer_submit(s->writer, op) < 0) {
		c->pending = op;
		block(c);
	}
}

/* ---- reading ---- */

/* A frame body unpacked, or NULL after a protocol error (a body that would cost more than
 * MAX_UNPACK_FACTOR times its size is not unpacked). */
static frame_envelope *unpack_checked(struct conn *c, const uint8_t *body, size_t len)
{
	size_t cost = frame_unpacked_size(body, len);
	frame_envelope *env;

	if (cost > MAX_UNPACK_FACTOR * len && cost > MAX_UNPACK_FLOOR) {
		protocol_error(c,
			       cost == SIZE_MAX ? "frame body is not a protocol message"
						: "frame would take more than 16 times its size to unpack",
			       body, len < 16 ? len : 16);
		return NULL;
	}
	if (!(env = frame_unpack(body, len))) {
		protocol_error(c, "frame body is not a protocol message", body, len < 16 ? len : 16);
		return NULL;
	}
	c->srv->m.frames_ok++;
	return env;
}

static void handle_envelope(struct conn *c, frame_envelope *env);

/* A new virtual connection for agent on relay; NULL (the agent is told its connection ended)
 * over max_relayed_agents. */
static struct conn *virtual_new(struct conn *relay, const char *agent)
{
	struct server *s = relay->srv;
	struct conn *c;
	uint32_t slot;

	const char *why = text_check_str(agent, 1, HELLO_NAME_MAX);

	if (why) {
		static struct log_limit limit = {.what = "relayed agents refused"};

		if (log_limit_allow(&limit))
			log_warning("agent %s: relayed agent id \"%s\" %s; ending it", relay->peer, LOG_ESC(agent), why);
		relay_send(relay, agent, NULL, 0);
		return NULL;
	}
	if (s->n_free == 0 || s->m.agents_via_relay >= (uint64_t)s->cfg.max_relayed_agents ||
	    !(c = calloc(1, sizeof(*c)))) {
		static struct log_limit limit = {.what = "relayed agents refused"};

		s->m.over_limit[LIMIT_CONNECTIONS]++;
		if (log_limit_allow(&limit))
			log_warning("agent %s: relayed agent \"%s\" over max_relayed_agents (%lld); closing it",
				    relay->peer, LOG_ESC(agent), (long long)s->cfg.max_relayed_agents);
		relay_send(relay, agent, NULL, 0);
		return NULL;
	}
	if (strmap_put(&relay->virt, agent, c) < 0) {
		free(c);
		relay_send(relay, agent, NULL, 0);
		return NULL;
	}
	slot = s->free_slots[--s->n_free];
	c->id = ((uint64_t)s->generations[slot] << 32) | slot;
	s->slots[slot] = c;
	c->srv = s;
	c->state = CONN_HELLO;
	c->parent_id = relay->id;
	s->m.agents_via_relay++;
	snprintf(c->agent, sizeof(c->agent), "%s", agent);
	snprintf(c->addr, sizeof(c->addr), "%s", relay->addr);
	snprintf(c->peer, sizeof(c->peer), "%.22s/%.40s", relay->peer, agent);
	return c;
}

/* A Relay on a relay connection: a frame of one of its agents, or the end of its connection. */
static void handle_relay(struct conn *c, const Culprit__V1__Relay *r)
{
	struct conn *v = strmap_get(&c->virt, r->agent_id);
	frame_envelope *env;

	if (r->frame.len == 0) {
		if (v) { /* out of the map first: its relay is not told what it said */
			strmap_del(&c->virt, r->agent_id);
			conn_close(v, CLOSE_PEER);
		}
		return;
	}
	if (!v && !(v = virtual_new(c, r->agent_id)))
		return;
	if (r->frame.len > (size_t)c->srv->cfg.max_frame) {
		protocol_error(v, "relayed frame over max_frame", r->frame.data, 16);
		return;
	}
	if (!(env = unpack_checked(v, r->frame.data, r->frame.len)))
		return;
	handle_envelope(v, env);
	frame_free(env);
	if (v->state == CONN_BLOCKED) /* the writer's queue is full: the relay is not read until it has room */
		conn_hold(c, true);
}

static void handle_envelope(struct conn *c, frame_envelope *env)
{
	switch (env->msg_case) {
	case CULPRIT__V1__ENVELOPE__MSG_RELAY:
		if (!c->relay) {
			protocol_error(c, "message an agent does not send", NULL, 0);
			return;
		}
		handle_relay(c, env->relay);
		return;
	case CULPRIT__V1__ENVELOPE__MSG_HELLO:
		if (c->state != CONN_HELLO) {
			protocol_error(c, "hello sent twice", NULL, 0);
			return;
		}
		handle_hello(c, env->hello);
		if (c->state == CONN_LEASE)
			c->parked = env; /* kept: handled again by ingest_hello_resume */
		return;
	case CULPRIT__V1__ENVELOPE__MSG_BATCH:
		if (c->state == CONN_HELLO || c->relay) {
			protocol_error(c, c->relay ? "batch outside a relay message" : "batch before hello", NULL, 0);
			return;
		}
		handle_batch(c, env->batch);
		return;
	case CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT:
		if (c->state == CONN_HELLO) {
			protocol_error(c, "heartbeat before hello", NULL, 0);
			return;
		}
		return;
	case CULPRIT__V1__ENVELOPE__MSG_GOODBYE:
		if (text_check_str(env->goodbye->reason, 0, GOODBYE_REASON_MAX)) {
			protocol_error(c, "goodbye reason is not up to 1024 bytes of UTF-8 without control characters",
				       NULL, 0);
			return;
		}
		log_debug("agent %s: goodbye: %s", c->peer, LOG_ESC(env->goodbye->reason));
		c->goodbye = true;
		conn_close(c, CLOSE_PEER);
		return;
	default: protocol_error(c, "message an agent does not send", NULL, 0); return;
	}
}

static void parse_frames(struct conn *c)
{
	struct evbuffer *in;

	if (!c->bev)
		return; /* virtual: its frames come with its relay's */
	in = bufferevent_get_input(c->bev);
	while ((c->state == CONN_HELLO || c->state == CONN_ACTIVE) && !c->held) { /* not REFUSING, BLOCKED, CLOSING */
		size_t len = evbuffer_get_length(in);
		uint32_t max = c->state == CONN_HELLO ? (uint32_t)c->srv->cfg.max_frame_before_hello
						      : (uint32_t)c->srv->cfg.max_frame + (c->relay ? RELAY_SLACK : 0);
		const char *why = NULL;
		uint32_t body = 0;
		uint8_t *data;
		frame_envelope *env;
		enum frame_status st;

		if (len == 0)
			return;
		data = evbuffer_pullup(in, len < FRAME_HEADER ? (ssize_t)len : FRAME_HEADER);
		st = frame_check(data, len, max, &body, &why);
		if (st == FRAME_MALFORMED) {
			protocol_error(c, why, data, len < 16 ? len : 16);
			return;
		}
		if (st == FRAME_NEED_MORE) {
			/* wake only when the whole frame can be there */
			if (body)
				bufferevent_setwatermark(c->bev, EV_READ, FRAME_HEADER + body, 0);
			return;
		}
		bufferevent_setwatermark(c->bev, EV_READ, 0, 0);
		data = evbuffer_pullup(in, (ssize_t)(FRAME_HEADER + body));
		if (!data) {
			conn_close(c, CLOSE_NOMEM);
			return;
		}
		if (c->up) { /* relayed as it is: the owner reads it */
			int full = relay_forward(c->up, c->agent, data + FRAME_HEADER, body);

			evbuffer_drain(in, FRAME_HEADER + body);
			if (full > 0 && c->state == CONN_ACTIVE)
				conn_hold(c, true);
			continue;
		}
		if (!(env = unpack_checked(c, data + FRAME_HEADER, body)))
			return;
		handle_envelope(c, env);
		if (c->parked != env)
			frame_free(env);
		evbuffer_drain(in, FRAME_HEADER + body);
	}
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct conn *c = arg;

	(void)bev;
	parse_frames(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;
	char why[256];

	(void)bev;
	if (what & BEV_EVENT_TIMEOUT) {
		if (c->state == CONN_HELLO) {
			static struct log_limit limit = {.what = "hello timeouts"};

			if (log_limit_allow(&limit))
				log_info("agent %s: no hello within %lld ms; closing the connection", c->peer,
					 (long long)c->srv->cfg.hello_timeout_ms);
			conn_close(c, CLOSE_HELLO_TIMEOUT);
		} else {
			log_info("agent %s: silent for %lld s; closing the connection", c->peer,
				 (long long)c->srv->cfg.idle_timeout_s);
			conn_close(c, CLOSE_IDLE);
		}
		return;
	}
	if ((what & BEV_EVENT_ERROR) && tls_failed(c->bev, why, sizeof(why))) {
		static struct log_limit limit = {.what = "failed TLS connections"};

		/* a plaintext client, or one that does not trust the certificate */
		if (log_limit_allow(&limit))
			log_info("agent %s: TLS failed: %s; closing the connection", c->peer, why);
		conn_close(c, CLOSE_TLS);
		return;
	}
	if (what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) {
		if (what & BEV_EVENT_ERROR)
			log_debug("agent %s: connection error: %s", c->peer, strerror(errno));
		conn_close(c, CLOSE_PEER);
	}
}

/* ---- accepting ---- */

/* Closes a connection over a limit at accept: counted always, logged a few times a second. */
static void over_limit(struct server *s, evutil_socket_t fd, enum metrics_limit which, const char *addr, int port,
		       const char *setting, int64_t value)
{
	static struct log_limit limit = {.what = "connections over a limit"};

	s->m.closed[CLOSE_LIMIT]++;
	s->m.over_limit[which]++;
	if (log_limit_allow(&limit))
		log_warning("agent %s:%d: over %s (%lld); closing", addr, port, setting, (long long)value);
	evutil_closesocket(fd);
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen, void *arg)
{
	struct server *s = arg;
	struct conn *c;
	char addr[48] = "?";
	int port = 0, one = 1;
	struct timeval hello = {(time_t)(s->cfg.hello_timeout_ms / 1000),
				(suseconds_t)(s->cfg.hello_timeout_ms % 1000) * 1000};
	uint32_t slot;

	(void)l;
	(void)salen;
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, addr, sizeof(addr));
		port = ntohs(in->sin_port);
	} else if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, addr, sizeof(addr));
		port = ntohs(in6->sin6_port);
	}
	s->m.accepted++;
	listen_pause_ok(&s->agent_pause);
	if (s->n_free == 0 ||
	    metrics_open_connections(&s->m) >= (uint64_t)s->cfg.max_connections + (s->cluster ? RELAY_CONNS : 0)) {
		over_limit(s, fd, LIMIT_CONNECTIONS, addr, port, "max_connections", s->cfg.max_connections);
		return;
	}
	if ((intptr_t)strmap_get(&s->per_addr, addr) >= s->cfg.max_connections_per_addr) {
		over_limit(s, fd, LIMIT_PER_ADDR, addr, port, "max_connections_per_addr",
			   s->cfg.max_connections_per_addr);
		return;
	}
	if (s->m.conns_hello >= (uint64_t)s->cfg.max_connections_before_hello) {
		over_limit(s, fd, LIMIT_BEFORE_HELLO, addr, port, "max_connections_before_hello",
			   s->cfg.max_connections_before_hello);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		s->m.closed[CLOSE_NOMEM]++;
		evutil_closesocket(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->bev = s->tls ? tls_agent_bufferevent(s, fd) : bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		s->m.closed[CLOSE_NOMEM]++;
		evutil_closesocket(fd);
		free(c);
		return;
	}
	slot = s->free_slots[--s->n_free];
	c->id = ((uint64_t)s->generations[slot] << 32) | slot;
	s->slots[slot] = c;
	c->srv = s;
	c->state = CONN_HELLO;
	s->m.conns_hello++;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	snprintf(c->peer, sizeof(c->peer), "%s:%d", addr, port);
	per_addr_adjust(s, addr, +1);
	bufferevent_setcb(c->bev, read_cb, NULL, event_cb, c);
	if (!evbuffer_add_cb(bufferevent_get_input(c->bev), input_cb, c)) {
		conn_close(c, CLOSE_NOMEM);
		return;
	}
	bufferevent_set_timeouts(c->bev, &hello, NULL);
	bufferevent_enable(c->bev, EV_READ | EV_WRITE);
}

int ingest_start(struct server *s)
{
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	size_t n = (size_t)s->cfg.max_connections;

	if (s->cluster) /* relays: connections from other instances, and the agents on them */
		n += RELAY_CONNS + (size_t)s->cfg.max_relayed_agents;
	if (evutil_parse_sockaddr_port(s->cfg.agent_listen, (struct sockaddr *)&ss, &sslen) < 0) {
		log_error("invalid agent_listen address \"%s\"", s->cfg.agent_listen);
		return -1;
	}
	s->slots = calloc(n, sizeof(*s->slots));
	s->generations = calloc(n, sizeof(*s->generations));
	s->free_slots = malloc(n * sizeof(*s->free_slots));
	if (!s->slots || !s->generations || !s->free_slots) {
		log_error("out of memory for %zu connection slots", n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		s->free_slots[i] = (uint32_t)(n - 1 - i);
		s->generations[i] = 1;
	}
	s->n_free = s->n_slots = n;
	s->reclaim = event_new(s->base, -1, 0, reclaim_cb, s);
	s->agent_listener = evconnlistener_new_bind(s->base, accept_cb, s,
						    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC,
						    1024, (struct sockaddr *)&ss, sslen);
	if (!s->agent_listener || !s->reclaim) {
		log_error("could not listen for agents on %s: %s", s->cfg.agent_listen, strerror(errno));
		return -1;
	}
	if (listen_pause_init(&s->agent_pause, s->agent_listener, "agent connection") < 0)
		return -1;
	log_info("listening for agents on %s", s->cfg.agent_listen);
	return 0;
}

void ingest_stop_accepting(struct server *s)
{
	/* closed, not only disabled: a new connection is refused at once (its agent retries
	 * against the next culpritd) instead of waiting in the kernel's backlog */
	if (s->agent_listener)
		evconnlistener_free(s->agent_listener);
	s->agent_listener = NULL;
	listen_pause_free(&s->agent_pause);
}

void ingest_close_all(struct server *s)
{
	relay_close_all(s);
	for (size_t i = 0; i < s->n_slots; i++)
		if (s->slots && s->slots[i] && s->slots[i]->state != CONN_CLOSING)
			conn_close(s->slots[i], CLOSE_SHUTDOWN);
	reclaim_cb(-1, 0, s);
	if (s->agent_listener)
		evconnlistener_free(s->agent_listener);
	s->agent_listener = NULL;
	listen_pause_free(&s->agent_pause);
	if (s->reclaim)
		event_free(s->reclaim);
	s->reclaim = NULL;
	free(s->slots);
	free(s->generations);
	free(s->free_slots);
	s->slots = NULL;
	s->n_slots = 0;
}

size_t ingest_send_command(struct server *s, const struct job *job, const Culprit__V1__Command *cmd,
			   void (*each)(void *arg, const char *agent, const char *host, const uint32_t *ranks,
					size_t n),
			   void *arg)
{
	uint32_t *mine = malloc((cmd->n_ranks + 1) * sizeof(uint32_t));
	size_t sent = 0;

	if (!mine)
		return 0;
	for (size_t slot = 0; slot < s->n_slots; slot++) {
		struct conn *c = s->slots[slot];
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
		Culprit__V1__Command part = *cmd;
		size_t n = 0;

		if (!c || c->job != job || (c->state != CONN_ACTIVE && c->state != CONN_BLOCKED))
			continue;
		for (size_t i = 0; i < cmd->n_ranks; i++)
			if (serves(c, cmd->ranks[i]))
				mine[n++] = cmd->ranks[i];
		if (n == 0)
			continue;
		part.n_ranks = n;
		part.ranks = mine;
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_COMMAND;
		env.command = &part;
		if (conn_send(c, &env) < 0)
			continue;
		sent++;
		if (each)
			each(arg, c->agent, c->host, mine, n);
	}
	free(mine);
	return sent;
}

size_t ingest_close_unauthorized(struct server *s)
{
	size_t n = 0;

	for (size_t i = 0; i < s->n_slots; i++) {
		struct conn *c = s->slots ? s->slots[i] : NULL;

		if (c && c->job && (c->state == CONN_ACTIVE || c->state == CONN_BLOCKED) &&
		    !auth_agent_digest(s->auth, c->job->name, c->token_digest)) {
			s->m.agent_auth_failures++;
			conn_close(c, CLOSE_REFUSED);
			n++;
		}
	}
	return n;
}

static void relayed_deliver(struct server *s, uint64_t conn_id, const uint8_t *frame, size_t len)
{
	struct conn *c = conn_by_id(s, conn_id);
	uint32_t be = htobe32((uint32_t)len);

	if (!c || c->state == CONN_CLOSING)
		return;
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) > MAX_OUTPUT) {
		log_warning("agent %s: does not read what culpritd sends; closing the connection", c->peer);
		conn_close(c, CLOSE_PROTOCOL);
		return;
	}
	if (bufferevent_write(c->bev, &be, sizeof(be)) < 0 || bufferevent_write(c->bev, frame, len) < 0)
		conn_close(c, CLOSE_NOMEM);
}

static void relayed_close(struct server *s, uint64_t conn_id)
{
	struct conn *c = conn_by_id(s, conn_id);

	if (!c)
		return;
	c->up = NULL; /* its relay has ended, or forgot it */
	/* what the owner said last (a refusal) reaches the agent first; with nothing to write the
	 * write callback would never come */
	if ((c->state == CONN_ACTIVE || c->state == CONN_HELLO) && evbuffer_get_length(bufferevent_get_output(c->bev)))
		close_after_write(c);
	else
		conn_close(c, CLOSE_REFUSED);
}

static void relayed_release(struct server *s, uint64_t conn_id)
{
	struct conn *c = conn_by_id(s, conn_id);

	if (!c || !c->held || c->state == CONN_CLOSING)
		return;
	conn_hold(c, false);
	parse_frames(c);
}

void ingest_writer_progress(struct server *s)
{
	struct storage_done done[256];
	size_t n;
	char key[300];

	while ((n = storage_writer_take_done(s->writer, done, 256)) > 0) {
		for (size_t i = 0; i < n; i++) {
			struct agent_progress *p;
			struct conn *c;

			if (done[i].agent[0] == '\0')
				continue; /* a job op */
			p = strmap_get(&s->agents, agent_key(done[i].job, done[i].agent, key, sizeof(key)));
			c = conn_by_id(s, done[i].source);
			if (done[i].failed == STORAGE_FENCED) {
				/* another instance owns the job: the agent resends there what was not acked */
				cluster_lost(s, done[i].job);
				if (c && c->state != CONN_CLOSING)
					conn_close(c, CLOSE_REFUSED);
				continue;
			}
			if (done[i].failed) {
				/* the database refused its content: the agent must not resend it */
				if (c && c->state != CONN_CLOSING)
					send_reject(c, done[i].seq, "the database refused this batch's content");
				continue;
			}
			if (p && done[i].seq > p->durable_seq)
				p->durable_seq = done[i].seq;
			if (p && p->durable_seq > p->last_seq)
				p->last_seq = p->durable_seq; /* p made again since that batch was taken */
			if (c && c->state != CONN_CLOSING && p)
				send_ack(c, p->durable_seq, 0);
		}
	}
	/* resume blocked connections in arrival order while the writer takes their batch */
	while (s->blocked_head) {
		struct conn *c = s->blocked_head;

		if (storage_writer_submit(s->writer, c->pending) < 0)
			break;
		c->pending = NULL;
		s->blocked_head = c->blocked_next;
		if (!s->blocked_head)
			s->blocked_tail = NULL;
		c->blocked_next = NULL;
		conn_set_state(c, CONN_ACTIVE);
		if (c->parent_id) { /* its relay is read again */
			if (!(c = conn_by_id(s, c->parent_id)) || c->state == CONN_CLOSING)
				continue;
			conn_hold(c, false);
		} else if (!c->paused) {
			bufferevent_enable(c->bev, EV_READ);
		}
		parse_frames(c); /* frames that arrived while blocked */
	}
}

/* A paused connection whose peer closed or reset (its FIN may wait behind unread bytes; a
 * reset or an accepted FIN shows in the socket's state). */
static bool peer_gone(const struct conn *c)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return getsockopt(bufferevent_getfd(c->bev), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	       ti.tcpi_state != TCP_ESTABLISHED;
}

void ingest_tick(struct server *s)
{
	int64_t now = clock_mono_ms(), limit_ms = s->cfg.frame_timeout_s * 1000;

	for (size_t i = 0; i < s->n_slots; i++) {
		struct conn *c = s->slots[i];

		if (!c || !c->bev || !c->in_held || c->state == CONN_CLOSING || c->state == CONN_REFUSING)
			continue;
		if (c->held || c->state == CONN_BLOCKED || c->state == CONN_LEASE) {
			c->frame_since_ms = now; /* waiting for culpritd: its deadline starts again after */
			continue;
		}
		if (now - c->frame_since_ms >= limit_ms) {
			static struct log_limit limit = {.what = "connections over frame_timeout_s"};

			if (log_limit_allow(&limit))
				log_info("agent %s: a frame unfinished for %lld s (%zu bytes of it%s; frame_timeout_s "
					 "%lld); closing the connection",
					 c->peer, (long long)(now - c->frame_since_ms) / 1000, c->in_held,
					 c->paused ? ", not read over max_input_buffer_bytes" : "",
					 (long long)s->cfg.frame_timeout_s);
			conn_close(c, CLOSE_FRAME_TIMEOUT);
		} else if (c->paused && peer_gone(c)) {
			conn_close(c, CLOSE_PEER);
		}
	}
	/* freed input buffers back to the system: malloc keeps its free pages otherwise (the
	 * bytes of 400 half-sent 4 MiB frames, in 4 KiB chains, stayed resident) */
	if (s->input_freed >= INPUT_TRIM_BYTES) {
		s->input_freed = 0;
		malloc_trim(0);
	}
}

void ingest_hello_resume(struct server *s, uint64_t conn_id)
{
	struct conn *c = conn_by_id(s, conn_id);
	frame_envelope *env;

	if (!c || c->state != CONN_LEASE)
		return;
	env = c->parked;
	c->parked = NULL;
	free(c->ranks); /* handle_hello takes them again */
	c->ranks = NULL;
	c->n_ranks = 0;
	handle_hello(c, env->hello);
	if (c->state == CONN_LEASE)
		c->parked = env; /* looked up again (the lease was lost meanwhile) */
	else
		frame_free(env);
	if (c->state == CONN_ACTIVE && c->bev) {
		if (!c->paused)
			bufferevent_enable(c->bev, EV_READ);
		parse_frames(c); /* what the agent sent after its Hello */
	}
}

void ingest_close_job(struct server *s, const char *job)
{
	for (size_t i = 0; i < s->n_slots; i++) {
		struct conn *c = s->slots[i];

		if (c && c->state != CONN_CLOSING &&
		    ((c->job && strcmp(c->job->name, job) == 0) || (c->relay && strcmp(c->relay_job, job) == 0)))
			conn_close(c, CLOSE_REFUSED);
	}
}

void ingest_set_progress(struct server *s, const char *job, const char *agent, uint64_t durable_seq)
{
	char key[300];
	struct agent_progress *p = strmap_get(&s->agents, agent_key(job, agent, key, sizeof(key)));

	if (!p) {
		if (!(p = calloc(1, sizeof(*p))) || strmap_put(&s->agents, key, p) < 0) {
			free(p); /* the agent is told durable 0 and resends: the writer skips what is stored */
			return;
		}
	}
	/* the database's word: what this instance took before, under an older lease, may not be there */
	p->durable_seq = p->last_seq = durable_seq;
}

struct progress_load {
	struct server *s;
	int failed;
};

static void progress_row(const char *job, const char *agent, uint64_t seq, void *arg)
{
	struct progress_load *pl = arg;
	char key[300];
	struct agent_progress *p = calloc(1, sizeof(*p));

	if (!p || strmap_put(&pl->s->agents, agent_key(job, agent, key, sizeof(key)), p) < 0) {
		free(p);
		pl->failed = 1;
		return;
	}
	p->durable_seq = p->last_seq = seq;
}

int ingest_load_progress(struct server *s)
{
	struct progress_load pl = {s, 0};
	char err[512] = "out of memory";

	if (!s->writer)
		return 0;

	if (storage_progress_load(s->db_dsn, progress_row, &pl, err, sizeof(err)) < 0 || pl.failed) {
		log_error("could not load the agents' durable sequences: %s", err);
		return -1;
	}
	log_info("loaded durable sequences of %zu agents", s->agents.len);
	return 0;
}
