/* test_ingest_memory.c: culpritd's memory is bounded by its configuration, not by what
 * agents send (docs/operations.md, "Memory"). One case per run (argv[1]), each against a
 * culpritd of its own without storage, whose RSS it reads from /proc/PID/status:
 *
 *   input  64 connections each send 4 MiB - 1 byte of one frame under
 *          max_input_buffer_bytes = 16 MiB: culpritd's RSS grows by less than 56 MiB (reading
 *          them all would take 256 MiB and more), the connections over their share are
 *          paused and counted; an honest agent beside them has 20 batches of 200 KB (each
 *          read in many pieces) acknowledged in turn within 8 s (not paused with them until
 *          idle_timeout_s closes them); half of them reset their connection and are
 *          closed at once though not read, the others at their frame's deadline
 *          (frame_timeout_s 10); the held bytes go back to 0 and culpritd's RSS to within
 *          16 MiB of where it was (checked without a sanitizer, whose
 *          allocator keeps freed memory: build/rel's test_ingest_memory input).
 *   names  200 connections each define name id 65,535: RSS grows by less than 16 MiB (not
 *          768 KiB of id arrays per connection, 150 MiB), and the id still works.
 *   cap    batches of 10,000 name definitions, each with new names: the one that takes the
 *          job past max_names_per_job (65,536) is refused with that reason and its connection
 *          closed, counted; a new connection using names the job has is acknowledged.
 *   frame  one 4 MiB frame of 1.4 M one-byte names: the connection is closed as a protocol
 *          violation and culpritd's peak RSS (VmHWM) grows by less than 32 MiB (unpacking it
 *          took over 100 MB). */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "frame.h"
#include "harness.h"

#define MIB (1024L * 1024)
#define JOB "memory"
#define WORLD 256

static struct h_proc proc;

static void start(const char *const *more)
{
	const char *extra[16] = {"--storage", "false", "--log-level", "info"};
	int n = 4;
	char dir[600];

	for (; more && *more; more++)
		extra[n++] = *more;
	extra[n] = NULL;
	h_tmpdir("ingest_memory", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
}

/* A connection past Hello as agent <prefix><rank>, serving that rank. */
static int agent(const char *prefix, uint32_t rank)
{
	char id[64];
	int fd = h_connect(proc.agent_port);

	snprintf(id, sizeof(id), "%s%u", prefix, rank);
	H_CHECK(fd >= 0 && h_hello(fd, JOB, id, WORLD, rank), &proc);
	return fd;
}

/* A batch: the name definitions (ids[i] -> names[i]), and one phase of rank named by name id
 * phase_id when phase_id >= 0. */
static void send_batch(int fd, uint64_t seq, uint32_t rank, size_t n_defs, const uint32_t *ids, char **names,
		       int64_t phase_id)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__NameDef *defs = calloc(n_defs + 1, sizeof(*defs)), **pdefs = calloc(n_defs + 1, sizeof(*pdefs));
	uint32_t iter = 1, name = (uint32_t)phase_id, zero = 0;
	int64_t start = -1, dur = 1000;

	H_CHECK(defs && pdefs, &proc);
	for (size_t i = 0; i < n_defs; i++) {
		culprit__v1__name_def__init(&defs[i]);
		defs[i].id = ids[i];
		defs[i].name = names[i];
		pdefs[i] = &defs[i];
	}
	b.seq = seq;
	b.name_defs = pdefs;
	b.n_name_defs = n_defs;
	if (phase_id >= 0) {
		b.phase_rank = &rank, b.n_phase_rank = 1;
		b.phase_iter = &iter, b.n_phase_iter = 1;
		b.phase_name = &name, b.n_phase_name = 1;
		b.phase_kind = &zero, b.n_phase_kind = 1;
		b.phase_group = &zero, b.n_phase_group = 1;
		b.phase_start_us = &start, b.n_phase_start_us = 1;
		b.phase_dur_us = &dur, b.n_phase_dur_us = 1;
	}
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
	free(defs);
	free(pdefs);
}

/* A batch of rank's one phase, its dictionary of n names of about 100 bytes each (the same
 * names every time: a frame of about n * 100 bytes, read in many pieces). */
