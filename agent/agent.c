/* agent.c: the agent library's record side (see agent.h and docs/protocol.md): names,
 * the batch being built, sealing, the queue of unacknowledged batches, the agent's life
 * cycle. The network side is agent_loop.c; what they share, and the locking, agent_impl.h.
 *
 * A sealed batch is kept as its Batch packed once, without the sequence and without the
 * strings of its names (it names them by agent name id). The frame header (length,
 * Envelope tag, Batch length, seq field; the field keys from the schema's descriptors,
 * frame_field_tag) and the definitions of the names the connection has
 * not had yet are made when it is sent (agent_batch_frame), so that renumbering (only ever
 * before the first accepted Hello, see agent_rebase) and a resend on a new connection cost
 * no re-packing. */
#include "agent.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent_impl.h"
#include "frame.h"
#include "cmp.h"
#include "hash.h"
#include "clock.h"

#define PREFIX_MAX 21u /* 4 length + 1 tag + 5 varint + 1 tag + 10 varint */

/* ---- small helpers ---- */

static void abs_deadline(struct timespec *ts, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += timeout_ms / 1000;
	ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

void agent_log(struct agent *a, enum agent_log_level level, const char *fmt, ...)
{
	char msg[512];
	int n = snprintf(msg, sizeof(msg), "agent %s: ", a->agent_id);
	va_list ap;

	if (n < 0 || (size_t)n >= sizeof(msg))
		n = 0;
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	if (a->log)
		a->log(a->log_arg, level, msg);
	else if (level >= AGENT_LOG_WARNING)
		fprintf(stderr, "%s: %s\n", level == AGENT_LOG_ERROR ? "error" : "warning", msg);
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static size_t varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* The keys of the fields packed here (from the schema's descriptors; each fits a byte). */
#define TAG(msg, field) ((uint8_t)frame_field_tag(&culprit__v1__##msg##__descriptor, field))

/* The frame header in front of a batch's body: the length, the Envelope's batch field tag
 * and length, the seq field. batch_len is the Batch's bytes after the seq field. */
static size_t frame_header(uint8_t *p, uint64_t seq, size_t batch_len)
{
	size_t seq_part = 1 + varint_len(seq);
	size_t inner = seq_part + batch_len;
	uint32_t be = htobe32((uint32_t)(1 + varint_len(inner) + inner));
	size_t o = 0;

	memcpy(p, &be, sizeof(be));
	o += 4;
	p[o++] = TAG(envelope, "batch");
	o += varint_put(p + o, inner);
	p[o++] = TAG(batch, "seq");
	o += varint_put(p + o, seq);
	return o;
}

/* Numbers a batch; its frame length without name definitions (what the queue counts). */
static void batch_set_seq(struct batch *bt, uint64_t seq)
{
	uint8_t hdr[PREFIX_MAX];

	bt->seq = seq;
	bt->len = frame_header(hdr, seq, bt->body_len) + bt->body_len;
}

int agent_batch_frame(struct agent *a, struct batch *bt)
{
	struct agent_conn *c = &a->c;
	const uint8_t def_tag = TAG(batch, "name_defs"), id_tag = TAG(name_def, "id"), name_tag = TAG(name_def, "name");

	if (c->epoch == 0)
		c->epoch = 1;
	c->defs_len = 0;
	for (size_t i = 0; i < bt->n_ids; i++) {
		uint32_t id = bt->ids[i];
		const char *name = a->name_str[id];
		size_t nl = strlen(name), inner = 1 + varint_len(id) + 1 + varint_len(nl) + nl;
		size_t need = c->defs_len + 1 + varint_len(inner) + inner;

		if (id >= c->known_cap) {
			size_t cap = c->known_cap ? c->known_cap : 256;
			uint32_t *k;

			while (cap <= id)
				cap *= 2;
			if (!(k = realloc(c->known, cap * sizeof(*k))))
				return -1;
			memset(k + c->known_cap, 0, (cap - c->known_cap) * sizeof(*k));
			c->known = k;
			c->known_cap = cap;
		}
		if (c->known[id] == c->epoch)
			continue;
		if (need > c->defs_cap) {
			size_t cap = c->defs_cap ? c->defs_cap : 4096;
			uint8_t *d;

			while (cap < need)
				cap *= 2;
			if (!(d = realloc(c->defs, cap)))
				return -1;
			c->defs = d;
			c->defs_cap = cap;
		}
		uint8_t *p = c->defs + c->defs_len;
		size_t o = 0;

		p[o++] = def_tag;
		o += varint_put(p + o, inner);
		p[o++] = id_tag;
		o += varint_put(p + o, id);
		p[o++] = name_tag;
		o += varint_put(p + o, nl);
		memcpy(p + o, name, nl);
		c->defs_len += o + nl;
		c->known[id] = c->epoch;
	}
	c->hdr_len = frame_header(c->hdr, bt->seq, bt->body_len + c->defs_len);
	return 0;
}

/* ---- names ---- */

static int names_rehash(struct agent *a, size_t cap)
{
	int32_t *t = malloc(cap * sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < cap; i++)
		t[i] = -1;
	for (size_t i = 0; i < a->n_names; i++) {
		size_t j = hash_str(a->name_str[i]) & (cap - 1);

		while (t[j] >= 0)
			j = (j + 1) & (cap - 1);
		t[j] = (int32_t)i;
	}
	free(a->name_hash);
	a->name_hash = t;
	a->hash_cap = cap;
	return 0;
}

int32_t agent_intern(struct agent *a, const char *name)
{
	size_t len = name ? strlen(name) : 0, j;
	int32_t id = -1;

	if (len == 0 || len > AGENT_MAX_NAME)
		return -1;
	pthread_mutex_lock(&a->mu);
	if ((a->n_names + 1) * 2 > a->hash_cap && names_rehash(a, a->hash_cap ? a->hash_cap * 2 : 64) < 0)
		goto out;
	j = hash_str(name) & (a->hash_cap - 1);
	while (a->name_hash[j] >= 0) {
		if (strcmp(a->name_str[a->name_hash[j]], name) == 0) {
			id = a->name_hash[j];
			goto out;
		}
		j = (j + 1) & (a->hash_cap - 1);
	}
	if (a->n_names >= AGENT_MAX_NAMES)
		goto out;
	if (a->n_names == a->names_cap) {
		size_t cap = a->names_cap ? a->names_cap * 2 : 64;
		char **s = realloc(a->name_str, cap * sizeof(*s));

		if (!s)
			goto out;
		a->name_str = s;
		a->names_cap = cap;
	}
	if (!(a->name_str[a->n_names] = strdup(name)))
		goto out;
	id = (int32_t)a->n_names++;
	a->name_hash[j] = id;
out:
	pthread_mutex_unlock(&a->mu);
	return id;
}

/* ---- the batch being built (a.mu held) ---- */

#define GROW(field)                                                    \
	do {                                                           \
		void *p_ = realloc(b->field, cap * sizeof(*b->field)); \
		if (!p_)                                               \
			return -1;                                     \
		b->field = p_;                                         \
	} while (0)

/* Room for one more record of type t (0 iter, 1 phase, 2 kernel); columns grow by type. */
static int building_reserve(struct building *b, int t)
{
	size_t *capp = t == 0 ? &b->iter_cap : t == 1 ? &b->ph_cap : &b->k_cap;
	size_t n = t == 0 ? b->n_iter : t == 1 ? b->n_phase : b->n_kernel, cap;

	if (n < *capp)
		return 0;
	cap = *capp ? *capp * 2 : 32;
	if (t == 0) {
		GROW(iter_rank);
		GROW(iter_iter);
		GROW(iter_start);
		GROW(iter_dur);
	} else if (t == 1) {
		GROW(ph_rank);
		GROW(ph_iter);
		GROW(ph_name);
		GROW(ph_kind);
		GROW(ph_group);
		GROW(ph_start);
		GROW(ph_dur);
	} else {
		GROW(k_rank);
		GROW(k_iter);
		GROW(k_name);
		GROW(k_kind);
		GROW(k_count);
		GROW(k_sum);
		GROW(k_min);
		GROW(k_max);
		GROW(k_p50);
		GROW(k_p99);
		GROW(k_sketch_len);
	}
	*capp = cap;
	return 0;
}
#undef GROW

static void building_free(struct building *b)
{
	void *arrays[] = {b->iter_rank,    b->iter_iter, b->iter_start, b->iter_dur, b->ph_rank, b->ph_iter, b->ph_name,
			  b->ph_kind,      b->ph_group,  b->ph_start,   b->ph_dur,   b->k_rank,  b->k_iter,  b->k_name,
			  b->k_kind,       b->k_count,   b->k_sum,      b->k_min,    b->k_max,   b->k_p50,   b->k_p99,
			  b->k_sketch_len, b->sketch,    b->used_epoch, b->name_ids};

	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
	free(b->raw);
	memset(b, 0, sizeof(*b));
}

static size_t building_records(const struct building *b) { return b->n_iter + b->n_phase + b->n_kernel + b->n_raw; }

size_t agent_building_records(const struct agent *a) { return building_records(&a->b); }

/* Notes that the batch uses agent name id (its definition may have to go with it); 0, -1
 * out of memory. */
static int building_use_name(struct agent *a, uint32_t id)
{
	struct building *b = &a->b;

	if (id >= b->used_cap) {
		size_t cap = b->used_cap ? b->used_cap : 64;
		uint32_t *u;

		while (cap <= id)
			cap *= 2;
		if (!(u = realloc(b->used_epoch, cap * sizeof(*u))))
			return -1;
		memset(u + b->used_cap, 0, (cap - b->used_cap) * sizeof(*u));
		b->used_epoch = u;
		b->used_cap = cap;
	}
	if (b->used_epoch[id] == b->epoch)
		return 0;
	if (b->n_names == b->names_cap) {
		size_t cap = b->names_cap ? b->names_cap * 2 : 32;
		uint32_t *ids = realloc(b->name_ids, cap * sizeof(*ids));

		if (!ids)
			return -1;
		b->name_ids = ids;
		b->names_cap = cap;
	}
	b->name_ids[b->n_names++] = id;
	b->used_epoch[id] = b->epoch;
	b->est_bytes += strlen(a->name_str[id]) + 8;
	return 0;
}

static void building_reset(struct building *b)
{
	b->n_iter = b->n_phase = b->n_kernel = b->n_raw = 0;
	b->n_names = 0;
	b->sketch_len = 0;
	b->any_sketch = false;
	b->est_bytes = 0;
	if (++b->epoch == 0) { /* wrapped: forget every mapping */
		if (b->used_epoch)
			memset(b->used_epoch, 0, b->used_cap * sizeof(*b->used_epoch));
		b->epoch = 1;
	}
}

/* The kernel columns of m, as lean as the protocol allows: the rank and the iteration once
 * when every kernel shares them; no kinds when each follows from its name
 * (record_kernel_kind_of); no p50/p99 when the server can derive them (each kernel has a
 * sketch or at most 3 calls). */
static void kernel_columns(const struct agent *a, const struct building *b, Culprit__V1__Batch *m)
{
	size_t n = b->n_kernel, n_rank = n, n_iter = n, n_q = 0, n_kind = 0;
	bool one_rank = n > 0, one_iter = n > 0;

	for (size_t i = 1; i < n; i++) {
		one_rank = one_rank && b->k_rank[i] == b->k_rank[0];
		one_iter = one_iter && b->k_iter[i] == b->k_iter[0];
	}
	for (size_t i = 0; i < n; i++) {
		if (!b->k_sketch_len[i] && b->k_count[i] > 3)
			n_q = n;
		if (b->k_kind[i] != record_kernel_kind_of(a->name_str[b->k_name[i]]))
			n_kind = n;
	}
	if (one_rank)
		n_rank = 1;
	if (one_iter)
		n_iter = 1;
	m->n_kernel_rank = n_rank;
	m->n_kernel_iter = n_iter;
	m->n_kernel_name = m->n_kernel_count = m->n_kernel_sum_us = m->n_kernel_min_us = m->n_kernel_max_us = n;
	m->n_kernel_kind = n_kind;
	m->n_kernel_p50_us = m->n_kernel_p99_us = n_q;
	m->kernel_rank = b->k_rank;
	m->kernel_iter = b->k_iter;
	m->kernel_name = b->k_name;
	m->kernel_kind = b->k_kind;
	m->kernel_count = b->k_count;
	m->kernel_sum_us = b->k_sum;
	m->kernel_min_us = b->k_min;
	m->kernel_max_us = b->k_max;
	m->kernel_p50_us = b->k_p50;
	m->kernel_p99_us = b->k_p99;
}

/* Packs the current batch into a new queued batch. a.mu held; the batch must be non-empty.
 * -1 out of memory (the records stay in the batch being built). */
int agent_seal(struct agent *a)
{
	struct building *b = &a->b;
	Culprit__V1__Batch m = CULPRIT__V1__BATCH__INIT;
	Culprit__V1__RawKernel **raw = NULL;
	struct batch *bt;
	size_t body;

	/* no dictionary: records carry the agent's name ids, whose strings go at send time,
	 * once per connection (agent_batch_frame) */
	m.n_iter_rank = m.n_iter_iter = m.n_iter_start_us = m.n_iter_dur_us = b->n_iter;
	m.iter_rank = b->iter_rank;
	m.iter_iter = b->iter_iter;
	m.iter_start_us = b->iter_start;
	m.iter_dur_us = b->iter_dur;
	m.n_phase_rank = m.n_phase_iter = m.n_phase_name = m.n_phase_kind = m.n_phase_group = m.n_phase_start_us =
		m.n_phase_dur_us = b->n_phase;
	m.phase_rank = b->ph_rank;
	m.phase_iter = b->ph_iter;
	m.phase_name = b->ph_name;
	m.phase_kind = b->ph_kind;
	m.phase_group = b->ph_group;
	m.phase_start_us = b->ph_start;
	m.phase_dur_us = b->ph_dur;
	kernel_columns(a, b, &m);
	if (b->any_sketch && b->n_kernel) {
		m.n_kernel_sketch_len = b->n_kernel;
		m.kernel_sketch_len = b->k_sketch_len;
		m.kernel_sketches.len = b->sketch_len;
		m.kernel_sketches.data = b->sketch;
	}
	if (b->n_raw) {
		if (!(raw = malloc(b->n_raw * sizeof(*raw))))
			return -1;
		for (size_t i = 0; i < b->n_raw; i++)
			raw[i] = &b->raw[i];
		m.n_raw_kernels = b->n_raw;
		m.raw_kernels = raw;
	}
	body = culprit__v1__batch__get_packed_size(&m);
	bt = calloc(1, sizeof(*bt));
	if (!bt || !(bt->base = malloc(body ? body : 1))) {
		free(bt);
		free(raw);
		return -1;
	}
	culprit__v1__batch__pack(&m, bt->base);
	free(raw);
	if (b->n_names && !(bt->ids = malloc(b->n_names * sizeof(*bt->ids)))) {
		free(bt->base);
		free(bt);
		return -1;
	}
	if (b->n_names)
		memcpy(bt->ids, b->name_ids, b->n_names * sizeof(*bt->ids));
	bt->n_ids = b->n_names;
	bt->body_len = body;
	bt->n_records = (uint32_t)building_records(b);
	batch_set_seq(bt, a->next_seq++);
	if (a->tail)
		a->tail->next = bt;
	else
		a->head = bt;
	a->tail = bt;
	a->q_bytes += bt->len;
	a->q_batches++;
	a->sealed_total++;
	a->st.batches_sealed++;
	building_reset(b);
	return 0;
}

/* Waits (a.mu held) until the queue has room; false when the timeout passed or the agent
 * gave up (st.refused). */
static bool wait_space(struct agent *a, int timeout_ms)
{
	struct timespec dl;

	if (a->st.refused)
		return false;
	if (a->q_bytes < a->max_unacked)
		return true;
	if (timeout_ms == AGENT_NO_WAIT)
		return false;
	if (timeout_ms >= 0)
		abs_deadline(&dl, timeout_ms);
	while (a->q_bytes >= a->max_unacked && !a->st.refused) {
		if (timeout_ms < 0)
			pthread_cond_wait(&a->cv, &a->mu);
		else if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
			return a->q_bytes < a->max_unacked && !a->st.refused;
	}
	return !a->st.refused;
}

/* Makes room for count records of est bytes in the batch being built (a.mu held): seals
 * the batch first when they would not fit, waiting for space as the policy says. */
static int make_room(struct agent *a, size_t count, size_t est)
{
	struct building *b = &a->b;
	size_t n = building_records(b);

	if (a->st.refused)
		return AGENT_EREFUSED;
	if (n && (n + count > a->max_records || b->est_bytes + est > a->batch_bytes)) {
		if (!wait_space(a, a->append_timeout))
			return a->st.refused ? AGENT_EREFUSED : AGENT_EFULL;
		if (agent_seal(a) < 0)
			return AGENT_ENOMEM;
		agent_loop_wake(a->loop);
		n = 0;
	}
	if (n == 0) {
		b->started_ms = clock_mono_ms();
		agent_loop_wake(a->loop); /* so the loop schedules the flush interval */
	}
	return 0;
}

static bool rank_served(const struct agent *a, uint32_t rank)
{
	size_t lo = 0, hi = a->n_ranks;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (a->ranks[mid] == rank)
			return true;
		if (a->ranks[mid] < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int append_done(struct agent *a, size_t done, size_t n, int rc)
{
	a->st.records_appended += done;
	if (rc == AGENT_EFULL || rc == AGENT_ENOMEM || rc == AGENT_EREFUSED)
		a->st.records_dropped += n - done;
	pthread_mutex_unlock(&a->mu);
	return rc;
}

/* Validation without the lock (names are checked under it, see names_ok). */
static bool iters_ok(const struct agent *a, const struct record_iter *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!rank_served(a, r[i].rank) || r[i].dur_us < 0)
			return false;
	return true;
}

static bool phases_ok(const struct agent *a, const struct record_phase *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!rank_served(a, r[i].rank) || r[i].kind >= RECORD_KIND_COUNT || r[i].group >= RECORD_GROUP_COUNT ||
		    r[i].dur_us < 0 || (r[i].start_us < 0 && r[i].start_us != RECORD_NO_START))
			return false;
	return true;
}

static bool kernels_ok(const struct agent *a, const struct record_kernel *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!rank_served(a, r[i].rank) || r[i].kind >= RECORD_KIND_COUNT || (r[i].sketch_len && !r[i].sketch) ||
		    r[i].sketch_len > BATCH_SOFT_BYTES / 2)
			return false;
	return true;
}

/* a.mu held */
static bool names_ok(const struct agent *a, const struct record_phase *ph, size_t nph, const struct record_kernel *k,
		     size_t nk)
{
	for (size_t i = 0; i < nph; i++)
		if (ph[i].name >= a->n_names)
			return false;
	for (size_t i = 0; i < nk; i++)
		if (k[i].name >= a->n_names)
			return false;
	return true;
}

/* Writers of one record into the batch being built (a.mu held, make_room done). */
static int put_iter(struct agent *a, const struct record_iter *r)
{
	struct building *b = &a->b;

	if (building_reserve(b, 0) < 0)
		return AGENT_ENOMEM;
	b->iter_rank[b->n_iter] = r->rank;
	b->iter_iter[b->n_iter] = r->iter;
	b->iter_start[b->n_iter] = r->start_us;
	b->iter_dur[b->n_iter] = r->dur_us;
	b->n_iter++;
	b->est_bytes += 30;
	return 0;
}

static int put_phase(struct agent *a, const struct record_phase *r)
{
	struct building *b = &a->b;
	if (building_reserve(b, 1) < 0 || building_use_name(a, r->name) < 0)
		return AGENT_ENOMEM;
	b->ph_rank[b->n_phase] = r->rank;
	b->ph_iter[b->n_phase] = r->iter;
	b->ph_name[b->n_phase] = r->name; /* the agent's name id: the batch lists it in name ids */
	b->ph_kind[b->n_phase] = r->kind;
	b->ph_group[b->n_phase] = r->group;
	b->ph_start[b->n_phase] = r->start_us == RECORD_NO_START ? -1 : r->start_us;
	b->ph_dur[b->n_phase] = r->dur_us;
	b->n_phase++;
	b->est_bytes += 50;
	return 0;
}

static int put_kernel(struct agent *a, const struct record_kernel *r)
{
	struct building *b = &a->b;
	size_t k;

	if (building_reserve(b, 2) < 0 || building_use_name(a, r->name) < 0)
		return AGENT_ENOMEM;
	if (b->sketch_len + r->sketch_len > b->sketch_cap) {
		size_t cap = b->sketch_cap ? b->sketch_cap : 4096;
		uint8_t *p;

		while (cap < b->sketch_len + r->sketch_len)
			cap *= 2;
		if (!(p = realloc(b->sketch, cap)))
			return AGENT_ENOMEM;
		b->sketch = p;
		b->sketch_cap = cap;
	}
	k = b->n_kernel;
	b->k_rank[k] = r->rank;
	b->k_iter[k] = r->iter;
	b->k_name[k] = r->name;
	b->k_kind[k] = r->kind;
	b->k_count[k] = r->count;
	b->k_sum[k] = r->sum_us;
	b->k_min[k] = r->min_us;
	b->k_max[k] = r->max_us;
	b->k_p50[k] = r->p50_us;
	b->k_p99[k] = r->p99_us;
	b->k_sketch_len[k] = r->sketch_len;
	if (r->sketch_len) {
		memcpy(b->sketch + b->sketch_len, r->sketch, r->sketch_len);
		b->sketch_len += r->sketch_len;
		b->any_sketch = true;
	}
	b->n_kernel++;
	b->est_bytes += 110 + r->sketch_len;
	return 0;
}

int agent_add_iters(struct agent *a, const struct record_iter *r, size_t n)
{
	size_t i;
	int rc = 0;

	if (!iters_ok(a, r, n))
		return AGENT_EINVAL;
	pthread_mutex_lock(&a->mu);
	for (i = 0; i < n; i++)
		if ((rc = make_room(a, 1, 30)) < 0 || (rc = put_iter(a, &r[i])) < 0)
			break;
	return append_done(a, i, n, rc);
}

int agent_add_phases(struct agent *a, const struct record_phase *r, size_t n)
{
	size_t i;
	int rc = 0;

	if (!phases_ok(a, r, n))
		return AGENT_EINVAL;
	pthread_mutex_lock(&a->mu);
	if (!names_ok(a, r, n, NULL, 0)) {
		pthread_mutex_unlock(&a->mu);
		return AGENT_EINVAL;
	}
	for (i = 0; i < n; i++)
		if ((rc = make_room(a, 1, 50)) < 0 || (rc = put_phase(a, &r[i])) < 0)
			break;
	return append_done(a, i, n, rc);
}

int agent_add_kernels(struct agent *a, const struct record_kernel *r, size_t n)
{
	size_t i;
	int rc = 0;

	if (!kernels_ok(a, r, n))
		return AGENT_EINVAL;
	pthread_mutex_lock(&a->mu);
	if (!names_ok(a, NULL, 0, r, n)) {
		pthread_mutex_unlock(&a->mu);
		return AGENT_EINVAL;
	}
	for (i = 0; i < n; i++)
		if ((rc = make_room(a, 1, 110 + r[i].sketch_len)) < 0 || (rc = put_kernel(a, &r[i])) < 0)
			break;
	return append_done(a, i, n, rc);
}

/* Raw kernels of a capture: one RawKernel message each (a.mu held, make_room done). */
static int put_raw(struct agent *a, const struct record_raw_kernel *r)
{
	struct building *b = &a->b;
	Culprit__V1__RawKernel *k;

	if (b->n_raw == b->raw_cap) {
		size_t cap = b->raw_cap ? b->raw_cap * 2 : 64;
		Culprit__V1__RawKernel *p = realloc(b->raw, cap * sizeof(*p));

		if (!p)
			return AGENT_ENOMEM;
		b->raw = p;
		b->raw_cap = cap;
	}
	if (building_use_name(a, r->name) < 0)
		return AGENT_ENOMEM;
	k = &b->raw[b->n_raw++];
	culprit__v1__raw_kernel__init(k);
	k->rank = r->rank;
	k->iter = r->iter;
	k->name = r->name; /* the agent's name id, as for phases and kernels */
	k->kind = r->kind;
	k->start_us = r->start_us;
	k->dur_us = r->dur_us;
	k->stream = r->stream;
	b->est_bytes += 40;
	return 0;
}

int agent_add_raw_kernels(struct agent *a, const struct record_raw_kernel *r, size_t n)
{
	size_t i;
	int rc = 0;

	for (i = 0; i < n; i++)
		if (!rank_served(a, r[i].rank) || r[i].kind >= RECORD_KIND_COUNT || r[i].dur_us < 0 ||
		    r[i].start_us <= 0)
			return AGENT_EINVAL;
	pthread_mutex_lock(&a->mu);
	for (i = 0; i < n; i++)
		if (r[i].name >= a->n_names) {
			pthread_mutex_unlock(&a->mu);
			return AGENT_EINVAL;
		}
	for (i = 0; i < n; i++)
		if ((rc = make_room(a, 1, 40)) < 0 || (rc = put_raw(a, &r[i])) < 0)
			break;
	return append_done(a, i, n, rc);
}

int agent_add_iteration(struct agent *a, const struct record_iter *it, const struct record_phase *ph, size_t nph,
			const struct record_kernel *k, size_t nk)
{
	size_t total = 1 + nph + nk, est = 30 + 50 * nph, i, done = 0;
	int rc = 0;

	for (i = 0; i < nk; i++)
		est += 110 + k[i].sketch_len;
	if (!iters_ok(a, it, 1) || !phases_ok(a, ph, nph) || !kernels_ok(a, k, nk))
		return AGENT_EINVAL;
	for (i = 0; i < nph; i++)
		if (ph[i].rank != it->rank || ph[i].iter != it->iter)
			return AGENT_EINVAL;
	for (i = 0; i < nk; i++)
		if (k[i].rank != it->rank || k[i].iter != it->iter)
			return AGENT_EINVAL;
	pthread_mutex_lock(&a->mu);
	if (!names_ok(a, ph, nph, k, nk)) {
		pthread_mutex_unlock(&a->mu);
		return AGENT_EINVAL;
	}
	if ((rc = make_room(a, total, est)) < 0)
		return append_done(a, 0, total, rc);
	if ((rc = put_iter(a, it)) < 0)
		return append_done(a, done, total, rc);
	done++;
	for (i = 0; i < nph; i++, done++)
		if ((rc = put_phase(a, &ph[i])) < 0)
			return append_done(a, done, total, rc);
	for (i = 0; i < nk; i++, done++)
		if ((rc = put_kernel(a, &k[i])) < 0)
			return append_done(a, done, total, rc);
	return append_done(a, done, total, 0);
}

/* ---- the queue, from the network thread ---- */

static void batch_free(struct batch *bt)
{
	if (bt) {
		free(bt->base);
		free(bt->ids);
		free(bt);
	}
}

/* Drops batches up to durable (a.mu held). */
void agent_queue_ack(struct agent *a, uint64_t durable)
{
	bool freed = false;

	if (durable > a->st.durable_seq)
		a->st.durable_seq = durable;
	while (a->head && a->head->seq <= durable && a->head != a->c.cur) {
		struct batch *bt = a->head;

		a->head = bt->next;
		if (!a->head)
			a->tail = NULL;
		if (a->c.last_sent == bt)
			a->c.last_sent = NULL;
		a->q_bytes -= bt->len;
		a->q_batches--;
		a->done_total++;
		a->st.batches_acked++;
		batch_free(bt);
		freed = true;
	}
	if (freed)
		pthread_cond_broadcast(&a->cv);
}

void agent_queue_reject(struct agent *a, uint64_t seq, const char *reason)
{
	struct batch *prev = NULL, *bt;

	for (bt = a->head; bt && bt->seq != seq; bt = bt->next)
		prev = bt;
	if (!bt) {
		agent_log(a, AGENT_LOG_DEBUG, "server rejected batch %llu, which is not held: %s",
			  (unsigned long long)seq, reason);
		return;
	}
	if (bt == a->c.cur) { /* never: a batch is rejected after it was read whole */
		agent_log(a, AGENT_LOG_WARNING, "server rejected batch %llu while it was being sent",
			  (unsigned long long)seq);
		return;
	}
	agent_log(a, AGENT_LOG_WARNING, "server rejected batch %llu (%u records): %s", (unsigned long long)seq,
		  bt->n_records, reason);
	if (prev)
		prev->next = bt->next;
	else
		a->head = bt->next;
	if (a->tail == bt)
		a->tail = prev;
	if (a->c.last_sent == bt)
		a->c.last_sent = prev;
	a->q_bytes -= bt->len;
	a->q_batches--;
	a->done_total++;
	a->st.batches_rejected++;
	a->st.records_rejected += bt->n_records;
	batch_free(bt);
	pthread_cond_broadcast(&a->cv);
}

/* First accepted Hello of this agent's life: a server that already holds sequences of this
 * (job, agent_id) knows an earlier incarnation (a restarted training process); number this
 * life's batches after them, or they would be taken for resends and dropped. Nothing has
 * been sent yet, so nothing but this agent has seen the old numbers. (a.mu held) */
void agent_rebase(struct agent *a, uint64_t durable)
{
	if (durable == 0)
		return;
	agent_log(a, AGENT_LOG_INFO, "server holds sequences up to %llu from an earlier run; continuing after them",
		  (unsigned long long)durable);
	for (struct batch *bt = a->head; bt; bt = bt->next)
		batch_set_seq(bt, bt->seq + durable);
	a->next_seq += durable;
	a->st.durable_seq = durable;
	a->max_sent_seq = durable;
}

/* ---- life cycle ---- */

int agent_parse_addr(const char *s, char *host, size_t host_size, char *port, size_t port_size)
{
	const char *colon, *h = s;
	size_t hlen;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end)
			return -1;
		h = s + 1;
		hlen = (size_t)(end - h);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -1;
	} else {
		colon = strrchr(s, ':');
		hlen = colon ? (size_t)(colon - s) : strlen(s);
	}
	if (hlen == 0 || hlen >= host_size)
		return -1;
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end || p <= 0 || p > 65535)
			return -1;
		snprintf(port, port_size, "%ld", p);
	} else {
		snprintf(port, port_size, "%d", AGENT_DEFAULT_PORT);
	}
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	return 0;
}

