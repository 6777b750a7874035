/* agent_loop.c: the agent library's network side: one connection per agent, an explicit
 * state machine (CONN_IDLE -> CONNECTING -> HELLO -> STREAMING, back to IDLE on any failure
 * with a backoff), and the network thread that drives many agents with poll(2). See
 * agent_impl.h for what is shared with agent.c and who locks what. */
#include "agent.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "agent_impl.h"
#include "frame.h"
#include "clock.h"

#define IN_FRAME_MAX (1u << 20) /* largest frame accepted from the server */
#define REDIRECT_PACE_MS 1000   /* longest backoff while redirected (conn_redirect) */
#define CONNECT_TIMEOUT_MS 10000
#define HELLO_TIMEOUT_MS 10000

void agent_loop_wake(struct agent_loop *l)
{
	bool expected = false;
	char c = 1;

	if (atomic_compare_exchange_strong(&l->wake_pending, &expected, true))
		if (write(l->wake_wr, &c, 1) < 0 && errno != EAGAIN)
			atomic_store(&l->wake_pending, false);
}

/* ---- the connection (network thread) ---- */

/* Before its first accepted Hello, an agent that gives up (give_up_refused) stops after
 * being refused: true when it did (the state is CONN_REFUSED). */
static bool conn_give_up(struct agent *a, const char *why)
{
	struct agent_conn *c = &a->c;

	if (!a->give_up_refused || a->ever_accepted || ++c->refusals < a->give_up_refused)
		return false;
	agent_log(a, AGENT_LOG_WARNING, "%s; giving up (refused %u times, never accepted)", why, c->refusals);
	pthread_mutex_lock(&a->mu);
	a->st.refused = true;
	snprintf(a->st.refusal, sizeof(a->st.refusal), "%s", why);
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	return true;
}

static void conn_close(struct agent *a, const char *why, bool failure)
{
	struct agent_conn *c = &a->c;
	bool before_ack = c->state == CONN_HELLO || c->state == CONN_TLS, refused;
	long long delay;

	agent_tls_close(c, false);
	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (c->state == CONN_STREAMING) {
		pthread_mutex_lock(&a->mu);
		a->st.connected = false;
		a->st.disconnects++;
		pthread_mutex_unlock(&a->mu);
	}
	/* an instance redirected to that fails (it is full, or just lost the job) is no refusal:
	 * the configured server, asked again, knows where the job is or relays it */
	refused = failure && before_ack && !c->redirected && conn_give_up(a, why);
	if (refused) {
		/* logged; no reconnect */
	} else if (failure) {
		if (!c->complaining) {
			agent_log(a, AGENT_LOG_WARNING, "%s; reconnecting", why);
			c->complaining = true;
		} else {
			agent_log(a, AGENT_LOG_DEBUG, "%s; reconnecting", why);
		}
	} else {
		agent_log(a, AGENT_LOG_INFO, "%s; reconnecting", why);
	}
	c->state = refused ? CONN_REFUSED : CONN_IDLE;
	if (failure) /* the configured server again (which knows where the job went) */
		c->redirected = false;
	/* the next connection has no names yet */
	if (++c->epoch == 0) {
		if (c->known)
			memset(c->known, 0, c->known_cap * sizeof(*c->known));
		c->epoch = 1;
	}
	free(c->ctrl);
	c->ctrl = NULL;
	c->ctrl_len = c->ctrl_off = 0;
	c->cur = NULL;
	c->cur_off = 0;
	c->last_sent = NULL;
	c->rlen = 0;
	/* exponential backoff with jitter: uniform in [d/2, d] */
	delay = (long long)a->backoff_min << (c->attempts < 20 ? c->attempts : 20);
	if (delay > a->backoff_max)
		delay = a->backoff_max;
	if (c->redirects && delay > REDIRECT_PACE_MS)
		delay = REDIRECT_PACE_MS; /* between the instances of a job that changes hands */
	delay = delay / 2 + rand_r(&c->rnd) % (delay / 2 + 1);
	if (c->attempts < 30)
		c->attempts++;
	c->retry_at_ms = clock_mono_ms() + delay;
}