static void send_big_batch(int fd, uint64_t seq, uint32_t rank, size_t n)
{
	static char text[4096][128];
	static char *names[4096];
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	uint32_t iter = (uint32_t)seq, zero = 0;
	int64_t start = -1, dur = 1000;

	H_CHECK(n <= 4096, NULL);
	for (size_t i = 0; i < n; i++) {
		snprintf(text[i], sizeof(text[i]), "kernel_%04zu_%0100d", i, 0);
		names[i] = text[i];
	}
	b.seq = seq;
	b.names = names, b.n_names = n;
	b.phase_rank = &rank, b.n_phase_rank = 1;
	b.phase_iter = &iter, b.n_phase_iter = 1;
	b.phase_name = &zero, b.n_phase_name = 1;
	b.phase_kind = &zero, b.n_phase_kind = 1;
	b.phase_group = &zero, b.n_phase_group = 1;
	b.phase_start_us = &start, b.n_phase_start_us = 1;
	b.phase_dur_us = &dur, b.n_phase_dur_us = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
}

static int case_input(void)
{
	enum { N = 64, CHUNK = 64 * 1024, HONEST = 20 };
	const long budget = 16 * MIB;
	const char *more[] = {"--max-input-buffer-bytes", "16777216", "--frame-timeout-s", "10", NULL};
	const size_t frame = FRAME_HEADER + 4 * MIB - 1; /* all but the last byte of a 4 MiB body */
	uint8_t *buf = calloc(1, CHUNK);                 /* the frame header, then zeros */
	uint32_t be = htobe32(4 * MIB);
	size_t sent[N] = {0}, total = 0;
	int fds[N], good;
	long rss0, rss1, rss2;
	double received = 0, held;
	int64_t t0, took;

	H_CHECK(buf != NULL, NULL);
	start(more);
	for (int i = 0; i < N; i++) {
		fds[i] = agent("holder-", (uint32_t)i);
		fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK);
	}
	good = agent("good-", WORLD - 1);
	rss0 = rss_kib(proc.pid);
	/* every holder writes as long as culpritd (or the kernel's buffers) take bytes */
	memcpy(buf, &be, sizeof(be));
	for (;;) {
		struct pollfd pfd[N];
		int n = 0, progress = 0;

		for (int i = 0; i < N; i++) {
			/* the header from buf, the body from past it (zeros) */
			const uint8_t *from = buf + (sent[i] < FRAME_HEADER ? sent[i] : FRAME_HEADER);
			size_t want = frame - sent[i], room = CHUNK - (size_t)(from - buf);
			ssize_t w;

			if (!want)
				continue;
			w = send(fds[i], from, want < room ? want : room, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (w > 0)
				sent[i] += (size_t)w, total += (size_t)w, progress = 1;
			else
				H_CHECK(errno == EAGAIN || errno == EWOULDBLOCK, &proc);
			if (sent[i] < frame)
				pfd[n++] = (struct pollfd){.fd = fds[i], .events = POLLOUT};
		}
		if (n == 0 || (!progress && poll(pfd, (nfds_t)n, 2000) == 0))
			break; /* all sent, or culpritd reads none of them */
	}
	/* what culpritd will read of it: everything (it was unbounded) or up to the budget */
	for (int64_t deadline = h_now_ms() + 5000, stable_since = h_now_ms(); h_now_ms() < deadline;) {
		double r = h_get_metric(proc.http_port, "culprit_agent_received_bytes_total");

		if (r != received)
			stable_since = h_now_ms(), received = r;
		if (received >= (double)total || h_now_ms() - stable_since > 1000)
			break;
		poll(NULL, 0, 50);
	}
	rss1 = rss_kib(proc.pid);
	held = h_get_metric(proc.http_port, "culprit_agent_input_buffer_bytes");
	fprintf(stderr,
		"input: %d holders sent %zu MiB, culpritd read %.0f MiB, holds %.1f MiB, RSS +%ld MiB (budget %ld "
		"MiB)\n",
		N, total / MIB, received / MIB, held / MIB, (rss1 - rss0) / 1024, budget / MIB);
	H_CHECK(rss1 - rss0 < (2 * budget + 24 * MIB) / 1024, &proc);
	H_CHECK(held >= 0 && held <= 2 * budget + N * 64 * 1024, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_input_paused_total") >= N / 2, &proc);
	H_CHECK(h_log_wait(&proc, "not reading from those over their share", 1, 5000), &proc);

	/* the honest agent's batches of 200 KB (within its share, 16 MiB / 65) are read and
	 * acknowledged one after the other: the holders are not read, it is (it was paused with
	 * them until they were closed) */
	t0 = h_now_ms();
	for (int i = 1; i <= HONEST; i++) {
		send_big_batch(good, (uint64_t)i, WORLD - 1, 2000);
		H_CHECK(h_wait_ack(good, (uint64_t)i), &proc);
	}
	took = h_now_ms() - t0;
	fprintf(stderr, "input: %d honest batches of 200 KB acknowledged in %lld ms beside them\n", HONEST,
		(long long)took);
	H_CHECK(took < 8000, &proc); /* before their frames' 10 s deadline */

	/* half the holders reset their connection: culpritd sees it though it does not read them */
	for (int i = 0; i < N / 2; i++) {
		struct linger l = {1, 0};

		setsockopt(fds[i], SOL_SOCKET, SO_LINGER, &l, sizeof(l));
		close(fds[i]);
	}
	for (int64_t deadline = h_now_ms() + 5000; h_now_ms() < deadline;) {
		if (h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"peer\"}") >= N / 2)
			break;
		poll(NULL, 0, 100);
	}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"peer\"}") >= N / 2,
		&proc);
	/* the others say nothing more: closed at their frame's deadline, not at idle_timeout_s */
	for (int64_t deadline = h_now_ms() + 20000; h_now_ms() < deadline;) {
		if (h_get_metric(proc.http_port, "culprit_agent_input_buffer_bytes") == 0)
			break;
		poll(NULL, 0, 200);
	}
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_input_buffer_bytes") == 0, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"frame_timeout\"}") >=
			N / 2,
		&proc);
	H_CHECK(h_log_wait(&proc, "frame_timeout_s 10); closing the connection", 1, 5000), &proc);
	H_CHECK(h_log_wait(&proc, "under half of max_input_buffer_bytes again", 1, 5000), &proc);
	/* and their memory went back to the system */
	for (int64_t deadline = h_now_ms() + 5000; h_now_ms() < deadline && rss_kib(proc.pid) - rss0 >= 16 * 1024;)
		poll(NULL, 0, 200);
	rss2 = rss_kib(proc.pid);
	fprintf(stderr, "input: RSS +%ld MiB once they left\n", (rss2 - rss0) / 1024);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/* (a sanitizer's allocator keeps what is freed in its quarantine: not checked there) */
	H_CHECK(rss2 - rss0 < 16 * 1024, &proc);
