/* test_agent.c: the agent library against a fake server in a thread of the test (real
 * sockets on loopback): batching and the name dictionary, exact delivery across dropped
 * connections (resend is a no-op), numbering after an earlier run, Reject, Goodbye,
 * Command, the buffer-full policy, many appending threads, a shared loop. */
#include <endian.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent.h"
#include "frame.h"

/* ---- fake server ---- */

#define FS_CONNS 128
#define FS_AGENTS 128

struct fs_agent {
	char id[64];
	uint64_t durable;
	uint64_t iters, phases, kernels, sketches;
	uint64_t checksum;    /* sum over records of rank * 1000003 + iter * 31 + dur */
	uint64_t name_errors; /* phase names that did not decode to "phase-<iter % 7>" */
	uint64_t name_defs;   /* names defined, over all connections */
	uint64_t gaps;        /* batches with seq > durable + 1 */
	uint64_t orphans;     /* phases of an even iteration without their iteration in the batch */
	uint64_t dups;        /* batches with seq <= durable (resends: no-ops) */
	uint64_t hellos;
	uint64_t resume_seq;
	uint64_t heartbeats;
	uint64_t goodbyes;
	uint64_t raw;             /* raw kernels (captures) */
	uint64_t raw_name_errors; /* raw kernels whose name id did not decode to "flash_attn_fwd" */
	int64_t raw_dur_sum;
};

struct fs_conn {
	int fd;
	uint8_t buf[1 << 21];
	size_t len;
	int agent;          /* -1 before hello */
	char names[64][32]; /* the agent's name ids defined on this connection ("" none) */
};

struct fake_server {
	int lfd, port;
	pthread_t thr;
	pthread_mutex_t mu;
	bool stop;
	struct fs_conn *conns[FS_CONNS];
	struct fs_agent agents[FS_AGENTS];
	int n_agents;
	uint64_t batches_total;
	/* knobs */
	uint64_t drop_every;  /* close every connection after this many batches (0: never) */
	bool drop_before_ack; /* when dropping, the dropped batch is stored but not acked */
	uint64_t reject_seq;  /* reject this seq (0: none) */
	bool no_ack;          /* store nothing, ack nothing */
	bool refuse_hello;
	char redirect[64];  /* answer Hello with this HelloAck.redirect ("" none) */
	int send_goodbye;   /* >0: after this many batches send Goodbye once */
	bool send_command;  /* after the first Hello send a Command */
	uint32_t max_frame; /* announced in HelloAck (0: 4 MiB) */
	uint64_t oversize;  /* frames longer than max_frame */
};

static struct fs_agent *fs_agent_get(struct fake_server *s, const char *id)
{
	for (int i = 0; i < s->n_agents; i++)
		if (strcmp(s->agents[i].id, id) == 0)
			return &s->agents[i];
	assert_true(s->n_agents < FS_AGENTS);
	snprintf(s->agents[s->n_agents].id, sizeof(s->agents[0].id), "%s", id);
	return &s->agents[s->n_agents++];
}

static void fs_send(int fd, const frame_envelope *env)
{
	uint8_t buf[4096];
	size_t n = frame_packed_size(env);

	assert_true(n <= sizeof(buf));
	frame_pack(env, buf);
	if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n) {
		/* the agent may have gone; the test checks outcomes, not this */
	}
}

static void fs_send_ack(int fd, uint64_t durable)
{
	Culprit__V1__Ack ack = CULPRIT__V1__ACK__INIT;
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;

	ack.durable_seq = durable;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_ACK;
	env.ack = &ack;
	fs_send(fd, &env);
}

static void fs_close(struct fake_server *s, int i)
{
	close(s->conns[i]->fd);
	free(s->conns[i]);
	s->conns[i] = NULL;
}

