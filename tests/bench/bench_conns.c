/* bench_conns: memory per idle agent connection, and culpritd's RSS with N connected agents.
 *
 *   bench_conns CULPRITD N [RUNS]
 *
 * Starts CULPRITD (storage off, loopback ports of its own), connects N agents that each say
 * Hello for one rank of an N-rank job and then stay idle, and reads culpritd's VmRSS from
 * /proc: after the first agent (the job and its window exist) and after all N. The
 * difference over N - 1 is the memory one idle connection costs. Prints the median of RUNS
 * (default 3). N is bounded by this process's and culpritd's open-file limits (ulimit -n). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "benchutil.h"
#include "harness.h"
#include "frame.h"

static int connect_to(int port)
{
	struct sockaddr_in a = {0};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Says Hello for rank on fd and waits for the HelloAck. */
static int hello(int fd, uint32_t world, uint32_t rank)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
	uint8_t buf[512];
	char agent[32];
	size_t n;
	struct pollfd p = {fd, POLLIN, 0};

	snprintf(agent, sizeof(agent), "a%u", rank);
	t.world = world, t.tp = 1, t.cp = 1, t.pp = 1, t.dp = world, t.ep = 1, t.gpus_per_node = 8;
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = (char *)"bench-conns";
	h.topology = &t;
	h.agent_id = agent;
	h.host = (char *)"bench";
	h.ranks = &rank;
	h.n_ranks = 1;
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	n = frame_pack(&env, buf);
	if (send(fd, buf, n, MSG_NOSIGNAL) != (ssize_t)n)
		return -1;
	if (poll(&p, 1, 10000) != 1 || recv(fd, buf, sizeof(buf), 0) <= 0)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	int n, runs = 3;
	double per_conn[16], total_mib[16];
	struct rlimit rl;

	if (argc < 3) {
		fprintf(stderr, "usage: bench_conns CULPRITD N [RUNS]\n");
		return 2;
	}
	n = atoi(argv[2]);
	if (argc > 3)
		runs = atoi(argv[3]);
	if (runs < 1 || runs > 16 || n < 2) {
		fprintf(stderr, "bench_conns: N >= 2, 1 <= RUNS <= 16\n");
		return 2;
	}
	getrlimit(RLIMIT_NOFILE, &rl);
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	if ((rlim_t)n + 64 > rl.rlim_cur) {
		fprintf(stderr, "bench_conns: open-file limit %llu is too low for %d connections\n",
			(unsigned long long)rl.rlim_cur, n);
		return 2;
	}
	for (int run = 0; run < runs; run++) {
		int agent_port = h_free_port(), http_port = h_free_port();
		char agent[64], http[64], maxc[32];
		int *fds = calloc((size_t)n, sizeof(int));
		pid_t pid;
		long rss1, rssn;

		snprintf(agent, sizeof(agent), "127.0.0.1:%d", agent_port);
		snprintf(http, sizeof(http), "127.0.0.1:%d", http_port);
		snprintf(maxc, sizeof(maxc), "%d", n + 16);
		pid = fork();
		if (pid == 0) {
			execl(argv[1], argv[1], "--storage", "false", "--agent-listen", agent, "--http-listen", http,
			      "--max-connections", maxc, "--max-connections-per-addr", maxc, "--log-level", "warning",
			      "--idle-timeout-s", "3600", (char *)NULL);
			_exit(127);
		}
		for (int i = 0; i < 500 && (fds[0] = connect_to(agent_port)) < 0; i++)
			usleep(10000);
		if (fds[0] < 0 || hello(fds[0], (uint32_t)n, 0) < 0) {
			fprintf(stderr, "bench_conns: culpritd did not answer\n");
			kill(pid, SIGKILL);
			return 1;
		}
		usleep(200000);
		rss1 = rss_kib(pid);
		for (int i = 1; i < n; i++) {
			fds[i] = connect_to(agent_port);
			if (fds[i] < 0 || hello(fds[i], (uint32_t)n, (uint32_t)i) < 0) {
				fprintf(stderr, "bench_conns: connection %d failed: %s\n", i, strerror(errno));
				kill(pid, SIGKILL);
				return 1;
			}
		}
		usleep(500000);
		rssn = rss_kib(pid);
		per_conn[run] = (double)(rssn - rss1) * 1024.0 / (n - 1);
		total_mib[run] = (double)rssn / 1024.0;
		printf("run %d: %d idle agents: culpritd RSS %.1f MiB, %.0f bytes per connection\n", run + 1, n,
		       total_mib[run], per_conn[run]);
		for (int i = 0; i < n; i++)
			close(fds[i]);
		free(fds);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
	}
	printf("median of %d runs: %d idle agents, culpritd RSS %.1f MiB, %.1f KiB per idle connection (target <= 32 "
	       "KiB)\n",
	       runs, n, median(total_mib, runs), median(per_conn, runs) / 1024.0);
	return 0;
}
