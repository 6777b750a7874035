/* bench_hostile: healthy agents' ingest rate through culpritd with and without hostile
 * connections beside them.
 *
 *   bench_hostile CULPRITD [--healthy N] [--hostile N] [--runs R] [--seconds S]
 *                 [--hostile-addrs K] [--hostile-pause-ms MS] [--per-addr-limit L]
 *                 [--hello-timeout-ms T] [--before-hello-limit B] [--kinds K,K...]
 *                 [--rate BATCHES_PER_S] [--pin] [--check]
 *
 * Starts CULPRITD with --storage false (the listener and the windows, no PostgreSQL: the
 * figure is the agent path's), connects N healthy agents (default 10,000) speaking the raw
 * protocol from this process, one rank each of one job, spread over source addresses
 * 127.0.1.x (100 an address), and keeps each streaming: a batch (1 iteration and 8 phase
 * records of its rank) sent, the next one when the Ack comes, two in flight. Then R times
 * (default 3), interleaved: S seconds (default 10) counting acknowledged records alone, then
 * a separate process opens N hostile connections (default 1,000) from K source addresses
 * 127.0.2.x (default 5), a fifth each of:
 *   slowloris   a valid Hello, one byte every 100 ms (never finishes before hello_timeout_ms)
 *   oversized   a length prefix of 0xffffffff, then junk
 *   garbage     a length prefix of 200 and 200 random bytes (not a protocol message)
 *   half-open   connects and sends nothing
 *   flood       connects, sends a valid Hello of job "flood", closes at once
 * each reconnecting MS ms (default 100) after culpritd closed it (or it closed itself), and S
 * seconds are counted with them. Prints the healthy records/s of each window, the medians,
 * their ratio, the healthy batches' Ack latency (p50, p99), culpritd's CPU and RSS, the close
 * counters from /metrics and whether culpritd is still alive.
 *
 * --rate paces the healthy agents at BATCHES_PER_S in all (round the agents, as training steps
 * would) instead of each sending as fast as its Acks come; the figure is then whether culpritd
 * keeps up with that load and how late its Acks come. --pin runs culpritd on CPU 1 and this
 * process and the hostile one on CPU 0: on a 2-core machine the nearest thing to clients on a
 * machine of their own, so that the hostile process's own CPU is not taken from culpritd. 
 *
 * --check (the ctest, small numbers): exit 1 unless every healthy agent was acknowledged in
 * every window, culpritd counted the hostile closes (protocol, hello_timeout; per_address
 * when the hostile connections of one address exceed --per-addr-limit; before_hello when the
 * slowloris and half-open ones exceed --before-hello-limit) and the bytes it received,
 * culpritd is alive, and its RSS grew by less than 64 MiB. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "harness.h"
#include "frame.h"

#define PHASES 8
#define DEPTH 2     /* batches in flight per healthy agent */
#define PER_SRC 100 /* healthy agents per source address */
#define INBUF 4096

static int agent_port, http_port;
static pid_t culpritd_pid;

/* A socket from 127.<net>.<host / 256>.<host % 256 + 1> to culpritd's agent port, connecting
 * (non-blocking when nb: then the connect may be in progress). -1 on failure. */
static int connect_from(int net, int host, bool nb)
{
	struct sockaddr_in src = {0}, dst = {0};
	int fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0) | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	src.sin_family = AF_INET;
	src.sin_addr.s_addr =
		htonl((127u << 24) | ((unsigned)net << 16) | ((unsigned)host / 256 << 8) | ((unsigned)host % 256 + 1));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)agent_port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    (connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0 && !(nb && errno == EINPROGRESS))) {
		close(fd);
		return -1;
	}
	return fd;
}

static size_t pack_hello(uint8_t *buf, const char *job, const char *agent, uint32_t world, uint32_t rank)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;

	t.world = world, t.tp = 1, t.cp = 1, t.pp = 1, t.dp = world, t.ep = 1, t.gpus_per_node = 8;
	t.order = (char *)"tp-cp-ep-dp-pp";
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)job;
	h.topology = &t;
	h.agent_id = (char *)agent;
	h.host = (char *)"bench";
	h.ranks = &rank;
	h.n_ranks = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	return frame_pack(&env, buf);
}