#endif
	send_big_batch(good, HONEST + 1, WORLD - 1, 1);
	H_CHECK(h_wait_ack(good, HONEST + 1), &proc);
	for (int i = N / 2; i < N; i++)
		close(fds[i]);
	free(buf);
	return 0;
}

static int case_names(void)
{
	enum { N = 200 };
	int fds[N];
	long rss0, rss1;
	uint32_t id = 65535;
	char *name = (char *)"sm90_gemm";

	start(NULL);
	for (int i = 0; i < N; i++)
		fds[i] = agent("ids-", (uint32_t)i);
	rss0 = rss_kib(proc.pid);
	for (int i = 0; i < N; i++)
		send_batch(fds[i], 1, (uint32_t)i, 1, &id, &name, -1);
	for (int i = 0; i < N; i++)
		H_CHECK(h_wait_ack(fds[i], 1), &proc);
	rss1 = rss_kib(proc.pid);
	fprintf(stderr, "names: %d connections defining name id 65535: RSS +%ld KiB\n", N, rss1 - rss0);
	H_CHECK(rss1 - rss0 < 16 * MIB / 1024, &proc);
	/* the id names what it was defined as */
	send_batch(fds[7], 2, 7, 0, NULL, NULL, 65535);
	H_CHECK(h_wait_ack(fds[7], 2), &proc);
	send_batch(fds[8], 2, 8, 0, NULL, NULL, 65534);
	frame_envelope *e = h_recv_env(fds[8], 20000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT && strstr(e->reject->reason, "not defined"),
		&proc);
	frame_free(e);
	for (int i = 0; i < N; i++)
		close(fds[i]);
	return 0;
}

