/* bench_rest_sizes: REST requests/s on kept-alive connections by answer size.
 *
 *   bench_rest_sizes CULPRITD [--runs R] [--seconds S] [--conns C] [--pin]
 *
 * Starts CULPRITD (--storage false: every answer from memory) and keeps C connections
 * (default 64) busy, one request in flight on each, as wrk does, for answers of four sizes:
 *
 *   2 KB, 19 KB  GET /api/v1/jobs/{job}/reports/latest, a report culpritd holds as text: of
 *                a job of 8,192 ranks this process streams through the agent protocol (two
 *                agents of 4,096 ranks), 24 iterations of 150 ms then 12 where L ranks start
 *                445 ms late (a host-side delay: their allreduce is the shortest, the others
 *                wait in theirs). The report lists the late arrivers (up to 64): L = 1 makes
 *                2 KB, L = 60 19 KB (as case5's report).
 *   200 KB, 1 MB GET /api/v1/jobs, the list of the jobs culpritd holds, built for each
 *                request: this process says Hello for jobs (one agent each, closed after its
 *                HelloAck) until the list is that long. No answer culpritd holds as text is
 *                that large (reports list at most 64 suspects); the CPU a request shows what
 *                building the list costs.
 *
 * For each size R runs (default 5) of S seconds (default 5, after 1 s of warm-up) print
 * requests/s, MB/s and culpritd's CPU per request, then the medians. --pin runs culpritd on
 * CPU 0 and this process on CPU 1 (2 cores: the nearest thing to a client of its own). */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "frame.h"
#include "harness.h"

#define WORLD 8192
#define PER_AGENT 4096
#define BASE_ITERS 24
#define SLOW_ITERS 12
#define MAX_CONNS 1024

struct client {
	int fd;
	const char *request;
	char head[8192];
	size_t head_len;
	long body_left; /* -1: reading the head */
};

static struct h_proc proc;
static struct client clients[MAX_CONNS];

/* A batch of iteration it of the agent serving ranks first .. first + PER_AGENT - 1: each
 * rank's iteration, its "fwd" (compute, 100 ms) and its "allreduce" (communication along dp).
 * From iteration BASE_ITERS on, the ranks below late start 445 ms late and wait 5 ms in the
 * allreduce; the others wait 450 ms for them. 2% of jitter everywhere. */
static void send_iteration(int fd, uint64_t seq, uint32_t first, uint32_t it, uint32_t late, int64_t t0_us)
{
	static uint32_t rank[PER_AGENT], iter[PER_AGENT], prank[2 * PER_AGENT], piter[2 * PER_AGENT],
		pname[2 * PER_AGENT], pkind[2 * PER_AGENT], pgroup[2 * PER_AGENT];
	static int64_t start[PER_AGENT], dur[PER_AGENT], pstart[2 * PER_AGENT], pdur[2 * PER_AGENT];
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	char *names[] = {(char *)"fwd", (char *)"allreduce"};
	int slow = it >= BASE_ITERS;
	int64_t step_us = 1000000; /* iterations start a second apart */

	for (uint32_t i = 0; i < PER_AGENT; i++) {
		uint32_t r = first + i, h = (r * 2654435761u) ^ (it * 40503u);
		double j = 1.0 + ((double)(h % 2001) - 1000.0) / 50000.0; /* 0.98 .. 1.02 */
		int is_late = slow && r < late;
		int64_t fwd = (int64_t)(100000 * j), wait = !slow     ? (int64_t)(50000 * j)
							    : is_late ? 5000
								      : (int64_t)(450000 * j);

		rank[i] = r;
		iter[i] = it;
		start[i] = t0_us + (int64_t)it * step_us + (is_late ? 445000 : 0);
		dur[i] = fwd + wait;
		prank[2 * i] = prank[2 * i + 1] = r;
		piter[2 * i] = piter[2 * i + 1] = it;
		pname[2 * i] = 0, pname[2 * i + 1] = 1;
		pkind[2 * i] = 0, pkind[2 * i + 1] = 1;
		pgroup[2 * i] = 0, pgroup[2 * i + 1] = 4; /* dp */
		pstart[2 * i] = 0, pstart[2 * i + 1] = fwd;
		pdur[2 * i] = fwd, pdur[2 * i + 1] = wait;
	}
	b.seq = seq;
	b.names = names, b.n_names = 2;
	b.iter_rank = rank, b.n_iter_rank = PER_AGENT;
	b.iter_iter = iter, b.n_iter_iter = PER_AGENT;
	b.iter_start_us = start, b.n_iter_start_us = PER_AGENT;
	b.iter_dur_us = dur, b.n_iter_dur_us = PER_AGENT;
	b.phase_rank = prank, b.n_phase_rank = 2 * PER_AGENT;
	b.phase_iter = piter, b.n_phase_iter = 2 * PER_AGENT;
	b.phase_name = pname, b.n_phase_name = 2 * PER_AGENT;
	b.phase_kind = pkind, b.n_phase_kind = 2 * PER_AGENT;
	b.phase_group = pgroup, b.n_phase_group = 2 * PER_AGENT;
	b.phase_start_us = pstart, b.n_phase_start_us = 2 * PER_AGENT;
	b.phase_dur_us = pdur, b.n_phase_dur_us = 2 * PER_AGENT;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
	H_CHECK(h_wait_ack(fd, seq), &proc);
}