static int parse_server(struct agent *a, const char *s)
{
	char host[AGENT_HOST_MAX], port[16];

	if (agent_parse_addr(s, host, sizeof(host), port, sizeof(port)) < 0)
		return -1;
	a->server_host = strdup(host);
	a->server_port = strdup(port);
	return a->server_host && a->server_port ? 0 : -1;
}

static void agent_free(struct agent *a)
{
	struct batch *bt, *next;

	for (bt = a->head; bt; bt = next) {
		next = bt->next;
		batch_free(bt);
	}
	building_free(&a->b);
	for (size_t i = 0; i < a->n_names; i++)
		free(a->name_str[i]);
	free(a->name_str);
	free(a->name_hash);
	free(a->cmd.ranks);
	free(a->c.rbuf);
	free(a->c.ctrl);
	free(a->c.defs);
	free(a->c.known);
	agent_tls_release(a);
	free(a->server_host);
	free(a->server_port);
	free(a->job);
	free(a->agent_id);
	free(a->host);
	free(a->token);
	free(a->order);
	free(a->device);
	free(a->ranks);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	free(a);
}

static bool bad_str(const char *s, size_t max) { return !s || !*s || strlen(s) > max; }

struct agent *agent_new(const struct agent_config *cfg)
{
	struct agent *a = calloc(1, sizeof(*a));
	const char *why = NULL;
	pthread_condattr_t ca;