/* GET /metrics into a malloc'd string (NULL on failure). */
static char *get_metrics(void)
{
	struct sockaddr_in a = {0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	static const char req[] = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	ssize_t n;

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)http_port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || !buf || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
		if (fd >= 0)
			close(fd);
		free(buf);
		return NULL;
	}
	while ((n = recv(fd, buf + len, cap - len - 1, 0)) > 0) {
		len += (size_t)n;
		if (len + 1 == cap) {
			char *p = realloc(buf, cap *= 2);

			if (!p)
				break;
			buf = p;
		}
	}
	close(fd);
	buf[len] = '\0';
	return buf;
}

static double metric(const char *text, const char *sample)
{
	size_t n = strlen(sample);

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, sample, n) == 0 && p[n] == ' ')
			return atof(p + n + 1);
	return -1;
}

/* ---- healthy agents ---- */

struct healthy {
	int fd;
	bool active, lost;
	uint64_t sent_seq, acked_seq;
	uint64_t acked_in_window; /* batches */
	uint32_t owed;            /* paced: batches due but not sent (DEPTH already in flight) */
	double sent_at[DEPTH];    /* when batch seq was sent, at [seq % DEPTH] */
	size_t in_len;
	uint8_t in[INBUF];
};

static struct {
	struct healthy *a;
	uint32_t n;
	int ep;
	uint64_t acked_records, lost, write_short;
	int64_t t0_us;
	uint8_t batch_buf[2048];
	double rate;        /* paced: batches a second over all agents; 0: each as fast as Acks come */
	double pace_t0;     /* paced: when batch number 0 was due */
	uint64_t scheduled; /* paced: batches made due so far, agent scheduled % n each */
	float *lat;         /* Ack latencies (seconds) of the window being counted */
	size_t n_lat, cap_lat;
} H;

static int healthy_send_batch(struct healthy *h, uint32_t rank)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	static char n0[] = "p0", n1[] = "p1", n2[] = "p2", n3[] = "p3", n4[] = "p4", n5[] = "p5", n6[] = "p6",
		    n7[] = "p7";
	char *names[PHASES] = {n0, n1, n2, n3, n4, n5, n6, n7};
	uint32_t ir = rank, ii, pr[PHASES], pi[PHASES], pn[PHASES], pk[PHASES], pg[PHASES];
	int64_t is, id = 1000000, ps[PHASES], pd[PHASES];
	uint64_t seq = h->sent_seq + 1;
	size_t n;

	ii = (uint32_t)seq;
	is = H.t0_us + (int64_t)seq * 1000000;
	for (int k = 0; k < PHASES; k++) {
		pr[k] = rank, pi[k] = ii, pn[k] = (uint32_t)k, pk[k] = k % 2 ? 1 : 0, pg[k] = k % 2 ? 4 : 0;
		ps[k] = k * 100000, pd[k] = 90000;
	}
	b.seq = seq;
	b.names = names, b.n_names = PHASES;
	b.iter_rank = &ir, b.n_iter_rank = 1;
	b.iter_iter = &ii, b.n_iter_iter = 1;
	b.iter_start_us = &is, b.n_iter_start_us = 1;
	b.iter_dur_us = &id, b.n_iter_dur_us = 1;
	b.phase_rank = pr, b.n_phase_rank = PHASES;
	b.phase_iter = pi, b.n_phase_iter = PHASES;
	b.phase_name = pn, b.n_phase_name = PHASES;
	b.phase_kind = pk, b.n_phase_kind = PHASES;
	b.phase_group = pg, b.n_phase_group = PHASES;
	b.phase_start_us = ps, b.n_phase_start_us = PHASES;
	b.phase_dur_us = pd, b.n_phase_dur_us = PHASES;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	n = frame_pack(&env, H.batch_buf);
	if (send(h->fd, H.batch_buf, n, MSG_NOSIGNAL) != (ssize_t)n) {
		H.write_short++; /* a few hundred bytes into an empty loopback socket: not expected */
		return -1;
	}
	h->sent_seq = seq;
	h->sent_at[seq % DEPTH] = now_s();
	return 0;
}

static void healthy_lose(struct healthy *h, const char *why, uint32_t i)
{
	if (H.lost++ < 5)
		fprintf(stderr, "bench_hostile: healthy agent %u lost: %s\n", i, why);
	h->lost = true;
	h->active = false;
	epoll_ctl(H.ep, EPOLL_CTL_DEL, h->fd, NULL);
	close(h->fd);
}

static void healthy_fill(struct healthy *h, uint32_t i)
{
	while (h->active && h->sent_seq < h->acked_seq + DEPTH && (H.rate == 0 || h->owed > 0)) {
		if (healthy_send_batch(h, i) < 0)
			healthy_lose(h, "short write", i);
		else if (h->owed)
			h->owed--;
	}
}