/* Streams job (late ranks late from iteration BASE_ITERS on) and waits for its report after
 * the last iteration; returns the report's size. */
static long stream_job(const char *job, uint32_t late)
{
	int fds[WORLD / PER_AGENT];
	int64_t t0_us = ((int64_t)time(NULL) - 3600) * 1000000;
	char path[256], *body = NULL;
	long size = 0, last = -1;

	for (int a = 0; a < WORLD / PER_AGENT; a++) {
		char agent[16];

		snprintf(agent, sizeof(agent), "a%d", a);
		fds[a] = h_connect(proc.agent_port);
		H_CHECK(fds[a] >= 0 && h_hello_ok(fds[a], &(struct h_hello){.job = job,
									    .agent = agent,
									    .world = WORLD,
									    .pp = 1,
									    .dp = WORLD,
									    .ep = 1,
									    .first_rank = (uint32_t)a * PER_AGENT,
									    .n_ranks = PER_AGENT}),
			&proc);
	}
	for (uint32_t it = 1; it <= BASE_ITERS + SLOW_ITERS; it++)
		for (int a = 0; a < WORLD / PER_AGENT; a++)
			send_iteration(fds[a], it, (uint32_t)a * PER_AGENT, it, late, t0_us);
	/* the report of the whole window: its size stops changing */
	snprintf(path, sizeof(path), "/api/v1/jobs/%s/reports/latest", job);
	for (int stable = 0, i = 0; stable < 10 && i < 3000; i++) {
		if (h_http(proc.http_port, "GET", path, NULL, &body) == 200) {
			size = (long)strlen(body);
			stable = size == last ? stable + 1 : 0;
			last = size;
		}
		free(body);
		body = NULL;
		usleep(100000); /* polls for the diagnosis */
	}
	H_CHECK(size > 0, &proc);
	for (int a = 0; a < WORLD / PER_AGENT; a++)
		close(fds[a]);
	return size;
}

/* The size of the answer to path now. */
static long answer_size(const char *path)
{
	char *body = NULL;
	long n;

	H_CHECK(h_http(proc.http_port, "GET", path, NULL, &body) == 200, &proc);
	n = (long)strlen(body);
	free(body);
	return n;
}

/* New jobs of one rank until the jobs list is at least size bytes; its size. */
static long jobs_list_to(long size)
{
	static int n_jobs;
	long now = answer_size("/api/v1/jobs");

	while (now < size) {
		for (int i = 0; i < 16; i++) {
			char job[64];
			int fd = h_connect(proc.agent_port);

			snprintf(job, sizeof(job), "rest-sizes-list-%05d", n_jobs++);
			H_CHECK(fd >= 0 && h_hello(fd, job, "a0", 1, 0), &proc);
			close(fd);
		}
		now = answer_size("/api/v1/jobs");
	}
	return now;
}

/* culpritd on ports of its own, its log in dir (on CPU 0 when pinned, this process on 1). */
static void start(const char *culpritd, const char *dir, int do_pin)
{
	const char *extra[] = {"--storage", "false",       "--max-jobs", "20000", "--max-http-connections",
			       "4096",      "--log-level", "info",       NULL};

	h_culpritd_bin = culpritd;
	if (do_pin)
		pin_cpu(0); /* culpritd inherits it */
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	if (do_pin)
		pin_cpu(1);
}

static void client_send(struct client *c)
{
	c->head_len = 0;
	c->body_left = -1;
	H_CHECK(h_write_all(c->fd, c->request, strlen(c->request)) == 0, &proc);
}

/* Reads what fd has; returns the answers it completed. */
static long client_read(struct client *c)
{
	static char buf[1 << 16];
	long done = 0;
	ssize_t n;

	while ((n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		for (ssize_t at = 0; at < n;) {
			if (c->body_left < 0) { /* the head, up to its blank line */
				const char *cl;

				H_CHECK(c->head_len + 1 < sizeof(c->head), &proc);
				c->head[c->head_len++] = buf[at++];
				if (c->head_len < 4 || memcmp(c->head + c->head_len - 4, "\r\n\r\n", 4) != 0)
					continue;
				c->head[c->head_len] = '\0';
				H_CHECK(strncmp(c->head, "HTTP/1.1 200", 12) == 0, &proc);
				cl = strcasestr(c->head, "\r\nContent-Length: ");
				H_CHECK(cl != NULL, &proc);
				c->body_left = strtol(cl + 18, NULL, 10);
			} else {
				long take = n - at < c->body_left ? n - at : c->body_left;

				at += take;
				c->body_left -= take;
			}
			if (c->body_left == 0) {
				H_CHECK(at == n, &proc); /* one request in flight: nothing after its answer */
				done++;
				client_send(c);
				break;
			}
		}
	}
	H_CHECK(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK), &proc);
	return done;
}

