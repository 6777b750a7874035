/* bench_fair: an honest job's rate through culpritd with and without connections that hold
 * most of a frame each (docs/operations.md, "Limits on clients").
 *
 *   bench_fair CULPRITD DSN [--runs R] [--iters N] [--ms-per-iter MS] [--holders H]
 *              [--holder-addrs K] [--pin]
 *
 * DSN is a PostgreSQL server's (a database bench_fair is made afresh on it for each run; the
 * test PostgreSQL of ./test.sh will do: tests/pg.sh start DIR prints one). Each run starts
 * CULPRITD on its defaults (max_input_buffer_bytes 256 MiB, frame_timeout_s 5) on that
 * database and streams compute_straggler (1,024 ranks, 128 node agents of the agent library
 * in this process, tests/integration/ingest/simfeed.h) for N iterations (default 100), one
 * every MS milliseconds (default 100: a 10 s job, as a job's agents send at its step's pace;
 * 0: as fast as culpritd acknowledges them, which measures the CPU left to it rather than
 * its fairness). Runs alternate (R each, default 3): alone, then with H
 * holders (default 400, from K source addresses 127.0.2.x, default 4): a separate process
 * whose connections each say Hello, then send 4 MiB - 1 byte of a 4 MiB frame as fast as
 * culpritd takes it (1.56 GiB asked for in all), and connect again as soon as culpritd closes
 * one. The job starts once the holders fill the input budget.
 *
 * Each run prints the honest job's records/s, whether every record was acknowledged and is in
 * PostgreSQL (counts and duration sums against what the agents sent), how often culpritd
 * paused a connection and closed one at its frame's deadline, and culpritd's RSS at the end
 * of the job and 5 s after the holders left. Then the medians and their ratio (target: at
 * least 90% of the rate alone). --pin runs culpritd on CPU 1 and this process (agents and
 * holders) on CPU 0. */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "benchutil.h"
#include "frame.h"
#include "harness.h"
#include "simfeed.h"

#define FRAME (4u << 20)
#define MAX_HOLDERS 4096

static struct h_proc proc;
static volatile sig_atomic_t stop_holders;

/* culpritd on database dsn, ports of its own, its log in dir (on CPU 1 when pinned). */
static void start(const char *culpritd, const char *dir, const char *dsn, int do_pin)
{
	const char *extra[] = {"--db", dsn, NULL};

	h_culpritd_bin = culpritd;
	if (do_pin)
		pin_cpu(1); /* culpritd inherits it */
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	if (do_pin)
		pin_cpu(0);
}

/* ---- the holders (a process of their own) ---- */

struct holder {
	int fd;
	size_t sent; /* of the frame: header and body */
};

static void on_term(int sig)
{
	(void)sig;
	stop_holders = 1;
}

/* A connection from 127.0.2.<addr + 1> past Hello (agent id i), non-blocking; -1 on failure. */
static int holder_connect(int port, int addr, int i)
{
	struct sockaddr_in src = {0}, dst = {0};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;
	char id[32];
	frame_envelope *e;

	if (fd < 0)
		return -1;
	src.sin_family = AF_INET;
	src.sin_addr.s_addr = htonl((127u << 24) | (2u << 16) | (unsigned)(addr + 1));
	dst.sin_family = AF_INET;
	dst.sin_port = htons((uint16_t)port);
	dst.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) < 0 ||
	    connect(fd, (struct sockaddr *)&dst, sizeof(dst)) < 0) {
		close(fd);
		return -1;
	}
	snprintf(id, sizeof(id), "holder-%d", i);
	h_send_hello(fd, "holders", id, "holder", NULL);
	e = h_recv_env(fd, 10000);
	ok = e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted;
	frame_free(e);
	if (!ok) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static void holders_main(int port, int n, int addrs)
{
	static struct holder h[MAX_HOLDERS];
	static uint8_t zeros[1 << 16];
	struct pollfd pfd[MAX_HOLDERS];
	uint32_t be = htobe32(FRAME);

	signal(SIGTERM, on_term);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < n; i++)
		h[i].fd = -1;
	while (!stop_holders) {
		for (int i = 0; i < n; i++) {
			if (h[i].fd < 0) {
				h[i].fd = holder_connect(port, i % addrs, i);
				h[i].sent = 0;
			}
			pfd[i] = (struct pollfd){.fd = h[i].fd, .events = POLLOUT | POLLIN};
		}
		if (poll(pfd, (nfds_t)n, 200) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++) {
			struct holder *x = &h[i];
			ssize_t w = 0;

			if (x->fd < 0)
				continue;
			if (pfd[i].revents & (POLLIN | POLLERR | POLLHUP)) { /* culpritd closed it: again */
				char b[256];

				if (recv(x->fd, b, sizeof(b), MSG_DONTWAIT) <= 0) {
					close(x->fd);
					x->fd = -1;
					continue;
				}
			}
			if (!(pfd[i].revents & POLLOUT) || x->sent >= FRAME_HEADER + FRAME - 1)
				continue;
			if (x->sent < FRAME_HEADER)
				w = send(x->fd, (const uint8_t *)&be + x->sent, FRAME_HEADER - x->sent, MSG_NOSIGNAL);
			else {
				size_t left = FRAME_HEADER + FRAME - 1 - x->sent;

				w = send(x->fd, zeros, left < sizeof(zeros) ? left : sizeof(zeros), MSG_NOSIGNAL);
			}
			if (w > 0)
				x->sent += (size_t)w;
			else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
				close(x->fd);
				x->fd = -1;
			}
		}
	}
	_exit(0);
}

/* ---- runs ---- */

