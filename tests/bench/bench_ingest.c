/* bench_ingest: phase records per second from agents (agent/agent.h) through a culpritd
 * listener, end to end: records are appended for --seconds, then the clock runs until the
 * server has acknowledged every one of them. Point it at any server:
 *
 *   culpritd --storage false --agent-listen 127.0.0.1:7433 --max-connections-per-addr 20000 &
 *   bench_ingest --server 127.0.0.1:7433 --agents 1620 --seconds 10
 *
 *   culpritd --db "$DSN" --agent-listen 127.0.0.1:7433 --max-connections-per-addr 20000 &  # with PostgreSQL
 *   bench_ingest --server 127.0.0.1:7433 --agents 1620 --seconds 10
 *
 * Prints one line of figures. The agents and their producer threads share the machine with
 * the server: on a small machine the figure is a lower bound for the server alone (the
 * line also says how fast the agents appended, which bounds what they could offer). */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "benchutil.h"
#include "agent.h"

#define PHASES 16 /* per rank and iteration */

struct bench {
	const char *server;
	uint32_t n_agents, n_threads, seconds, batch;
	struct agent_loop **loops;
	uint32_t n_loops;
	struct agent **agents;
	int32_t (*names)[PHASES];
	atomic_bool stop;
	atomic_ullong appended;
};

struct worker {
	struct bench *b;
	uint32_t first, last; /* agents [first, last) */
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench *b = w->b;
	struct record_phase ph[8 * PHASES];
	uint64_t mine = 0;

