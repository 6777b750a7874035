/* relay.h: this instance relays agents of a job another instance owns (docs/operations.md,
 * "Many instances", relays). When the owner has no room for more agents (its lease row's
 * agent_room is 0), a Hello for its job is not redirected: the agent's connection stays here
 * and everything it sends goes to the owner over one connection per job (opened with
 * Hello.relay), each frame wrapped in a Relay message naming the agent; what the owner answers
 * (HelloAck, Acks, Rejects, Commands) comes back the same way and is written to the agent as
 * it is. Acks come only from the owner, after its commit: a relay holds nothing an agent
 * believes stored. When the owner's connection ends, every agent relayed over it is closed
 * (they come back and are redirected or relayed anew).
 *
 * Backpressure: at most RELAY_MAX_QUEUE bytes wait to be sent to an owner; beyond it the
 * agents relayed to it are not read until half of it is sent.
 *
 * Not relayed: over TLS (the relay's connection would be clear text, so with TLS on the agent
 * listener agents are redirected as before), nor to an owner whose advertise_agent_addr is
 * not numeric (nothing resolves names on the loop). */
#ifndef CULPRIT_RELAY_H
#define CULPRIT_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "frame.h"
#include "attrs.h"

#define RELAY_MAX_QUEUE (4u << 20)

struct server;
struct relay;

/* What a relay does to the connections of the agents it relays (ingest.c's, given with each
 * agent): writes a frame body from the owner to the agent of conn_id; closes it once what
 * it was sent is written; reads it again after its relay was full. */
struct relay_calls {
	void (*deliver)(struct server *s, uint64_t conn_id, const uint8_t *frame, size_t len);
	void (*close)(struct server *s, uint64_t conn_id);
	void (*release)(struct server *s, uint64_t conn_id);
};

/* Relays the agent of connection conn_id (whose Hello is hello) to the owner at addr
 * (host:port, numeric); forwards the Hello. NULL (logged): the connection is closed. */
struct relay *relay_agent(struct server *s, const struct relay_calls *calls, uint64_t conn_id,
			  const Culprit__V1__Hello *hello, const char *addr);
/* Forwards one frame body of the agent. 1: the queue to the owner is full, stop reading the
 * agent until calls->release; 0: go on; -1: the relay failed (the agent is closed). */
MUST_CHECK int relay_forward(struct relay *r, const char *agent, const uint8_t *body, size_t len);
/* The agent's connection of conn_id ended: the owner is told (unless it said so first). */
void relay_agent_gone(struct relay *r, const char *agent, uint64_t conn_id);
/* Shutdown: closes every relay. */
void relay_close_all(struct server *s);

#endif
