/* fleet.c: node agents streaming a synthetic job, and the database check (see fleet.h). */
#include "fleet.h"

#include <inttypes.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define FLEET_LOOPS 4
#define FLEET_BASE_US 1796169600000000LL /* 2026-12-01 00:00 UTC */

static const char *const phase_names[FLEET_PHASES] = {"mlp", "ep_dispatch", "dp_reduce_scatter", "pp_send_recv"};
static const uint8_t phase_kind[FLEET_PHASES] = {RECORD_KIND_COMPUTE, RECORD_KIND_COMM, RECORD_KIND_COMM,
						 RECORD_KIND_COMM};
static const uint8_t phase_group[FLEET_PHASES] = {RECORD_GROUP_NONE, RECORD_GROUP_EP, RECORD_GROUP_DP, RECORD_GROUP_PP};

struct fleet {
	struct agent_loop *loops[FLEET_LOOPS];
	struct agent **agents;
	uint32_t n_nodes;
	int32_t (*names)[FLEET_PHASES + 1]; /* per agent: phase ids, then the kernel's */
	struct fleet_sum sent;
};

static void fleet_log(void *arg, enum agent_log_level level, const char *msg)
{
	static int lines;

	(void)arg;
	/* reconnect storms after a SIGKILL: keep the test log readable */
	if (level >= AGENT_LOG_WARNING && __atomic_add_fetch(&lines, 1, __ATOMIC_RELAXED) <= 20)
		fprintf(stderr, "%s\n", msg);
}

struct fleet *fleet_new(const char *job, uint32_t n_nodes, int port)
{
	struct fleet *f = calloc(1, sizeof(*f));
	char server[64];

	snprintf(server, sizeof(server), "127.0.0.1:%d", port);
	f->n_nodes = n_nodes;
	f->agents = calloc(n_nodes, sizeof(*f->agents));
	f->names = calloc(n_nodes, sizeof(*f->names));
	if (!f->agents || !f->names)
		abort();
	for (int i = 0; i < FLEET_LOOPS; i++)
		if (!(f->loops[i] = agent_loop_new()))
			abort();
	for (uint32_t n = 0; n < n_nodes; n++) {
		struct agent_config cfg = {0};
		uint32_t ranks[8];
		char host[32];

		snprintf(host, sizeof(host), "node-%u", n);
		for (uint32_t r = 0; r < 8; r++)
			ranks[r] = n * 8 + r;
		cfg.server = server;
		cfg.job = job;
		cfg.topo = (struct agent_topology){.world = n_nodes * 8,
						   .tp = 1,
						   .cp = 1,
						   .pp = 9,
						   .dp = n_nodes * 8 / 9,
						   .ep = 32,
						   .gpus_per_node = 8,
						   .order = "tp-cp-ep-dp-pp"};
		cfg.host = host;
		cfg.ranks = ranks;
		cfg.n_ranks = 8;
		cfg.flush_interval_ms = 100;
		cfg.max_batch_records = 2048;
		cfg.max_unacked_bytes = 1 << 20;
		cfg.append_timeout_ms = AGENT_WAIT_FOREVER;
		cfg.backoff_min_ms = 50;
		cfg.backoff_max_ms = 1000;
		cfg.loop = f->loops[n % FLEET_LOOPS];
		cfg.log = fleet_log;
		if (!(f->agents[n] = agent_new(&cfg)))
			abort();
		for (int p = 0; p < FLEET_PHASES; p++)
			f->names[n][p] = agent_intern(f->agents[n], phase_names[p]);
		f->names[n][FLEET_PHASES] = agent_intern(f->agents[n], "sm90_gemm");
	}
	return f;
}

void fleet_stream(struct fleet *f, uint32_t first, uint32_t n)
{
	for (uint32_t it = first; it < first + n; it++)
		for (uint32_t node = 0; node < f->n_nodes; node++)
			for (uint32_t r = node * 8; r < node * 8 + 8; r++) {
				struct record_iter ri = {.rank = r,
							 .iter = it,
							 .start_us = FLEET_BASE_US + (int64_t)it * 30000000,
							 .dur_us = 30000000 + r % 1000};
				struct record_phase ph[FLEET_PHASES];
				struct record_kernel k = {.rank = r,
							  .iter = it,
							  .name = (uint32_t)f->names[node][FLEET_PHASES],
							  .kind = RECORD_KIND_COMPUTE,
							  .count = 96,
							  .sum_us = 240000 + (r * 7 + it) % 5000,
							  .min_us = 2400,
							  .max_us = 2600,
							  .p50_us = 2500,
							  .p99_us = 2590};

				for (int p = 0; p < FLEET_PHASES; p++)
					ph[p] = (struct record_phase){.rank = r,
								      .iter = it,
								      .name = (uint32_t)f->names[node][p],
								      .kind = phase_kind[p],
								      .group = phase_group[p],
								      .start_us = p == 0 ? RECORD_NO_START : p * 1000,
								      .dur_us = 1000 +
										(r * 7 + it * 13 + (uint32_t)p) % 997};
				if (agent_add_iteration(f->agents[node], &ri, ph, FLEET_PHASES, &k, 1) != 0)
					abort();
				f->sent.iters++;
				f->sent.iter_dur += ri.dur_us;
				for (int p = 0; p < FLEET_PHASES; p++)
					f->sent.phase_dur += ph[p].dur_us;
				f->sent.phases += FLEET_PHASES;
				f->sent.kernels++;
				f->sent.kernel_sum += k.sum_us;
			}
}

