/* jobs.h: the jobs culpritd knows: topology, rank hosts, the job's name dictionary, and
 * (through diagnose/) its in-memory window of recent iterations. */
#ifndef CULPRIT_JOBS_H
#define CULPRIT_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "record.h"
#include "strmap.h"
#include "writer.h"

struct server;

struct job {
	char name[128];
	struct storage_topology topo;
	struct strmap names; /* name -> id + 1 */
	uint32_t n_names;
	uint64_t records;
	uint32_t last_iter; /* highest iteration seen on any rank */
};

/* Checks a topology: world = tp * cp * pp * dp, ep divides dp, gpus_per_node >= 1, a known
 * rank order. -1 with the reason in err. */
int jobs_check_topology(const struct storage_topology *t, char *err, size_t err_size);
/* The job called name, created with topo when new. NULL with err when topo differs from the
 * job's, or out of memory. */
struct job *jobs_get_or_create(struct server *s, const char *name, const struct storage_topology *topo,
			       char *err, size_t err_size);
/* Job-wide id of a name (interned on first use); UINT32_MAX when out of memory. */
uint32_t jobs_intern(struct job *job, const char *name);
/* Adds a batch's records to the job's window (names already mapped to job ids). */
void jobs_add_records(struct job *job, const struct record_iter *iters, size_t n_iters,
		      const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
		      size_t n_kernels);
void jobs_free_all(struct server *s);

#endif
