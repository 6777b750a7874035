/* import_trace.c: culprit's own Chrome trace, read back (see import_trace.h). */
#include "import_trace.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "import_stream.h"
#include "strmap.h"

#define MAX_PID 1048576 /* a process id past it names no host */
#define MAX_NAMES 65536 /* distinct slice names */

enum slice_type { SL_ITER, SL_PHASE, SL_KERNEL };

struct slice {
	uint32_t rank, iter, name; /* name: index into names */
	uint8_t type, kind, group, start_unknown;
	int64_t ts, dur; /* us from the job's start; the measured duration */
};

struct mark { /* an out-of-band event */
	int64_t ts, pid;
	uint32_t name;
	char *detail; /* "source: detail" */
};

struct rank_pid {
	uint32_t rank;
	int64_t pid;
};

struct tr {
	struct strmap name_ids; /* name -> index into names */
	char **names;
	size_t n_names, cap_names;
	struct slice *sl;
	size_t n_sl, cap_sl;
	struct mark *marks;
	size_t n_marks, cap_marks;
	struct rank_pid *ranks;
	size_t n_ranks, cap_ranks;
	char **hosts; /* by process id */
	size_t cap_hosts;
	struct import_stream_other other;
	int have_other;
};

/* Doubles *v's capacity when full: 0, or -1 out of memory. */
static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 64;
	void *p = realloc(*v, nc * size);
	if (!p)
		return -1;
	*v = p;
	*cap = nc;
	return 0;
}

/* The index of name, interned: -1 out of memory or too many names. */
static int64_t name_id(struct tr *t, const char *name)
{
	struct strmap_entry *e = strmap_find(&t->name_ids, name);
	char *copy;

	if (e)
		return e->num;
	if (t->n_names == MAX_NAMES || grow((void **)&t->names, &t->cap_names, t->n_names, sizeof(char *)) < 0 ||
	    !(copy = strdup(name)))
		return -1;
	if (strmap_put_num(&t->name_ids, name, (int64_t)t->n_names) < 0) {
		free(copy);
		return -1;
	}
	t->names[t->n_names] = copy;
	return (int64_t)t->n_names++;
}

static int on_meta(struct tr *t, const struct import_stream_event *e, const char **why)
{
	unsigned rank, a, b, c, d, f;

	if (strcmp(e->name, "process_name") == 0 && e->pid >= 1 && e->pid < MAX_PID) {
		size_t pid = (size_t)e->pid;
		if (pid >= t->cap_hosts) {
			size_t nc = pid * 2;
			char **p = realloc(t->hosts, nc * sizeof(char *));
			if (!p)
				goto oom;
			memset(p + t->cap_hosts, 0, (nc - t->cap_hosts) * sizeof(char *));
			t->hosts = p;
			t->cap_hosts = nc;
		}
		free(t->hosts[pid]);
		if (!(t->hosts[pid] = strdup(e->arg_name)))
			goto oom;
		return 0;
	}
	if (strcmp(e->name, "thread_name") == 0 &&
	    sscanf(e->arg_name, "rank %u (tp %u cp %u ep %u dp %u pp %u)", &rank, &a, &b, &c, &d, &f) == 6) {
		if (grow((void **)&t->ranks, &t->cap_ranks, t->n_ranks, sizeof(*t->ranks)) < 0)
			goto oom;
		t->ranks[t->n_ranks++] = (struct rank_pid){.rank = rank, .pid = e->pid};
	}
	return 0;
oom:
	*why = "out of memory";
	return -1;
}

