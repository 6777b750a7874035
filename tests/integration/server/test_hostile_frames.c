/* test_hostile_frames.c: against the real culpritd on a real PostgreSQL, truncated,
 * oversized, zero-length, garbage and wrong-version frames, a batch before Hello and a client
 * that never says Hello each close that connection only, with the counters saying so, while
 * a well-behaved agent beside them keeps streaming and gets its batches acknowledged. An
 * invalid batch is refused with a reason and its connection stays. */
#include <arpa/inet.h>
#include <endian.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

static struct h_proc proc;

static void send_hello(int fd, uint32_t version, const char *agent, uint32_t first_rank)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
	uint32_t ranks[8];

	for (int i = 0; i < 8; i++)
		ranks[i] = first_rank + (uint32_t)i;
	t.world = 64;
	t.tp = 1;
	t.cp = 1;
	t.pp = 4;
	t.dp = 16;
	t.ep = 4;
	t.gpus_per_node = 8;
	h.protocol_version = version;
	h.job = (char *)"hostile";
	h.topology = &t;
	h.agent_id = (char *)agent;
	h.host = (char *)"node-0";
	h.ranks = ranks;
	h.n_ranks = 8;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	h_send_env(fd, &env);
}

/* One batch of one iteration of 8 ranks, with 2 phases each. rank_offset lets a test send
 * records of a rank the agent does not serve. */
static void send_batch(int fd, uint64_t seq, uint32_t iter, uint32_t first_rank, uint32_t name_index)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	char *names[] = {(char *)"mlp", (char *)"ep_dispatch"};
	uint32_t ir[8], ii[8], pr[16], pi[16], pn[16], pk[16], pg[16];
	int64_t is[8], id[8], ps[16], pd[16];

	for (int r = 0; r < 8; r++) {
		ir[r] = first_rank + (uint32_t)r;
		ii[r] = iter;
		is[r] = 1700000000000000LL + (int64_t)iter * 30000000;
		id[r] = 30000000;
		for (int k = 0; k < 2; k++) {
			int j = r * 2 + k;

			pr[j] = ir[r];
			pi[j] = iter;
			pn[j] = k ? name_index : 0;
			pk[j] = (uint32_t)k;
			pg[j] = k ? 3 : 0;
			ps[j] = -1;
			pd[j] = 40000;
		}
	}
	b.seq = seq;
	b.names = names;
	b.n_names = 2;
	b.iter_rank = ir, b.n_iter_rank = 8;
	b.iter_iter = ii, b.n_iter_iter = 8;
	b.iter_start_us = is, b.n_iter_start_us = 8;
	b.iter_dur_us = id, b.n_iter_dur_us = 8;
	b.phase_rank = pr, b.n_phase_rank = 16;
	b.phase_iter = pi, b.n_phase_iter = 16;
	b.phase_name = pn, b.n_phase_name = 16;
	b.phase_kind = pk, b.n_phase_kind = 16;
	b.phase_group = pg, b.n_phase_group = 16;
	b.phase_start_us = ps, b.n_phase_start_us = 16;
	b.phase_dur_us = pd, b.n_phase_dur_us = 16;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
}

