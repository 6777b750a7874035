/* trace_export.c: see trace_export.h. */
#include "trace_export.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perfetto_trace.pb-c.h"
#include "record.h"

/* Track uuids (Perfetto): a kind in the top byte, the id below. */
#define UUID_HOST(h) ((UINT64_C(1) << 56) | (uint64_t)(h))
#define UUID_RANK(r) ((UINT64_C(2) << 56) | (uint64_t)(r))
#define UUID_KERNELS(r, s) ((UINT64_C(3) << 56) | ((uint64_t)(r) << 20) | (uint64_t)((s)&0xfffff))
#define UUID_INCIDENTS (UINT64_C(4) << 56)
#define SEQUENCE_ID 1
#define MAX_STREAM_TID 98 /* streams above share the last kernel thread id in Chrome JSON */

int trace_export_tid(uint32_t rank) { return (int)(1000000 + (int64_t)rank * 100); }

int trace_export_kernel_tid(uint32_t rank, uint32_t stream)
{
	return trace_export_tid(rank) + 1 + (int)(stream < MAX_STREAM_TID ? stream : MAX_STREAM_TID);
}

/* ---- output buffer with a sticky failure flag ---- */

struct obuf {
	char *p;
	size_t len, cap;
	bool failed;
};

static bool reserve(struct obuf *b, size_t n)
{
	if (b->failed)
		return false;
	if (b->cap - b->len >= n)
		return true;
	size_t nc = b->cap ? b->cap : 65536;
	while (nc - b->len < n) {
		if (nc > SIZE_MAX / 2) {
			b->failed = true;
			return false;
		}
		nc *= 2;
	}
	char *np = realloc(b->p, nc);
	if (!np) {
		b->failed = true;
		return false;
	}
	b->p = np;
	b->cap = nc;
	return true;
}

static void put(struct obuf *b, const void *data, size_t n)
{
	if (reserve(b, n)) {
		memcpy(b->p + b->len, data, n);
		b->len += n;
	}
}

static void puts_(struct obuf *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(struct obuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void printf_(struct obuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp)) {
		b->failed = true;
		return;
	}
	put(b, tmp, (size_t)n);
}

/* A JSON string (quotes included). Input is UTF-8 (PostgreSQL's): bytes >= 0x80 pass. */
static void json_str(struct obuf *b, const char *s)
{
	put(b, "\"", 1);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\') {
			char e[2] = {'\\', (char)*c};
			put(b, e, 2);
		} else if (*c < 0x20) {
			printf_(b, "\\u%04x", *c);
		} else {
			put(b, c, 1);
		}
	}
	put(b, "\"", 1);
}

/* ---- layout ---- */

/* Track of a slice within its rank: 0 the rank's own, 1 + stream for kernels. */
static uint32_t track_of(const struct trace_slice *s)
{
	return s->type == TRACE_SLICE_KERNEL ? 1 + (s->stream < 0xfffff ? s->stream : 0xfffff) : 0;
}

static int cmp_slice(const void *a, const void *b)
{
	const struct trace_slice *x = a, *y = b;
	uint32_t tx = track_of(x), ty = track_of(y);

	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (tx != ty)
		return tx < ty ? -1 : 1;
	if (x->start_us != y->start_us)
		return x->start_us < y->start_us ? -1 : 1;
	if (x->dur_us != y->dur_us)
		return x->dur_us > y->dur_us ? -1 : 1; /* the longer one is the parent */
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1; /* an iteration before its phase */
	return x->name < y->name ? -1 : x->name > y->name;
}

/* Per slice: its measured duration, and whether it was clipped to nest. */
struct laid {
	int64_t measured_dur;
	bool clipped;
};

#define MAX_DEPTH 64