static int on_event(void *ctx, const struct import_stream_event *e, const char **why)
{
	struct tr *t = ctx;
	int64_t id;

	if (e->ph[0] == 'M')
		return on_meta(t, e, why);
	if (e->ph[0] == 'i' && strcmp(e->cat, "event") == 0) {
		if (!e->has_ts || !isfinite(e->ts))
			return 0;
		if ((id = name_id(t, e->name)) < 0 ||
		    grow((void **)&t->marks, &t->cap_marks, t->n_marks, sizeof(*t->marks)) < 0)
			goto oom;
		struct mark *m = &t->marks[t->n_marks];
		*m = (struct mark){.ts = (int64_t)llround(e->ts), .pid = e->pid, .name = (uint32_t)id};
		if (!(m->detail = strdup(e->detail)))
			goto oom;
		t->n_marks++;
		return 0;
	}
	if (e->ph[0] != 'X' || e->ph[1])
		return 0;
	uint8_t type = strcmp(e->cat, "iteration") == 0 ? SL_ITER
		       : strcmp(e->cat, "phase") == 0   ? SL_PHASE
		       : strcmp(e->cat, "kernel") == 0  ? SL_KERNEL
							: 0xff;
	if (type == 0xff)
		return 0;
	if (e->rank < 0 || e->rank > UINT32_MAX || e->iter < 0 || e->iter > INT32_MAX || !e->has_ts ||
	    !isfinite(e->ts)) {
		*why = "an iteration, phase or kernel without args.rank, args.iter and ts";
		return -1;
	}
	int kind = type == SL_ITER ? 0 : record_kind_parse(e->kind);
	int group = type == SL_PHASE ? record_group_parse(e->group) : 0;
	if (kind < 0 || group < 0) {
		*why = "a phase or kernel whose args.kind or args.group is unknown";
		return -1;
	}
	if ((id = type == SL_ITER ? 0 : name_id(t, e->name)) < 0 ||
	    grow((void **)&t->sl, &t->cap_sl, t->n_sl, sizeof(*t->sl)) < 0)
		goto oom;
	t->sl[t->n_sl++] = (struct slice){
		.rank = (uint32_t)e->rank,
		.iter = (uint32_t)e->iter,
		.name = (uint32_t)id,
		.type = type,
		.kind = (uint8_t)kind,
		.group = (uint8_t)group,
		.start_unknown = (uint8_t)e->start_unknown,
		.ts = (int64_t)llround(e->ts),
		.dur = e->dur_us >= 0 ? e->dur_us : (e->has_dur && e->dur > 0 ? (int64_t)llround(e->dur) : 0),
	};
	return 0;
oom:
	*why = "out of memory";
	return -1;
}

static int on_other(void *ctx, const struct import_stream_other *o, const char **why)
{
	struct tr *t = ctx;

	(void)why;
	t->other = *o;
	t->have_other = 1;
	return 0;
}

/* By iteration, rank, then iterations before phases before kernels, kernels by name. */
static int cmp_slice(const void *a, const void *b)
{
	const struct slice *x = a, *y = b;

	if (x->iter != y->iter)
		return x->iter < y->iter ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->type == SL_KERNEL && x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return x->ts < y->ts ? -1 : x->ts > y->ts;
}