/* Handles one frame; false: close the connection. (s->mu held) */
static bool fs_frame(struct fake_server *s, struct fs_conn *c, const uint8_t *body, size_t len)
{
	frame_envelope *env = frame_unpack(body, len);
	frame_envelope out = CULPRIT__V1__ENVELOPE__INIT;
	bool keep = true;

	assert_non_null(env);
	if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO) {
		Culprit__V1__HelloAck ha = CULPRIT__V1__HELLO_ACK__INIT;
		struct fs_agent *a = fs_agent_get(s, env->hello->agent_id);

		assert_int_equal(env->hello->protocol_version, FRAME_PROTOCOL_VERSION);
		assert_true(env->hello->n_ranks > 0);
		a->hellos++;
		a->resume_seq = env->hello->resume_seq;
		c->agent = (int)(a - s->agents);
		ha.accepted = !s->refuse_hello && !s->redirect[0];
		ha.reason = (char *)(s->refuse_hello  ? "bad token"
				     : s->redirect[0] ? "another culpritd owns this job"
						      : "");
		ha.redirect = s->redirect;
		ha.durable_seq = a->durable;
		ha.max_frame = s->max_frame ? s->max_frame : 4u << 20;
		out.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK;
		out.hello_ack = &ha;
		fs_send(c->fd, &out);
		if (s->send_command) {
			Culprit__V1__Command cmd = CULPRIT__V1__COMMAND__INIT;
			uint32_t ranks[2] = {3, 5};

			cmd.id = 42;
			cmd.kind = CULPRIT__V1__COMMAND__KIND__CAPTURE;
			cmd.n_ranks = 2;
			cmd.ranks = ranks;
			cmd.iterations = 4;
			out.msg_case = CULPRIT__V1__ENVELOPE__MSG_COMMAND;
			out.command = &cmd;
			fs_send(c->fd, &out);
			s->send_command = false;
		}
	} else if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT) {
		if (c->agent >= 0)
			s->agents[c->agent].heartbeats++;
	} else if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_GOODBYE) {
		if (c->agent >= 0)
			s->agents[c->agent].goodbyes++;
	} else if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_BATCH) {
		Culprit__V1__Batch *b = env->batch;
		struct fs_agent *a;

		assert_true(c->agent >= 0);
		a = &s->agents[c->agent];
		s->batches_total++;
		/* names are defined once per connection; records carry the agent's name ids */
		assert_int_equal(b->n_names, 0);
		for (size_t i = 0; i < b->n_name_defs; i++) {
			assert_true(b->name_defs[i]->id < 64);
			snprintf(c->names[b->name_defs[i]->id], sizeof(c->names[0]), "%s", b->name_defs[i]->name);
			a->name_defs++;
		}
		if (s->no_ack) {
			/* hold nothing */
		} else if (b->seq <= a->durable) {
			a->dups++;
			fs_send_ack(c->fd, a->durable);
		} else if (b->seq == s->reject_seq) {
			Culprit__V1__Reject rj = CULPRIT__V1__REJECT__INIT;

			if (b->seq != a->durable + 1)
				a->gaps++;
			a->durable = b->seq; /* consumed, not stored */
			rj.seq = b->seq;
			rj.reason = (char *)"rank 99 is not served by this agent";
			out.msg_case = CULPRIT__V1__ENVELOPE__MSG_REJECT;
			out.reject = &rj;
			fs_send(c->fd, &out);
		} else {
			if (b->seq != a->durable + 1)
				a->gaps++;
			assert_int_equal(b->n_iter_iter, b->n_iter_rank);
			assert_int_equal(b->n_phase_dur_us, b->n_phase_rank);
			assert_int_equal(b->n_phase_name, b->n_phase_rank);
			for (size_t i = 0; i < b->n_iter_rank; i++)
				a->checksum += b->iter_rank[i] * 1000003ull + b->iter_iter[i] * 31ull +
					       (uint64_t)b->iter_dur_us[i];
			for (size_t i = 0; i < b->n_phase_rank; i++) {
				char want[32];

				a->checksum += b->phase_rank[i] * 1000003ull + b->phase_iter[i] * 31ull +
					       (uint64_t)b->phase_dur_us[i];
				snprintf(want, sizeof(want), "phase-%u", b->phase_iter[i] % 7);
				if (b->phase_iter[i] % 2 == 0) {
					bool found = false;

					for (size_t j = 0; j < b->n_iter_rank && !found; j++)
						found = b->iter_rank[j] == b->phase_rank[i] &&
							b->iter_iter[j] == b->phase_iter[i];
					a->orphans += !found;
				}
				if (b->phase_name[i] >= 64 || strcmp(c->names[b->phase_name[i]], want) != 0)
					a->name_errors++;
			}
			/* rank and iteration may be sent once for every kernel of the batch */
			for (size_t i = 0; i < b->n_kernel_name; i++)
				a->checksum += b->kernel_rank[b->n_kernel_rank == 1 ? 0 : i] * 1000003ull +
					       b->kernel_iter[b->n_kernel_iter == 1 ? 0 : i] * 31ull +
					       (uint64_t)b->kernel_sum_us[i];
			for (size_t i = 0; i < b->n_raw_kernels; i++) {
				const Culprit__V1__RawKernel *k = b->raw_kernels[i];

				if (k->name >= 64 || strcmp(c->names[k->name], "flash_attn_fwd") != 0)
					a->raw_name_errors++;
				a->raw_dur_sum += k->dur_us;
			}
			a->raw += b->n_raw_kernels;
			a->sketches += b->n_kernel_sketch_len;
			a->iters += b->n_iter_rank;
			a->phases += b->n_phase_rank;
			a->kernels += b->n_kernel_name;
			a->durable = b->seq;
			if (!(s->drop_every && s->drop_before_ack && s->batches_total % s->drop_every == 0))
				fs_send_ack(c->fd, a->durable);
		}
		if (s->drop_every && s->batches_total % s->drop_every == 0)
			keep = false;
		if (s->send_goodbye > 0 && s->batches_total == (uint64_t)s->send_goodbye) {
			Culprit__V1__Goodbye g = CULPRIT__V1__GOODBYE__INIT;

			g.reason = (char *)"server shutting down";
			out.msg_case = CULPRIT__V1__ENVELOPE__MSG_GOODBYE;
			out.goodbye = &g;
			fs_send(c->fd, &out);
			keep = false;
		}
	}
	frame_free(env);
	return keep;
}

