/* simfeed.c: see simfeed.h. */
#include "simfeed.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"
#include "clock.h"

struct simfeed {
	struct simfeed_config cfg;
	char server[64], job[128];
	struct fanout *f;
	const char *const *names;
	size_t n_names;
	const char **pnames, **knames;
	size_t names_cap;
	struct fleet_sum sent;
	int64_t t0_ms;
	uint32_t cur;
	uint64_t sealed_before; /* batches sealed when the previous iteration began */
	uint32_t gpus_per_node;
	struct lagged *lagged; /* the lagging node's rank-iterations not fed yet, in order */
	size_t n_lagged, lagged_cap;
	pthread_t thread;
	atomic_uint iter;
	atomic_int ready, fed, holding, released, failed;
	char err[256];
};

/* a copy of a rank's iteration held back (cfg.lag_iters) */
struct lagged {
	struct record_iter iter;
	struct record_phase *phases;
	struct record_kernel *kernels;
	int64_t **kdurs;
	size_t *kndurs;
	size_t nphases, nkernels;
};

static void quiet_log(void *arg, enum agent_log_level level, const char *msg)
{
	static atomic_int lines;

	(void)arg;
	/* reconnect storms of 1,620 agents: a few lines are enough */
	if (level >= AGENT_LOG_WARNING && atomic_fetch_add(&lines, 1) < 10)
		fprintf(stderr, "%s\n", msg);
}

static int on_job(void *ctx, const struct jsonl_job *j)
{
	struct simfeed *sf = ctx;
	struct fanout_config fc = {.server = sf->server,
				   .max_unacked_bytes = sf->cfg.max_unacked_bytes,
				   .flush_interval_ms = 100,
				   .log = quiet_log};
	struct fanout_job fj = fanout_job_of(j);

	snprintf(sf->job, sizeof(sf->job), "%s", j->job);
	sf->gpus_per_node = j->gpus_per_node ? j->gpus_per_node : 8;
	sf->f = fanout_new(&fc, &fj, sf->err, sizeof(sf->err));
	return sf->f ? 0 : -1;
}

/* Between iterations: seal, then pace (lockstep or wall time), then the hold. */
static void next_iteration(struct simfeed *sf, uint32_t it)
{
	fanout_kick(sf->f);
	atomic_store(&sf->ready, 1); /* every agent exists after the first iteration */
	if (sf->cfg.ms_per_iter > 0) {
		int64_t due = sf->t0_ms + (int64_t)it * sf->cfg.ms_per_iter, wait = due - clock_mono_ms();

		if (wait > 0)
			poll(NULL, 0, (int)wait);
	} else {
		struct fanout_stats st;

		/* the previous iteration may still be in flight, the one before it not */
		for (;;) {
			fanout_get_stats(sf->f, &st);
			if (st.acked_batches + st.rejected_batches >= sf->sealed_before)
				break;
			poll(NULL, 0, 10);
		}
		sf->sealed_before = st.sealed_batches;
	}
	if (sf->cfg.hold_at && it == sf->cfg.hold_at) {
		atomic_store(&sf->holding, 1);
		while (!atomic_load(&sf->released))
			poll(NULL, 0, 10);
		atomic_store(&sf->holding, 0);
	}
	atomic_store(&sf->iter, it);
}