int fleet_flush(struct fleet *f, int timeout_ms)
{
	int64_t deadline = clock_mono_ms() + timeout_ms;

	for (uint32_t n = 0; n < f->n_nodes; n++) /* seal everything first, then wait */
		agent_flush(f->agents[n], 0);
	for (uint32_t n = 0; n < f->n_nodes; n++) {
		int64_t now = clock_mono_ms();

		if (agent_flush(f->agents[n], now < deadline ? (int)(deadline - now) : 0) != 0)
			return -1;
	}
	return 0;
}

uint32_t fleet_stats(struct fleet *f, struct agent_stats *sum)
{
	uint32_t connected = 0;

	memset(sum, 0, sizeof(*sum));
	for (uint32_t n = 0; n < f->n_nodes; n++) {
		struct agent_stats st;

		agent_get_stats(f->agents[n], &st);
		sum->records_appended += st.records_appended;
		sum->records_dropped += st.records_dropped;
		sum->records_rejected += st.records_rejected;
		sum->batches_sealed += st.batches_sealed;
		sum->batches_acked += st.batches_acked;
		sum->batches_rejected += st.batches_rejected;
		sum->batches_sent += st.batches_sent;
		sum->batches_resent += st.batches_resent;
		sum->connects += st.connects;
		sum->disconnects += st.disconnects;
		sum->unacked_bytes += st.unacked_bytes;
		sum->unacked_batches += st.unacked_batches;
		connected += st.connected;
	}
	return connected;
}

void fleet_agent_stats(struct fleet *f, uint32_t i, struct agent_stats *st) { agent_get_stats(f->agents[i], st); }

const struct fleet_sum *fleet_sent(const struct fleet *f) { return &f->sent; }

void fleet_free(struct fleet *f)
{
	for (uint32_t n = 0; n < f->n_nodes; n++)
		agent_close(f->agents[n], 0);
	for (int i = 0; i < FLEET_LOOPS; i++)
		agent_loop_free(f->loops[i]);
	free(f->agents);
	free(f->names);
	free(f);
}

static int64_t q_int(PGconn *c, const char *sql, const char *job)
{
	const char *params[1] = {job};
	PGresult *r = PQexecParams(c, sql, 1, NULL, params, NULL, NULL, 0);
	int64_t v;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		fprintf(stderr, "query failed: %s: %s", sql, PQerrorMessage(c));
		PQclear(r);
		return -1;
	}
	v = PQgetisnull(r, 0, 0) ? 0 : strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return v;
}

int fleet_check_db(const char *dsn, const char *job, const struct fleet_sum *sent)
{
	PGconn *c = PQconnectdb(dsn);
	struct {
		const char *what, *sql;
		int64_t want;
	} checks[] = {
		{"iterations", "SELECT count(*) FROM iterations WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 (int64_t)sent->iters},
		{"phases", "SELECT count(*) FROM phases WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 (int64_t)sent->phases},
		{"kernels", "SELECT count(*) FROM kernels WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 (int64_t)sent->kernels},
		{"sum(iterations.dur_us)",
		 "SELECT sum(dur_us) FROM iterations WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 sent->iter_dur},
		{"sum(phases.dur_us)",
		 "SELECT sum(dur_us) FROM phases WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 sent->phase_dur},
		{"sum(kernels.sum_us)",
		 "SELECT sum(sum_us) FROM kernels WHERE job_id = (SELECT id FROM jobs WHERE name = $1)",
		 sent->kernel_sum},
		/* one row per (rank, iteration, phase): nothing twice, even under another ts */
		{"distinct phase keys",
		 "SELECT count(*) FROM (SELECT DISTINCT rank, iter, name_id FROM phases WHERE job_id = "
		 "(SELECT id FROM jobs WHERE name = $1)) d",
		 (int64_t)sent->phases},
		{"distinct iteration keys",
		 "SELECT count(*) FROM (SELECT DISTINCT rank, iter FROM iterations WHERE job_id = "
		 "(SELECT id FROM jobs WHERE name = $1)) d",
		 (int64_t)sent->iters},
	};
	int rc = 0;

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "could not connect to \"%s\": %s", dsn, PQerrorMessage(c));
		PQfinish(c);
		return -1;
	}
	/* the distinct-key counts hash millions of rows: in memory, not in sorted runs on disk */
	PQclear(PQexec(c, "SET work_mem = '256MB'"));
	for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
		int64_t got = q_int(c, checks[i].sql, job);

		fprintf(stderr, "  %-24s sent %" PRId64 ", in PostgreSQL %" PRId64 "%s\n", checks[i].what,
			checks[i].want, got, got == checks[i].want ? "" : "  <-- differs");
		if (got != checks[i].want)
			rc = -1;
	}
	PQfinish(c);
	return rc;
}