/* HelloAck sent the agent to the job's owner: connects there, at once for a few redirects in
 * a row, then after the backoff, which stays under REDIRECT_PACE_MS while redirected (see
 * conn_close): an owner that died is taken over within its lease, and its agents must not
 * wait the full backoff to come back. */
static void conn_redirect(struct agent *a, const char *to)
{
	struct agent_conn *c = &a->c;
	char host[AGENT_HOST_MAX], port[16], why[AGENT_HOST_MAX + 64];
	bool paced = c->redirects >= AGENT_MAX_REDIRECTS;

	if (agent_parse_addr(to, host, sizeof(host), port, sizeof(port)) < 0) {
		snprintf(why, sizeof(why), "server redirected to an invalid address \"%.64s\"", to);
		conn_close(a, why, true);
		return;
	}
	snprintf(why, sizeof(why), "job owned by the culpritd at \"%s:%s\": redirected", host, port);
	if (c->redirects < UINT32_MAX)
		c->redirects++;
	conn_close(a, why, false); /* not a refusal: the backoff, never giving up */
	snprintf(c->host, sizeof(c->host), "%s", host);
	snprintf(c->port, sizeof(c->port), "%s", port);
	c->redirected = true;
	if (!paced) {
		c->retry_at_ms = clock_mono_ms();
		if (c->attempts)
			c->attempts--;
	}
}

static int conn_queue_ctrl(struct agent *a, const frame_envelope *env)
{
	struct agent_conn *c = &a->c;
	size_t n = frame_packed_size(env);
	uint8_t *p;

	if (c->ctrl) /* a control frame still pending: heartbeats can be skipped, others wait */
		return -1;
	if (!(p = malloc(n)))
		return -1;
	frame_pack(env, p);
	c->ctrl = p;
	c->ctrl_len = n;
	c->ctrl_off = 0;
	return 0;
}

static int conn_hello(struct agent *a)
{
	Culprit__V1__Topology topo = CULPRIT__V1__TOPOLOGY__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;

	topo.world = a->topo.world;
	topo.tp = a->topo.tp;
	topo.cp = a->topo.cp;
	topo.pp = a->topo.pp;
	topo.dp = a->topo.dp;
	topo.ep = a->topo.ep;
	topo.gpus_per_node = a->topo.gpus_per_node;
	topo.order = a->order;
	topo.device = a->device;
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = a->job;
	h.topology = &topo;
	h.agent_id = a->agent_id;
	h.host = a->host;
	h.n_ranks = a->n_ranks;
	h.ranks = a->ranks;
	h.token = a->token;
	pthread_mutex_lock(&a->mu);
	h.resume_seq = a->head ? a->head->seq : a->next_seq;
	pthread_mutex_unlock(&a->mu);
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	return conn_queue_ctrl(a, &env);
}

static void conn_start(struct agent *a)
{
	struct agent_conn *c = &a->c;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	size_t n = 0, pick;
	int rc, fd, one = 1;
	char why[512];

	if (!c->redirected) {
		snprintf(c->host, sizeof(c->host), "%s", a->server_host);
		snprintf(c->port, sizeof(c->port), "%s", a->server_port);
	}
	rc = getaddrinfo(c->host, c->port, &hints, &res);
	if (rc != 0) {
		snprintf(why, sizeof(why), "could not resolve \"%s\": %s", c->host, gai_strerror(rc));
		conn_close(a, why, true);
		return;
	}
	for (ai = res; ai; ai = ai->ai_next)
		n++;
	pick = c->addr_next++ % n;
	for (ai = res; pick--; ai = ai->ai_next)
		;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, sizeof(why), "could not create socket: %s", strerror(errno));
		freeaddrinfo(res);
		conn_close(a, why, true);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	{
		int idle = 30, intvl = 10, cnt = 3;

		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	c->fd = fd;
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (rc < 0 && errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "could not connect to \"%s:%s\": %s", c->host, c->port, strerror(errno));
		conn_close(a, why, true);
		return;
	}
	c->state = CONN_CONNECTING;
	c->deadline_ms = clock_mono_ms() + CONNECT_TIMEOUT_MS;
}

