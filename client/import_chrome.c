/* import_chrome.c: many-rank Chrome-trace timelines (see import_chrome.h). */
#include "import_chrome.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_stream.h"
#include "import_trace.h"
#include "topo.h"

#define MAX_NAMES 40 /* distinct event names kept; later ones become "other" */

enum tkind { T_COMPUTE, T_PP, T_TP, T_DP, T_MISC };

struct thread {
	int64_t pid, tid;
	int32_t pp, tp;
	uint8_t kind;
	uint8_t used;
};

struct agg {
	int64_t pid, tid, step;
	uint32_t name;
	uint8_t used;
	double sum, lo, hi;
};

struct chr {
	struct thread *th;
	size_t thcap, nth;
	struct agg *ag;
	size_t agcap, nag;
	char names[MAX_NAMES + 1][64];
	uint32_t nnames;
	int64_t maxpid;
	uint64_t nostep;
	uint64_t own; /* events with args.rank and args.iter: culprit's own trace (import_trace.c) */
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static struct thread *thread_get(struct chr *c, int64_t pid, int64_t tid, int add)
{
	if (add && (c->nth + 1) * 2 > c->thcap) {
		size_t cap = c->thcap ? c->thcap * 2 : 64;
		struct thread *n = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t i = 0; i < c->thcap; i++)
			if (c->th[i].used) {
				size_t j = mix((uint64_t)c->th[i].pid * 1000003u + (uint64_t)c->th[i].tid) & (cap - 1);
				while (n[j].used)
					j = (j + 1) & (cap - 1);
				n[j] = c->th[i];
			}
		free(c->th);
		c->th = n;
		c->thcap = cap;
	}
	if (!c->thcap)
		return NULL;
	size_t j = mix((uint64_t)pid * 1000003u + (uint64_t)tid) & (c->thcap - 1);
	while (c->th[j].used) {
		if (c->th[j].pid == pid && c->th[j].tid == tid)
			return &c->th[j];
		j = (j + 1) & (c->thcap - 1);
	}
	if (!add)
		return NULL;
	c->th[j].used = 1;
	c->th[j].pid = pid;
	c->th[j].tid = tid;
	c->th[j].pp = c->th[j].tp = -1;
	c->nth++;
	return &c->th[j];
}

static uint64_t agg_hash(int64_t pid, int64_t tid, int64_t step, uint32_t name)
{
	return mix(((uint64_t)pid * 1000003u + (uint64_t)tid) * 1000033u + (uint64_t)step * 131u + name);
}

static struct agg *agg_get(struct chr *c, int64_t pid, int64_t tid, int64_t step, uint32_t name)
{
	if ((c->nag + 1) * 2 > c->agcap) {
		size_t cap = c->agcap ? c->agcap * 2 : 1024;
		struct agg *n = calloc(cap, sizeof(*n));
		if (!n)
			return NULL;
		for (size_t i = 0; i < c->agcap; i++)
			if (c->ag[i].used) {
				const struct agg *a = &c->ag[i];
				size_t j = agg_hash(a->pid, a->tid, a->step, a->name) & (cap - 1);
				while (n[j].used)
					j = (j + 1) & (cap - 1);
				n[j] = *a;
			}
		free(c->ag);
		c->ag = n;
		c->agcap = cap;
	}
	size_t j = agg_hash(pid, tid, step, name) & (c->agcap - 1);
	while (c->ag[j].used) {
		struct agg *a = &c->ag[j];
		if (a->pid == pid && a->tid == tid && a->step == step && a->name == name)
			return a;
		j = (j + 1) & (c->agcap - 1);
	}
	struct agg *a = &c->ag[j];
	a->used = 1;
	a->pid = pid;
	a->tid = tid;
	a->step = step;
	a->name = name;
	a->sum = 0;
	a->lo = INFINITY;
	a->hi = -INFINITY;
	c->nag++;
	return a;
}

/* "PP rank X, TP rank Y, kind" */
static int parse_thread_name(const char *s, int32_t *pp, int32_t *tp, uint8_t *kind)
{
	int a, b, n = 0;
	if (sscanf(s, "PP rank %d, TP rank %d, %n", &a, &b, &n) != 2 || !n || a < 0 || b < 0 || a > 65535 || b > 65535)
		return -1;
	const char *k = s + n;
	if (strcmp(k, "compute") == 0)
		*kind = T_COMPUTE;
	else if (strcmp(k, "pp-comm") == 0)
		*kind = T_PP;
	else if (strcmp(k, "tp-comm") == 0)
		*kind = T_TP;
	else if (strcmp(k, "dp-comm") == 0)
		*kind = T_DP;
	else
		*kind = T_MISC;
	*pp = a;
	*tp = b;
	return 0;
}