static int feed_rank_iter(struct simfeed *sf, const struct sim_rank_iter *ri)
{
	const char *why = NULL;

	if (ri->nphases > sf->names_cap || ri->nkernels > sf->names_cap) {
		size_t cap = (ri->nphases > ri->nkernels ? ri->nphases : ri->nkernels) + 16;

		sf->pnames = realloc(sf->pnames, cap * sizeof(*sf->pnames));
		sf->knames = realloc(sf->knames, cap * sizeof(*sf->knames));
		if (!sf->pnames || !sf->knames)
			abort();
		sf->names_cap = cap;
	}
	for (size_t i = 0; i < ri->nphases; i++) {
		sf->pnames[i] = sf->names[ri->phases[i].name];
		sf->sent.phase_dur += ri->phases[i].dur_us;
	}
	for (size_t i = 0; i < ri->nkernels; i++) {
		sf->knames[i] = sf->names[ri->kernels[i].name];
		/* the fanout sums the sampled durations when there are any (as it stores them) */
		if (ri->kernel_durs && ri->kernel_ndurs && ri->kernel_durs[i] && ri->kernel_ndurs[i])
			for (size_t k = 0; k < ri->kernel_ndurs[i]; k++)
				sf->sent.kernel_sum += ri->kernel_durs[i][k];
		else
			sf->sent.kernel_sum += ri->kernels[i].sum_us;
	}
	if (fanout_rank_iter(sf->f, &ri->iter, ri->phases, sf->pnames, ri->nphases, ri->kernels, sf->knames,
			     ri->kernel_durs, ri->kernel_ndurs, ri->nkernels, &why) < 0) {
		snprintf(sf->err, sizeof(sf->err), "rank %u iteration %u: %s", ri->iter.rank, ri->iter.iter, why);
		return -1;
	}
	sf->sent.iters++;
	sf->sent.iter_dur += ri->iter.dur_us;
	sf->sent.phases += ri->nphases;
	sf->sent.kernels += ri->nkernels;
	return 0;
}

static void *dup_mem(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	if (!q)
		abort();
	return n ? memcpy(q, p, n) : q;
}

static void lag_hold(struct simfeed *sf, const struct sim_rank_iter *ri)
{
	struct lagged *l;

	if (sf->n_lagged == sf->lagged_cap) {
		sf->lagged_cap = sf->lagged_cap ? 2 * sf->lagged_cap : 64;
		sf->lagged = realloc(sf->lagged, sf->lagged_cap * sizeof(*sf->lagged));
		if (!sf->lagged)
			abort();
	}
	l = &sf->lagged[sf->n_lagged++];
	l->iter = ri->iter;
	l->nphases = ri->nphases;
	l->nkernels = ri->nkernels;
	l->phases = dup_mem(ri->phases, ri->nphases * sizeof(*ri->phases));
	l->kernels = dup_mem(ri->kernels, ri->nkernels * sizeof(*ri->kernels));
	l->kdurs = NULL;
	l->kndurs = NULL;
	if (ri->kernel_durs && ri->kernel_ndurs) {
		l->kdurs = dup_mem(ri->kernel_durs, ri->nkernels * sizeof(*l->kdurs));
		l->kndurs = dup_mem(ri->kernel_ndurs, ri->nkernels * sizeof(*l->kndurs));
		for (size_t i = 0; i < ri->nkernels; i++)
			l->kdurs[i] = dup_mem(ri->kernel_durs[i], ri->kernel_ndurs[i] * sizeof(int64_t));
	}
}

/* Feeds the held rank-iterations of iterations before until (all of them: UINT32_MAX). */
static int lag_release(struct simfeed *sf, uint32_t until)
{
	size_t n = 0;
	int rc = 0;

	while (n < sf->n_lagged && sf->lagged[n].iter.iter < until)
		n++;
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++) {
		struct lagged *l = &sf->lagged[i];
		struct sim_rank_iter ri = {.iter = l->iter,
					   .phases = l->phases,
					   .nphases = l->nphases,
					   .kernels = l->kernels,
					   .nkernels = l->nkernels,
					   .kernel_durs = l->kndurs ? (const int64_t *const *)l->kdurs : NULL,
					   .kernel_ndurs = l->kndurs};

		if (!rc)
			rc = feed_rank_iter(sf, &ri);
		for (size_t k = 0; l->kndurs && k < l->nkernels; k++)
			free(l->kdurs[k]);
		free(l->phases);
		free(l->kernels);
		free(l->kdurs);
		free(l->kndurs);
	}
	memmove(sf->lagged, sf->lagged + n, (sf->n_lagged - n) * sizeof(*sf->lagged));
	sf->n_lagged -= n;
	return rc;
}

