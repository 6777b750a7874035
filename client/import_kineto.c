/* import_kineto.c: PyTorch profiler traces (see import_kineto.h). */
#include "import_kineto.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hash.h"
#include "import_stream.h"

#define MAX_COLL_PHASES 24 /* per step and type; later collectives share "#rest" */

struct kev {
	double ts, dur;
	uint32_t name;
	uint8_t comm;
};

struct step {
	int64_t num;
	double ts, dur;
	int64_t tid;
};

/* A CPU operator of a trace without kernels (a CPU job's): its phases come from them. */
struct cev {
	double ts, dur;
	int64_t tid;
	uint8_t data; /* the data loader's next() */
};

struct names {
	char **s;
	uint8_t *comm;
	uint32_t n, cap;
	uint32_t *tab; /* open addressing, index + 1 */
	uint32_t tcap;
};

struct kin {
	struct kev *k;
	size_t nk, capk;
	struct step *st;
	size_t ns, caps;
	struct cev *c; /* kept until the first kernel: a trace with kernels does not need them */
	size_t nc, capc;
	struct names nm;
	int64_t rank, world;           /* from a complete distributedInfo, else -1 */
	int dist;                      /* a distributedInfo was seen */
	int64_t dist_rank, dist_world; /* what it said (-1: nothing) */
	double first, last;            /* the span of the timed events (a trace without steps) */
	int timed;
};

int import_kineto_nccl_type(const char *name, char *out, size_t cap)
{
	const char *p = NULL;
	if (strncmp(name, "ncclKernel_", 11) == 0)
		p = name + 11;
	else if (strncmp(name, "ncclDevKernel_", 14) == 0)
		p = name + 14;
	if (p) {
		size_t i = 0;
		while (p[i] && p[i] != '_' && p[i] != '(' && i + 1 < cap) {
			out[i] = p[i];
			i++;
		}
		out[i] = 0;
		return i > 0;
	}
	for (const char *q = name; *q; q++)
		if (tolower((unsigned char)q[0]) == 'n' && tolower((unsigned char)q[1]) == 'c' &&
		    tolower((unsigned char)q[2]) == 'c' && tolower((unsigned char)q[3]) == 'l') {
			snprintf(out, cap, "nccl");
			return 1;
		}
	return 0;
}

static int names_grow(struct names *nm)
{
	uint32_t tcap = nm->tcap ? nm->tcap * 2 : 256;
	uint32_t *t = calloc(tcap, sizeof(*t));
	if (!t)
		return -1;
	for (uint32_t i = 0; i < nm->n; i++) {
		uint32_t j = (uint32_t)hash_str(nm->s[i]) & (tcap - 1);
		while (t[j])
			j = (j + 1) & (tcap - 1);
		t[j] = i + 1;
	}
	free(nm->tab);
	nm->tab = t;
	nm->tcap = tcap;
	return 0;
}

static int64_t names_intern(struct names *nm, const char *s)
{
	if ((nm->n + 1) * 2 > nm->tcap && names_grow(nm) < 0)
		return -1;
	uint32_t j = (uint32_t)hash_str(s) & (nm->tcap - 1);
	while (nm->tab[j]) {
		if (strcmp(nm->s[nm->tab[j] - 1], s) == 0)
			return nm->tab[j] - 1;
		j = (j + 1) & (nm->tcap - 1);
	}
	if (nm->n == nm->cap) {
		uint32_t c = nm->cap ? nm->cap * 2 : 64;
		char **ns = realloc(nm->s, c * sizeof(*ns));
		if (!ns)
			return -1;
		nm->s = ns;
		uint8_t *nc = realloc(nm->comm, c);
		if (!nc)
			return -1;
		nm->comm = nc;
		nm->cap = c;
	}
	char *d = strdup(s);
	if (!d)
		return -1;
	char ty[64];
	nm->comm[nm->n] = (uint8_t)import_kineto_nccl_type(s, ty, sizeof(ty));
	nm->s[nm->n] = d;
	nm->tab[j] = nm->n + 1;
	return nm->n++;
}