static void *fs_main(void *arg)
{
	struct fake_server *s = arg;
	struct pollfd pfd[FS_CONNS + 1];
	int map[FS_CONNS + 1];

	for (;;) {
		int n = 0;

		pthread_mutex_lock(&s->mu);
		if (s->stop) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		pfd[n++] = (struct pollfd){s->lfd, POLLIN, 0};
		for (int i = 0; i < FS_CONNS; i++)
			if (s->conns[i]) {
				map[n] = i;
				pfd[n++] = (struct pollfd){s->conns[i]->fd, POLLIN, 0};
			}
		pthread_mutex_unlock(&s->mu);
		if (poll(pfd, (nfds_t)n, 20) <= 0)
			continue;
		pthread_mutex_lock(&s->mu);
		if (pfd[0].revents & POLLIN) {
			int fd = accept(s->lfd, NULL, NULL);

			for (int i = 0; fd >= 0 && i < FS_CONNS; i++)
				if (!s->conns[i]) {
					s->conns[i] = calloc(1, sizeof(*s->conns[i]));
					s->conns[i]->fd = fd;
					s->conns[i]->agent = -1;
					fd = -1;
				}
			if (fd >= 0)
				close(fd);
		}
		for (int k = 1; k < n; k++) {
			int i = map[k];
			struct fs_conn *c = s->conns[i];
			ssize_t r;
			size_t off = 0;
			bool keep = true;

			if (!c || !pfd[k].revents)
				continue;
			r = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
			if (r <= 0) {
				fs_close(s, i);
				continue;
			}
			c->len += (size_t)r;
			for (;;) {
				uint32_t body;
				const char *why;
				enum frame_status st = frame_check(c->buf + off, c->len - off, 1u << 20, &body, &why);

				assert_int_not_equal(st, FRAME_MALFORMED);
				if (st == FRAME_NEED_MORE)
					break;
				if (s->max_frame && body > s->max_frame)
					s->oversize++;
				keep = fs_frame(s, c, c->buf + off + 4, body);
				off += 4 + body;
				if (!keep)
					break;
			}
			if (!keep) {
				fs_close(s, i);
				continue;
			}
			memmove(c->buf, c->buf + off, c->len - off);
			c->len -= off;
		}
		pthread_mutex_unlock(&s->mu);
	}
	for (int i = 0; i < FS_CONNS; i++)
		if (s->conns[i])
			fs_close(s, i);
	return NULL;
}

static struct fake_server *fs_start(void)
{
	struct fake_server *s = calloc(1, sizeof(*s));
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int one = 1;

	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 256), 0);
	getsockname(s->lfd, (struct sockaddr *)&sa, &len);
	s->port = ntohs(sa.sin_port);
	pthread_mutex_init(&s->mu, NULL);
	pthread_create(&s->thr, NULL, fs_main, s);
	return s;
}

static void fs_stop(struct fake_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->thr, NULL);
	close(s->lfd);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* ---- helpers ---- */

static uint32_t node_ranks[8] = {0, 1, 2, 3, 4, 5, 6, 7};

static void quiet_log(void *arg, enum agent_log_level level, const char *msg)
{
	(void)arg;
	if (level >= AGENT_LOG_ERROR)
		fprintf(stderr, "%s\n", msg);
}

static struct agent_config base_config(char *server, size_t size, int port, const char *id)
{
	struct agent_config cfg = {0};

	snprintf(server, size, "127.0.0.1:%d", port);
	cfg.server = server;
	cfg.job = "J";
	cfg.topo =
		(struct agent_topology){.world = 64, .tp = 1, .cp = 1, .pp = 2, .dp = 32, .ep = 4, .gpus_per_node = 8};
	cfg.agent_id = id;
	cfg.host = "node-0";
	cfg.ranks = node_ranks;
	cfg.n_ranks = 8;
	cfg.flush_interval_ms = 20;
	cfg.max_batch_records = 500;
	cfg.backoff_min_ms = 5;
	cfg.backoff_max_ms = 50;
	cfg.append_timeout_ms = AGENT_WAIT_FOREVER;
	cfg.log = quiet_log;
	return cfg;
}

struct stream_sum {
	uint64_t iters, phases, kernels, checksum;
};

/* Appends iterations first..first+n-1 for the node's 8 ranks: per rank an iter, 7 phases
 * and 2 kernels. */
