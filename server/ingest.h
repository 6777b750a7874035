/* ingest.h: the agent listener and one state machine per agent connection.
 *
 * States (changed only in conn_set_state, which keeps the gauges right):
 *   HELLO    -> ACTIVE (Hello accepted) | REFUSING (HelloAck with the reason being written) | LEASE | CLOSING
 *   LEASE    -> (many instances: not read while the job's lease is looked up) ACTIVE | REFUSING
 *               (refused, or redirected to the owner) | CLOSING
 *   REFUSING -> CLOSING (once the refusal is written, or after 2 s)
 *   ACTIVE  -> BLOCKED (writer queue full: stop reading) | CLOSING
 *   BLOCKED -> ACTIVE (queue space again) | CLOSING
 * Relays (relay.h): on the job's owner, each agent relayed to it is a virtual connection
 * (no socket) with the same states, its frames taken from its relay connection's Relay
 * messages; a blocked one stops the reading of its relay connection. On the relaying
 * instance, an ACTIVE connection whose agent is relayed forwards its frames unread.
 * A connection is never freed inside its own callback: CLOSING connections are freed by a
 * separate event after the loop pass. */
#ifndef CULPRIT_INGEST_H
#define CULPRIT_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "culprit.pb-c.h"
#include "attrs.h"

struct server;
struct job;

/* Starts listening on cfg.agent_listen. -1 with a log line on failure. */
MUST_CHECK int ingest_start(struct server *s);
/* Stops accepting new connections (SIGTERM). */
void ingest_stop_accepting(struct server *s);
/* Closes every connection (shutdown). */
void ingest_close_all(struct server *s);
/* Once a second: closes connections whose unfinished frame is older than frame_timeout_s,
 * and paused ones whose peer has gone; gives freed input memory back to the system. */
void ingest_tick(struct server *s);
/* Called on the loop when the writer has done items or queue space: sends Acks and
 * resumes blocked connections. */
void ingest_writer_progress(struct server *s);
/* Loads the durable sequences of every (job, agent) from the database (start-up only). */
MUST_CHECK int ingest_load_progress(struct server *s);
/* Sends cmd to every connection of job past Hello that serves some of cmd's ranks, with
 * cmd.ranks narrowed to those; each (may be NULL) is told who got which. Returns how many
 * connections it was sent to. */
size_t ingest_send_command(struct server *s, const struct job *job, const Culprit__V1__Command *cmd,
			   void (*each)(void *arg, const char *agent, const char *host, const uint32_t *ranks,
					size_t n),
			   void *arg);
/* Many instances (cluster.h's calls, given by main.c): handles again the Hello of a connection that waited for its
 * job's lease; closes every connection of a job whose lease was lost; sets an agent's durable
 * sequence to the database's when the job's lease is taken. */
void ingest_hello_resume(struct server *s, uint64_t conn_id);
void ingest_close_job(struct server *s, const char *job);
void ingest_set_progress(struct server *s, const char *job, const char *agent, uint64_t durable_seq);
/* After SIGHUP: closes every streaming connection whose Hello token the new s->auth no
 * longer accepts (counted as authentication failures, closed as refused); their agents'
 * next Hello is refused. Returns how many. */
size_t ingest_close_unauthorized(struct server *s);

#endif
