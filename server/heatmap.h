/* heatmap.h: the rank x iteration heat map of a job (GET /api/v1/jobs/{job}/heatmap,
 * docs/api.md): each cell is a rank's duration of one metric (its iteration, or one phase)
 * in one iteration, as its ratio to the median of its role group (the ranks with its pp, tp
 * and cp) in that iteration; rows are ranks ordered by group (node, pipeline stage or DP
 * replica), or, when that would be more than HEATMAP_CELLS_MAX cells, one row per group or
 * run of groups (at most HEATMAP_ROWS_MAX), each its ranks' worst ratio.
 *
 * The data are gathered on the loop from a job's window, or on a query worker from
 * PostgreSQL (storage/heatmap.c); encoding runs on a query worker. Pure: no I/O. The answer
 * is binary (docs/api.md, "The heat map's encoding"): a JSON header, then typed arrays and
 * one byte per cell. */
#ifndef CULPRIT_HEATMAP_H
#define CULPRIT_HEATMAP_H

#include <stddef.h>
#include <stdint.h>
#include "attrs.h"

#define HEATMAP_NONE UINT32_MAX  /* a value not reported */
#define HEATMAP_ROWS_MAX 2000    /* rows of an aggregated answer */
#define HEATMAP_CELLS_MAX 900000 /* cells of an answer with a row per rank (about 1 MB) */
#define HEATMAP_ITERS_MAX 256    /* iterations per answer */
/* a cell's byte: 0 no value, else 1 + round((log2(ratio) - LO) / (HI - LO) * 254), clamped */
#define HEATMAP_LOG2_LO (-2.0)
#define HEATMAP_LOG2_HI 4.0

enum heatmap_group { HEATMAP_BY_NODE, HEATMAP_BY_STAGE, HEATMAP_BY_DP };

struct heatmap_data {
	char job[128];
	char metric[256];   /* "step" or a phase's name */
	const char *source; /* "memory" or "database" */
	enum heatmap_group group;
	uint32_t world, first_iter, n_iters; /* n_iters 0: nothing reported */
	uint32_t *step;                      /* [rank * n_iters + i]: the rank's iteration time (us) or HEATMAP_NONE */
	uint32_t *value;                     /* the metric's durations, the same layout; == step for "step" */
	uint32_t *role;                      /* [rank]: role group */
	uint32_t *key;                       /* [rank]: the group it is shown in (host id, pp or dp) */
	uint32_t *host;                      /* [rank]: index into hosts */
	uint32_t n_roles;
	char **hosts;
	uint32_t n_hosts;
	char **phases; /* the job's phase names */
	uint32_t n_phases;
	uint32_t *culprits; /* the latest report's culprit ranks */
	uint32_t n_culprits;
	int has_rows;              /* rows=A-B was asked: */
	uint32_t row_from, row_to; /* rows (ranks in shown order) A..B inclusive */
	int gzip;                  /* the client takes Content-Encoding: gzip */
};

/* Arrays sized for world ranks and n_iters iterations (value == step when same); -1 out of
 * memory. */
MUST_CHECK int heatmap_data_alloc(struct heatmap_data *d, uint32_t world, uint32_t n_iters, int same);
/* Adds a host name; its index, or UINT32_MAX out of memory. */
uint32_t heatmap_add_host(struct heatmap_data *d, const char *name);
MUST_CHECK int heatmap_add_phase(struct heatmap_data *d, const char *name);
MUST_CHECK int heatmap_add_culprit(struct heatmap_data *d, uint32_t rank);
void heatmap_data_free(struct heatmap_data *d);
/* The answer's body (malloc'd, *len bytes), gzip'd when d->gzip (then *gzipped = 1); NULL
 * out of memory. */
char *heatmap_encode(const struct heatmap_data *d, size_t *len, int *gzipped);
/* "node", "stage", "dp" -> group; -1 for another word. */
int heatmap_group_parse(const char *s);
const char *heatmap_group_name(enum heatmap_group g);

#endif
