/* work.h: the working state of one diagnosis, shared by the attribution (diagnose.c) and
 * the rules that judge nodes and links (nodes.c). Private to diagnose/. */
#ifndef CULPRIT_DIAGNOSE_WORK_H
#define CULPRIT_DIAGNOSE_WORK_H

#include <stddef.h>
#include <stdint.h>

#include "l2.h"
#include "record.h"
#include "report.h"
#include "store.h"
#include "topo.h"

struct diagnose_config;

struct work {
	const struct store *s;
	const struct topo *t;
	const struct diagnose_config *cfg;
	struct l2 l2;
	uint32_t P, W;
	uint8_t *role; /* per rank: 0 none, 1 culprit, 2 late arriver, 3 victim */
	uint32_t first, last;
	uint32_t bfirst, blast; /* the baseline (empty: blast < bfirst) */
	uint32_t kfirst; /* first iteration for L3: a kernel block boundary when possible */
	struct report *rep;
	uint8_t kind[256]; /* phase slot -> enum record_kind */
	int has_span;      /* wall-clock span of the window, for the event verdicts */
	int64_t span_start, span_end;
};

static inline int phase_flag_any(const struct work *w, uint32_t r, int kind_mask, int flag)
{
	const uint8_t *f = w->l2.flag + (size_t)r * w->P;
	for (uint32_t p = 0; p < w->P; p++)
		if ((kind_mask >> w->kind[p]) & 1 && (f[p] & flag))
			return 1;
	return 0;
}

#define KM_COMPUTE (1 << RECORD_KIND_COMPUTE)
#define KM_COMM (1 << RECORD_KIND_COMM)
#define KM_HOST (1 << RECORD_KIND_HOST)

/* a rank's own fault, as attribution assigns them (kind[rank]); FK_LOAD: more work than its
 * peers, not slower hardware (imbalance.c) */
enum fault_kind { FK_NONE = 0, FK_COMPUTE, FK_HOST, FK_COMM, FK_LATE, FK_LOAD, FK_COUNT };

/* Each rank's own fault (kind[], count[]), the heavy stage, and what the rules decided of
 * the window as a whole (diagnose.c, assign_faults) */
struct faults {
	uint8_t *kind, *weak;
	size_t count[FK_COUNT];
	int stage;
	double stage_excess, stage_ratio;
	int late_only; /* late arrivers on more than a few nodes, still a minority */
	int data_imbalance; /* the work of each step spread unevenly, no rank the same (imbalance.c) */
	double gain[FK_COUNT], stage_gain; /* what each kind of fault costs a step (judge.c) */
	uint8_t unseen[FK_COUNT]; /* kept though the replay cannot see its cost (judge.c) */
};

/* judge.c: the replay judges the faults: sets gain[] and stage_gain, drops the faults that
 * recover no step in enough iterations (a hidden straggler becomes an advisory) */
int judge_faults(struct work *w, struct faults *f);
/* judge.c: with no window, the ranks that slowed while the step did not: advisories */
int judge_hidden(struct work *w, uint32_t last);

/* imbalance.c: work spread unevenly, which no hardware repair mends */
int imbalance_wide_stage(struct work *w, struct faults *f);
int imbalance_expert(struct work *w, struct faults *f);
int imbalance_data(struct work *w, struct faults *f);

/* links.c: a slow NIC, the node common to the collectives whose transfers slowed */
int links_locate(struct work *w, struct faults *f, size_t few_nodes);

/* nodes.c: the rules that judge nodes and links (docs/method.md, "Attribution") */
int on_few_nodes(const struct work *w, const uint8_t *kind, int k, size_t n, uint32_t nodes, size_t few_nodes);
/* whether rank r's long collectives are only the wait of a rank that arrives early */
int comm_is_wait(const struct work *w, uint32_t r);
size_t node_shift(const struct work *w, uint8_t *kind, uint32_t nodes, size_t few_nodes);
void node_comm(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes);
int comm_cover(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes);
int node_first_long(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes);
int node_leaves_late(struct work *w, uint8_t *kind, size_t *count, uint32_t nodes, size_t few_nodes);

#endif