static int on_rank_iter(void *ctx, const struct sim_rank_iter *ri)
{
	struct simfeed *sf = ctx;
	const struct simfeed_config *c = &sf->cfg;

	if (ri->iter.iter != sf->cur) {
		sf->cur = ri->iter.iter;
		next_iteration(sf, ri->iter.iter);
		if (c->lag_iters && ri->iter.iter >= c->lag_iters && lag_release(sf, ri->iter.iter - c->lag_iters) < 0)
			return -1;
	}
	if (c->lag_iters && ri->iter.iter >= c->lag_from &&
	    ri->iter.rank / sf->gpus_per_node == (uint32_t)c->lag_host) {
		lag_hold(sf, ri);
		return 0;
	}
	return feed_rank_iter(sf, ri);
}

static int on_event(void *ctx, const char *host, const char *kind, int64_t ts_us, const char *source,
		    const char *detail)
{
	(void)ctx, (void)host, (void)kind, (void)ts_us, (void)source, (void)detail;
	return 0; /* the agent protocol carries no events */
}

static void *feed_main(void *arg)
{
	struct simfeed *sf = arg;
	struct sim_options opt = {.scenario = sf->cfg.scenario,
				  .iters = sf->cfg.iters,
				  .recover_at = sf->cfg.recover_at,
				  .start_us = (int64_t)time(NULL) * 1000000};
	struct sim_sink sink = {.ctx = sf, .job = on_job, .rank_iter = on_rank_iter, .event = on_event};
	char err[256];

	sf->t0_ms = clock_mono_ms();
	if (sim_run(&opt, &sink, err, sizeof(err)) < 0 || lag_release(sf, UINT32_MAX) < 0) {
		fprintf(stderr, "simfeed: %s\n", sf->err[0] ? sf->err : err);
		atomic_store(&sf->failed, 1);
	} else if (sf->f) {
		fanout_kick(sf->f);
	}
	atomic_store(&sf->fed, 1);
	return NULL;
}

struct simfeed *simfeed_start(const struct simfeed_config *cfg)
{
	struct simfeed *sf = calloc(1, sizeof(*sf));

	if (!sf)
		abort();
	sf->cfg = *cfg;
	snprintf(sf->server, sizeof(sf->server), "127.0.0.1:%d", cfg->port);
	sf->names = sim_names(&sf->n_names);
	if (pthread_create(&sf->thread, NULL, feed_main, sf) != 0)
		abort();
	return sf;
}

uint32_t simfeed_iter(struct simfeed *sf) { return atomic_load(&sf->iter); }

int simfeed_fed(struct simfeed *sf) { return atomic_load(&sf->fed); }

int simfeed_holding(struct simfeed *sf) { return atomic_load(&sf->holding); }

void simfeed_release(struct simfeed *sf) { atomic_store(&sf->released, 1); }

void simfeed_stats(struct simfeed *sf, struct fanout_stats *st)
{
	memset(st, 0, sizeof(*st));
	/* the agents are made during the first iteration; after it the fanout's table is fixed */
	if (atomic_load(&sf->ready))
		fanout_get_stats(sf->f, st);
}

int simfeed_finish(struct simfeed *sf, int timeout_ms, struct fanout_stats *st)
{
	int rc;

	pthread_join(sf->thread, NULL);
	if (atomic_load(&sf->failed) || !sf->f)
		return -1;
	rc = fanout_close(sf->f, timeout_ms, st);
	sf->f = NULL;
	return rc;
}

const struct fleet_sum *simfeed_sent(const struct simfeed *sf) { return &sf->sent; }

const char *simfeed_job(const struct simfeed *sf) { return sf->job; }

void simfeed_free(struct simfeed *sf)
{
	if (sf->f)
		fanout_abandon(sf->f, 0);
	free(sf->pnames);
	free(sf->knames);
	free(sf->lagged); /* empty once fed */
	free(sf);
}