static void names_free(struct names *nm)
{
	for (uint32_t i = 0; i < nm->n; i++)
		free(nm->s[i]);
	free(nm->s);
	free(nm->comm);
	free(nm->tab);
	memset(nm, 0, sizeof(*nm));
}

/* Kernel names travel in at most KERNEL_NAME_MAX bytes (agent.h AGENT_MAX_NAME): a longer
 * C++ template name keeps its head, cut at a UTF-8 boundary, and a hash of the whole, so
 * distinct names stay distinct. */
#define KERNEL_NAME_MAX 255
static const char *short_name(const char *name, char *buf)
{
	size_t len = strlen(name);
	if (len <= KERNEL_NAME_MAX)
		return name;
	size_t keep = KERNEL_NAME_MAX - 17;
	while (keep && ((unsigned char)name[keep] & 0xC0) == 0x80)
		keep--;
	snprintf(buf, KERNEL_NAME_MAX + 1, "%.*s~%016llx", (int)keep, name, (unsigned long long)hash_str(name));
	return buf;
}

/* Room for one more element in the array *a of n elements (capacity *cap, doubled from
 * first); -1 when out of memory. */
static int room(void **a, size_t *cap, size_t n, size_t size, size_t first)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : first;
	void *p = realloc(*a, c * size);
	if (!p)
		return -1;
	*a = p;
	*cap = c;
	return 0;
}

static int on_event(void *ctx, const struct import_stream_event *e, const char **why)
{
	struct kin *k = ctx;
	if (e->ph[0] != 'X' || e->ph[1])
		return 0;
	if (e->has_ts && e->has_dur && e->dur >= 0) {
		if (!k->timed || e->ts < k->first)
			k->first = e->ts;
		if (!k->timed || e->ts + e->dur > k->last)
			k->last = e->ts + e->dur;
		k->timed = 1;
	}
	if (strcmp(e->cat, "kernel") == 0 || strcmp(e->cat, "Kernel") == 0) {
		if (!e->has_ts || !e->has_dur) {
			*why = "kernel event without ts or dur";
			return -1;
		}
		if (room((void **)&k->k, &k->capk, k->nk, sizeof(*k->k), 4096) < 0)
			goto oom;
		char shortname[KERNEL_NAME_MAX + 1];
		int64_t id = names_intern(&k->nm, short_name(e->name, shortname));
		if (id < 0)
			goto oom;
		k->k[k->nk++] = (struct kev){e->ts, e->dur, (uint32_t)id, k->nm.comm[id]};
		free(k->c);
		k->c = NULL;
		k->nc = k->capc = 0;
		return 0;
	}
	if (strncmp(e->name, "ProfilerStep#", 13) == 0 && strcmp(e->cat, "gpu_user_annotation") != 0) {
		if (!e->has_ts || !e->has_dur) {
			*why = "ProfilerStep event without ts or dur";
			return -1;
		}
		char *end;
		long long num = strtoll(e->name + 13, &end, 10);
		if (end == e->name + 13 || num < 0 || num > (long long)UINT32_MAX) {
			*why = "ProfilerStep without a step number";
			return -1;
		}
		if (room((void **)&k->st, &k->caps, k->ns, sizeof(*k->st), 16) < 0)
			goto oom;
		k->st[k->ns++] = (struct step){num, e->ts, e->dur, e->tid};
		return 0;
	}
	/* the CPU operators and annotations (not Python frames) of a trace without kernels so far:
	 * the legacy profiler's export has no categories */
	if (!k->nk && e->has_ts && e->has_dur && e->dur >= 0 &&
	    (!e->cat[0] || strcmp(e->cat, "cpu_op") == 0 || strcmp(e->cat, "Operator") == 0 ||
	     strcmp(e->cat, "user_annotation") == 0)) {
		if (room((void **)&k->c, &k->capc, k->nc, sizeof(*k->c), 4096) < 0)
			goto oom;
		k->c[k->nc++] = (struct cev){e->ts, e->dur, e->tid, strncmp(e->name, "enumerate(DataLoader)", 21) == 0};
	}
	return 0;
oom:
	*why = "out of memory";
	return -1;
}