/* Keeps every connection's request going for secs seconds; answers completed. */
static long load(int ep, double secs)
{
	struct epoll_event evs[256];
	double until = now_s() + secs;
	long done = 0;

	while (now_s() < until) {
		int n = epoll_wait(ep, evs, 256, 100);

		for (int i = 0; i < n; i++)
			done += client_read(&clients[evs[i].data.u32]);
	}
	return done;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"runs", required_argument, NULL, 'r'},
					     {"seconds", required_argument, NULL, 's'},
					     {"conns", required_argument, NULL, 'c'},
					     {"pin", no_argument, NULL, 'p'},
					     {NULL, 0, NULL, 0}};
	static const struct {
		const char *name;
		uint32_t late; /* a report of a job with late late arrivers, or (0) the jobs list ... */
		long bytes;    /* ... of this many bytes */
	} sizes[] = {{"2 KB", 1, 0}, {"19 KB", 60, 0}, {"200 KB", 0, 200000}, {"1 MB", 0, 1000000}};
	int runs = 5, conns = 64, do_pin = 0, o, ep;
	double secs = 5;
	char dir[] = "/tmp/bench_rest_sizes.XXXXXX";

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'r')
			runs = atoi(optarg);
		else if (o == 's')
			secs = atof(optarg);
		else if (o == 'c')
			conns = atoi(optarg);
		else if (o == 'p')
			do_pin = 1;
		else
			return 2;
	}
	if (optind != argc - 1 || runs < 1 || runs > 99 || conns < 1 || conns > MAX_CONNS || secs <= 0) {
		fprintf(stderr, "usage: bench_rest_sizes CULPRITD [--runs R] [--seconds S] [--conns C] [--pin]\n");
		return 2;
	}
	if (!mkdtemp(dir))
		return 1;
	start(argv[optind], dir, do_pin);
	printf("culpritd %s, %d kept-alive connections, %d runs of %.0f s per size%s\n", argv[optind], conns, runs,
	       secs, do_pin ? ", culpritd on cpu 0, this client on cpu 1" : "");
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		double rate[100], mbs[100], cpu_us[100];
		char job[64], request[256];
		long bytes;

		if (sizes[s].late) {
			snprintf(job, sizeof(job), "rest-sizes-%u-late", sizes[s].late);
			bytes = stream_job(job, sizes[s].late);
			snprintf(request, sizeof(request),
				 "GET /api/v1/jobs/%s/reports/latest HTTP/1.1\r\nHost: bench\r\n\r\n", job);
		} else {
			bytes = jobs_list_to(sizes[s].bytes);
			snprintf(request, sizeof(request), "GET /api/v1/jobs HTTP/1.1\r\nHost: bench\r\n\r\n");
		}
		ep = epoll_create1(EPOLL_CLOEXEC);
		for (int i = 0; i < conns; i++) {
			struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

			clients[i].fd = h_connect(proc.http_port);
			clients[i].request = request;
			H_CHECK(clients[i].fd >= 0 && epoll_ctl(ep, EPOLL_CTL_ADD, clients[i].fd, &ev) == 0, &proc);
			client_send(&clients[i]);
		}
		load(ep, 1.0); /* warm-up */
		for (int r = 0; r < runs; r++) {
			double t0 = now_s(), c0 = cpu_s(proc.pid), c1, t1;
			long n = load(ep, secs);

			t1 = now_s();
			c1 = cpu_s(proc.pid);
			rate[r] = (double)n / (t1 - t0);
			mbs[r] = rate[r] * (double)bytes / 1e6;
			cpu_us[r] = n ? (c1 - c0) * 1e6 / (double)n : 0;
			printf("%-6s (%7ld bytes, %s) run %d: %8.0f requests/s, %7.1f MB/s, culpritd %6.1f us CPU a "
			       "request\n",
			       sizes[s].name, bytes, sizes[s].late ? "report" : "jobs list", r + 1, rate[r], mbs[r],
			       cpu_us[r]);
			fflush(stdout);
		}
		printf("%-6s (%7ld bytes, %s) median: %.0f requests/s, %.1f MB/s, culpritd %.1f us CPU a request\n",
		       sizes[s].name, bytes, sizes[s].late ? "report" : "jobs list", median(rate, runs),
		       median(mbs, runs), median(cpu_us, runs));
		fflush(stdout);
		for (int i = 0; i < conns; i++)
			close(clients[i].fd);
		close(ep);
	}
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	return 0;
}