static void healthy_read(uint32_t i)
{
	struct healthy *h = &H.a[i];
	ssize_t n = recv(h->fd, h->in + h->in_len, INBUF - h->in_len, 0);

	if (n <= 0) {
		if (n < 0 && errno == EAGAIN)
			return;
		healthy_lose(h, n == 0 ? "closed by culpritd" : strerror(errno), i);
		return;
	}
	h->in_len += (size_t)n;
	for (;;) {
		uint32_t body = 0;
		const char *why = NULL;
		enum frame_status st = frame_check(h->in, h->in_len, INBUF - FRAME_HEADER, &body, &why);
		frame_envelope *env;

		if (st == FRAME_NEED_MORE)
			break;
		if (st == FRAME_MALFORMED || !(env = frame_unpack(h->in + FRAME_HEADER, body))) {
			healthy_lose(h, "malformed frame from culpritd", i);
			return;
		}
		if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK) {
			if (!env->hello_ack->accepted) {
				frame_free(env);
				healthy_lose(h, "hello refused", i);
				return;
			}
			h->active = true;
			h->acked_seq = h->sent_seq = env->hello_ack->durable_seq;
		} else if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK && env->ack->durable_seq > h->acked_seq) {
			uint64_t k = env->ack->durable_seq - h->acked_seq;
			double t = now_s();

			for (uint64_t q = h->acked_seq + 1; q <= env->ack->durable_seq && q <= h->sent_seq; q++)
				if (H.n_lat < H.cap_lat)
					H.lat[H.n_lat++] = (float)(t - h->sent_at[q % DEPTH]);
			H.acked_records += k * (1 + PHASES);
			h->acked_in_window += k;
			h->acked_seq = env->ack->durable_seq;
		} else if (env->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT) {
			frame_free(env);
			healthy_lose(h, "batch rejected", i);
			return;
		}
		frame_free(env);
		memmove(h->in, h->in + FRAME_HEADER + body, h->in_len - FRAME_HEADER - body);
		h->in_len -= FRAME_HEADER + body;
	}
	healthy_fill(h, i);
}

/* Drives the healthy agents for secs seconds. Paced, it makes batches due round the agents at
 * H.rate a second; an agent with DEPTH batches unacknowledged owes the batch and sends it on
 * its next Ack, so a culpritd that falls behind shows as fewer records acknowledged. */
static void healthy_run(double secs)
{
	struct epoll_event ev[512];
	double end = now_s() + secs;

	for (double t; (t = now_s()) < end;) {
		if (H.rate > 0 && H.pace_t0 > 0) { /* pacing starts once every agent is connected */
			uint64_t due = (uint64_t)((t - H.pace_t0) * H.rate);

			for (; H.scheduled < due; H.scheduled++) {
				uint32_t i = (uint32_t)(H.scheduled % H.n);

				if (!H.a[i].lost) {
					H.a[i].owed++;
					healthy_fill(&H.a[i], i);
				}
			}
		}
		int n = epoll_wait(H.ep, ev, 512, H.rate > 0 ? 1 : (int)((end - t) * 1000) + 1);

		for (int k = 0; k < n; k++)
			if (!H.a[ev[k].data.u32].lost)
				healthy_read(ev[k].data.u32);
	}
}