static void conn_say_hello(struct agent *a)
{
	struct agent_conn *c = &a->c;

	if (conn_hello(a) < 0) {
		conn_close(a, "out of memory for hello", true);
		return;
	}
	c->state = CONN_HELLO;
	c->deadline_ms = clock_mono_ms() + HELLO_TIMEOUT_MS;
}

/* Drives the TLS handshake; Hello once it is done. */
static void conn_handshake(struct agent *a)
{
	char why[512];
	int r = agent_tls_handshake(a, why, sizeof(why));

	if (r < 0)
		conn_close(a, why, true);
	else if (r > 0)
		conn_say_hello(a);
}

static void conn_connected(struct agent *a)
{
	struct agent_conn *c = &a->c;
	int err = 0;
	socklen_t len = sizeof(err);
	char why[512];

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		snprintf(why, sizeof(why), "could not connect to \"%s:%s\": %s", c->host, c->port, strerror(err));
		conn_close(a, why, true);
		return;
	}
	if (a->tls) {
		if (agent_tls_start(a, why, sizeof(why)) < 0) {
			conn_close(a, why, true);
			return;
		}
		c->state = CONN_TLS; /* the connect deadline covers the handshake too */
		conn_handshake(a);
		return;
	}
	conn_say_hello(a);
}

/* Handles one frame from the server; false when the connection was closed. */
static bool conn_frame(struct agent *a, const uint8_t *body, size_t len)
{
	struct agent_conn *c = &a->c;
	frame_envelope *env = frame_unpack(body, len);
	char why[512];
	bool ok = true;

	if (!env) {
		char hex[80];

		frame_hex_sample(body, len, hex, sizeof(hex));
		snprintf(why, sizeof(why), "malformed frame from server (%zu bytes: %s)", len, hex);
		conn_close(a, why, true);
		return false;
	}
	switch (env->msg_case) {
	case CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK:
		if (c->state != CONN_HELLO) {
			conn_close(a, "unexpected hello_ack from server", true);
			ok = false;
			break;
		}
		if (!env->hello_ack->accepted && env->hello_ack->redirect && *env->hello_ack->redirect) {
			conn_redirect(a, env->hello_ack->redirect);
			ok = false;
			break;
		}
		if (!env->hello_ack->accepted) {
			snprintf(why, sizeof(why), "server refused hello: %s",
				 env->hello_ack->reason && *env->hello_ack->reason ? env->hello_ack->reason
										   : "no reason");
			c->attempts = 30; /* retry at the slowest pace */
			if (a->give_up_refused)
				c->refusals = a->give_up_refused - 1; /* or give up now (conn_give_up) */
			c->complaining = false; /* log every refusal at warning (they are rare: backoff_max apart) */
			conn_close(a, why, true);
			ok = false;
			break;
		}
		c->redirects = 0;
		pthread_mutex_lock(&a->mu);
		if (!a->ever_accepted) {
			a->ever_accepted = true;
			agent_rebase(a, env->hello_ack->durable_seq);
		}
		agent_queue_ack(a, env->hello_ack->durable_seq);
		a->st.connected = true;
		a->st.connects++;
		pthread_mutex_unlock(&a->mu);
		c->max_frame = env->hello_ack->max_frame ? env->hello_ack->max_frame : 4u << 20;
		/* the estimate is an upper bound of the packed size; keep room for the prefix */
		pthread_mutex_lock(&a->mu);
		a->batch_bytes = c->max_frame > BATCH_SOFT_BYTES + 64 ? BATCH_SOFT_BYTES
				 : c->max_frame > 1024                ? c->max_frame - 64
								      : 960;
		pthread_mutex_unlock(&a->mu);
		c->state = CONN_STREAMING;
		/* the backoff resets on progress (an Ack that frees batches), not on an accepted
		 * Hello alone: a batch that makes the server drop the connection every time must
		 * not turn into a tight reconnect loop */
		pthread_mutex_lock(&a->mu);
		if (!a->head)
			c->attempts = 0;
		pthread_mutex_unlock(&a->mu);
		c->last_sent = NULL;
		if (c->complaining) {
			agent_log(a, AGENT_LOG_INFO, "connected to \"%s:%s\" again; resending after sequence %llu",
				  c->host, c->port, (unsigned long long)env->hello_ack->durable_seq);
			c->complaining = false;
		} else {
			agent_log(a, AGENT_LOG_DEBUG, "connected to \"%s:%s\", durable sequence %llu", c->host, c->port,
				  (unsigned long long)env->hello_ack->durable_seq);
		}
		break;
	case CULPRIT__V1__ENVELOPE__MSG_ACK:
		pthread_mutex_lock(&a->mu);
		if (a->head && a->head->seq <= env->ack->durable_seq)
			c->attempts = 0;
		agent_queue_ack(a, env->ack->durable_seq);
		pthread_mutex_unlock(&a->mu);
		break;
	case CULPRIT__V1__ENVELOPE__MSG_REJECT:
		pthread_mutex_lock(&a->mu);
		agent_queue_reject(a, env->reject->seq, env->reject->reason ? env->reject->reason : "");
		pthread_mutex_unlock(&a->mu);
		break;
	case CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT: break;
	case CULPRIT__V1__ENVELOPE__MSG_COMMAND: {
		Culprit__V1__Command *cmd = env->command;
		uint32_t *ranks = NULL;

		if (cmd->n_ranks && !(ranks = malloc(cmd->n_ranks * sizeof(*ranks)))) {
			agent_log(a, AGENT_LOG_WARNING, "out of memory for command %llu", (unsigned long long)cmd->id);
			break;
		}
		if (cmd->n_ranks)
			memcpy(ranks, cmd->ranks, cmd->n_ranks * sizeof(*ranks));
		pthread_mutex_lock(&a->mu);
		free(a->cmd.ranks);
		a->cmd.id = cmd->id;
		a->cmd.kind = (uint32_t)cmd->kind;
		a->cmd.iterations = cmd->iterations;
		a->cmd.max_events = cmd->max_events;
		a->cmd.n_ranks = cmd->n_ranks;
		a->cmd.ranks = ranks;
		a->have_cmd = true;
		pthread_mutex_unlock(&a->mu);
		agent_log(a, AGENT_LOG_INFO, "command %llu from server: kind %d, %zu ranks, %u iterations",
			  (unsigned long long)cmd->id, (int)cmd->kind, cmd->n_ranks, cmd->iterations);
		break;
	}
	case CULPRIT__V1__ENVELOPE__MSG_GOODBYE:
		snprintf(why, sizeof(why), "server said goodbye: %s",
			 env->goodbye->reason && *env->goodbye->reason ? env->goodbye->reason : "no reason");
		conn_close(a, why, false);
		ok = false;
		break;
	default:
		snprintf(why, sizeof(why), "unexpected message %d from server", (int)env->msg_case);
		conn_close(a, why, true);
		ok = false;
		break;
	}
	frame_free(env);
	return ok;
}