struct run {
	double rate; /* records/s */
	int stored;  /* every record acknowledged and in PostgreSQL */
	double paused, frame_timeouts;
	long rss_job_kib, rss_after_kib;
};

static void one_run(const char *culpritd, const char *dsn_base, int attacked, const struct simfeed_config *sc,
		    int holders, int addrs, int do_pin, struct run *r)
{
	char dsn[512], dir[] = "/tmp/bench_fair.XXXXXX";
	pid_t hp = -1;
	struct simfeed *sf;
	struct fanout_stats st;
	double t0, t1;
	struct simfeed_config cfg = *sc;

	H_CHECK(mkdtemp(dir) != NULL, NULL);
	setenv("CULPRIT_TEST_DSN", dsn_base, 1);
	h_db_create("bench_fair", dsn, sizeof(dsn));
	start(culpritd, dir, dsn, do_pin);
	if (attacked) {
		hp = fork();
		if (hp == 0)
			holders_main(proc.agent_port, holders, addrs);
		/* the job starts once the holders fill the budget */
		for (int i = 0; i < 600; i++) {
			if (h_get_metric(proc.http_port, "culprit_agent_input_buffer_bytes") >= 0.9 * 268435456.0)
				break;
			usleep(100000); /* polls for the holders' bytes */
		}
	}
	cfg.port = proc.agent_port;
	t0 = now_s();
	sf = simfeed_start(&cfg);
	r->stored = simfeed_finish(sf, 600000, &st) == 0 && st.dropped_records == 0 && st.rejected_batches == 0;
	t1 = now_s();
	r->rate = (double)st.records / (t1 - t0);
	r->rss_job_kib = rss_kib(proc.pid);
	r->paused = h_get_metric(proc.http_port, "culprit_agent_input_paused_total");
	r->frame_timeouts =
		h_get_metric(proc.http_port, "culprit_agent_connections_closed_total{reason=\"frame_timeout\"}");
	r->rss_after_kib = r->rss_job_kib;
	if (hp > 0) {
		kill(hp, SIGTERM);
		waitpid(hp, NULL, 0);
		for (int i = 0; i < 50 && h_get_metric(proc.http_port, "culprit_agent_input_buffer_bytes") > 0; i++)
			usleep(100000); /* polls for culpritd to see them go */
		sleep(2);               /* a tick or two to give freed memory back */
		r->rss_after_kib = rss_kib(proc.pid);
	}
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	r->stored = r->stored && fleet_check_db(dsn, simfeed_job(sf), simfeed_sent(sf)) == 0;
	printf("%-9s %7.0f records/s (%llu records in %.1f s), every record stored: %s; paused %.0f, closed at "
	       "frame_timeout_s %.0f; culpritd RSS %ld MiB at the job's end, %ld MiB after the holders left\n",
	       attacked ? "attacked" : "alone", r->rate, (unsigned long long)st.records, t1 - t0,
	       r->stored ? "yes" : "NO", r->paused, r->frame_timeouts, r->rss_job_kib / 1024, r->rss_after_kib / 1024);
	fflush(stdout);
	simfeed_free(sf);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"runs", required_argument, NULL, 'r'},
					     {"iters", required_argument, NULL, 'i'},
					     {"holders", required_argument, NULL, 'h'},
					     {"holder-addrs", required_argument, NULL, 'a'},
					     {"pin", no_argument, NULL, 'p'},
					     {"ms-per-iter", required_argument, NULL, 'm'},
					     {NULL, 0, NULL, 0}};
	int runs = 3, holders = 400, addrs = 4, do_pin = 0, o, all_stored = 1;
	struct simfeed_config sc = {.scenario = "compute_straggler", .iters = 100, .ms_per_iter = 100};
	double alone[32], attacked[32];

	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (o == 'r')
			runs = atoi(optarg);
		else if (o == 'i')
			sc.iters = (uint32_t)atoi(optarg);
		else if (o == 'h')
			holders = atoi(optarg);
		else if (o == 'a')
			addrs = atoi(optarg);
		else if (o == 'p')
			do_pin = 1;
		else if (o == 'm')
			sc.ms_per_iter = atoi(optarg);
		else
			return 2;
	}
	if (optind != argc - 2 || runs < 1 || runs > 32 || holders < 1 || holders > MAX_HOLDERS || addrs < 1 ||
	    addrs > 250 || sc.iters < 4) {
		fprintf(stderr,
			"usage: bench_fair CULPRITD DSN [--runs R] [--iters N] [--ms-per-iter MS] [--holders H] "
			"[--holder-addrs K] [--pin]\n");
		return 2;
	}
	if (do_pin)
		pin_cpu(0);
	printf("compute_straggler (1,024 ranks, 128 agents), %u iterations, one every %d ms; %d holders from %d "
	       "addresses; %d runs each\n",
	       sc.iters, sc.ms_per_iter, holders, addrs, runs);
	for (int i = 0; i < runs; i++) {
		struct run a, b;

		one_run(argv[optind], argv[optind + 1], 0, &sc, holders, addrs, do_pin, &a);
		one_run(argv[optind], argv[optind + 1], 1, &sc, holders, addrs, do_pin, &b);
		alone[i] = a.rate;
		attacked[i] = b.rate;
		all_stored = all_stored && a.stored && b.stored;
	}
	printf("median: %.0f records/s alone, %.0f attacked: %.1f%% of the rate alone (target >= 90%%); every record "
	       "stored in every run: %s\n",
	       median(alone, runs), median(attacked, runs), 100.0 * median(attacked, runs) / median(alone, runs),
	       all_stored ? "yes" : "NO");
	return all_stored ? 0 : 1;
}