static int layout(struct trace_data *d, struct laid **out)
{
	struct laid *l = calloc(d->n_slices ? d->n_slices : 1, sizeof(*l));
	int64_t ends[MAX_DEPTH];
	int depth = 0;

	if (!l)
		return -1;
	if (d->n_slices > 1)
		qsort(d->slices, d->n_slices, sizeof(*d->slices), cmp_slice);
	for (size_t i = 0; i < d->n_slices; i++) {
		if (d->slices[i].dur_us < 0)
			d->slices[i].dur_us = 0;
		l[i].measured_dur = d->slices[i].dur_us;
	}
	/* a rank's iterations are siblings, never parent and child: one that starts before the
	 * previous one ends (the next step's first kernels launched while the last ones run)
	 * cuts the previous one short, and keeps its own length */
	for (size_t i = 0, prev = SIZE_MAX; i < d->n_slices; i++) {
		struct trace_slice *s = &d->slices[i], *p = prev != SIZE_MAX ? &d->slices[prev] : NULL;

		if (s->type != TRACE_SLICE_ITER)
			continue;
		if (p && p->rank == s->rank && p->start_us + p->dur_us > s->start_us) {
			p->dur_us = s->start_us - p->start_us;
			l[prev].clipped = true;
		}
		prev = i;
	}
	for (size_t i = 0; i < d->n_slices; i++) {
		struct trace_slice *s = &d->slices[i];

		if (i == 0 || s->rank != d->slices[i - 1].rank || track_of(s) != track_of(&d->slices[i - 1]))
			depth = 0;
		while (depth > 0 && ends[depth - 1] <= s->start_us)
			depth--;
		if (depth > 0 && s->start_us + s->dur_us > ends[depth - 1]) {
			s->dur_us = ends[depth - 1] - s->start_us;
			l[i].clipped = true;
		}
		if (depth < MAX_DEPTH)
			ends[depth++] = s->start_us + s->dur_us;
		else {
			/* deeper than any real trace: flatten onto the deepest level */
			s->dur_us = 0;
			l[i].clipped = true;
		}
	}
	*out = l;
	return 0;
}

/* Hosts in rank order: h index per rank, names. */
struct hosts {
	const char **name; /* per host */
	size_t n;
	size_t *of_rank; /* per d->ranks index */
};

static int hosts_build(const struct trace_data *d, struct hosts *h)
{
	h->name = calloc(d->n_ranks + 1, sizeof(*h->name));
	h->of_rank = calloc(d->n_ranks + 1, sizeof(*h->of_rank));
	h->n = 0;
	if (!h->name || !h->of_rank)
		return -1;
	for (size_t i = 0; i < d->n_ranks; i++) {
		size_t k;

		for (k = 0; k < h->n; k++)
			if (strcmp(h->name[k], d->ranks[i].host) == 0)
				break;
		if (k == h->n)
			h->name[h->n++] = d->ranks[i].host;
		h->of_rank[i] = k;
	}
	return 0;
}

static void hosts_free(struct hosts *h)
{
	free(h->name);
	free(h->of_rank);
}

static const struct trace_rank *rank_info(const struct trace_data *d, uint32_t rank, size_t *idx)
{
	size_t lo = 0, hi = d->n_ranks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (d->ranks[mid].rank < rank)
			lo = mid + 1;
		else if (d->ranks[mid].rank > rank)
			hi = mid;
		else {
			*idx = mid;
			return &d->ranks[mid];
		}
	}
	return NULL;
}

static const char *slice_name(const struct trace_data *d, const struct trace_slice *s, char *buf, size_t size)
{
	if (s->type == TRACE_SLICE_ITER) {
		snprintf(buf, size, "iteration %" PRIu32, s->iter);
		return buf;
	}
	return s->name < d->n_names ? d->names[s->name] : "?";
}

static const char *slice_cat(const struct trace_slice *s)
{
	return s->type == TRACE_SLICE_ITER ? "iteration" : s->type == TRACE_SLICE_PHASE ? "phase" : "kernel";
}

/* ---- Chrome JSON ---- */