static void conn_read(struct agent *a)
{
	struct agent_conn *c = &a->c;
	char why[256];

	for (;;) {
		ssize_t n;
		size_t off = 0;

		if (c->rlen == c->rcap) {
			size_t cap = c->rcap ? c->rcap * 2 : 4096;
			uint8_t *p;

			if (cap > IN_FRAME_MAX + FRAME_HEADER)
				cap = IN_FRAME_MAX + FRAME_HEADER;
			if (cap <= c->rcap || !(p = realloc(c->rbuf, cap))) {
				conn_close(a, "out of memory for a frame from server", true);
				return;
			}
			c->rbuf = p;
			c->rcap = cap;
		}
		n = agent_io_recv(c, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n == 0) {
			conn_close(a, "server closed the connection", true);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			snprintf(why, sizeof(why), "could not receive from server: %s", strerror(errno));
			conn_close(a, why, true);
			return;
		}
		c->rlen += (size_t)n;
		for (;;) {
			uint32_t body = 0;
			const char *err = NULL;
			enum frame_status fs = frame_check(c->rbuf + off, c->rlen - off, IN_FRAME_MAX, &body, &err);

			if (fs == FRAME_NEED_MORE)
				break;
			if (fs == FRAME_MALFORMED) {
				snprintf(why, sizeof(why), "malformed frame from server: %s", err);
				conn_close(a, why, true);
				return;
			}
			if (!conn_frame(a, c->rbuf + off + FRAME_HEADER, body))
				return;
			off += FRAME_HEADER + body;
		}
		if (off) {
			memmove(c->rbuf, c->rbuf + off, c->rlen - off);
			c->rlen -= off;
		}
	}
}