/* Connects n healthy agents, at most chunk of them in Hello at a time. */
static int healthy_connect(uint32_t n, uint32_t chunk)
{
	uint8_t buf[256];
	char agent[32];

	H.n = n;
	H.a = calloc(n, sizeof(*H.a));
	H.ep = epoll_create1(EPOLL_CLOEXEC);
	H.t0_us = (int64_t)time(NULL) * 1000000;
	for (uint32_t i = 0; i < n; i++) {
		struct epoll_event e = {.events = EPOLLIN, .data.u32 = i};
		struct healthy *h = &H.a[i];
		size_t len;

		h->fd = connect_from(1, (int)(i / PER_SRC), false);
		if (h->fd < 0) {
			fprintf(stderr, "bench_hostile: healthy agent %u could not connect: %s\n", i, strerror(errno));
			return -1;
		}
		fcntl(h->fd, F_SETFL, O_NONBLOCK);
		snprintf(agent, sizeof(agent), "h%u", i);
		len = pack_hello(buf, "bench-hostile", agent, n, i);
		if (send(h->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len ||
		    epoll_ctl(H.ep, EPOLL_CTL_ADD, h->fd, &e) < 0) {
			fprintf(stderr, "bench_hostile: healthy agent %u: hello not sent\n", i);
			return -1;
		}
		if (i % chunk == chunk - 1) /* take the HelloAcks of this chunk before the next */
			for (double end = now_s() + 10; now_s() < end && !H.a[i].active && !H.a[i].lost;)
				healthy_run(0.001);
	}
	for (double end = now_s() + 60; now_s() < end;) {
		uint32_t active = 0;

		healthy_run(0.2);
		for (uint32_t i = 0; i < n; i++)
			active += H.a[i].active;
		if (active == n)
			break;
	}
	for (uint32_t i = 0; i < n; i++)
		if (!H.a[i].active) {
			fprintf(stderr, "bench_hostile: healthy agent %u not accepted within 60 s\n", i);
			return -1;
		}
	H.pace_t0 = now_s();
	for (uint32_t i = 0; i < n; i++)
		healthy_fill(&H.a[i], i);
	return 0;
}

/* ---- hostile connections (a process of their own) ---- */

enum hostile_kind { SLOWLORIS, OVERSIZED, GARBAGE, HALF_OPEN, HELLO_FLOOD, KINDS };
static const char *const kind_names[KINDS] = {"slowloris", "oversized", "garbage", "half-open", "flood"};

struct hostile {
	int fd;
	enum hostile_kind kind;
	double next; /* time of the next action */
	size_t sent; /* slowloris: bytes of the Hello sent */
	int addr;
};

static volatile sig_atomic_t hostile_stop;

static void on_term(int sig)
{
	(void)sig;
	hostile_stop = 1;
}

static void hostile_main(uint32_t n, int n_addrs, double pause_s, unsigned kinds)
{
	struct hostile *x = calloc(n, sizeof(*x));
	uint8_t hello[256], junk[512];
	size_t hello_len = pack_hello(hello, "flood", "slow", 64, 0);
	uint64_t connects[KINDS] = {0}, refused = 0;
	uint32_t seed = 12345;

	signal(SIGTERM, on_term);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 16);
	unsigned n_kinds = 0;
	enum hostile_kind which[KINDS];

	for (int k = 0; k < KINDS; k++)
		if (kinds & (1u << k))
			which[n_kinds++] = (enum hostile_kind)k;
	for (uint32_t i = 0; i < n; i++) {
		x[i].fd = -1;
		x[i].kind = which[i % n_kinds];
		x[i].addr = (int)(i / ((n + (uint32_t)n_addrs - 1) / (uint32_t)n_addrs)); /* blocks: kinds mixed */
		x[i].next = now_s() + (double)i / n * 0.5; /* spread the first connects over half a second */
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev[256];
	struct rusage ru;

	while (!hostile_stop) {
		/* closed by culpritd (or answered: read and ignored)? then reconnect after the pause */
		int ne = epoll_wait(ep, ev, 256, 5);
		double t = now_s();

		for (int k = 0; k < ne; k++) {
			struct hostile *h = &x[ev[k].data.u32];
			char sink[4096];
			ssize_t r = recv(h->fd, sink, sizeof(sink), MSG_DONTWAIT);

			if (r == 0 || (r < 0 && errno != EAGAIN) || (ev[k].events & (EPOLLHUP | EPOLLERR))) {
				close(h->fd);
				h->fd = -1;
				h->next = t + pause_s;
			}
		}
		for (uint32_t i = 0; i < n; i++) {
			struct hostile *h = &x[i];

			if (t < h->next)
				continue;
			if (h->fd < 0) {
				struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.u32 = i};

				h->fd = connect_from(2, h->addr, true);
				if (h->fd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, h->fd, &e) < 0) {
					if (h->fd >= 0)
						close(h->fd);
					h->fd = -1;
					refused++;
					h->next = t + pause_s;
					continue;
				}
				connects[h->kind]++;
				h->sent = 0;
				h->next = t + 0.01; /* let the connect finish */
				continue;
			}
			switch (h->kind) {
			case SLOWLORIS:
				if (h->sent < hello_len &&
				    send(h->fd, hello + h->sent, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
					h->sent++;
				h->next = t + 0.1;
				break;
			case OVERSIZED:
				if (!h->sent) {
					static const uint8_t big[8] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4};

					send(h->fd, big, sizeof(big), MSG_NOSIGNAL | MSG_DONTWAIT);
					h->sent = 1;
				}
				h->next = t + 0.05;
				break;
			case GARBAGE:
				if (!h->sent) {
					uint8_t g[204] = {0, 0, 0, 200};
					size_t off = (size_t)(seed = seed * 1103515245u + 12345u) % 300;

					memcpy(g + 4, junk + off, 200);
					send(h->fd, g, sizeof(g), MSG_NOSIGNAL | MSG_DONTWAIT);
					h->sent = 1;
				}
				h->next = t + 0.05;
				break;
			case HALF_OPEN: h->next = t + 0.1; break;
			case HELLO_FLOOD: {
				uint8_t fh[256];
				char agent[32];
				size_t len;

				snprintf(agent, sizeof(agent), "f%u-%llu", i,
					 (unsigned long long)connects[HELLO_FLOOD]);
				len = pack_hello(fh, "flood", agent, 64, i % 64);
				send(h->fd, fh, len, MSG_NOSIGNAL | MSG_DONTWAIT);
				close(h->fd);
				h->fd = -1;
				h->next = t + pause_s;
				break;
			}
			case KINDS: break;
			}
		}
	}
	getrusage(RUSAGE_SELF, &ru);
	fprintf(stderr, "bench_hostile: hostile process: connects");
	for (int k = 0; k < KINDS; k++)
		fprintf(stderr, " %s %llu", kind_names[k], (unsigned long long)connects[k]);
	fprintf(stderr, "; %llu could not connect; its CPU %.1f s\n", (unsigned long long)refused,
		(double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
			(double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
	_exit(0);
}

/* ---- main ---- */

static int complain(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int complain(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("bench_hostile: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	return 1;
}

/* Healthy agents without an Ack in the window just counted: 1 (and a line) when any. */
static int starved(const char *window)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < H.n; i++)
		n += !H.a[i].lost && !H.a[i].acked_in_window;
	return n ? complain("%u healthy agents had no Ack in a window %s", n, window) : 0;
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return x < y ? -1 : x > y;
}

/* The q-quantile of the window's Ack latencies, in ms (sorts them). */
static double latency_ms(double q)
{
	if (!H.n_lat)
		return -1;
	qsort(H.lat, H.n_lat, sizeof(*H.lat), cmp_float);
	return 1000.0 * H.lat[(size_t)(q * (double)(H.n_lat - 1))];
}

/* Counts a window of secs seconds: healthy records acknowledged a second, culpritd's CPU in
 * cores over it, the p50 and p99 Ack latency in ms. */
static void count_window(double secs, double *rate, double *cpu, double *p50, double *p99)
{
	uint64_t before = H.acked_records;
	double cpu0 = cpu_s(culpritd_pid);

	for (uint32_t i = 0; i < H.n; i++)
		H.a[i].acked_in_window = 0;
	H.n_lat = 0;
	healthy_run(secs);
	*rate = (double)(H.acked_records - before) / secs;
	*cpu = (cpu_s(culpritd_pid) - cpu0) / secs;
	*p50 = latency_ms(0.5);
	*p99 = latency_ms(0.99);
}

/* Runs the calling process on CPU cpu alone. */
static void usage(void)
{
	fprintf(stderr, "usage: bench_hostile CULPRITD [--healthy N] [--hostile N] [--runs R] [--seconds S]\n"
			"                     [--hostile-addrs K] [--hostile-pause-ms MS] [--per-addr-limit L]\n"
			"                     [--hello-timeout-ms T] [--before-hello-limit B] [--kinds "
			"slowloris,oversized,garbage,half-open,flood]\n"
			"                     [--rate BATCHES_PER_S] [--pin] [--check]\n");
	exit(2);
}

/* The settings of a run and what its windows measured (a slot per run). */
struct bench {
	long n_healthy, n_hostile, runs, n_addrs, pause_ms, per_addr, hello_ms, before_hello;
	double secs;
	bool check, pinned;
	unsigned kinds;
	char log_path[32];
	double without[32], with[32], cpu_alone[32], cpu_with[32];
	double p50_alone[32], p50_with[32], p99_alone[32], p99_with[32];
	long rss0, rss1;
};

/* The command line into b; the culpritd binary's index in argv. */
static int parse_args(int argc, char **argv, struct bench *b)
{
	static const struct option opts[] = {
		{"healthy", required_argument, NULL, 'n'},
		{"hostile", required_argument, NULL, 'x'},
		{"runs", required_argument, NULL, 'r'},
		{"seconds", required_argument, NULL, 's'},
		{"hostile-addrs", required_argument, NULL, 'a'},
		{"hostile-pause-ms", required_argument, NULL, 'p'},
		{"per-addr-limit", required_argument, NULL, 'l'},
		{"hello-timeout-ms", required_argument, NULL, 't'},
		{"before-hello-limit", required_argument, NULL, 'b'},
		{"kinds", required_argument, NULL, 'k'},
		{"rate", required_argument, NULL, 'R'},
		{"pin", no_argument, NULL, 'P'},
		{"check", no_argument, NULL, 'c'},
		{NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'n': b->n_healthy = atol(optarg); break;
		case 'x': b->n_hostile = atol(optarg); break;
		case 'r': b->runs = atol(optarg); break;
		case 's': b->secs = atof(optarg); break;
		case 'a': b->n_addrs = atol(optarg); break;
		case 'p': b->pause_ms = atol(optarg); break;
		case 'l': b->per_addr = atol(optarg); break;
		case 't': b->hello_ms = atol(optarg); break;
		case 'b': b->before_hello = atol(optarg); break;
		case 'c': b->check = true; break;
		case 'R': H.rate = atof(optarg); break;
		case 'P': b->pinned = true; break;
		case 'k':
			b->kinds = 0;
			for (char *tok = strtok(optarg, ","); tok; tok = strtok(NULL, ",")) {
				int k = 0;

				while (k < KINDS && strcmp(kind_names[k], tok) != 0)
					k++;
				if (k == KINDS)
					usage();
				b->kinds |= 1u << k;
			}
			break;
		default: usage();
		}
	}
	if (optind + 1 != argc || b->n_healthy < 1 || b->n_hostile < 0 || b->runs < 1 || b->runs > 32 || b->secs <= 0 ||
	    b->n_addrs < 1 || b->n_addrs > 250 || b->pause_ms < 0 || b->per_addr < 1 || b->hello_ms < 100 ||
	    b->before_hello < 2 || H.rate < 0 || (b->pinned && sysconf(_SC_NPROCESSORS_ONLN) < 2))
		usage();
	return optind;
}

/* culpritd (bin) started without storage, its log in b->log_path: its pid. */
static pid_t start_culpritd(struct bench *b, const char *bin)
{
	char agent[64], http[64], maxc[32], per_addr_s[32], hello_s[32], before_s[32];
	int log_fd = mkstemp(b->log_path);
	pid_t pid;

	snprintf(agent, sizeof(agent), "127.0.0.1:%d", agent_port);
	snprintf(http, sizeof(http), "127.0.0.1:%d", http_port);
	snprintf(maxc, sizeof(maxc), "%ld", b->n_healthy + b->n_hostile + 100);
	snprintf(per_addr_s, sizeof(per_addr_s), "%ld", b->per_addr);
	snprintf(hello_s, sizeof(hello_s), "%ld", b->hello_ms);
	snprintf(before_s, sizeof(before_s), "%ld", b->before_hello);
	pid = fork();
	if (pid == 0) {
		if (b->pinned)
			pin_cpu(1);
		/* under AddressSanitizer, freed memory waits in a quarantine of 256 MiB: keep it
		 * small, or the RSS check measures the quarantine */
		const char *asan = getenv("ASAN_OPTIONS");
		char opts[1024];

		snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=8", asan ? asan : "", asan && *asan ? ":" : "");
		setenv("ASAN_OPTIONS", opts, 1);
		dup2(log_fd, 1);
		dup2(log_fd, 2);
		execl(bin, bin, "--storage", "false", "--agent-listen", agent, "--http-listen", http,
		      "--max-connections", maxc, "--max-connections-per-addr", per_addr_s, "--hello-timeout-ms",
		      hello_s, "--max-connections-before-hello", before_s, "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	return pid;
}

/* Run r: a window of the healthy agents alone, then one beside the hostile connections. */
static int run_once(struct bench *b, int r)
{
	long rss_alone, rss_with;
	int failed = 0;
	pid_t hp;

	count_window(b->secs, &b->without[r], &b->cpu_alone[r], &b->p50_alone[r], &b->p99_alone[r]);
	rss_alone = rss_kib(culpritd_pid);
	failed |= starved("alone");
	fflush(stdout);
	hp = fork();
	if (hp == 0) {
		close(H.ep);
		for (uint32_t i = 0; i < H.n; i++)
			close(H.a[i].fd);
		hostile_main((uint32_t)b->n_hostile, (int)b->n_addrs, (double)b->pause_ms / 1000, b->kinds);
	}
	healthy_run(2); /* let the hostile connections pile up */
	count_window(b->secs, &b->with[r], &b->cpu_with[r], &b->p50_with[r], &b->p99_with[r]);
	rss_with = rss_kib(culpritd_pid);
	failed |= starved("with hostile connections");
	kill(hp, SIGTERM);
	while (waitpid(hp, NULL, WNOHANG) == 0)
		healthy_run(0.05);
	healthy_run(1); /* culpritd closes what is left of them */
	printf("run %d: healthy records/s alone %.0f, with hostile connections %.0f (%.1f%%); Ack latency "
	       "p50/p99 "
	       "%.2f/%.2f and %.2f/%.2f ms; culpritd CPU %.2f and %.2f cores, RSS %.1f and %.1f MiB\n",
	       r + 1, b->without[r], b->with[r], 100.0 * b->with[r] / b->without[r], b->p50_alone[r], b->p99_alone[r],
	       b->p50_with[r], b->p99_with[r], b->cpu_alone[r], b->cpu_with[r], rss_alone / 1024.0, rss_with / 1024.0);
	fflush(stdout);
	return failed;
}

/* The medians of the runs and culpritd's counters. */
static void report(const struct bench *b, const char *m)
{
	int runs = (int)b->runs;
	double us_alone[32], us_with[32];

	for (int r = 0; r < runs; r++) {
		us_alone[r] = b->cpu_alone[r] / b->without[r] * 1e6;
		us_with[r] = b->cpu_with[r] / b->with[r] * 1e6;
	}
	double mw = median(b->without, runs), mh = median(b->with, runs);
	printf("median healthy records/s: alone %.0f, with %ld hostile connections %.0f; ratio %.3f (target >= 0.90)\n",
	       mw, b->n_hostile, mh, mh / mw);
	printf("healthy Ack latency (medians of the runs): p50 %.2f ms alone, %.2f ms with; p99 %.2f ms alone, %.2f ms "
	       "with\n",
	       median(b->p50_alone, runs), median(b->p50_with, runs), median(b->p99_alone, runs),
	       median(b->p99_with, runs));
	printf("culpritd CPU per healthy record (median): %.2f us alone, %.2f us with the hostile connections\n",
	       median(us_alone, runs), median(us_with, runs));
	printf("culpritd RSS: %.1f MiB before, %.1f MiB after (%+.1f MiB)\n", b->rss0 / 1024.0, b->rss1 / 1024.0,
	       (b->rss1 - b->rss0) / 1024.0);
	if (m) {
		static const char *const shown[] = {
			"culprit_agent_connections_accepted_total",
			"culprit_agent_received_bytes_total",
			"culprit_agent_connections_closed_total{reason=\"protocol\"}",
			"culprit_agent_connections_closed_total{reason=\"hello_timeout\"}",
			"culprit_agent_connections_closed_total{reason=\"peer\"}",
			"culprit_agent_connections_closed_total{reason=\"limit\"}",
			"culprit_agent_connections_over_limit_total{limit=\"connections\"}",
			"culprit_agent_connections_over_limit_total{limit=\"per_address\"}",
			"culprit_agent_connections_over_limit_total{limit=\"before_hello\"}",
			"culprit_agent_frames_total{outcome=\"malformed\"}",
			"culprit_agent_connections{state=\"hello\"}",
			"culprit_agent_connections{state=\"active\"}",
			"culprit_jobs",
		};
		for (size_t i = 0; i < sizeof(shown) / sizeof(*shown); i++)
			printf("  %s %.0f\n", shown[i], metric(m, shown[i]));
	}
}

/* --check: culpritd alive, no healthy agent lost, every kind of hostile close counted, no
 * growth. 1 when one fails. */
static int check_results(const struct bench *b, const char *m, bool alive)
{
	int failed = 0;

	if (!alive || !m || H.lost)
		failed = 1;
	if (m && b->n_hostile >= KINDS &&
	    (metric(m, "culprit_agent_connections_closed_total{reason=\"protocol\"}") <= 0 ||
	     metric(m, "culprit_agent_connections_closed_total{reason=\"hello_timeout\"}") <= 0))
		failed = complain("culpritd did not count the hostile closes");
	/* slowloris and half-open connections sit in Hello: 2/5 of those culpritd lets in */
	if (m &&
	    (b->n_hostile / b->n_addrs < b->per_addr ? b->n_hostile : b->per_addr * b->n_addrs) * 2 / 5 >
		    b->before_hello &&
	    metric(m, "culprit_agent_connections_over_limit_total{limit=\"before_hello\"}") <= 0)
		failed = complain("no connection over max_connections_before_hello counted");
	if (m && b->n_hostile / b->n_addrs > b->per_addr &&
	    metric(m, "culprit_agent_connections_over_limit_total{limit=\"per_address\"}") <= 0)
		failed = complain("no connection over max_connections_per_addr counted");
	/* every healthy batch is more than 100 bytes on the wire */
	if (m && metric(m, "culprit_agent_received_bytes_total") < 100.0 * (double)H.acked_records / (1 + PHASES))
		failed = complain("culprit_agent_received_bytes_total is below what the healthy agents sent");
	if (b->rss1 - b->rss0 > 64 * 1024)
		failed = complain("culpritd grew by %ld KiB", b->rss1 - b->rss0);
	return failed;
}

int main(int argc, char **argv)
{
	struct bench b = {.n_healthy = 10000,
			  .n_hostile = 1000,
			  .runs = 3,
			  .n_addrs = 5,
			  .pause_ms = 100,
			  .per_addr = 256,
			  .hello_ms = 5000,
			  .before_hello = 4096,
			  .secs = 10,
			  .kinds = (1u << KINDS) - 1,
			  .log_path = "/tmp/bench_hostile.XXXXXX"};
	struct rlimit rl;
	int failed = 0, status;
	int bin = parse_args(argc, argv, &b);
	char *m;

	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if ((rlim_t)b.n_healthy + 64 > rl.rlim_cur) {
		fprintf(stderr, "bench_hostile: open-file limit %llu is too low for %ld agents\n",
			(unsigned long long)rl.rlim_cur, b.n_healthy);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	agent_port = h_free_port();
	http_port = h_free_port();
	/* latencies kept per window: paced, 1.5 times what is due; flat out, up to 300,000 batches a second */
	H.cap_lat = (size_t)((H.rate > 0 ? H.rate * 1.5 : 3e5) * b.secs) + 1024;
	H.lat = malloc(H.cap_lat * sizeof(*H.lat));
	if (!H.lat)
		return 2;
	culpritd_pid = start_culpritd(&b, argv[bin]);
	if (b.pinned)
		pin_cpu(0); /* this process and the hostile one on the other CPU: clients on a machine of their own */
	for (int i = 0; i < 1000; i++) {
		int fd = connect_from(0, 0, false);

		if (fd >= 0) {
			close(fd);
			break;
		}
		usleep(10000);
	}
	if (healthy_connect((uint32_t)b.n_healthy, (uint32_t)(b.before_hello / 2 < 1000 ? b.before_hello / 2 : 1000)) <
	    0) {
		kill(culpritd_pid, SIGKILL);
		return 1;
	}
	healthy_run(2); /* warm up */
	b.rss0 = rss_kib(culpritd_pid);
	printf("bench_hostile: %ld healthy agents (1 iteration + %d phases a batch, %d in flight, ", b.n_healthy,
	       PHASES, DEPTH);
	if (H.rate > 0)
		printf("paced at %.0f batches/s = %.0f records/s in all)", H.rate, H.rate * (1 + PHASES));
	else
		printf("each as fast as its Acks come)");
	printf(", %ld hostile connections from %ld addresses (pause %ld ms), culpritd --storage false "
	       "--hello-timeout-ms %ld --max-connections-per-addr %ld --max-connections-before-hello %ld, %ld runs of "
	       "%.0f s%s, culpritd log %s\n",
	       b.n_hostile, b.n_addrs, b.pause_ms, b.hello_ms, b.per_addr, b.before_hello, b.runs, b.secs,
	       b.pinned ? ", culpritd pinned to CPU 1 and the clients to CPU 0" : "", b.log_path);
	for (int r = 0; r < b.runs; r++)
		failed |= run_once(&b, r);
	b.rss1 = rss_kib(culpritd_pid);
	m = get_metrics();
	report(&b, m);
	bool alive = waitpid(culpritd_pid, &status, WNOHANG) == 0;
	printf("healthy agents lost: %llu; short writes: %llu; culpritd alive: %s\n", (unsigned long long)H.lost,
	       (unsigned long long)H.write_short, alive ? "yes" : "NO (crashed)");
	if (b.check) {
		failed |= check_results(&b, m, alive);
		if (failed) {
			char cmd[128];

			snprintf(cmd, sizeof(cmd), "tail -40 %s >&2", b.log_path);
			if (system(cmd) < 0)
				perror("system");
		}
	}
	free(m);
	kill(culpritd_pid, SIGTERM);
	waitpid(culpritd_pid, &status, 0);
	if (b.check && !failed)
		unlink(b.log_path);
	printf("%s\n", failed ? "FAILED" : "ok");
	return failed;
}
