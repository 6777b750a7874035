/* relay.c: see relay.h.
 *
 * One struct relay per job relayed, in s->relays: the connection to the owner and the agents
 * relayed over it (agent id -> connection id). The owner's connection is never freed in its
 * own callback: an ended relay leaves s->relays at once and is freed on the next loop pass. */
#include "relay.h"

#include <endian.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

#define RELAY_FRAME_SLACK 1024 /* a Relay around a max_frame agent frame */

struct relay {
	struct server *s;
	const struct relay_calls *calls; /* ingest's, on its agents' connections */
	char job[128];
	char addr[256];
	struct bufferevent *bev;
	bool accepted;        /* the owner answered the relay's Hello */
	bool full;            /* the queue to the owner went over RELAY_MAX_QUEUE: agents not read */
	struct strmap agents; /* agent id -> connection id (uintptr_t) */
};

static int send_env(struct relay *r, const frame_envelope *env)
{
	size_t need = frame_packed_size(env);
	uint8_t *buf = malloc(need);
	int rc = buf && bufferevent_write(r->bev, buf, frame_pack(env, buf)) == 0 ? 0 : -1;

	free(buf);
	return rc;
}

static int send_relay(struct relay *r, const char *agent, const uint8_t *body, size_t len)
{
	frame_envelope env;
	Culprit__V1__Relay rel;

	frame_relay(&env, &rel, agent, body, len);
	return send_env(r, &env);
}

static void collect(const char *agent, void *value, void *arg)
{
	uint64_t **at = arg;

	(void)agent;
	*(*at)++ = (uint64_t)(uintptr_t)value;
}

/* The connection ids of r's agents (free() it); *n their number. */
static uint64_t *agent_ids(struct relay *r, size_t *n)
{
	uint64_t *ids = malloc((r->agents.len + 1) * sizeof(*ids)), *at = ids;

	*n = 0;
	if (!ids)
		return NULL;
	strmap_each(&r->agents, collect, &at);
	*n = (size_t)(at - ids);
	return ids;
}

static void free_cb(evutil_socket_t fd, short what, void *arg)
{
	struct relay *r = arg;

	(void)fd;
	(void)what;
	bufferevent_free(r->bev);
	strmap_free(&r->agents);
	free(r);
}

/* Ends r: out of s->relays at once, its agents closed, freed after this loop pass (now: at
 * once, outside r's callbacks). */
static void relay_end_now(struct relay *r, const char *why, bool now)
{
	static struct log_limit limit = {.what = "relays ended"};
	struct server *s = r->s;
	size_t n = 0;
	uint64_t *ids;

	if (strmap_get(&s->relays, r->job) != r)
		return; /* ended already */
	strmap_del(&s->relays, r->job);
	bufferevent_disable(r->bev, EV_READ | EV_WRITE);
	ids = agent_ids(r, &n);
	if (n && log_limit_allow(&limit)) /* a dead owner fails every relay until its lease expires */
		log_warning("relay of job \"%s\" to %s ended: %s; closing the connections of its %zu agents", r->job,
			    r->addr, why, n);
	s->m.agents_relayed -= r->agents.len;
	strmap_free(&r->agents);
	for (size_t i = 0; i < n; i++)
		r->calls->close(s, ids[i]);
	free(ids);
	if (now || event_base_once(s->base, -1, EV_TIMEOUT, free_cb, r, &(struct timeval){0, 0}) < 0)
		free_cb(-1, 0, r); /* a relay ends without one at shutdown only */
}

static void relay_end(struct relay *r, const char *why) { relay_end_now(r, why, false); }

