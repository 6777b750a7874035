/* jobs.c: see jobs.h. */
#include "jobs.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "server.h"

static const char *const known_orders[] = {"tp-cp-ep-dp-pp", "tp-cp-dp-pp", "tp-dp-pp", "tp-pp-dp"};

int jobs_check_topology(const struct storage_topology *t, char *err, size_t err_size)
{
	uint64_t product = (uint64_t)t->tp * t->cp * t->pp * t->dp;
	size_t i;

	if (t->world == 0 || t->tp == 0 || t->cp == 0 || t->pp == 0 || t->dp == 0 || t->ep == 0) {
		snprintf(err, err_size, "topology sizes must all be at least 1");
		return -1;
	}
	if (product != t->world) {
		snprintf(err, err_size, "topology does not multiply out: tp*cp*pp*dp = %llu but world = %u",
			 (unsigned long long)product, t->world);
		return -1;
	}
	if (t->dp % t->ep != 0) {
		snprintf(err, err_size, "ep (%u) does not divide dp (%u)", t->ep, t->dp);
		return -1;
	}
	if (t->gpus_per_node == 0) {
		snprintf(err, err_size, "gpus_per_node must be at least 1");
		return -1;
	}
	if (t->order[0] == '\0')
		return 0;
	for (i = 0; i < sizeof(known_orders) / sizeof(known_orders[0]); i++)
		if (strcmp(t->order, known_orders[i]) == 0)
			return 0;
	snprintf(err, err_size, "unknown rank order \"%s\"", t->order);
	return -1;
}

static int same_topology(const struct storage_topology *a, const struct storage_topology *b)
{
	const char *oa = a->order[0] ? a->order : "tp-cp-ep-dp-pp";
	const char *ob = b->order[0] ? b->order : "tp-cp-ep-dp-pp";

	return a->world == b->world && a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->dp == b->dp &&
	       a->ep == b->ep && a->gpus_per_node == b->gpus_per_node && strcmp(oa, ob) == 0;
}

struct job *jobs_get_or_create(struct server *s, const char *name, const struct storage_topology *topo,
			       char *err, size_t err_size)
{
	struct job *job = strmap_get(&s->jobs, name);

	if (job) {
		if (!same_topology(&job->topo, topo)) {
			snprintf(err, err_size, "job \"%s\" is known with another topology (world %u, pp %u, dp %u)",
				 name, job->topo.world, job->topo.pp, job->topo.dp);
			return NULL;
		}
		return job;
	}
	job = calloc(1, sizeof(*job));
	if (!job || strmap_put(&s->jobs, name, job) < 0) {
		free(job);
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	snprintf(job->name, sizeof(job->name), "%s", name);
	job->topo = *topo;
	if (job->topo.order[0] == '\0')
		snprintf(job->topo.order, sizeof(job->topo.order), "tp-cp-ep-dp-pp");
	s->m.jobs++;
	log_info("job \"%s\": new, world %u (tp %u, cp %u, pp %u, dp %u, ep %u, order %s)", name, topo->world,
		 topo->tp, topo->cp, topo->pp, topo->dp, topo->ep, job->topo.order);
	return job;
}

uint32_t jobs_intern(struct job *job, const char *name)
{
	void *v = strmap_get(&job->names, name);

	if (v)
		return (uint32_t)((uintptr_t)v - 1);
	if (strmap_put(&job->names, name, (void *)(uintptr_t)(job->n_names + 1)) < 0)
		return UINT32_MAX;
	return job->n_names++;
}

void jobs_add_records(struct job *job, const struct record_iter *iters, size_t n_iters,
		      const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
		      size_t n_kernels)
{
	(void)phases;
	(void)kernels;
	for (size_t i = 0; i < n_iters; i++)
		if (iters[i].iter > job->last_iter)
			job->last_iter = iters[i].iter;
	job->records += n_iters + n_phases + n_kernels;
}

static void free_job(const char *key, void *value, void *arg)
{
	struct job *job = value;

	(void)key;
	(void)arg;
	strmap_free(&job->names);
	free(job);
}

void jobs_free_all(struct server *s)
{
	strmap_each(&s->jobs, free_job, NULL);
	strmap_free(&s->jobs);
}