/* Picks the next batch to send (a.mu held). */
static struct batch *next_batch(struct agent *a) { return a->c.last_sent ? a->c.last_sent->next : a->head; }

static void conn_write(struct agent *a)
{
	struct agent_conn *c = &a->c;
	char why[256];

	for (;;) {
		const uint8_t *p;
		size_t left;
		ssize_t n;
		bool is_ctrl;

		if (!c->cur && c->ctrl) {
			is_ctrl = true;
			p = c->ctrl + c->ctrl_off;
			left = c->ctrl_len - c->ctrl_off;
		} else {
			if (!c->cur) {
				if (c->state != CONN_STREAMING)
					return;
				pthread_mutex_lock(&a->mu);
				c->cur = next_batch(a);
				/* sealed before this server said how large a frame may be: it would
				 * only get the connection closed, again and again */
				while (c->cur && c->cur->len - FRAME_HEADER > c->max_frame) {
					agent_queue_reject(a, c->cur->seq,
							   "larger than the server's max_frame; dropped by the agent");
					c->cur = next_batch(a);
				}
				if (c->cur && agent_batch_frame(a, c->cur) < 0) {
					pthread_mutex_unlock(&a->mu);
					c->cur = NULL;
					conn_close(a, "out of memory for the names of a batch", true);
					return;
				}
				pthread_mutex_unlock(&a->mu);
				c->cur_off = 0;
				if (!c->cur)
					return;
			}
			/* header, body, name definitions: one frame */
			is_ctrl = false;
			if (c->cur_off < c->hdr_len) {
				p = c->hdr + c->cur_off;
				left = c->hdr_len - c->cur_off;
			} else if (c->cur_off < c->hdr_len + c->cur->body_len) {
				p = c->cur->base + (c->cur_off - c->hdr_len);
				left = c->hdr_len + c->cur->body_len - c->cur_off;
			} else {
				p = c->defs + (c->cur_off - c->hdr_len - c->cur->body_len);
				left = c->hdr_len + c->cur->body_len + c->defs_len - c->cur_off;
			}
		}
		n = agent_io_send(c, p, left);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			snprintf(why, sizeof(why), "could not send to server: %s", strerror(errno));
			conn_close(a, why, true);
			return;
		}
		c->last_send_ms = clock_mono_ms();
		if (is_ctrl) {
			c->ctrl_off += (size_t)n;
			if (c->ctrl_off == c->ctrl_len) {
				free(c->ctrl);
				c->ctrl = NULL;
				c->ctrl_len = c->ctrl_off = 0;
			}
		} else {
			c->cur_off += (size_t)n;
			if (c->cur_off == c->hdr_len + c->cur->body_len + c->defs_len) {
				pthread_mutex_lock(&a->mu);
				c->last_sent = c->cur;
				a->st.batches_sent++;
				if (c->cur->seq <= a->max_sent_seq)
					a->st.batches_resent++;
				else
					a->max_sent_seq = c->cur->seq;
				pthread_mutex_unlock(&a->mu);
				c->cur = NULL;
				c->cur_off = 0;
			}
		}
	}
}