static int cmp_rank(const void *a, const void *b)
{
	const struct rank_pid *x = a, *y = b;

	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static const char *host_of_pid(const struct tr *t, int64_t pid)
{
	return pid >= 1 && (size_t)pid < t->cap_hosts ? t->hosts[pid] : NULL;
}

/* The job (otherData) and the ranks' hosts (their threads' processes). */
static int emit_job(struct tr *t, const struct import_options *opt, const struct jsonl_handler *h, const char **why)
{
	const struct import_stream_other *o = &t->other;
	struct jsonl_job job = {
		.job = opt && opt->job ? opt->job
		       : o->job[0]     ? o->job
				       : "trace",
		.world = (uint32_t)o->world,
		.tp = (uint32_t)o->tp,
		.cp = (uint32_t)o->cp,
		.pp = (uint32_t)o->pp,
		.dp = (uint32_t)o->dp,
		.ep = (uint32_t)o->ep,
		.gpus_per_node = (uint32_t)o->gpus_per_node,
		.order = o->order[0] ? o->order : NULL,
	};

	if (h->job && h->job(h->ctx, &job, why) < 0)
		return -1;
	qsort(t->ranks, t->n_ranks, sizeof(*t->ranks), cmp_rank);
	for (size_t i = 0; i < t->n_ranks; i++) {
		const char *host = host_of_pid(t, t->ranks[i].pid);

		if (host && h->host && h->host(h->ctx, t->ranks[i].rank, host, why) < 0)
			return -1;
	}
	for (size_t i = 0; i < t->n_marks; i++) {
		const struct mark *m = &t->marks[i];
		const char *host = host_of_pid(t, m->pid), *sep = strstr(m->detail, ": ");
		char source[64];

		if (!host)
			continue;
		snprintf(source, sizeof(source), "%.*s", sep ? (int)(sep - m->detail) : 0, m->detail);
		if (h->event && h->event(h->ctx, host, t->names[m->name], m->ts + o->job_start_us, source,
					 sep ? sep + 2 : m->detail, why) < 0)
			return -1;
	}
	return 0;
}

/* The kernels of one (rank, iteration, name), sl[i..j): one summary of their durations. */
static int emit_kernel(const struct tr *t, size_t i, size_t j, const struct jsonl_handler *h, const char **why)
{
	const struct slice *s = &t->sl[i];
	int64_t *durs = malloc((j - i) * sizeof(*durs));
	int rc;

	if (!durs) {
		*why = "out of memory";
		return -1;
	}
	for (size_t k = i; k < j; k++)
		durs[k - i] = t->sl[k].dur;
	struct record_kernel kr = {.rank = s->rank, .iter = s->iter, .kind = s->kind, .count = (uint32_t)(j - i)};
	rc = h->kernel ? h->kernel(h->ctx, &kr, t->names[s->name], durs, j - i, why) : 0;
	free(durs);
	return rc;
}

/* The slices, sorted: each rank's iteration, its phases (offsets from the iteration's start),
 * its kernels. */
static int emit_records(struct tr *t, const struct jsonl_handler *h, const char **why)
{
	int64_t start = 0, job_start = t->other.job_start_us;

	qsort(t->sl, t->n_sl, sizeof(*t->sl), cmp_slice);
	for (size_t i = 0; i < t->n_sl;) {
		const struct slice *s = &t->sl[i];
		size_t j = i + 1;

		if (s->type == SL_ITER) {
			struct record_iter it = {
				.rank = s->rank, .iter = s->iter, .start_us = s->ts + job_start, .dur_us = s->dur};
			start = s->ts;
			if (h->iter && h->iter(h->ctx, &it, why) < 0)
				return -1;
		} else if (s->type == SL_PHASE) {
			struct record_phase ph = {.rank = s->rank,
						  .iter = s->iter,
						  .kind = s->kind,
						  .group = s->group,
						  .start_us = s->start_unknown ? RECORD_NO_START : s->ts - start,
						  .dur_us = s->dur};
			if (h->phase && h->phase(h->ctx, &ph, t->names[s->name], why) < 0)
				return -1;
		} else {
			while (j < t->n_sl && t->sl[j].type == SL_KERNEL && t->sl[j].rank == s->rank &&
			       t->sl[j].iter == s->iter && t->sl[j].name == s->name)
				j++;
			if (emit_kernel(t, i, j, h, why) < 0)
				return -1;
		}
		i = j;
	}
	return 0;
}

static void tr_free(struct tr *t)
{
	for (size_t i = 0; i < t->n_names; i++)
		free(t->names[i]);
	for (size_t i = 0; i < t->n_marks; i++)
		free(t->marks[i].detail);
	for (size_t i = 0; i < t->cap_hosts; i++)
		free(t->hosts[i]);
	free(t->names);
	free(t->marks);
	free(t->hosts);
	free(t->sl);
	free(t->ranks);
	strmap_free(&t->name_ids);
}

int import_trace_read(const char *path, const struct import_options *opt, const struct jsonl_handler *h, char *err,
		      size_t err_size)
{
	struct tr t = {0};
	struct import_stream_handler sh = {.ctx = &t, .event = on_event, .other = on_other};
	const struct import_stream_other *o = &t.other;
	const char *why = NULL;
	int rc = -1;

	if (import_stream_events(path, &sh, NULL, err, err_size) < 0)
		goto out;
	if (!t.have_other || o->world < 1 || o->world > UINT32_MAX || o->tp < 1 || o->cp < 1 || o->pp < 1 ||
	    o->dp < 1 || o->ep < 1 || o->gpus_per_node < 1) {
		snprintf(err, err_size, "%s: no job layout in otherData (world, tp, cp, pp, dp, ep, gpus_per_node)",
			 path);
		goto out;
	}
	rc = emit_job(&t, opt, h, &why) < 0 || emit_records(&t, h, &why) < 0 ? import_rejected(path, why, err, err_size)
									     : 0;
out:
	tr_free(&t);
	return rc;
}