int main(void)
{
	char dsn[1024], dir[600], db_arg[1100];
	const char *extra[] = {"--db",        db_arg,  "--hello-timeout-ms",       "3000",
			       "--max-frame", "65536", "--max-frame-before-hello", "1024",
			       NULL};
	int good, fd;
	uint64_t seq = 0;
	frame_envelope *e;

	h_db_create("test_hostile", dsn, sizeof(dsn));
	snprintf(db_arg, sizeof(db_arg), "%s", dsn);
	h_tmpdir("hostile", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	/* the well-behaved agent */
	good = h_connect(proc.agent_port);
	H_CHECK(good >= 0, &proc);
	send_hello(good, FRAME_PROTOCOL_VERSION, "good", 0);
	e = h_recv_env(good, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted, &proc);
	frame_free(e);
	send_batch(good, ++seq, 1, 0, 1);
	H_CHECK(h_wait_ack(good, seq), &proc);

	struct {
		const char *what;
		uint8_t bytes[32];
		size_t len;
		int hello_first;
	} cases[] = {
		{"zero-length frame", {0, 0, 0, 0}, 4, 0},
		{"length over max_frame_before_hello", {0, 0, 0x10, 0}, 4, 0},
		{"huge length prefix", {0xff, 0xff, 0xff, 0xff, 1, 2, 3}, 7, 0},
		{"garbage body", {0, 0, 0, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 10, 0},
		{"length over max_frame after hello", {0, 2, 0, 0}, 4, 1},
	};
	int n_cases = (int)(sizeof(cases) / sizeof(cases[0]));
	double malformed0 = h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}");

	for (int i = 0; i < n_cases; i++) {
		fd = h_connect(proc.agent_port);
		H_CHECK(fd >= 0, &proc);
		if (cases[i].hello_first) {
			send_hello(fd, FRAME_PROTOCOL_VERSION, "hostile-after-hello", 8);
			e = h_recv_env(fd, 10000);
			H_CHECK(e && e->hello_ack->accepted, &proc);
			frame_free(e);
		}
		H_CHECK(h_write_all(fd, cases[i].bytes, cases[i].len) == 0, &proc);
		/* closed for the violation itself, well before the hello timeout could do it */
		if (!h_peer_closed(fd, 1500)) {
			fprintf(stderr, "%s: connection not closed\n", cases[i].what);
			h_dump_log(&proc);
			return 1;
		}
		close(fd);
		/* the good agent is unaffected */
		send_batch(good, ++seq, (uint32_t)(2 + i), 0, 1);
		H_CHECK(h_wait_ack(good, seq), &proc);
	}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}") - malformed0 ==
			n_cases,
		&proc);

	/* truncated frame, then the peer goes away: closed as a peer close, nothing stored */
	fd = h_connect(proc.agent_port);
	H_CHECK(h_write_all(fd, "\0\0\0\x40\x0a\x02", 6) == 0, &proc);
	close(fd);

	/* wrong protocol version: refused with a reason, then closed */
	fd = h_connect(proc.agent_port);
	send_hello(fd, 1, "old", 16); /* version 1: no longer accepted */
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && !e->hello_ack->accepted, &proc);
	H_CHECK(strstr(e->hello_ack->reason, "protocol version") != NULL, &proc);
	frame_free(e);
	H_CHECK(h_peer_closed(fd, 5000), &proc);
	close(fd);

	/* a batch before hello is a protocol violation */
	fd = h_connect(proc.agent_port);
	send_batch(fd, 1, 1, 0, 1);
	H_CHECK(h_peer_closed(fd, 1500), &proc);
	close(fd);

	/* never says hello: closed after hello_timeout_ms */
	double timeouts0 =
		h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"hello_timeout\"}");
	fd = h_connect(proc.agent_port);
	int64_t t0 = h_now_ms();
	H_CHECK(h_peer_closed(fd, 8000), &proc);
	H_CHECK(h_now_ms() - t0 >= 2800, &proc);
	close(fd);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"hello_timeout\"}") ==
			timeouts0 + 1,
		&proc);

	/* an invalid batch (a rank the agent does not serve; a name index outside the
	 * dictionary) is refused with a reason, and the connection stays */
	double rejected0 = h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"rejected\"}");
	send_batch(good, ++seq, 50, 8, 1);
	e = h_recv_env(good, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT && e->reject->seq == seq, &proc);
	H_CHECK(strstr(e->reject->reason, "does not serve") != NULL, &proc);
	frame_free(e);
	send_batch(good, ++seq, 51, 0, 7);
	e = h_recv_env(good, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT && strstr(e->reject->reason, "dictionary"),
		&proc);
	frame_free(e);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"rejected\"}") == rejected0 + 2,
		&proc);
	send_batch(good, ++seq, 52, 0, 1);
	H_CHECK(h_wait_ack(good, seq), &proc);

	/* a resend of a durable batch is a no-op, acknowledged again */
	double dup0 = h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"duplicate\"}");
	send_batch(good, 1, 1, 0, 1);
	H_CHECK(h_wait_ack(good, seq), &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"duplicate\"}") == dup0 + 1, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections{state=\"active\"}") == 1, &proc);

	close(good);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	printf("hostile frames: all closed alone; the good agent kept streaming\n");
	return 0;
}