/* Timers and what to poll for; returns the agent's next deadline (ms). */
static long long conn_tick(struct agent *a, long long now, short *events)
{
	struct agent_conn *c = &a->c;
	long long next = now + 1000;
	bool want_write = false;

	pthread_mutex_lock(&a->mu);
	if (agent_building_records(a)) {
		long long due = a->b.started_ms + a->flush_ms;

		if (now >= due && a->q_bytes < a->max_unacked) {
			if (agent_seal(a) < 0)
				due = now + 100;
		}
		if (agent_building_records(a) && due < next)
			next = due > now ? due : now + 1;
	}
	if (c->state == CONN_STREAMING && !c->cur)
		want_write = next_batch(a) != NULL;
	pthread_mutex_unlock(&a->mu);

	switch (c->state) {
	case CONN_IDLE:
		if (now >= c->retry_at_ms) {
			conn_start(a);
			return now; /* state changed: look again at once */
		}
		if (c->retry_at_ms < next)
			next = c->retry_at_ms;
		*events = 0;
		return next;
	case CONN_CONNECTING:
		if (now >= c->deadline_ms) {
			conn_close(a, "timed out connecting to server", true);
			return now;
		}
		*events = POLLOUT;
		return c->deadline_ms < next ? c->deadline_ms : next;
	case CONN_TLS:
		if (now >= c->deadline_ms) {
			conn_close(a, "timed out in the TLS handshake with server", true);
			return now;
		}
		*events = c->tls_want ? c->tls_want : POLLIN;
		return c->deadline_ms < next ? c->deadline_ms : next;
	case CONN_HELLO:
		if (now >= c->deadline_ms) {
			conn_close(a, "timed out waiting for hello_ack", true);
			return now;
		}
		if (c->deadline_ms < next)
			next = c->deadline_ms;
		break;
	case CONN_REFUSED: *events = 0; return next;
	case CONN_STREAMING:
		if (!c->ctrl && !c->cur && !want_write && now - c->last_send_ms >= a->heartbeat_ms) {
			Culprit__V1__Heartbeat hb = CULPRIT__V1__HEARTBEAT__INIT;
			frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;

			hb.time_us = clock_wall_us();
			env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT;
			env.heartbeat = &hb;
			conn_queue_ctrl(a, &env);
		}
		if (c->last_send_ms + a->heartbeat_ms < next)
			next = c->last_send_ms + a->heartbeat_ms;
		break;
	}
	*events = POLLIN | c->tls_want; /* TLS may need to write to read on, or the reverse */
	if (c->ctrl || c->cur || want_write)
		*events |= POLLOUT;
	return next;
}

/* A closing agent leaves the loop: best-effort Goodbye, close. (network thread) */
static void conn_goodbye(struct agent *a)
{
	struct agent_conn *c = &a->c;

	if (c->fd >= 0 && c->state == CONN_STREAMING && !c->cur && !c->ctrl) {
		Culprit__V1__Goodbye g = CULPRIT__V1__GOODBYE__INIT;
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
		uint8_t buf[64];
		size_t n;

		g.reason = (char *)"agent closing";
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_GOODBYE;
		env.goodbye = &g;
		n = frame_pack(&env, buf);
		if (agent_io_send(c, buf, n) < 0)
			agent_log(a, AGENT_LOG_DEBUG, "could not send goodbye: %s", strerror(errno));
	}
	agent_tls_close(c, c->state == CONN_STREAMING);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->ctrl);
	c->ctrl = NULL;
	free(c->rbuf);
	c->rbuf = NULL;
}

/* ---- the loop ---- */

