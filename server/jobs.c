/* jobs.c: see jobs.h. */
#include "jobs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

static int same_topology(const struct storage_topology *a, const struct storage_topology *b)
{
	return a->world == b->world && a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->dp == b->dp &&
	       a->ep == b->ep && a->gpus_per_node == b->gpus_per_node && strcmp(a->order, b->order) == 0;
}

struct job *jobs_get_or_create(struct server *s, const char *name, const struct storage_topology *wire,
			       char *err, size_t err_size)
{
	struct job *job = strmap_get(&s->jobs, name);
	struct engine_config ec;

	if (job) {
		if (!same_topology(&job->wire_topo, wire)) {
			snprintf(err, err_size, "job \"%s\" is known with another topology (world %u, pp %u, dp %u)",
				 name, job->topo.world, job->topo.pp, job->topo.dp);
			return NULL;
		}
		return job;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	if (topo_init(&job->topo, wire->world, wire->tp, wire->cp, wire->pp, wire->dp, wire->ep, wire->order,
		      wire->gpus_per_node, err, err_size) < 0) {
		free(job);
		return NULL;
	}
	memset(&ec, 0, sizeof(ec));
	ec.store.ring_iters = (uint32_t)s->cfg.window_iters;
	job->engine = engine_create(&job->topo, &ec);
	if (!job->engine || strmap_put(&s->jobs, name, job) < 0) {
		if (job->engine)
			engine_destroy(job->engine);
		free(job);
		snprintf(err, err_size, "out of memory for the window of job \"%s\"", name);
		return NULL;
	}
	store_set_job(engine_store(job->engine), name);
	snprintf(job->name, sizeof(job->name), "%s", name);
	job->wire_topo = *wire;
	s->m.jobs++;
	log_info("job \"%s\": new, world %u (tp %u, cp %u, pp %u, dp %u, ep %u), window of %lld iterations: %.1f MiB",
		 name, wire->world, wire->tp, wire->cp, wire->pp, wire->dp, wire->ep, (long long)s->cfg.window_iters,
		 (double)store_memory(engine_store(job->engine)) / (1 << 20));
	return job;
}

uint32_t jobs_intern(struct job *job, const char *name)
{
	int id = store_intern_name(engine_store(job->engine), name);

	return id < 0 ? UINT32_MAX : (uint32_t)id;
}

void jobs_set_hosts(struct job *job, const uint32_t *ranks, size_t n, const char *host)
{
	for (size_t i = 0; i < n; i++)
		store_set_host(engine_store(job->engine), ranks[i], host);
}

void jobs_add_records(struct job *job, const struct record_iter *iters, size_t n_iters,
		      const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
		      size_t n_kernels)
{
	struct store *st = engine_store(job->engine);
	int ev;

	for (size_t i = 0; i < n_iters; i++)
		job->dropped += store_add_iter(st, &iters[i]) != 0;
	for (size_t i = 0; i < n_phases; i++)
		job->dropped += store_add_phase(st, &phases[i]) != 0;
	for (size_t i = 0; i < n_kernels; i++)
		job->dropped += store_add_kernel(st, &kernels[i], NULL, 0) != 0;
	job->records += n_iters + n_phases + n_kernels;
	ev = engine_poll(job->engine);
	if (ev & ENGINE_OPENED) {
		const struct l1 *l = engine_l1(job->engine);

		log_info("job \"%s\": anomalous window opened at iteration %u (baseline %.0f ms)", job->name,
			 l->first_iter, l->baseline_ms);
	}
	if (ev & ENGINE_CLOSED) {
		const struct l1 *l = engine_l1(job->engine);

		log_info("job \"%s\": anomalous window %u-%u closed", job->name, l->first_iter, l->last_iter);
	}
}

static void free_job(const char *key, void *value, void *arg)
{
	struct job *job = value;

	(void)key;
	(void)arg;
	engine_destroy(job->engine);
	free(job);
}

void jobs_free_all(struct server *s)
{
	strmap_each(&s->jobs, free_job, NULL);
	strmap_free(&s->jobs);
}