static int case_cap(void)
{
	enum { DEFS = 10000, BATCHES = 96 }; /* 960,000 names at most */
	static char text[DEFS][32];
	static char *names[DEFS];
	static uint32_t ids[DEFS];
	int fd, refused = 0;
	uint64_t seq;
	frame_envelope *e;

	start(NULL);
	fd = agent("names-", 0);
	for (seq = 1; seq <= BATCHES && !refused; seq++) {
		for (int i = 0; i < DEFS; i++) {
			snprintf(text[i], sizeof(text[i]), "kernel_%llu_%d", (unsigned long long)seq, i);
			names[i] = text[i];
			ids[i] = (uint32_t)i;
		}
		send_batch(fd, seq, 0, DEFS, ids, names, -1);
		e = h_recv_env(fd, 20000);
		H_CHECK(e && (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK ||
			      e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT),
			&proc);
		if (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT) {
			fprintf(stderr, "cap: batch %llu refused: %s\n", (unsigned long long)seq, e->reject->reason);
			H_CHECK(e->reject->seq == seq && strstr(e->reject->reason, "max_names_per_job (65536)"), &proc);
			refused = 1;
		}
		frame_free(e);
	}
	/* the batch that crosses 65,536 names: the 7th */
	H_CHECK(refused && seq - 1 == 7, &proc);
	H_CHECK(h_peer_closed(fd, 5000), &proc);
	close(fd);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_names_over_limit_total") == 1, &proc);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"refused\"}") == 1, &proc);
	/* names the job has are still good */
	fd = agent("names-", 1);
	ids[0] = 3;
	names[0] = (char *)"kernel_2_17";
	send_batch(fd, 1, 1, 1, ids, names, 3);
	H_CHECK(h_wait_ack(fd, 1), &proc);
	close(fd);
	return 0;
}

static int case_frame(void)
{
	enum { N = 1398000 }; /* 3 bytes each on the wire: a frame of 4 MiB */
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	char **names = malloc(N * sizeof(*names));
	int fd;
	long rss0, hwm;
	double malformed0;
	frame_envelope *reply;

	H_CHECK(names != NULL, NULL);
	for (size_t i = 0; i < N; i++)
		names[i] = (char *)"a";
	b.seq = 1;
	b.names = names;
	b.n_names = N;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	H_CHECK(frame_packed_size(&env) <= FRAME_HEADER + 4 * MIB, NULL);
	start(NULL);
	fd = agent("frame-", 0);
	malformed0 = h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}");
	rss0 = rss_kib(proc.pid);
	h_send_env(fd, &env);
	reply = h_recv_env(fd, 20000); /* NULL: closed (it was a Reject "too many names") */
	hwm = status_kib(proc.pid, "VmHWM");
	fprintf(stderr, "frame: %zu-byte frame of %d one-byte names: peak RSS +%ld MiB\n", frame_packed_size(&env), N,
		(hwm - rss0) / 1024);
	H_CHECK(hwm - rss0 < 32 * MIB / 1024, &proc);
	H_CHECK(reply == NULL, &proc);
	close(fd);
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}") == malformed0 + 1,
		&proc);
	H_CHECK(h_log_wait(&proc, "frame would take more than 16 times its size to unpack", 1, 5000), &proc);
	free(names);
	return 0;
}

int main(int argc, char **argv)
{
	int rc;

	if (argc != 2) {
		fprintf(stderr, "usage: %s input|names|cap|frame\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[1], "input") == 0)
		rc = case_input();
	else if (strcmp(argv[1], "names") == 0)
		rc = case_names();
	else if (strcmp(argv[1], "cap") == 0)
		rc = case_cap();
	else if (strcmp(argv[1], "frame") == 0)
		rc = case_frame();
	else
		return 2;
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "ok\n");
	return rc;
}
