/* test_relay_frames.c: the owner's side of a relay, frames written by hand (docs/protocol.md,
 * "Relay"). One culpritd in cluster mode; this test plays the relaying instance.
 *
 * Checked: a Relay on an agent's connection is a protocol violation (closed, counted); a
 * relay's Hello takes the job's lease and is accepted; two agents relayed over it get the
 * owner's HelloAck in a Relay naming them; a relayed agent id that is not text (a newline,
 * an escape, a C1 control, invalid UTF-8) is ended at once; a malformed relayed frame of one closes that agent
 * only (an empty Relay for it, counted as malformed) while the other's batch is acknowledged
 * through the relay and stored; an empty Relay from the relay ends its agent without an
 * answer; when the relay's connection closes, its agents are gone (culprit_agents_via_relay
 * back to 0). */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alerttest.h"
#include "harness.h"

#define JOB "relayed"

static struct h_proc p;

/* A frame body the harness writes (fn on one end of a socketpair, read from the other). */
static size_t body_of(void (*fn)(int fd, const void *arg), const void *arg, uint8_t *out, size_t size)
{
	int sp[2];
	uint8_t buf[65536];
	size_t len = 0;
	uint32_t be;

	H_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0, NULL);
	fn(sp[0], arg);
	close(sp[0]);
	for (ssize_t n; (n = read(sp[1], buf + len, sizeof(buf) - len)) > 0;)
		len += (size_t)n;
	close(sp[1]);
	memcpy(&be, buf, 4);
	H_CHECK(len >= 4 && len - 4 == ntohl(be) && len - 4 <= size, NULL);
	memcpy(out, buf + 4, len - 4);
	return len - 4;
}

static void hello_fn(int fd, const void *agent)
{
	h_send_hello_as(fd, &(struct h_hello){.job = JOB,
					      .agent = agent,
					      .world = 16,
					      .pp = 1,
					      .dp = 16,
					      .ep = 1,
					      .first_rank = strcmp(agent, "r1") == 0 ? 0 : 8,
					      .n_ranks = 8});
}

static void batch_fn(int fd, const void *arg)
{
	(void)arg;
	h_send_batch(fd, &(struct h_batch){.seq = 1,
					   .first_rank = 8,
					   .n_ranks = 8,
					   .iter = 1,
					   .start_us = 1764633600000000,
					   .kernel_count = 1});
}

static void relay(int fd, const char *agent, const uint8_t *frame, size_t len)
{
	frame_envelope env;
	Culprit__V1__Relay r;

	frame_relay(&env, &r, agent, frame, len);
	h_send_env(fd, &env);
}

/* The next Relay for agent: its frame unpacked, or NULL when it is empty (the agent ended). */
static frame_envelope *relayed(int fd, const char *agent, int *ended)
{
	frame_envelope *e = h_recv_env(fd, 10000), *in;

	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_RELAY && strcmp(e->relay->agent_id, agent) == 0, &p);
	*ended = e->relay->frame.len == 0;
	in = *ended ? NULL : frame_unpack(e->relay->frame.data, e->relay->frame.len);
	H_CHECK(*ended || in, &p);
	frame_free(e);
	return in;
}

int main(void)
{
	char dsn[512];
	uint8_t hello1[4096], hello2[4096], batch[16384], bad[] = {0xff, 0xff, 0xff, 0xff};
	size_t n1 = body_of(hello_fn, "r1", hello1, sizeof(hello1)),
	       n2 = body_of(hello_fn, "r2", hello2, sizeof(hello2));
	size_t nb = body_of(batch_fn, NULL, batch, sizeof(batch));
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	int fd, rfd, ended;
	double malformed;
	static const char *const bad_ids[] = {"r\n3", "r\x1b[2J", "r\xc2\x9b", "r\x9b", "r\xff"};

	h_db_create("test_relay_frames", dsn, sizeof(dsn));
	H_CHECK(h_culpritd_start_instance(&p, "A", dsn, NULL) == 0, &p);

	/* a Relay from an agent */
	fd = h_connect(p.agent_port);
	H_CHECK(h_hello(fd, "other", "x", 1, 0) == 1, &p);
	relay(fd, "r1", hello1, n1);
	H_CHECK(h_peer_closed(fd, 5000), &p);
	close(fd);
	malformed = h_get_metric(p.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}");
	H_CHECK(malformed == 1, &p);

	/* the relay's Hello */
	rfd = h_connect(p.agent_port);
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)JOB;
	h.relay = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	h_send_env(rfd, &env);
	e = h_recv_env(rfd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted, &p);
	frame_free(e);
	H_CHECK(at_sql_long(dsn, "SELECT (owner = 'A')::int FROM job_leases WHERE job = '" JOB "'") == 1, &p);

	/* two agents over it */
	relay(rfd, "r1", hello1, n1);
	e = relayed(rfd, "r1", &ended);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted, &p);
	frame_free(e);
	relay(rfd, "r2", hello2, n2);
	e = relayed(rfd, "r2", &ended);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted, &p);
	frame_free(e);
	H_CHECK(h_get_metric(p.http_port, "culprit_agents_via_relay") == 2, &p);
	H_CHECK(h_get_metric(p.http_port, "culprit_relay_connections") == 1, &p);

	/* an agent id that is not text (newline, CSI, C1, a raw 0x9b, invalid UTF-8): ended at once */
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		relay(rfd, bad_ids[i], hello1, n1);
		H_CHECK(relayed(rfd, bad_ids[i], &ended) == NULL && ended, &p);
	}
	H_CHECK(h_get_metric(p.http_port, "culprit_agents_via_relay") == 2, &p);

	/* r1 sends garbage: r1 ends, r2 goes on */
	relay(rfd, "r1", bad, sizeof(bad));
	H_CHECK(relayed(rfd, "r1", &ended) == NULL && ended, &p);
	relay(rfd, "r2", batch, nb);
	e = relayed(rfd, "r2", &ended);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK && e->ack->durable_seq == 1, &p);
	frame_free(e);
	H_CHECK(h_get_metric(p.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}") == malformed + 1, &p);
	H_CHECK(h_get_metric(p.http_port, "culprit_agents_via_relay") == 1, &p);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = '" JOB
				 "'") == 8,
		&p);

	/* r2 comes back over the relay after an empty Relay: the same durable sequence */
	relay(rfd, "r2", NULL, 0);
	relay(rfd, "r2", hello2, n2);
	e = relayed(rfd, "r2", &ended); /* no answer to the empty Relay: this is the HelloAck */
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted &&
			e->hello_ack->durable_seq == 1,
		&p);
	frame_free(e);

	/* the relay goes: so do its agents */
	close(rfd);
	for (int64_t deadline = h_now_ms() + 10000;; poll(NULL, 0, 20)) {
		if (h_get_metric(p.http_port, "culprit_agents_via_relay") == 0 &&
		    h_get_metric(p.http_port, "culprit_relay_connections") == 0)
			break;
		H_CHECK(h_now_ms() < deadline, &p);
	}
	int status = h_proc_stop(&p, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &p);
	fprintf(stderr, "ok\n");
	return 0;
}