static void *loop_main(void *arg)
{
	struct agent_loop *l = arg;
	sigset_t pipe;

	/* TLS writes with write(2), which has no MSG_NOSIGNAL: a server gone away must be EPIPE
	 * here, not a SIGPIPE that kills the training process */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);

	for (;;) {
		long long now = clock_mono_ms(), next = now + 1000;
		size_t n = 0;
		struct agent *a, **link;
		int timeout, rc;

		pthread_mutex_lock(&l->mu);
		if (l->stop) {
			pthread_mutex_unlock(&l->mu);
			break;
		}
		/* detach closing agents */
		for (link = &l->agents; (a = *link);) {
			bool closing;

			pthread_mutex_lock(&a->mu);
			closing = a->closing;
			pthread_mutex_unlock(&a->mu);
			if (closing) {
				conn_goodbye(a);
				*link = a->loop_next;
				l->n_agents--;
				pthread_mutex_lock(&a->mu);
				a->detached = true;
				pthread_mutex_unlock(&a->mu);
				pthread_cond_broadcast(&l->cv);
			} else {
				link = &a->loop_next;
			}
		}
		if (l->n_agents + 1 > l->pfd_cap) {
			size_t cap = (l->n_agents + 1) * 2;
			struct pollfd *p = realloc(l->pfd, cap * sizeof(*p));

			if (p) {
				l->pfd = p;
				l->pfd_cap = cap;
			}
		}
		l->pfd[n++] = (struct pollfd){.fd = l->wake_rd, .events = POLLIN};
		for (a = l->agents; a && n < l->pfd_cap; a = a->loop_next) {
			short ev = 0;
			long long d = conn_tick(a, now, &ev);

			if (d < next)
				next = d;
			a->c.pidx = -1;
			if (a->c.fd >= 0 && ev) {
				a->c.pidx = (int)n;
				l->pfd[n++] = (struct pollfd){.fd = a->c.fd, .events = ev};
			}
		}
		pthread_mutex_unlock(&l->mu);

		timeout = next <= now ? 0 : (int)(next - now);
		rc = poll(l->pfd, n, timeout);
		if (rc < 0 && errno != EINTR) {
			fprintf(stderr, "error: agent loop: poll failed: %s\n", strerror(errno));
			usleep(10000);
			continue;
		}
		if (rc <= 0)
			continue;
		if (l->pfd[0].revents) {
			char buf[256];

			/* drain first, then allow new wake-ups: the other order could swallow the
			 * byte of a wake-up that found the flag already cleared, leaving the flag
			 * set with an empty pipe and every later wake-up suppressed. A wake-up
			 * suppressed between the two is harmless: this pass looks at every agent. */
			while (read(l->wake_rd, buf, sizeof(buf)) > 0)
				;
			atomic_store(&l->wake_pending, false);
		}
		pthread_mutex_lock(&l->mu);
		for (a = l->agents; a; a = a->loop_next) {
			struct agent_conn *c = &a->c;
			short re;

			if (c->pidx < 0 || (size_t)c->pidx >= n || l->pfd[c->pidx].fd != c->fd)
				continue;
			re = l->pfd[c->pidx].revents;
			if (!re)
				continue;
			if (c->state == CONN_CONNECTING) {
				conn_connected(a);
				if (c->state == CONN_HELLO)
					conn_write(a);
				continue;
			}
			if (c->state == CONN_TLS) {
				conn_handshake(a);
				if (c->state == CONN_HELLO)
					conn_write(a);
				continue;
			}
			/* over TLS either direction may be what the other one waits for */
			if ((re & (POLLIN | POLLERR | POLLHUP)) || (c->ssl && (re & POLLOUT)))
				conn_read(a);
			if (c->fd >= 0 && ((re & POLLOUT) || (c->ssl && (re & POLLIN))))
				conn_write(a);
		}
		pthread_mutex_unlock(&l->mu);
	}
	return NULL;
}

struct agent_loop *agent_loop_new(void)
{
	struct agent_loop *l = calloc(1, sizeof(*l));
	int fds[2];

	if (!l)
		return NULL;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
		free(l);
		return NULL;
	}
	l->wake_rd = fds[0];
	l->wake_wr = fds[1];
	atomic_init(&l->wake_pending, false);
	pthread_mutex_init(&l->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&l->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	l->pfd_cap = 64;
	l->pfd = malloc(l->pfd_cap * sizeof(*l->pfd));
	if (!l->pfd || pthread_create(&l->thr, NULL, loop_main, l) != 0) {
		free(l->pfd);
		close(fds[0]);
		close(fds[1]);
		pthread_mutex_destroy(&l->mu);
		pthread_cond_destroy(&l->cv);
		free(l);
		return NULL;
	}
	return l;
}

void agent_loop_free(struct agent_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_mutex_unlock(&l->mu);
	atomic_store(&l->wake_pending, false);
	agent_loop_wake(l);
	pthread_join(l->thr, NULL);
	close(l->wake_rd);
	close(l->wake_wr);
	free(l->pfd);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

void agent_loop_attach(struct agent_loop *l, struct agent *a)
{
	pthread_mutex_lock(&l->mu);
	a->loop_next = l->agents;
	l->agents = a;
	l->n_agents++;
	pthread_mutex_unlock(&l->mu);
	agent_loop_wake(l);
}

void agent_loop_detach(struct agent_loop *l, struct agent *a)
{
	pthread_mutex_lock(&a->mu);
	a->closing = true;
	pthread_mutex_unlock(&a->mu);
	agent_loop_wake(l);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		bool detached;

		pthread_mutex_lock(&a->mu);
		detached = a->detached;
		pthread_mutex_unlock(&a->mu);
		if (detached)
			break;
		pthread_cond_wait(&l->cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
}