static void stream(struct agent *a, uint32_t first, uint32_t n, struct stream_sum *sum)
{
	int32_t names[7], kname = agent_intern(a, "sm90_gemm");

	for (int i = 0; i < 7; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "phase-%d", i);
		names[i] = agent_intern(a, nm);
		assert_true(names[i] >= 0);
	}
	for (uint32_t it = first; it < first + n; it++)
		for (uint32_t r = 0; r < 8; r++) {
			struct record_iter ri = {.rank = r, .iter = it, .start_us = 1000000 + it, .dur_us = 30000 + r};
			struct record_phase ph[7];
			struct record_kernel k[2];

			for (int p = 0; p < 7; p++)
				ph[p] = (struct record_phase){.rank = r,
							      .iter = it,
							      .name = (uint32_t)names[it % 7],
							      .kind = RECORD_KIND_COMPUTE,
							      .group = RECORD_GROUP_NONE,
							      .start_us = p == 0 ? RECORD_NO_START : p * 10,
							      .dur_us = 100 + p};
			for (int q = 0; q < 2; q++)
				k[q] = (struct record_kernel){.rank = r,
							      .iter = it,
							      .name = (uint32_t)kname,
							      .count = 9,
							      .sum_us = 500 + q,
							      .min_us = 1,
							      .max_us = 99,
							      .p50_us = 50,
							      .p99_us = 98,
							      .sketch = (const uint8_t *)"abc",
							      .sketch_len = q ? 3 : 0};
			if (it % 2 == 0) { /* one call: never split across batches (checked by the server) */
				assert_int_equal(agent_add_iteration(a, &ri, ph, 7, k, 2), 0);
			} else {
				assert_int_equal(agent_add_iters(a, &ri, 1), 0);
				assert_int_equal(agent_add_phases(a, ph, 7), 0);
				assert_int_equal(agent_add_kernels(a, k, 2), 0);
			}
			sum->iters++;
			sum->phases += 7;
			sum->kernels += 2;
			sum->checksum += r * 1000003ull + it * 31ull + 30000 + r;
			for (int p = 0; p < 7; p++)
				sum->checksum += r * 1000003ull + it * 31ull + 100 + (uint64_t)p;
			for (int q = 0; q < 2; q++)
				sum->checksum += r * 1000003ull + it * 31ull + 500 + (uint64_t)q;
		}
}

static void check_exact(struct fake_server *s, const char *id, const struct stream_sum *sum)
{
	struct fs_agent *a;

	pthread_mutex_lock(&s->mu);
	a = fs_agent_get(s, id);
	assert_int_equal(a->iters, sum->iters);
	assert_int_equal(a->phases, sum->phases);
	assert_int_equal(a->kernels, sum->kernels);
	assert_int_equal(a->checksum, sum->checksum);
	assert_int_equal(a->name_errors, 0);
	assert_int_equal(a->gaps, 0);
	assert_int_equal(a->orphans, 0);
	pthread_mutex_unlock(&s->mu);
}

/* ---- tests ---- */