static int on_event(void *ctx, const struct import_stream_event *e, const char **why)
{
	struct chr *c = ctx;
	if (e->ph[0] == 'M' && strcmp(e->name, "thread_name") == 0) {
		int32_t pp, tp;
		uint8_t kind;
		if (parse_thread_name(e->arg_name, &pp, &tp, &kind) < 0)
			return 0; /* a thread of something else */
		if (e->pid < 0 || e->tid < 0) {
			*why = "thread_name without a numeric pid and tid";
			return -1;
		}
		struct thread *t = thread_get(c, e->pid, e->tid, 1);
		if (!t) {
			*why = "out of memory";
			return -1;
		}
		t->pp = pp;
		t->tp = tp;
		t->kind = kind;
		if (e->pid > c->maxpid)
			c->maxpid = e->pid;
		return 0;
	}
	if (e->ph[0] != 'X' || e->ph[1])
		return 0;
	if (e->rank >= 0 && e->iter >= 0)
		c->own++;
	if (e->step < 0) {
		c->nostep++;
		return 0;
	}
	if (!e->has_ts || !e->has_dur || e->pid < 0 || e->tid < 0 || !isfinite(e->ts) || !isfinite(e->dur)) {
		*why = "an event without numeric ts, dur, pid and tid";
		return -1;
	}
	if (e->step > 100000000) {
		*why = "args.step out of range";
		return -1;
	}
	uint32_t id = 0;
	while (id < c->nnames && strcmp(c->names[id], e->name) != 0)
		id++;
	if (id == c->nnames) {
		if (c->nnames < MAX_NAMES)
			snprintf(c->names[c->nnames++], sizeof(c->names[0]), "%.63s", e->name);
		else {
			id = MAX_NAMES;
			snprintf(c->names[MAX_NAMES], sizeof(c->names[0]), "other");
		}
	}
	struct agg *a = agg_get(c, e->pid, e->tid, e->step, id);
	if (!a) {
		*why = "out of memory";
		return -1;
	}
	double dur = e->dur > 0 ? e->dur : 0; /* the SE timeline has a few negative ones */
	a->sum += dur;
	if (e->ts < a->lo)
		a->lo = e->ts;
	if (e->ts + dur > a->hi)
		a->hi = e->ts + dur;
	return 0;
}

/* meta-<trial>.yaml: "key: value" lines; we read pp_size, tp_size, dp_size */
static int read_meta(const char *path, uint32_t *pp, uint32_t *tp, uint32_t *dp, char *err, size_t err_size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return 1; /* absent */
	char line[256];
	unsigned ln = 0;
	while (fgets(line, sizeof(line), f)) {
		ln++;
		char key[64];
		unsigned long v;
		if (sscanf(line, " %63[a-z_] : %lu", key, &v) != 2)
			continue;
		uint32_t *dst = strcmp(key, "pp_size") == 0   ? pp
				: strcmp(key, "tp_size") == 0 ? tp
				: strcmp(key, "dp_size") == 0 ? dp
							      : NULL;
		if (!dst)
			continue;
		if (v < 1 || v > 65536) {
			snprintf(err, err_size, "%s:%u: %s out of range", path, ln, key);
			fclose(f);
			return -1;
		}
		*dst = (uint32_t)v;
	}
	fclose(f);
	return 0;
}

/* the meta file beside "…/timeline-<trial>.json[.gz]": "…/meta-<trial>.yaml" */
static int meta_path(const char *path, char *out, size_t cap)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (strncmp(base, "timeline-", 9) != 0)
		return -1;
	const char *trial = base + 9, *dot = strchr(trial, '.');
	size_t tl = dot ? (size_t)(dot - trial) : strlen(trial);
	int n = snprintf(out, cap, "%.*smeta-%.*s.yaml", (int)(base - path), path, (int)tl, trial);
	return n > 0 && (size_t)n < cap ? 0 : -1;
}

struct ph {
	uint32_t rank, iter, name;
	uint8_t kind, group;
	double sum, lo, hi;
};

static int cmp_ph(const void *a, const void *b)
{
	const struct ph *x = a, *y = b;
	if (x->iter != y->iter)
		return x->iter < y->iter ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	return x->name < y->name ? -1 : x->name > y->name;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return x < y ? -1 : x > y;
}