static void handle(struct relay *r, const frame_envelope *env)
{
	struct server *s = r->s;

	if (!r->accepted) {
		if (env->msg_case != CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK) {
			relay_end(r, "the owner did not answer the relay's hello");
			return;
		}
		if (!env->hello_ack->accepted) {
			char why[300];

			snprintf(why, sizeof(why), "the owner refused the relay: %s%s%s", env->hello_ack->reason,
				 env->hello_ack->redirect[0] ? "; the job is at " : "", env->hello_ack->redirect);
			relay_end(r, why);
			return;
		}
		r->accepted = true;
		log_info("relaying agents of job \"%s\" to its owner at %s", r->job, r->addr);
		return;
	}
	if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_GOODBYE) {
		relay_end(r, "the owner said goodbye");
		return;
	}
	if (env->msg_case != CULPRIT__V1__ENVELOPE__MSG_RELAY)
		return; /* heartbeats */
	uint64_t id = (uint64_t)(uintptr_t)strmap_get(&r->agents, env->relay->agent_id);

	if (!id)
		return; /* an agent gone meanwhile */
	if (env->relay->frame.len == 0) {
		/* the owner closed it: out of the map first, so that closing it tells the owner nothing */
		strmap_del(&r->agents, env->relay->agent_id);
		s->m.agents_relayed--;
		r->calls->close(s, id);
		return;
	}
	r->calls->deliver(s, id, env->relay->frame.data, env->relay->frame.len);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	struct relay *r = arg;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint32_t max = (uint32_t)r->s->cfg.max_frame + RELAY_FRAME_SLACK;

	while (strmap_get(&r->s->relays, r->job) == r) {
		size_t len = evbuffer_get_length(in);
		const char *why = NULL;
		uint32_t body = 0;
		uint8_t *data = evbuffer_pullup(in, len < FRAME_HEADER ? (ssize_t)len : FRAME_HEADER);
		frame_envelope *env;
		enum frame_status st;

		if (len == 0)
			return;
		st = frame_check(data, len, max, &body, &why);
		if (st == FRAME_NEED_MORE)
			return;
		if (st == FRAME_MALFORMED) {
			relay_end(r, why);
			return;
		}
		data = evbuffer_pullup(in, (ssize_t)(FRAME_HEADER + body));
		env = data && frame_unpacked_size(data + FRAME_HEADER, body) != SIZE_MAX
			      ? frame_unpack(data + FRAME_HEADER, body)
			      : NULL;
		if (!env) {
			relay_end(r, "the owner sent a frame that is not a protocol message");
			return;
		}
		handle(r, env);
		frame_free(env);
		evbuffer_drain(in, FRAME_HEADER + body);
	}
}

/* The queue to the owner is back under half of RELAY_MAX_QUEUE: its agents are read again. */
static void write_cb(struct bufferevent *bev, void *arg)
{
	struct relay *r = arg;
	size_t n = 0;
	uint64_t *ids;

	(void)bev;
	if (!r->full)
		return;
	r->full = false;
	ids = agent_ids(r, &n);
	for (size_t i = 0; i < n && !r->full; i++)
		r->calls->release(r->s, ids[i]);
	free(ids);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct relay *r = arg;

	(void)bev;
	if (what & BEV_EVENT_CONNECTED)
		return;
	relay_end(r, what & BEV_EVENT_EOF ? "the owner closed the connection" : "connection to the owner failed");
}

static struct relay *relay_open(struct server *s, const struct relay_calls *calls, const char *job, const char *addr)
{
	struct relay *r = calloc(1, sizeof(*r));
	struct sockaddr_storage ss;
	int sslen = sizeof(ss);
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;