	for (uint32_t it = 0; !atomic_load(&b->stop); it++) {
		for (uint32_t a = w->first; a < w->last && !atomic_load(&b->stop); a++) {
			size_t n = 0;

			for (uint32_t r = a * 8; r < a * 8 + 8; r++)
				for (int p = 0; p < PHASES; p++)
					ph[n++] = (struct record_phase){
						.rank = r,
						.iter = it,
						.name = (uint32_t)b->names[a][p],
						.kind = p % 2 ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE,
						.group = p % 2 ? RECORD_GROUP_DP : RECORD_GROUP_NONE,
						.start_us = p * 1000,
						.dur_us = 1000 + (r + it + (uint32_t)p) % 500};
			if (agent_add_phases(b->agents[a], ph, n) != 0) {
				fprintf(stderr, "bench_ingest: append failed\n");
				exit(1);
			}
			mine += n;
		}
	}
	atomic_fetch_add(&b->appended, mine);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: bench_ingest --server HOST:PORT [--agents N (1620)] [--threads N (1)]\n"
			"                    [--loops N (2)] [--seconds N (10)] [--batch RECORDS (8192)]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"server", required_argument, NULL, 's'},
		{"agents", required_argument, NULL, 'a'},
		{"threads", required_argument, NULL, 't'},
		{"loops", required_argument, NULL, 'l'},
		{"seconds", required_argument, NULL, 'S'},
		{"batch", required_argument, NULL, 'b'},
		{NULL, 0, NULL, 0},
	};
	struct bench b = {.n_agents = 1620, .n_threads = 1, .n_loops = 2, .seconds = 10, .batch = 8192};
	struct worker *w;
	pthread_t *thr;
	double t0, t_append, t_acked, c0;
	uint64_t sent = 0, resent = 0, batches = 0;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': b.server = optarg; break;
		case 'a': b.n_agents = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 't': b.n_threads = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'l': b.n_loops = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'S': b.seconds = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'b': b.batch = (uint32_t)strtoul(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (!b.server || !b.n_agents || b.n_agents > 100000 || !b.n_threads || b.n_threads > b.n_agents || !b.n_loops ||
	    b.n_loops > 64 || !b.seconds)
		usage();
	b.loops = calloc(b.n_loops, sizeof(*b.loops));
	b.agents = calloc(b.n_agents, sizeof(*b.agents));
	b.names = calloc(b.n_agents, sizeof(*b.names));
	w = calloc(b.n_threads, sizeof(*w));
	thr = calloc(b.n_threads, sizeof(*thr));
	if (!b.loops || !b.agents || !b.names || !w || !thr)
		return 1;
	for (uint32_t i = 0; i < b.n_loops; i++)
		if (!(b.loops[i] = agent_loop_new()))
			return 1;
	for (uint32_t a = 0; a < b.n_agents; a++) {
		struct agent_config cfg = {0};
		uint32_t ranks[8];
		char host[32];

		snprintf(host, sizeof(host), "node-%u", a);
		for (uint32_t r = 0; r < 8; r++)
			ranks[r] = a * 8 + r;
		cfg.server = b.server;
		cfg.job = "bench-ingest";
		cfg.topo = (struct agent_topology){.world = b.n_agents * 8,
						   .tp = 1,
						   .cp = 1,
						   .pp = 1,
						   .dp = b.n_agents * 8,
						   .ep = 1,
						   .gpus_per_node = 8};
		cfg.host = host;
		cfg.ranks = ranks;
		cfg.n_ranks = 8;
		cfg.max_batch_records = b.batch;
		cfg.max_unacked_bytes = 4u << 20;
		cfg.append_timeout_ms = AGENT_WAIT_FOREVER;
		cfg.give_up_refused = 3; /* over max_connections_per_addr: fail, do not hang */
		cfg.loop = b.loops[a % b.n_loops];
		if (!(b.agents[a] = agent_new(&cfg)))
			return 1;
		for (int p = 0; p < PHASES; p++) {
			char name[32];

			snprintf(name, sizeof(name), "phase_%02d", p);
			b.names[a][p] = agent_intern(b.agents[a], name);
		}
	}
	/* wait until every agent is connected, so that connecting is not in the figure */
	for (double deadline = now_s() + 60;;) {
		uint32_t up = 0;

		for (uint32_t a = 0; a < b.n_agents; a++) {
			struct agent_stats st;

			agent_get_stats(b.agents[a], &st);
			up += st.connected;
			if (st.refused) {
				fprintf(stderr,
					"bench_ingest: culpritd refused agent node-%u (%s): start it with "
					"--max-connections-per-addr %u or more\n",
					a, st.refusal, b.n_agents);
				return 1;
			}
		}
		if (up == b.n_agents)
			break;
		if (now_s() >= deadline) {
			fprintf(stderr, "bench_ingest: %u of %u agents connected after 60 s\n", up, b.n_agents);
			return 1;
		}
		nanosleep(&(struct timespec){0, 10000000}, NULL);
	}
	c0 = cpu_s(getpid());
	t0 = now_s();
	for (uint32_t i = 0; i < b.n_threads; i++) {
		w[i] = (struct worker){&b, b.n_agents * i / b.n_threads, b.n_agents * (i + 1) / b.n_threads};
		pthread_create(&thr[i], NULL, worker_main, &w[i]);
	}
	nanosleep(&(struct timespec){b.seconds, 0}, NULL);
	atomic_store(&b.stop, true);
	for (uint32_t i = 0; i < b.n_threads; i++)
		pthread_join(thr[i], NULL);
	t_append = now_s();
	for (uint32_t a = 0; a < b.n_agents; a++)
		agent_flush(b.agents[a], 0);
	for (uint32_t a = 0; a < b.n_agents; a++)
		if (agent_flush(b.agents[a], 600000) != 0) {
			fprintf(stderr, "bench_ingest: not everything acknowledged within 10 minutes\n");
			return 1;
		}
	t_acked = now_s();
	for (uint32_t a = 0; a < b.n_agents; a++) {
		struct agent_stats st;

		agent_get_stats(b.agents[a], &st);
		sent += st.records_appended;
		resent += st.batches_resent;
		batches += st.batches_sealed;
	}
	printf("bench_ingest: %llu phase records from %u agents (%u producer threads, %u network threads) "
	       "acknowledged in %.2f s: %.0f records/s end to end (appended at %.0f/s; %llu batches, "
	       "%llu resent; client CPU %.1f s)\n",
	       (unsigned long long)sent, b.n_agents, b.n_threads, b.n_loops, t_acked - t0,
	       (double)sent / (t_acked - t0), (double)sent / (t_append - t0), (unsigned long long)batches,
	       (unsigned long long)resent, cpu_s(getpid()) - c0);
	for (uint32_t a = 0; a < b.n_agents; a++)
		agent_close(b.agents[a], 1000);
	for (uint32_t i = 0; i < b.n_loops; i++)
		agent_loop_free(b.loops[i]);
	free(b.loops);
	free(b.agents);
	free(b.names);
	free(w);
	free(thr);
	return 0;
}