static void chrome_meta(struct obuf *b, const char *what, int pid, int tid, const char *key, const char *name,
			int64_t sort)
{
	printf_(b, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d", what, pid);
	if (tid >= 0)
		printf_(b, ",\"tid\":%d", tid);
	printf_(b, ",\"args\":{\"%s\":", key);
	if (name)
		json_str(b, name);
	else
		printf_(b, "%" PRId64, sort);
	puts_(b, "}},\n");
}

static void chrome(const struct trace_data *d, const struct hosts *h, const struct laid *l, struct obuf *b)
{
	char nb[64];

	puts_(b, "{\"traceEvents\":[\n");
	for (size_t k = 0; k < h->n; k++) {
		chrome_meta(b, "process_name", (int)k + 1, -1, "name", h->name[k], 0);
		chrome_meta(b, "process_sort_index", (int)k + 1, -1, "sort_index", NULL, (int64_t)k + 1);
	}
	for (size_t i = 0; i < d->n_ranks; i++) {
		const struct trace_rank *r = &d->ranks[i];
		char tn[160];

		snprintf(tn, sizeof(tn), "rank %" PRIu32 " (tp %u cp %u ep %u dp %u pp %u)", r->rank, r->tp, r->cp,
			 r->ep, r->dp, r->pp);
		chrome_meta(b, "thread_name", (int)h->of_rank[i] + 1, trace_export_tid(r->rank), "name",
			    tn /* coordinates 0 when unknown */, 0);
		chrome_meta(b, "thread_sort_index", (int)h->of_rank[i] + 1, trace_export_tid(r->rank), "sort_index",
			    NULL, (int64_t)r->rank * 100);
	}
	/* kernel threads: one per (rank, stream) seen */
	for (size_t i = 0; i < d->n_slices; i++) {
		const struct trace_slice *s = &d->slices[i];
		size_t ri;
		char tn[96];

		if (s->type != TRACE_SLICE_KERNEL ||
		    (i > 0 && d->slices[i - 1].type == TRACE_SLICE_KERNEL && d->slices[i - 1].rank == s->rank &&
		     track_of(&d->slices[i - 1]) == track_of(s)))
			continue;
		if (!rank_info(d, s->rank, &ri))
			continue;
		snprintf(tn, sizeof(tn), "rank %" PRIu32 " kernels (stream %" PRIu32 ")", s->rank, s->stream);
		chrome_meta(b, "thread_name", (int)h->of_rank[ri] + 1, trace_export_kernel_tid(s->rank, s->stream),
			    "name", tn, 0);
		chrome_meta(b, "thread_sort_index", (int)h->of_rank[ri] + 1,
			    trace_export_kernel_tid(s->rank, s->stream), "sort_index", NULL,
			    (int64_t)s->rank * 100 + 1 + (s->stream < MAX_STREAM_TID ? s->stream : MAX_STREAM_TID));
	}
	for (size_t i = 0; i < d->n_slices; i++) {
		const struct trace_slice *s = &d->slices[i];
		size_t ri;

		if (!rank_info(d, s->rank, &ri))
			continue;
		puts_(b, "{\"name\":");
		json_str(b, slice_name(d, s, nb, sizeof(nb)));
		printf_(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%" PRId64 ",\"dur\":%" PRId64 ",\"pid\":%zu,\"tid\":%d",
			slice_cat(s), s->start_us - d->job_start_us, s->dur_us, h->of_rank[ri] + 1,
			s->type == TRACE_SLICE_KERNEL ? trace_export_kernel_tid(s->rank, s->stream)
						      : trace_export_tid(s->rank));
		printf_(b, ",\"args\":{\"rank\":%" PRIu32 ",\"iter\":%" PRIu32 ",\"dur_us\":%" PRId64, s->rank, s->iter,
			l[i].measured_dur);
		if (s->type != TRACE_SLICE_ITER)
			printf_(b, ",\"kind\":\"%s\"", record_kind_name((enum record_kind)s->kind));
		if (s->type == TRACE_SLICE_PHASE)
			printf_(b, ",\"group\":\"%s\"", record_group_name((enum record_group)s->group));
		if (s->type == TRACE_SLICE_PHASE && !s->start_known)
			puts_(b, ",\"start_known\":false");
		if (s->type == TRACE_SLICE_KERNEL)
			printf_(b, ",\"stream\":%" PRIu32, s->stream);
		if (l[i].clipped)
			puts_(b, ",\"clipped\":true");
		puts_(b, "}},\n");
	}
	for (size_t i = 0; i < d->n_instants; i++) {
		const struct trace_instant *in = &d->instants[i];
		size_t k = 0;

		if (in->host)
			for (k = 0; k < h->n && strcmp(h->name[k], in->host) != 0; k++)
				;
		puts_(b, "{\"name\":");
		json_str(b, in->name);
		printf_(b, ",\"cat\":\"%s\",\"ph\":\"i\",\"s\":\"%s\",\"ts\":%" PRId64 ",\"pid\":%zu,\"tid\":0",
			in->host ? "event" : "incident", in->host ? "p" : "g", in->ts_us - d->job_start_us,
			in->host && k < h->n ? k + 1 : 0);
		printf_(b, ",\"args\":{\"id\":%" PRId64 ",\"detail\":", in->id);
		json_str(b, in->detail);
		if (in->host) {
			puts_(b, ",\"host\":");
			json_str(b, in->host);
		}
		puts_(b, "}},\n");
	}
	/* a last metadata event closes the list without a trailing comma */
	puts_(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":");
	{
		char jn[300];

		snprintf(jn, sizeof(jn), "job %s", d->job);
		json_str(b, jn);
	}
	puts_(b, "}}\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"job\":");
	json_str(b, d->job);
	printf_(b, ",\"job_start_us\":%" PRId64 ",\"from_iter\":%" PRId64 ",\"to_iter\":%" PRId64 ",\"slices\":%zu",
		d->job_start_us, d->from_iter, d->to_iter, d->n_slices);
	/* the job's layout: what `culprit diagnose` needs to read this file back */
	printf_(b, ",\"world\":%" PRIu32 ",\"tp\":%" PRIu32 ",\"cp\":%" PRIu32 ",\"pp\":%" PRIu32 ",\"dp\":%" PRIu32
		   ",\"ep\":%" PRIu32 ",\"gpus_per_node\":%" PRIu32 ",\"order\":",
		d->world, d->tp, d->cp, d->pp, d->dp, d->ep, d->gpus_per_node);
	json_str(b, d->order);
	puts_(b, "}}\n");
}

/* ---- Perfetto protobuf ---- */

static void varint(struct obuf *b, uint64_t v)
{
	uint8_t tmp[10];
	size_t n = 0;

	do {
		tmp[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			tmp[n] |= 0x80;
		n++;
	} while (v);
	put(b, tmp, n);
}

/* Appends one Trace.packet (field 1, length-delimited): concatenated, they are a Trace. */
static void packet(struct obuf *b, Perfetto__Protos__TracePacket *p, bool *first)
{
	size_t n;

	p->has_trusted_packet_sequence_id = 1;
	p->trusted_packet_sequence_id = SEQUENCE_ID;
	if (*first) {
		p->has_sequence_flags = 1;
		p->sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
		*first = false;
	}
	n = perfetto__protos__trace_packet__get_packed_size(p);
	put(b, "\x0a", 1);
	varint(b, n);
	if (reserve(b, n)) {
		perfetto__protos__trace_packet__pack(p, (uint8_t *)b->p + b->len);
		b->len += n;
	}
}

static void track(struct obuf *b, bool *first, uint64_t uuid, uint64_t parent, const char *name,
		  Perfetto__Protos__ProcessDescriptor *proc, Perfetto__Protos__ThreadDescriptor *thr)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackDescriptor t = PERFETTO__PROTOS__TRACK_DESCRIPTOR__INIT;

	t.has_uuid = 1;
	t.uuid = uuid;
	if (parent) {
		t.has_parent_uuid = 1;
		t.parent_uuid = parent;
	}
	t.name = (char *)name;
	t.process = proc;
	t.thread = thr;
	p.track_descriptor = &t;
	packet(b, &p, first);
}

static uint64_t ns(int64_t us) { return us > 0 ? (uint64_t)us * 1000 : 0; }

static void ann_int(Perfetto__Protos__DebugAnnotation *a, const char *name, int64_t v)
{
	perfetto__protos__debug_annotation__init(a);
	a->name = (char *)name;
	a->has_int_value = 1;
	a->int_value = v;
}

static void ann_str(Perfetto__Protos__DebugAnnotation *a, const char *name, const char *v)
{
	perfetto__protos__debug_annotation__init(a);
	a->name = (char *)name;
	a->string_value = (char *)v;
}

static void ann_bool(Perfetto__Protos__DebugAnnotation *a, const char *name, bool v)
{
	perfetto__protos__debug_annotation__init(a);
	a->name = (char *)name;
	a->has_bool_value = 1;
	a->bool_value = v;
}

static void slice_event(struct obuf *b, bool *first, const struct trace_data *d, const struct trace_slice *s,
			const struct laid *l, uint64_t uuid)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent e = PERFETTO__PROTOS__TRACK_EVENT__INIT;
	Perfetto__Protos__DebugAnnotation a[8], *ap[8];
	char nb[64];
	char *cats[3];
	size_t na = 0, nc = 0;

	e.has_type = 1;
	e.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_BEGIN;
	e.has_track_uuid = 1;
	e.track_uuid = uuid;
	e.name = (char *)slice_name(d, s, nb, sizeof(nb));
	cats[nc++] = (char *)slice_cat(s);
	if (s->type != TRACE_SLICE_ITER)
		cats[nc++] = (char *)record_kind_name((enum record_kind)s->kind);
	e.n_categories = nc;
	e.categories = cats;
	ann_int(&a[na++], "rank", s->rank);
	ann_int(&a[na++], "iter", s->iter);
	ann_int(&a[na++], "dur_us", l->measured_dur);
	if (s->type == TRACE_SLICE_PHASE)
		ann_str(&a[na++], "group", record_group_name((enum record_group)s->group));
	if (s->type == TRACE_SLICE_PHASE && !s->start_known)
		ann_bool(&a[na++], "start_known", false);
	if (s->type == TRACE_SLICE_KERNEL)
		ann_int(&a[na++], "stream", s->stream);
	if (l->clipped)
		ann_bool(&a[na++], "clipped", true);
	for (size_t i = 0; i < na; i++)
		ap[i] = &a[i];
	e.n_debug_annotations = na;
	e.debug_annotations = ap;
	p.has_timestamp = 1;
	p.timestamp = ns(s->start_us);
	p.track_event = &e;
	packet(b, &p, first);
}