static int64_t us(double v) { return (int64_t)llround(v); }

/* The layout of a timeline: what it shows and its sizes. */
struct layout {
	uint32_t pp, tp, dp, world;
	struct topo topo;
};

/* The layout: flags, else the meta file, else what the threads show. */
static int chrome_layout(const struct chr *c, const char *path, const struct import_options *opt, struct layout *l,
			 char *err, size_t err_size)
{
	uint32_t pp = 0, tp = 0, dp = 0;
	char mp[1024];
	const char *meta = opt && opt->meta ? opt->meta : meta_path(path, mp, sizeof(mp)) == 0 ? mp : NULL;
	if (meta) {
		int m = read_meta(meta, &pp, &tp, &dp, err, err_size);
		if (m < 0)
			return -1;
		if (m > 0 && opt && opt->meta) {
			snprintf(err, err_size, "%s: could not open: %s", meta, strerror(errno));
			return -1;
		}
	}
	if (opt && opt->pp)
		pp = opt->pp;
	if (opt && opt->tp)
		tp = opt->tp;
	uint32_t seen_pp = 0, seen_tp = 0;
	for (size_t i = 0; i < c->thcap; i++)
		if (c->th[i].used) {
			if ((uint32_t)c->th[i].pp + 1 > seen_pp)
				seen_pp = (uint32_t)c->th[i].pp + 1;
			if ((uint32_t)c->th[i].tp + 1 > seen_tp)
				seen_tp = (uint32_t)c->th[i].tp + 1;
		}
	if (!pp)
		pp = seen_pp;
	if (!tp)
		tp = seen_tp;
	if (!dp)
		dp = (uint32_t)c->maxpid + 1;
	/* the timeline shows TP rank 0 only when tp_size > 1 there: model the ranks it has */
	if (seen_tp < tp)
		tp = seen_tp;
	if (seen_pp > pp || (uint32_t)c->maxpid >= dp) {
		snprintf(err, err_size,
			 "%s: the timeline has PP rank %u and DP rank %lld, beyond the layout pp %u, dp %u", path,
			 seen_pp - 1, (long long)c->maxpid, pp, dp);
		return -1;
	}
	if ((uint64_t)pp * tp * dp > 1000000) {
		snprintf(err, err_size, "%s: layout too large", path);
		return -1;
	}
	uint32_t world = pp * tp * dp;
	char msg[200];
	if (topo_init(&l->topo, world, tp, 1, pp, dp, 1, "tp-cp-ep-dp-pp", world < 8 ? world : 8, msg, sizeof(msg)) <
	    0) {
		snprintf(err, err_size, "%s: %s", path, msg);
		return -1;
	}
	l->pp = pp;
	l->tp = tp;
	l->dp = dp;
	l->world = world;
	return 0;
}

/* The (rank, iteration, name) sums as phases, steps numbered as consecutive iterations,
 * sorted; *out malloc'd. */
static int chrome_phases(struct chr *c, const char *path, const struct layout *l, struct ph **out, size_t *n,
			 char *err, size_t err_size)
{
	int64_t *steps = malloc(c->nag * sizeof(*steps));
	struct ph *ph = malloc(c->nag * sizeof(*ph));
	int rc = -1;
	if (!steps || !ph) {
		snprintf(err, err_size, "%s: out of memory", path);
		goto out;
	}
	size_t ns = 0;
	for (size_t i = 0; i < c->agcap; i++)
		if (c->ag[i].used)
			steps[ns++] = c->ag[i].step;
	qsort(steps, ns, sizeof(*steps), cmp_i64);
	size_t nu = 0;
	for (size_t i = 0; i < ns; i++)
		if (!nu || steps[nu - 1] != steps[i])
			steps[nu++] = steps[i];
	size_t np = 0;
	for (size_t i = 0; i < c->agcap; i++) {
		const struct agg *a = &c->ag[i];
		if (!a->used)
			continue;
		const struct thread *t = thread_get(c, a->pid, a->tid, 0);
		if (!t) {
			snprintf(err, err_size,
				 "%s: events on pid %lld tid %lld, a thread without a \"PP rank X, TP rank Y\" name",
				 path, (long long)a->pid, (long long)a->tid);
			goto out;
		}
		struct topo_coords co;
		memset(&co, 0, sizeof(co));
		co.tp = (uint32_t)t->tp;
		co.dp = (uint32_t)a->pid;
		co.pp = (uint32_t)t->pp;
		size_t lo = 0, hi = nu;
		while (lo + 1 < hi) {
			size_t mid = (lo + hi) / 2;
			if (steps[mid] <= a->step)
				lo = mid;
			else
				hi = mid;
		}
		struct ph *p = &ph[np++];
		p->rank = topo_rank(&l->topo, &co);
		p->iter = (uint32_t)lo;
		p->name = a->name;
		const char *nm = c->names[a->name];
		static const uint8_t kinds[] = {RECORD_KIND_COMPUTE, RECORD_KIND_COMM, RECORD_KIND_COMM,
						RECORD_KIND_COMM, RECORD_KIND_HOST};
		static const uint8_t groups[] = {RECORD_GROUP_NONE, RECORD_GROUP_PP, RECORD_GROUP_TP, RECORD_GROUP_DP,
						 RECORD_GROUP_NONE};
		p->kind = strcmp(nm, "gc") == 0 ? RECORD_KIND_HOST : kinds[t->kind];
		p->group = groups[t->kind];
		p->sum = a->sum;
		p->lo = a->lo;
		p->hi = a->hi;
	}
	qsort(ph, np, sizeof(*ph), cmp_ph);
	*out = ph;
	*n = np;
	ph = NULL;
	rc = 0;
out:
	free(steps);
	free(ph);
	return rc;
}