	if (!a)
		return NULL;
	pthread_mutex_init(&a->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->cv, &ca);
	pthread_condattr_destroy(&ca);
	a->c.fd = -1;
	a->c.pidx = -1;
	a->log = cfg->log;
	a->log_arg = cfg->log_arg;
	a->agent_id = strdup(cfg->agent_id ? cfg->agent_id : cfg->host ? cfg->host : "?");
	if (!a->agent_id) {
		agent_free(a);
		return NULL;
	}
	if (!cfg->server || parse_server(a, cfg->server) < 0)
		why = "server must be HOST:PORT";
	else if (bad_str(cfg->job, 128))
		why = "job must be 1 to 128 bytes";
	else if (bad_str(cfg->host, 255))
		why = "host must be 1 to 255 bytes";
	else if (bad_str(a->agent_id, 128))
		why = "agent_id must be 1 to 128 bytes";
	else if (cfg->n_ranks == 0 || cfg->n_ranks > AGENT_MAX_RANKS || !cfg->ranks)
		why = "an agent serves 1 to 65536 ranks";
	else if (cfg->topo.world == 0)
		why = "the topology's world size must be set";
	if (!why) {
		a->job = strdup(cfg->job);
		a->host = strdup(cfg->host);
		const char *token = cfg->token ? cfg->token : getenv("CULPRIT_TOKEN");

		a->token = strdup(token ? token : "");
		a->order = strdup(cfg->topo.order ? cfg->topo.order : "");
		a->device = strdup(cfg->topo.device ? cfg->topo.device : "");
		a->ranks = malloc(cfg->n_ranks * sizeof(*a->ranks));
		if (!a->job || !a->host || !a->token || !a->order || !a->device || !a->ranks) {
			agent_free(a);
			return NULL;
		}
		memcpy(a->ranks, cfg->ranks, cfg->n_ranks * sizeof(*a->ranks));
		qsort(a->ranks, cfg->n_ranks, sizeof(*a->ranks), cmp_u32);
		a->n_ranks = cfg->n_ranks;
		for (size_t i = 0; i < a->n_ranks && !why; i++)
			if (a->ranks[i] >= cfg->topo.world || (i && a->ranks[i] == a->ranks[i - 1]))
				why = "ranks must be distinct and below the world size";
	}
	if (why) {
		agent_log(a, AGENT_LOG_ERROR, "invalid configuration: %s", why);
		agent_free(a);
		return NULL;
	}
	if (cfg->tls || cfg->tls_ca) {
		char err[512];

		if (agent_tls_init(a, cfg->tls_ca, err, sizeof(err)) < 0) {
			agent_log(a, AGENT_LOG_ERROR, "invalid configuration: %s", err);
			agent_free(a);
			return NULL;
		}
	}
	a->topo = cfg->topo;
	a->topo.order = NULL;
	a->topo.device = NULL;
	a->flush_ms = cfg->flush_interval_ms ? cfg->flush_interval_ms : 200;
	a->max_records = cfg->max_batch_records ? cfg->max_batch_records : 8192;
	a->max_unacked = cfg->max_unacked_bytes ? cfg->max_unacked_bytes : (size_t)64 << 20;
	a->append_timeout = cfg->append_timeout_ms ? cfg->append_timeout_ms : 1000;
	a->backoff_min = cfg->backoff_min_ms ? cfg->backoff_min_ms : 100;
	a->backoff_max = cfg->backoff_max_ms ? cfg->backoff_max_ms : 10000;
	if (a->backoff_max < a->backoff_min)
		a->backoff_max = a->backoff_min;
	a->heartbeat_ms = cfg->heartbeat_ms ? cfg->heartbeat_ms : 10000;
	a->give_up_refused = cfg->give_up_refused;
	a->next_seq = 1;
	a->st.next_seq = 1;
	a->batch_bytes = BATCH_SOFT_BYTES;
	a->b.epoch = 1;
	a->c.rnd = (unsigned int)(clock_mono_ms() ^ (uintptr_t)a);
	a->c.retry_at_ms = 0;
	if (cfg->loop) {
		a->loop = cfg->loop;
	} else {
		if (!(a->loop = agent_loop_new())) {
			agent_free(a);
			return NULL;
		}
		a->own_loop = true;
	}
	agent_loop_attach(a->loop, a);
	return a;
}