static int on_dist(void *ctx, int64_t rank, int64_t world, const char **why)
{
	struct kin *k = ctx;
	k->dist = 1;
	k->dist_rank = rank;
	k->dist_world = world;
	if (rank < 0 || world < 0)
		return 0; /* incomplete (rank alone, backend alone): the file's position decides */
	if (world < 1 || world > 1000000 || rank >= world) {
		*why = "distributedInfo: rank or world_size out of range";
		return -1;
	}
	k->rank = rank;
	k->world = world;
	return 0;
}

static int cmp_step(const void *a, const void *b)
{
	const struct step *x = a, *y = b;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* by start, the enclosing (longer) one first */
static int cmp_cev(const void *a, const void *b)
{
	const struct cev *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->dur > y->dur ? -1 : x->dur < y->dur;
}

static int cmp_kev(const void *a, const void *b)
{
	const struct kev *x = a, *y = b;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* kernels of one step grouped by name: sort indices by (name, ts) */
static const struct kev *g_sort_base;
static int cmp_idx(const void *a, const void *b)
{
	const struct kev *x = &g_sort_base[*(const size_t *)a], *y = &g_sort_base[*(const size_t *)b];
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int64_t us(double v) { return (int64_t)llround(v); }

/* A step of a trace without kernels: "cpu_compute", the time in the CPU operators outside
 * one another on the step's thread, and "data_wait" (host), in the data loader's next().
 * *ci: the first operator not before the step (the steps come in order). */
static int cpu_phases(const struct kin *k, const struct step *st, size_t *ci, uint32_t rank, uint32_t iter,
		      const struct jsonl_handler *h, const char **why)
{
	double end = st->ts + st->dur, cover = st->ts, compute = 0, data = 0;
	while (*ci < k->nc && k->c[*ci].ts < st->ts)
		(*ci)++;
	for (size_t i = *ci; i < k->nc && k->c[i].ts < end; i++) {
		const struct cev *c = &k->c[i];
		if (c->tid != st->tid || c->ts < cover)
			continue; /* another thread's, or inside one counted */
		cover = c->ts + c->dur;
		*(c->data ? &data : &compute) += c->dur;
	}
	struct record_phase pc = {rank, iter, 0, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, RECORD_NO_START, us(compute)};
	if (h->phase && h->phase(h->ctx, &pc, "cpu_compute", why) < 0)
		return -1;
	struct record_phase pd = {rank, iter, 0, RECORD_KIND_HOST, RECORD_GROUP_NONE, RECORD_NO_START, us(data)};
	return h->phase ? h->phase(h->ctx, &pd, "data_wait", why) : 0;
}

static int emit(struct kin *k, const char *path, uint32_t rank, const struct jsonl_handler *h, char *err,
		size_t err_size)
{
	const char *why = NULL;
	qsort(k->st, k->ns, sizeof(*k->st), cmp_step);
	if (k->nk)
		qsort(k->k, k->nk, sizeof(*k->k), cmp_kev);
	size_t *idx = malloc((k->nk ? k->nk : 1) * sizeof(*idx));
	int64_t *durs = malloc((k->nk ? k->nk : 1) * sizeof(*durs));
	int rc = -1;
	if (!idx || !durs) {
		snprintf(err, err_size, "%s: out of memory", path);
		goto out;
	}
	if (k->nc)
		qsort(k->c, k->nc, sizeof(*k->c), cmp_cev);
	size_t ki = 0, ci = 0;
	while (ki < k->nk && k->k[ki].ts < k->st[0].ts)
		ki++;
	for (size_t s = 0; s < k->ns; s++) {
		const struct step *st = &k->st[s];
		if (s + 1 < k->ns && k->st[s + 1].num == st->num)
			continue; /* duplicate annotation */
		/* the step's kernels: launched in it; the last step's until twice its length */
		double end = s + 1 < k->ns ? k->st[s + 1].ts : st->ts + 2 * st->dur;
		size_t a = ki;
		while (ki < k->nk && k->k[ki].ts < end)
			ki++;
		size_t b = ki;
		struct record_iter it = {rank, (uint32_t)st->num, us(st->ts), us(st->dur)};
		if (h->iter && h->iter(h->ctx, &it, &why) < 0)
			goto bad;
		/* phases */
		double compute = 0;
		struct {
			char ty[32];
			uint32_t n;
		} seen[16];
		size_t nseen = 0;
		for (size_t i = a; i < b; i++) {
			const struct kev *e = &k->k[i];
			if (!e->comm) {
				compute += e->dur;
				continue;
			}
			char ty[32], name[64];
			import_kineto_nccl_type(k->nm.s[e->name], ty, sizeof(ty));
			size_t j = 0;
			while (j < nseen && strcmp(seen[j].ty, ty) != 0)
				j++;
			if (j == nseen) {
				if (nseen == 16)
					j = 15; /* more types than slots: the last one collects them */
				else {
					snprintf(seen[nseen].ty, sizeof(seen[nseen].ty), "%s", ty);
					seen[nseen++].n = 0;
				}
			}
			uint32_t n = seen[j].n++;
			if (n < MAX_COLL_PHASES)
				snprintf(name, sizeof(name), "nccl_%.31s#%u", seen[j].ty, n);
			else
				snprintf(name, sizeof(name), "nccl_%.31s#rest", seen[j].ty);
			struct record_phase ph = {
				rank, it.iter, 0, RECORD_KIND_COMM, RECORD_GROUP_DP, us(e->ts - st->ts), us(e->dur)};
			if (h->phase && h->phase(h->ctx, &ph, name, &why) < 0)
				goto bad;
		}
		if (!k->nk && k->nc) {
			if (cpu_phases(k, st, &ci, rank, it.iter, h, &why) < 0)
				goto bad;
			continue;
		}
		struct record_phase pc = {
			rank, it.iter, 0, RECORD_KIND_COMPUTE, RECORD_GROUP_NONE, RECORD_NO_START, us(compute)};
		if (h->phase && h->phase(h->ctx, &pc, "gpu_compute", &why) < 0)
			goto bad;
		/* kernels, by name */
		for (size_t i = a; i < b; i++)
			idx[i - a] = i;
		g_sort_base = k->k;
		if (b > a)
			qsort(idx, b - a, sizeof(*idx), cmp_idx);
		for (size_t i = 0; i < b - a;) {
			size_t j = i;
			uint32_t nm = k->k[idx[i]].name;
			while (j < b - a && k->k[idx[j]].name == nm) {
				durs[j - i] = us(k->k[idx[j]].dur);
				j++;
			}
			struct record_kernel rk;
			memset(&rk, 0, sizeof(rk));
			rk.rank = rank;
			rk.iter = it.iter;
			rk.kind = k->nm.comm[nm] ? RECORD_KIND_COMM : RECORD_KIND_COMPUTE;
			rk.count = (uint32_t)(j - i);
			if (h->kernel && h->kernel(h->ctx, &rk, k->nm.s[nm], durs, j - i, &why) < 0)
				goto bad;
			i = j;
		}
	}
	rc = 0;
	goto out;
bad:
	import_rejected(path, why, err, err_size);
out:
	free(idx);
	free(durs);
	return rc;
}

/* One warning per run: the first file whose rank is its position among the files given. */
static void warn_position(const struct kin *k, const char *path, size_t n, const struct import_options *opt,
			  int *warned)
{
	if ((*warned)++)
		return;
	char what[96] = "no distributedInfo";
	if (k->dist && k->dist_rank >= 0)
		snprintf(what, sizeof(what), "incomplete distributedInfo (rank %lld, no world_size)",
			 (long long)k->dist_rank);
	else if (k->dist && k->dist_world >= 0)
		snprintf(what, sizeof(what), "incomplete distributedInfo (world_size %lld, no rank)",
			 (long long)k->dist_world);
	else if (k->dist)
		snprintf(what, sizeof(what), "incomplete distributedInfo (no rank, no world_size)");
	import_warn(opt, "%s: %s: read as rank %lld of %lld, %s", path, what, (long long)k->rank, (long long)k->world,
		    n > 1 ? "its position among the files given (so for every file without a complete one)"
			  : "the only file given");
}

/* A trace without ProfilerStep#N annotations (a benchmark, an inference run) is one step, 0,
 * over all its timed events; -1 when it has none. */
static int whole_trace_step(struct kin *k, const char *path, const struct import_options *opt)
{
	if (!k->timed)
		return -1;
	k->st = malloc(sizeof(*k->st));
	if (!k->st)
		return -1;
	/* without kernels, the CPU operators of the thread of the first one */
	k->st[0] = (struct step){0, k->first, k->last - k->first, k->nc ? k->c[0].tid : -1};
	k->ns = k->caps = 1;
	import_warn(opt, "%s: no ProfilerStep#N annotation: the whole trace (%.1f ms) is read as one step", path,
		    (k->last - k->first) / 1000);
	return 0;
}

int import_kineto_read_stats(const char *const *paths, size_t n, const struct import_options *opt,
			     const struct jsonl_handler *h, struct import_kineto_stats *stats, char *err,
			     size_t err_size)
{
	int64_t world = -1;
	int warned = 0;
	for (size_t f = 0; f < n; f++) {
		struct kin k;
		memset(&k, 0, sizeof(k));
		k.rank = k.world = -1;
		struct import_stream_handler sh = {.ctx = &k, .event = on_event, .dist = on_dist};
		uint64_t bytes = 0;
		int rc = import_stream_events(paths[f], &sh, &bytes, err, err_size);
		if (!rc && k.ns == 0 && whole_trace_step(&k, paths[f], opt) < 0) {
			snprintf(err, err_size,
				 "%s: no steps (no ProfilerStep#N annotation and no timed event in the trace)",
				 paths[f]);
			rc = -1;
		}
		if (!rc) {
			if (k.world < 0) {
				/* no distributedInfo, or one without rank or world_size */
				k.world = n > 1 ? (int64_t)n : 1;
				k.rank = (int64_t)f;
				if (k.dist || n > 1)
					warn_position(&k, paths[f], n, opt, &warned);
			}
			if (world < 0) {
				world = k.world;
				struct jsonl_job j = {.job = opt && opt->job ? opt->job : "kineto",
						      .world = (uint32_t)world, .tp = 1, .cp = 1, .pp = 1,
						      .dp = (uint32_t)world, .ep = 1,
						      .gpus_per_node = world < 8 ? (uint32_t)world : 8,
						      .order = "tp-cp-ep-dp-pp"};
				const char *why = NULL;
				if (h->job && h->job(h->ctx, &j, &why) < 0)
					rc = import_rejected(paths[f], why, err, err_size);
			} else if (k.world != world) {
				snprintf(err, err_size, "%s: world_size %lld differs from the first file's %lld",
					 paths[f], (long long)k.world, (long long)world);
				rc = -1;
			}
		}
		if (!rc)
			rc = emit(&k, paths[f], (uint32_t)k.rank, h, err, err_size);
		if (stats) {
			stats->bytes += bytes;
			stats->steps += k.ns;
			stats->kernels += k.nk;
		}
		free(k.k);
		free(k.st);
		free(k.c);
		names_free(&k.nm);
		if (rc)
			return -1;
	}
	return 0;
}

int import_kineto_read(const char *const *paths, size_t n, const struct import_options *opt,
		       const struct jsonl_handler *h, char *err, size_t err_size)
{
	return import_kineto_read_stats(paths, n, opt, h, NULL, err, err_size);
}