/* The job, then per (iteration, rank) an iteration spanning its phases and the phases. */
static int chrome_emit(const struct chr *c, const struct ph *ph, size_t np, const struct layout *l,
		       const struct import_options *opt, const struct jsonl_handler *h, const char **why)
{
	struct jsonl_job job = {.job = opt && opt->job ? opt->job : "chrome", .world = l->world, .tp = l->tp, .cp = 1,
				.pp = l->pp, .dp = l->dp, .ep = 1, .gpus_per_node = l->world < 8 ? l->world : 8,
				.order = "tp-cp-ep-dp-pp"};
	if (h->job && h->job(h->ctx, &job, why) < 0)
		return -1;
	for (size_t i = 0; i < np;) {
		size_t j = i;
		double lo = INFINITY, hi = -INFINITY;
		while (j < np && ph[j].iter == ph[i].iter && ph[j].rank == ph[i].rank) {
			lo = ph[j].lo < lo ? ph[j].lo : lo;
			hi = ph[j].hi > hi ? ph[j].hi : hi;
			j++;
		}
		struct record_iter it = {ph[i].rank, ph[i].iter, us(lo), us(hi - lo)};
		if (h->iter && h->iter(h->ctx, &it, why) < 0)
			return -1;
		for (size_t k = i; k < j;) {
			/* one name on several threads of the rank: one phase */
			size_t m = k;
			double sum = 0, plo = INFINITY;
			while (m < j && ph[m].name == ph[k].name) {
				sum += ph[m].sum;
				plo = ph[m].lo < plo ? ph[m].lo : plo;
				m++;
			}
			struct record_phase rp = {ph[k].rank,  ph[k].iter,   0,      ph[k].kind,
						  ph[k].group, us(plo - lo), us(sum)};
			if (h->phase && h->phase(h->ctx, &rp, c->names[ph[k].name], why) < 0)
				return -1;
			k = m;
		}
		i = j;
	}
	return 0;
}

int import_chrome_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		       size_t err_size)
{
	struct chr c = {0};
	struct import_stream_handler sh = {.ctx = &c, .event = on_event};
	struct layout l;
	struct ph *ph = NULL;
	size_t np = 0;
	int rc = -1;
	const char *why = NULL;

	if (import_stream_events(path, &sh, NULL, err, err_size) < 0)
		goto out;
	if (!c.nth && c.own) {
		rc = import_trace_read(path, opt, h, err, err_size); /* `culprit trace --format chrome` */
		goto out;
	}
	if (!c.nth) {
		snprintf(err, err_size,
			 "%s: no thread named \"PP rank X, TP rank Y, ...\" (not a per-rank timeline) and no event with "
			 "args.rank and args.iter (not a trace of culprit's)",
			 path);
		goto out;
	}
	if (!c.nag) {
		snprintf(err, err_size, "%s: no steps (no event with args.step)", path);
		goto out;
	}
	if (chrome_layout(&c, path, opt, &l, err, err_size) < 0 ||
	    chrome_phases(&c, path, &l, &ph, &np, err, err_size) < 0)
		goto out;
	rc = chrome_emit(&c, ph, np, &l, opt, h, &why) < 0 ? import_rejected(path, why, err, err_size) : 0;
out:
	free(ph);
	free(c.th);
	free(c.ag);
	return rc;
}
