/* heatmap_db.h: what a job's heat map (GET /api/v1/jobs/{job}/heatmap of a job culpritd does not
 * hold in memory) reads from PostgreSQL, on a query worker (storage/query.h,
 * storage_query_submit_fn): the job's topology and hosts, its phase names, the latest
 * report's culprits, and the iteration time and one metric of every rank in a range of
 * iterations (from steps). The heat map itself is server/heatmap.c's. */
#ifndef CULPRIT_STORAGE_HEATMAP_DB_H
#define CULPRIT_STORAGE_HEATMAP_DB_H

#include <stdint.h>

#include "op.h"
#include "attrs.h"

struct pg_conn;
struct storage_query_result;

/* What is read goes to these, in this order: job (once), hosts, phases, culprits, cells. Each
 * returns 0, or -1 to stop (out of memory). */
struct storage_heatmap_sink {
	/* the job's topology and the range read: n_iters from first_iter, those of the range asked
	 * that are not after the last iteration stored (n_iters 0: none) */
	int (*job)(void *arg, const struct storage_topology *t, uint32_t first_iter, uint32_t n_iters);
	int (*host)(void *arg, uint32_t rank, const char *host);
	int (*phase)(void *arg, const char *name);
	int (*culprit)(void *arg, uint32_t rank);
	/* a rank's iteration time and the metric's value (us; -1: not reported) */
	int (*cell)(void *arg, uint32_t rank, uint32_t iter, int64_t step_us, int64_t value_us);
	void *arg;
};

/* Reads job's heat map of metric ("step" or a phase name) over n iterations from first_iter
 * (first_iter < 0: the last n stored). 1 done, 0 no such job, -1 failed (r says why) or
 * stopped by the sink (r->failed not set). */
MUST_CHECK int storage_heatmap_read(struct pg_conn *conn, const char *job, const char *metric, int64_t first_iter, uint32_t n,
			 const struct storage_heatmap_sink *sink, struct storage_query_result *r);

#endif