static void test_stream_exact(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a1");
	struct agent *a = agent_new(&cfg);
	struct stream_sum sum = {0};
	struct agent_stats st;

	(void)state;
	assert_non_null(a);
	stream(a, 0, 200, &sum);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	assert_int_equal(st.records_appended, sum.iters + sum.phases + sum.kernels);
	assert_int_equal(st.unacked_batches, 0);
	assert_int_equal(st.batches_acked, st.batches_sealed);
	assert_int_equal(st.durable_seq, st.batches_sealed);
	assert_true(st.batches_sealed >= (200 * 8 * 10) / 500);
	assert_true(st.connected);
	check_exact(s, "a1", &sum);
	pthread_mutex_lock(&s->mu);
	assert_int_equal(fs_agent_get(s, "a1")->sketches > 0, 1);
	assert_int_equal(fs_agent_get(s, "a1")->dups, 0);
	/* one connection: each of the 8 names crossed it once, over many batches */
	assert_int_equal(fs_agent_get(s, "a1")->name_defs, 8);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* The server drops every connection after a few batches, half the time before acking the
 * last one: the agent reconnects, resends, and the server ends with exactly what was sent. */
static void test_reconnect_resend(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a2");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;

	(void)state;
	s->drop_every = 7;
	s->drop_before_ack = true;
	cfg.max_batch_records = 100;
	a = agent_new(&cfg);
	stream(a, 0, 150, &sum);
	assert_int_equal(agent_flush(a, 20000), 0);
	agent_get_stats(a, &st);
	assert_true(st.connects >= 5);
	assert_true(st.disconnects >= 4);
	assert_true(st.batches_sent > st.batches_sealed); /* some were sent twice */
	assert_int_equal(st.batches_sent, st.batches_sealed + st.batches_resent);
	assert_true(st.batches_resent > 0);
	assert_int_equal(st.batches_acked, st.batches_sealed);
	check_exact(s, "a2", &sum);
	pthread_mutex_lock(&s->mu);
	/* resend after a lost ack: HelloAck says the batch is durable, so it is not resent */
	assert_int_equal(fs_agent_get(s, "a2")->dups, 0);
	/* every new connection is told the names again (check_exact saw every name decode) */
	assert_true(fs_agent_get(s, "a2")->name_defs >= 8 * 2 && fs_agent_get(s, "a2")->name_defs <= 8 * st.connects);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* A restarted training process (same agent id) continues after the server's durable
 * sequence instead of reusing numbers the server would take for resends. */
static void test_restart_continues_sequence(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a3");
	struct agent *a;
	struct stream_sum sum = {0}, sum2 = {0};
	struct agent_stats st;

	(void)state;
	a = agent_new(&cfg);
	stream(a, 0, 20, &sum);
	assert_int_equal(agent_close(a, 10000), 0);
	/* a new life, records appended before the connection is up */
	a = agent_new(&cfg);
	stream(a, 20, 20, &sum2);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	sum.iters += sum2.iters;
	sum.phases += sum2.phases;
	sum.kernels += sum2.kernels;
	sum.checksum += sum2.checksum;
	check_exact(s, "a3", &sum);
	pthread_mutex_lock(&s->mu);
	assert_int_equal(fs_agent_get(s, "a3")->dups, 0);
	assert_int_equal(fs_agent_get(s, "a3")->durable, st.durable_seq);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

static void test_reject_drops_batch(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a4");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;

	(void)state;
	s->reject_seq = 2;
	cfg.flush_interval_ms = 60000; /* batches sealed full only: batch 2 holds 500 records */
	a = agent_new(&cfg);
	stream(a, 0, 50, &sum);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	assert_int_equal(st.batches_rejected, 1);
	assert_int_equal(st.records_rejected, 500);
	assert_int_equal(st.batches_acked + 1, st.batches_sealed);
	assert_int_equal(st.unacked_batches, 0);
	pthread_mutex_lock(&s->mu);
	assert_int_equal(fs_agent_get(s, "a4")->iters + fs_agent_get(s, "a4")->phases + fs_agent_get(s, "a4")->kernels +
				 500,
			 sum.iters + sum.phases + sum.kernels);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

static void test_goodbye_and_command(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a5");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;
	struct agent_command cmd;

	(void)state;
	s->send_goodbye = 3;
	s->send_command = true;
	a = agent_new(&cfg);
	stream(a, 0, 60, &sum);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	assert_true(st.connects >= 2);
	check_exact(s, "a5", &sum);
	assert_true(agent_command(a, &cmd));
	assert_int_equal(cmd.id, 42);
	assert_int_equal(cmd.kind, 1);
	assert_int_equal(cmd.iterations, 4);
	assert_int_equal(cmd.n_ranks, 2);
	assert_int_equal(cmd.ranks[1], 5);
	free(cmd.ranks);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* Raw kernels of a capture: validated like the other appends, sent in Batch.raw_kernels
 * with the agent's name ids (defined on the connection), exactly once with the stream. */
static void test_raw_kernels(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a9");
	struct agent *a;
	struct stream_sum sum = {0};
	struct fs_agent *fa;
	int32_t gemm;
	int64_t want = 0;

	(void)state;
	a = agent_new(&cfg);
	assert_non_null(a);
	stream(a, 0, 10, &sum);
	gemm = agent_intern(a, "flash_attn_fwd"); /* after stream's names: not id 0 */
	assert_true(gemm > 0);
	for (uint32_t i = 0; i < 20; i++) {
		struct record_raw_kernel k = {.rank = 3,
					      .iter = 9,
					      .name = (uint32_t)gemm,
					      .kind = RECORD_KIND_COMPUTE,
					      .stream = 7,
					      .start_us = 1796207474000000LL + i * 100,
					      .dur_us = 90 + i};

		assert_int_equal(agent_add_raw_kernels(a, &k, 1), 0);
		want += k.dur_us;
	}
	{
		struct record_raw_kernel bad = {
			.rank = 99, .iter = 9, .name = (uint32_t)gemm, .start_us = 1, .dur_us = 1};

		assert_int_equal(agent_add_raw_kernels(a, &bad, 1), AGENT_EINVAL); /* rank not served */
		bad.rank = 3;
		bad.kind = 7;
		assert_int_equal(agent_add_raw_kernels(a, &bad, 1), AGENT_EINVAL); /* kind */
		bad.kind = 0;
		bad.name = 9999;
		assert_int_equal(agent_add_raw_kernels(a, &bad, 1), AGENT_EINVAL); /* name never interned */
		bad.name = (uint32_t)gemm;
		bad.dur_us = -1;
		assert_int_equal(agent_add_raw_kernels(a, &bad, 1), AGENT_EINVAL);
		bad.dur_us = 1;
		bad.start_us = 0;
		assert_int_equal(agent_add_raw_kernels(a, &bad, 1), AGENT_EINVAL); /* no start */
	}
	assert_int_equal(agent_flush(a, 10000), 0);
	check_exact(s, "a9", &sum);
	pthread_mutex_lock(&s->mu);
	fa = fs_agent_get(s, "a9");
	assert_int_equal(fa->raw, 20);
	assert_int_equal(fa->raw_name_errors, 0);
	assert_int_equal(fa->raw_dur_sum, want);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* Nothing acknowledges: the buffer fills; a bounded wait returns AGENT_EFULL and counts
 * the dropped records; flush and close time out honestly. */
static void test_buffer_full_policy(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a6");
	struct agent *a;
	struct agent_stats st;
	struct record_phase ph = {.rank = 1,
				  .iter = 0,
				  .kind = RECORD_KIND_COMM,
				  .group = RECORD_GROUP_DP,
				  .start_us = RECORD_NO_START,
				  .dur_us = 5};
	int rc = 0;
	uint64_t appended = 0;
	long long t0;
	struct timespec ts;

	(void)state;
	s->no_ack = true;
	cfg.max_unacked_bytes = 20000;
	cfg.max_batch_records = 100;
	cfg.append_timeout_ms = 50;
	a = agent_new(&cfg);
	ph.name = (uint32_t)agent_intern(a, "dp_reduce_scatter");
	for (int i = 0; i < 100000 && rc == 0; i++) {
		ph.iter = (uint32_t)i;
		rc = agent_add_phases(a, &ph, 1);
		if (rc == 0)
			appended++;
	}
	assert_int_equal(rc, AGENT_EFULL);
	agent_get_stats(a, &st);
	assert_int_equal(st.records_dropped, 1);
	assert_int_equal(st.records_appended, appended);
	assert_true(st.unacked_bytes >= 20000);
	assert_true(st.unacked_bytes < 20000 + 100 * 60);
	/* AGENT_NO_WAIT equivalent through a short timeout: still full */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
	assert_int_equal(agent_flush(a, 100), AGENT_ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &ts);
	assert_true(ts.tv_sec * 1000LL + ts.tv_nsec / 1000000 - t0 >= 90);
	assert_int_equal(agent_close(a, 50), AGENT_ETIMEDOUT);
	fs_stop(s);
}

static void test_no_server_then_server(void **state)
{
	/* a port nobody listens on yet: records are held, then delivered when a server appears
	 * on it */
	struct fake_server *s = fs_start();
	char server[64];
	int port = s->port;
	struct agent_config cfg;
	struct agent *a;
	struct stream_sum sum = {0};

	(void)state;
	fs_stop(s); /* the port is free again */
	cfg = base_config(server, sizeof(server), port, "a7");
	a = agent_new(&cfg);
	stream(a, 0, 10, &sum);
	assert_int_equal(agent_flush(a, 100), AGENT_ETIMEDOUT);
	/* start a server on the same port */
	{
		struct fake_server *s2 = calloc(1, sizeof(*s2));
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
					 .sin_port = htons((uint16_t)port)};
		int one = 1;

		s2->lfd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(s2->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s2->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			/* someone else took the port: nothing to test */
			close(s2->lfd);
			free(s2);
			agent_close(a, 0);
			skip();
		}
		assert_int_equal(listen(s2->lfd, 16), 0);
		s2->port = port;
		pthread_mutex_init(&s2->mu, NULL);
		pthread_create(&s2->thr, NULL, fs_main, s2);
		assert_int_equal(agent_flush(a, 10000), 0);
		check_exact(s2, "a7", &sum);
		assert_int_equal(agent_close(a, 1000), 0);
		fs_stop(s2);
	}
}

static void test_refused_hello(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a8");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;

	(void)state;
	s->refuse_hello = true;
	a = agent_new(&cfg);
	stream(a, 0, 2, &sum);
	assert_int_equal(agent_flush(a, 300), AGENT_ETIMEDOUT);
	agent_get_stats(a, &st);
	assert_int_equal(st.connects, 0);
	assert_false(st.connected);
	assert_int_equal(st.batches_sent, 0);
	assert_int_equal(agent_close(a, 0), AGENT_ETIMEDOUT);
	fs_stop(s);
}

/* Many instances: the server the agent is configured with sends it to the job's owner,
 * where it streams; a server that keeps redirecting is followed a few times at once, then
 * with the backoff (the agent neither spins nor gives up). */
static void test_redirect(void **state)
{
	struct fake_server *s1 = fs_start(), *s2 = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s1->port, "a9");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;
	uint64_t hellos;

	(void)state;
	pthread_mutex_lock(&s1->mu);
	snprintf(s1->redirect, sizeof(s1->redirect), "127.0.0.1:%d", s2->port);
	pthread_mutex_unlock(&s1->mu);
	a = agent_new(&cfg);
	stream(a, 0, 20, &sum);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	assert_int_equal(st.connects, 1);
	check_exact(s2, "a9", &sum);
	pthread_mutex_lock(&s1->mu);
	assert_int_equal(fs_agent_get(s1, "a9")->hellos, 1);
	assert_int_equal(fs_agent_get(s1, "a9")->iters, 0);
	pthread_mutex_unlock(&s1->mu);
	assert_int_equal(agent_close(a, 1000), 0);

	/* s2 sends it to itself, again and again: 1 + AGENT_MAX_REDIRECTS (4) Hellos at once, then
	 * one per backoff (100, 200, 400, 800 ms: about 4 more in 1.5 s) */
	pthread_mutex_lock(&s2->mu);
	snprintf(s2->redirect, sizeof(s2->redirect), "127.0.0.1:%d", s2->port);
	pthread_mutex_unlock(&s2->mu);
	cfg = base_config(server, sizeof(server), s2->port, "a10");
	cfg.backoff_min_ms = 100;
	cfg.backoff_max_ms = 10000;
	cfg.give_up_refused = 3;
	a = agent_new(&cfg);
	stream(a, 0, 2, &sum);
	assert_int_equal(agent_flush(a, 1500), AGENT_ETIMEDOUT);
	pthread_mutex_lock(&s2->mu);
	hellos = fs_agent_get(s2, "a10")->hellos;
	pthread_mutex_unlock(&s2->mu);
	agent_get_stats(a, &st);
	assert_int_equal(st.connects, 0);
	assert_true(hellos >= 6 && hellos <= 12);
	assert_int_equal(agent_close(a, 0), AGENT_ETIMEDOUT);
	fs_stop(s1);
	fs_stop(s2);
}

static void test_invalid_input(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a9");
	struct agent *a;
	char longname[300];
	int32_t id;
	uint32_t bad_ranks[2] = {3, 3};
	struct record_phase ph = {.rank = 2, .kind = RECORD_KIND_COMPUTE, .start_us = RECORD_NO_START, .dur_us = 1};
	struct record_iter it = {.rank = 8, .dur_us = 1};

	(void)state;
	a = agent_new(&cfg);
	assert_non_null(a);
	id = agent_intern(a, "mlp");
	assert_true(id >= 0);
	assert_int_equal(agent_intern(a, "mlp"), id);
	assert_int_not_equal(agent_intern(a, "attn"), id);
	assert_int_equal(agent_intern(a, ""), -1);
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(agent_intern(a, longname), -1);
	ph.name = 999;
	assert_int_equal(agent_add_phases(a, &ph, 1), AGENT_EINVAL); /* name not interned */
	ph.name = (uint32_t)id;
	ph.kind = 9;
	assert_int_equal(agent_add_phases(a, &ph, 1), AGENT_EINVAL);
	ph.kind = RECORD_KIND_COMPUTE;
	ph.dur_us = -1;
	assert_int_equal(agent_add_phases(a, &ph, 1), AGENT_EINVAL);
	ph.dur_us = 1;
	assert_int_equal(agent_add_phases(a, &ph, 1), 0);
	assert_int_equal(agent_add_iters(a, &it, 1), AGENT_EINVAL); /* rank 8 not served */
	it.rank = 3;
	assert_int_equal(agent_add_iteration(a, &it, &ph, 1, NULL, 0), AGENT_EINVAL); /* phase of rank 2 */
	ph.rank = 3;
	ph.iter = 1;
	assert_int_equal(agent_add_iteration(a, &it, &ph, 1, NULL, 0), AGENT_EINVAL); /* another iteration */
	ph.iter = 0;
	assert_int_equal(agent_add_iteration(a, &it, &ph, 1, NULL, 0), 0);
	assert_int_equal(agent_close(a, 5000), 0);

	cfg.ranks = bad_ranks;
	cfg.n_ranks = 2;
	assert_null(agent_new(&cfg));
	cfg = base_config(server, sizeof(server), s->port, "a9");
	cfg.server = "127.0.0.1:notaport";
	assert_null(agent_new(&cfg));
	cfg.server = "127.0.0.1:70000";
	assert_null(agent_new(&cfg));
	cfg.server = ":7433";
	assert_null(agent_new(&cfg));
	cfg.server = "[::1";
	assert_null(agent_new(&cfg));
	cfg.server = "[::1]x";
	assert_null(agent_new(&cfg));
	{
		const char *good[] = {"[::1]:7433", "[::1]", "localhost", "localhost:7433"};

		for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
			struct agent *g;

			cfg.server = good[i];
			g = agent_new(&cfg);
			assert_non_null(g);
			assert_int_equal(agent_close(g, 0), 0); /* nothing appended: nothing to lose */
		}
	}
	cfg = base_config(server, sizeof(server), s->port, "a9");
	cfg.job = "";
	assert_null(agent_new(&cfg));
	fs_stop(s);
}

/* A server with a small max_frame: once it said so, every batch fits. */
static void test_small_max_frame(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a11");
	struct agent *a;
	struct stream_sum sum = {0};
	struct agent_stats st;

	(void)state;
	s->max_frame = 4096;
	a = agent_new(&cfg);
	for (int i = 0; i < 500; i++) {
		agent_get_stats(a, &st);
		if (st.connected)
			break;
		usleep(10000);
	}
	assert_true(st.connected);
	stream(a, 0, 100, &sum);
	assert_int_equal(agent_flush(a, 10000), 0);
	agent_get_stats(a, &st);
	assert_int_equal(st.batches_rejected, 0);
	assert_true(st.batches_sealed >= 100 * 8 * 10 * 40 / 4096);
	check_exact(s, "a11", &sum);
	pthread_mutex_lock(&s->mu);
	assert_int_equal(s->oversize, 0);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* An idle agent sends heartbeats; closing says Goodbye. */
static void test_heartbeat_goodbye(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a12");
	struct agent *a;
	struct agent_stats st = {0};
	uint64_t hb;

	(void)state;
	cfg.heartbeat_ms = 30;
	a = agent_new(&cfg);
	for (int i = 0; i < 500 && !st.connected; i++) {
		agent_get_stats(a, &st);
		usleep(10000);
	}
	assert_true(st.connected);
	usleep(400000);
	pthread_mutex_lock(&s->mu);
	hb = fs_agent_get(s, "a12")->heartbeats;
	pthread_mutex_unlock(&s->mu);
	assert_true(hb >= 4);
	assert_true(hb <= 40);
	assert_int_equal(agent_close(a, 1000), 0);
	for (int i = 0; i < 100; i++) { /* the server thread reads the Goodbye */
		uint64_t g;

		pthread_mutex_lock(&s->mu);
		g = fs_agent_get(s, "a12")->goodbyes;
		pthread_mutex_unlock(&s->mu);
		if (g)
			break;
		usleep(10000);
	}
	pthread_mutex_lock(&s->mu);
	assert_int_equal(fs_agent_get(s, "a12")->goodbyes, 1);
	pthread_mutex_unlock(&s->mu);
	fs_stop(s);
}

struct thr_arg {
	struct agent *a;
	uint32_t rank;
	int32_t name;
};

static void *appender(void *p)
{
	struct thr_arg *t = p;

	for (uint32_t it = 0; it < 5000; it++) {
		struct record_phase ph = {.rank = t->rank,
					  .iter = it,
					  .name = (uint32_t)t->name,
					  .kind = RECORD_KIND_COMPUTE,
					  .start_us = RECORD_NO_START,
					  .dur_us = it};

		if (agent_add_phases(t->a, &ph, 1) != 0)
			abort();
	}
	return NULL;
}

/* Eight threads append at once; every record arrives once. */
static void test_threads(void **state)
{
	struct fake_server *s = fs_start();
	char server[64];
	struct agent_config cfg = base_config(server, sizeof(server), s->port, "a10");
	struct agent *a = agent_new(&cfg);
	pthread_t th[8];
	struct thr_arg args[8];
	uint64_t want = 0;

	(void)state;
	for (uint32_t i = 0; i < 8; i++) {
		char nm[16];

		snprintf(nm, sizeof(nm), "phase-%u", i); /* name check: iter % 7 would not hold; skip it */
		args[i] = (struct thr_arg){a, i, agent_intern(a, nm)};
		pthread_create(&th[i], NULL, appender, &args[i]);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	for (uint32_t r = 0; r < 8; r++)
		for (uint32_t it = 0; it < 5000; it++)
			want += r * 1000003ull + it * 31ull + it;
	assert_int_equal(agent_flush(a, 20000), 0);
	pthread_mutex_lock(&s->mu);
	assert_int_equal(fs_agent_get(s, "a10")->phases, 40000);
	assert_int_equal(fs_agent_get(s, "a10")->checksum, want);
	assert_int_equal(fs_agent_get(s, "a10")->gaps, 0);
	pthread_mutex_unlock(&s->mu);
	assert_int_equal(agent_close(a, 1000), 0);
	fs_stop(s);
}

/* Many agents on one shared network thread, with connections dropping. */
static void test_shared_loop(void **state)
{
	struct fake_server *s = fs_start();
	struct agent_loop *loop = agent_loop_new();
	struct agent *ag[40];
	struct stream_sum sums[40];
	char server[64], ids[40][16];
	uint32_t ranks[40][8];

	(void)state;
	s->drop_every = 53;
	for (int i = 0; i < 40; i++) {
		struct agent_config cfg;

		snprintf(ids[i], sizeof(ids[i]), "node-%d", i);
		cfg = base_config(server, sizeof(server), s->port, ids[i]);
		for (int r = 0; r < 8; r++)
			ranks[i][r] = (uint32_t)r; /* each agent is its own job's node 0: ranks checked per agent */
		cfg.ranks = ranks[i];
		cfg.loop = loop;
		ag[i] = agent_new(&cfg);
		assert_non_null(ag[i]);
		memset(&sums[i], 0, sizeof(sums[i]));
	}
	for (int round = 0; round < 5; round++)
		for (int i = 0; i < 40; i++)
			stream(ag[i], (uint32_t)round * 10, 10, &sums[i]);
	for (int i = 0; i < 40; i++)
		assert_int_equal(agent_flush(ag[i], 20000), 0);
	for (int i = 0; i < 40; i++) {
		check_exact(s, ids[i], &sums[i]);
		assert_int_equal(agent_close(ag[i], 1000), 0);
	}
	agent_loop_free(loop);
	fs_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stream_exact),
		cmocka_unit_test(test_reconnect_resend),
		cmocka_unit_test(test_restart_continues_sequence),
		cmocka_unit_test(test_reject_drops_batch),
		cmocka_unit_test(test_goodbye_and_command),
		cmocka_unit_test(test_raw_kernels),
		cmocka_unit_test(test_buffer_full_policy),
		cmocka_unit_test(test_no_server_then_server),
		cmocka_unit_test(test_refused_hello),
		cmocka_unit_test(test_redirect),
		cmocka_unit_test(test_invalid_input),
		cmocka_unit_test(test_threads),
		cmocka_unit_test(test_shared_loop),
		cmocka_unit_test(test_small_max_frame),
		cmocka_unit_test(test_heartbeat_goodbye),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