int agent_flush(struct agent *a, int timeout_ms)
{
	struct timespec dl;
	uint64_t target;
	int rc = 0;

	if (timeout_ms >= 0)
		abs_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&a->mu);
	if (building_records(&a->b)) {
		if (!wait_space(a, timeout_ms < 0 ? AGENT_WAIT_FOREVER : timeout_ms) || agent_seal(a) < 0) {
			rc = a->st.refused ? AGENT_EREFUSED : AGENT_ETIMEDOUT;
			pthread_mutex_unlock(&a->mu);
			return rc;
		}
	}
	target = a->sealed_total;
	agent_loop_wake(a->loop);
	while (a->done_total < target) {
		if (a->st.refused) {
			rc = AGENT_EREFUSED;
			break;
		}
		if (timeout_ms < 0) {
			pthread_cond_wait(&a->cv, &a->mu);
		} else if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT) {
			if (a->done_total < target)
				rc = AGENT_ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&a->mu);
	return rc;
}

int agent_close(struct agent *a, int timeout_ms)
{
	struct agent_loop *l;
	int rc;

	if (!a)
		return 0;
	l = a->loop;
	rc = agent_flush(a, timeout_ms);
	pthread_mutex_lock(&a->mu);
	if (rc == 0 && (a->head || building_records(&a->b)))
		rc = AGENT_ETIMEDOUT;
	pthread_mutex_unlock(&a->mu);
	agent_loop_detach(l, a);
	if (a->own_loop)
		agent_loop_free(l);
	agent_free(a);
	return rc;
}