	if (!r)
		return NULL;
	r->s = s;
	r->calls = calls;
	snprintf(r->job, sizeof(r->job), "%s", job);
	snprintf(r->addr, sizeof(r->addr), "%s", addr);
	if (evutil_parse_sockaddr_port(addr, (struct sockaddr *)&ss, &sslen) < 0) {
		log_warning("job \"%s\": cannot relay to its owner at \"%s\" (relays need a numeric address)", job,
			    addr);
		free(r);
		return NULL;
	}
	r->bev = bufferevent_socket_new(s->base, -1, BEV_OPT_CLOSE_ON_FREE);
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)job;
	h.relay = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	if (!r->bev || strmap_put(&s->relays, job, r) < 0) {
		if (r->bev)
			bufferevent_free(r->bev);
		free(r);
		return NULL;
	}
	bufferevent_setcb(r->bev, read_cb, write_cb, event_cb, r);
	bufferevent_setwatermark(r->bev, EV_WRITE, RELAY_MAX_QUEUE / 2, 0);
	bufferevent_enable(r->bev, EV_READ | EV_WRITE);
	if (bufferevent_socket_connect(r->bev, (struct sockaddr *)&ss, sslen) < 0 || send_env(r, &env) < 0) {
		relay_end(r, "could not connect");
		return NULL;
	}
	return r;
}

struct relay *relay_agent(struct server *s, const struct relay_calls *calls, uint64_t conn_id,
			  const Culprit__V1__Hello *hello, const char *addr)
{
	struct relay *r = strmap_get(&s->relays, hello->job);
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	size_t need;
	uint8_t *buf;
	uint64_t old;
	int rc;

	if (r && strcmp(r->addr, addr) != 0)
		relay_end(r, "the job has another owner"); /* leaves s->relays */
	if (!(r = strmap_get(&s->relays, hello->job)) && !(r = relay_open(s, calls, hello->job, addr)))
		return NULL;
	if ((old = (uint64_t)(uintptr_t)strmap_get(&r->agents, hello->agent_id))) {
		/* the agent came back before its old connection here ended: the owner closes that first */
		relay_agent_gone(r, hello->agent_id, old);
		r->calls->close(s, old);
	}
	if (strmap_put(&r->agents, hello->agent_id, (void *)(uintptr_t)conn_id) < 0)
		return NULL;
	s->m.agents_relayed++;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = (Culprit__V1__Hello *)hello;
	need = frame_packed_size(&env);
	if (!(buf = malloc(need))) {
		relay_agent_gone(r, hello->agent_id, conn_id);
		return NULL;
	}
	frame_pack(&env, buf);
	rc = relay_forward(r, hello->agent_id, buf + FRAME_HEADER, need - FRAME_HEADER);
	free(buf);
	return rc < 0 ? NULL : r;
}

int relay_forward(struct relay *r, const char *agent, const uint8_t *body, size_t len)
{
	/* the agent library's Envelope puts its one field first: a Batch is counted by its key */
	if (len && body[0] == frame_field_tag(&culprit__v1__envelope__descriptor, "batch"))
		r->s->m.batches_relayed++;
	if (send_relay(r, agent, body, len) < 0) {
		relay_end(r, "out of memory");
		return -1;
	}
	if (evbuffer_get_length(bufferevent_get_output(r->bev)) > RELAY_MAX_QUEUE)
		r->full = true;
	return r->full ? 1 : 0;
}

void relay_agent_gone(struct relay *r, const char *agent, uint64_t conn_id)
{
	if ((uint64_t)(uintptr_t)strmap_get(&r->agents, agent) != conn_id || strmap_get(&r->s->relays, r->job) != r)
		return;
	strmap_del(&r->agents, agent);
	r->s->m.agents_relayed--;
	if (send_relay(r, agent, NULL, 0) < 0)
		relay_end(r, "out of memory");
}

struct relay_list {
	struct relay *r[64];
	size_t n;
};

static void note(const char *job, void *value, void *arg)
{
	struct relay_list *l = arg;

	(void)job;
	if (l->n < 64)
		l->r[l->n++] = value;
}

void relay_close_all(struct server *s)
{
	while (s->relays.len) {
		struct relay_list l = {.n = 0};

		strmap_each(&s->relays, note, &l);
		for (size_t i = 0; i < l.n; i++)
			relay_end_now(l.r[i], "culpritd stops", true);
	}
	strmap_free(&s->relays);
}