static void end_event(struct obuf *b, bool *first, int64_t at_us, uint64_t uuid)
{
	Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
	Perfetto__Protos__TrackEvent e = PERFETTO__PROTOS__TRACK_EVENT__INIT;

	e.has_type = 1;
	e.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_SLICE_END;
	e.has_track_uuid = 1;
	e.track_uuid = uuid;
	p.has_timestamp = 1;
	p.timestamp = ns(at_us);
	p.track_event = &e;
	packet(b, &p, first);
}

static void perfetto(const struct trace_data *d, const struct hosts *h, const struct laid *l, struct obuf *b)
{
	bool first = true;
	int64_t ends[MAX_DEPTH];
	int depth = 0;
	uint64_t cur = 0;
	char jn[300];

	snprintf(jn, sizeof(jn), "incidents (job %s)", d->job);
	track(b, &first, UUID_INCIDENTS, 0, jn, NULL, NULL);
	for (size_t k = 0; k < h->n; k++) {
		Perfetto__Protos__ProcessDescriptor pd = PERFETTO__PROTOS__PROCESS_DESCRIPTOR__INIT;

		pd.has_pid = 1;
		pd.pid = (int32_t)k + 1;
		pd.process_name = (char *)h->name[k];
		track(b, &first, UUID_HOST(k), 0, NULL, &pd, NULL);
	}
	for (size_t i = 0; i < d->n_ranks; i++) {
		const struct trace_rank *r = &d->ranks[i];
		Perfetto__Protos__ThreadDescriptor td = PERFETTO__PROTOS__THREAD_DESCRIPTOR__INIT;
		char tn[160];

		snprintf(tn, sizeof(tn), "rank %" PRIu32 " (tp %u cp %u ep %u dp %u pp %u)", r->rank, r->tp, r->cp,
			 r->ep, r->dp, r->pp);
		td.has_pid = 1;
		td.pid = (int32_t)h->of_rank[i] + 1;
		td.has_tid = 1;
		td.tid = trace_export_tid(r->rank);
		td.thread_name = tn;
		track(b, &first, UUID_RANK(r->rank), UUID_HOST(h->of_rank[i]), NULL, NULL, &td);
	}
	for (size_t i = 0; i < d->n_slices; i++) {
		const struct trace_slice *s = &d->slices[i];
		char tn[96];

		if (s->type != TRACE_SLICE_KERNEL ||
		    (i > 0 && d->slices[i - 1].rank == s->rank && track_of(&d->slices[i - 1]) == track_of(s)))
			continue;
		snprintf(tn, sizeof(tn), "kernels (stream %" PRIu32 ")", s->stream);
		track(b, &first, UUID_KERNELS(s->rank, s->stream), UUID_RANK(s->rank), tn, NULL, NULL);
	}
	/* slices: BEGIN/END per track, ends before a begin at the same time */
	for (size_t i = 0; i < d->n_slices; i++) {
		const struct trace_slice *s = &d->slices[i];
		uint64_t uuid = s->type == TRACE_SLICE_KERNEL ? UUID_KERNELS(s->rank, s->stream) : UUID_RANK(s->rank);

		if (uuid != cur) {
			while (depth > 0)
				end_event(b, &first, ends[--depth], cur);
			cur = uuid;
		}
		while (depth > 0 && ends[depth - 1] <= s->start_us)
			end_event(b, &first, ends[--depth], cur);
		slice_event(b, &first, d, s, &l[i], uuid);
		if (depth < MAX_DEPTH)
			ends[depth++] = s->start_us + s->dur_us;
		else
			end_event(b, &first, s->start_us + s->dur_us, uuid);
	}
	while (depth > 0)
		end_event(b, &first, ends[--depth], cur);
	for (size_t i = 0; i < d->n_instants; i++) {
		const struct trace_instant *in = &d->instants[i];
		Perfetto__Protos__TracePacket p = PERFETTO__PROTOS__TRACE_PACKET__INIT;
		Perfetto__Protos__TrackEvent e = PERFETTO__PROTOS__TRACK_EVENT__INIT;
		Perfetto__Protos__DebugAnnotation a[2], *ap[2] = {&a[0], &a[1]};
		char *cat = (char *)(in->host ? "event" : "incident");
		size_t k = 0;

		if (in->host)
			for (k = 0; k < h->n && strcmp(h->name[k], in->host) != 0; k++)
				;
		e.has_type = 1;
		e.type = PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_INSTANT;
		e.has_track_uuid = 1;
		e.track_uuid = in->host && k < h->n ? UUID_HOST(k) : UUID_INCIDENTS;
		e.name = in->name;
		e.n_categories = 1;
		e.categories = &cat;
		ann_int(&a[0], "id", in->id);
		ann_str(&a[1], "detail", in->detail);
		e.n_debug_annotations = 2;
		e.debug_annotations = ap;
		p.has_timestamp = 1;
		p.timestamp = ns(in->ts_us);
		p.track_event = &e;
		packet(b, &p, &first);
	}
}

int trace_export(struct trace_data *d, enum trace_format f, char **out, size_t *len)
{
	struct obuf b = {0};
	struct hosts h = {0};
	struct laid *l = NULL;

	if (layout(d, &l) < 0 || hosts_build(d, &h) < 0) {
		free(l);
		hosts_free(&h);
		return -1;
	}
	if (f == TRACE_FORMAT_CHROME)
		chrome(d, &h, l, &b);
	else
		perfetto(d, &h, l, &b);
	free(l);
	hosts_free(&h);
	if (b.failed) {
		free(b.p);
		return -1;
	}
	if (!b.p && !(b.p = malloc(1))) /* an empty Perfetto trace is zero bytes */
		return -1;
	*out = b.p;
	*len = b.len;
	return 0;
}