size_t agent_config_size(void) { return sizeof(struct agent_config); }

size_t agent_stats_size(void) { return sizeof(struct agent_stats); }

void agent_get_stats(struct agent *a, struct agent_stats *out)
{
	pthread_mutex_lock(&a->mu);
	*out = a->st;
	out->next_seq = a->next_seq;
	out->unacked_bytes = a->q_bytes;
	out->unacked_batches = a->q_batches;
	pthread_mutex_unlock(&a->mu);
}

bool agent_command(struct agent *a, struct agent_command *out)
{
	bool have;

	pthread_mutex_lock(&a->mu);
	have = a->have_cmd;
	if (have) {
		*out = a->cmd;
		out->ranks = NULL;
		if (a->cmd.n_ranks && (out->ranks = malloc(a->cmd.n_ranks * sizeof(*out->ranks))))
			memcpy(out->ranks, a->cmd.ranks, a->cmd.n_ranks * sizeof(*out->ranks));
		if (!out->ranks)
			out->n_ranks = 0;
	}
	pthread_mutex_unlock(&a->mu);
	return have;
}

const char *agent_strerror(int err)
{
	switch (err) {
	case AGENT_OK: return "ok";
	case AGENT_EFULL: return "the unacknowledged buffer is full";
	case AGENT_EINVAL: return "invalid record";
	case AGENT_ETIMEDOUT: return "timed out waiting for acknowledgements";
	case AGENT_ENOMEM: return "out of memory";
	case AGENT_EREFUSED: return "the server refused the connection";
	default: return "unknown error";
	}
}
