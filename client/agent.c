/* agent.c: the agent library (see agent.h and docs/protocol.md).
 *
 * Threads: appenders (any number) and one network thread (struct agent_loop, possibly
 * shared by many agents). Per agent, a.mu guards the batch being built, the queue of sealed
 * batches and the counters; the connection (struct agent_conn) belongs to the network thread
 * alone. Sealed batches are freed only by the network thread (on Ack or Reject) or by
 * agent_close after the agent left its loop, so the network thread may write a batch's bytes
 * without holding the lock.
 *
 * A sealed batch is kept as the bytes of its whole frame. Its body is packed once, without
 * the sequence; the frame prefix (length, Envelope tag, Batch length, seq field) is written
 * in front of it, so that renumbering (only ever before the first accepted Hello, see
 * agent_rebase) rewrites a few bytes instead of re-packing. */
#include "agent.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

#define PREFIX_MAX 21u                /* 4 length + 1 tag + 5 varint + 1 tag + 10 varint */
#define BATCH_SOFT_BYTES (1u << 20)   /* seal when a batch's estimate reaches this */
#define IN_FRAME_MAX (1u << 20)       /* largest frame accepted from the server */
#define CONNECT_TIMEOUT_MS 10000
#define HELLO_TIMEOUT_MS 10000

enum conn_state {
	CONN_IDLE,       /* no socket; (re)connect at retry_at */
	CONN_CONNECTING, /* non-blocking connect in progress */
	CONN_HELLO,      /* Hello sent, waiting for HelloAck */
	CONN_STREAMING,  /* HelloAck accepted: batches flow */
};

struct batch {
	uint64_t seq;
	uint8_t *base;   /* allocation: PREFIX_MAX bytes of room, then the body */
	uint8_t *frame;  /* start of the frame inside base */
	size_t len;      /* frame bytes */
	size_t body_len;
	uint32_t n_records;
	struct batch *next;
};

/* The batch being built: columns that protobuf-c packs directly. */
struct building {
	size_t iter_cap, ph_cap, k_cap, n_iter, n_phase, n_kernel;
	uint32_t *iter_rank, *iter_iter;
	int64_t *iter_start, *iter_dur;
	uint32_t *ph_rank, *ph_iter, *ph_name, *ph_kind, *ph_group;
	int64_t *ph_start, *ph_dur;
	uint32_t *k_rank, *k_iter, *k_name, *k_kind, *k_count;
	int64_t *k_sum, *k_min, *k_max, *k_p50, *k_p99;
	size_t *k_sketch_off;
	uint32_t *k_sketch_len;
	uint8_t *sketch;  /* bytes of this batch's sketches */
	size_t sketch_len, sketch_cap;
	bool any_sketch;
	/* dictionary: agent name id -> index in this batch */
	uint32_t *local_of, *local_epoch, epoch;
	size_t local_cap;
	const char **names;
	size_t n_names, names_cap;
	size_t est_bytes;
	long long started_ms;
};

struct agent_conn {
	enum conn_state state;
	int fd;
	int pidx;                   /* index in the loop's pollfd array, -1 none */
	long long deadline_ms;      /* connect or hello timeout */
	long long retry_at_ms;      /* CONN_IDLE: when to try again */
	long long last_send_ms;
	uint32_t attempts;          /* failed attempts since the last accepted Hello */
	unsigned int rnd;
	bool complaining;           /* a failure was logged at warning; log the recovery */
	size_t addr_next;           /* rotate through resolved addresses */
	uint8_t *ctrl;              /* a control frame being written (Hello, Heartbeat, Goodbye) */
	size_t ctrl_len, ctrl_off;
	struct batch *cur;          /* batch being written, NULL none */
	size_t cur_off;
	struct batch *last_sent;    /* NULL: the next to send is the queue's head */
	uint8_t *rbuf;
	size_t rlen, rcap;
	uint32_t max_frame;         /* the server's, from HelloAck */
};

struct agent {
	/* configuration (immutable after agent_new) */
	char *server_host, *server_port, *job, *agent_id, *host, *token, *order;
	struct agent_topology topo;
	uint32_t *ranks;            /* sorted */
	size_t n_ranks;
	uint32_t flush_ms, max_records, backoff_min, backoff_max, heartbeat_ms;
	size_t max_unacked;
	int append_timeout;
	agent_log_fn log;
	void *log_arg;
	struct agent_loop *loop;
	bool own_loop;

	pthread_mutex_t mu;
	pthread_cond_t cv;          /* space freed, batches done */
	/* names (append-only; strings never move) */
	char **name_str;
	size_t n_names, names_cap;
	int32_t *name_hash;         /* open addressing, -1 empty */
	size_t hash_cap;
	struct building b;
	/* sealed, unacknowledged batches in sequence order */
	struct batch *head, *tail;
	size_t q_bytes, q_batches;
	uint64_t next_seq;
	uint64_t sealed_total, done_total; /* batches; done = acked or rejected */
	bool ever_accepted;
	uint64_t max_sent_seq;      /* highest sequence written whole (resend accounting) */
	struct agent_stats st;
	bool have_cmd;
	struct agent_command cmd;
	bool closing, detached;

	struct agent_conn c;        /* network thread only */
	struct agent *loop_next;    /* in the loop's list */
};

struct agent_loop {
	pthread_t thr;
	pthread_mutex_t mu;
	pthread_cond_t cv;          /* an agent was detached */
	struct agent *agents;       /* attached */
	size_t n_agents;
	bool stop;
	int wake_rd, wake_wr;
	atomic_bool wake_pending;
	struct pollfd *pfd;
	size_t pfd_cap;
};

/* ---- small helpers ---- */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

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

__attribute__((format(printf, 3, 4))) static void alog(struct agent *a, enum agent_log_level level,
						       const char *fmt, ...)
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

static void loop_wake(struct agent_loop *l)
{
	bool expected = false;
	char c = 1;

	if (atomic_compare_exchange_strong(&l->wake_pending, &expected, true))
		if (write(l->wake_wr, &c, 1) < 0 && errno != EAGAIN)
			atomic_store(&l->wake_pending, false);
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

/* Writes the frame prefix for seq in front of the body: 4-byte length, Envelope field 3
 * (batch, length-delimited), the Batch's length, Batch field 1 (seq, varint). */
static void batch_set_seq(struct batch *bt, uint64_t seq)
{
	size_t seq_part = seq ? 1 + varint_len(seq) : 0;
	size_t batch_len = seq_part + bt->body_len;
	size_t env_len = 1 + varint_len(batch_len) + batch_len;
	size_t prefix = FRAME_HEADER + 1 + varint_len(batch_len) + seq_part;
	uint8_t *p = bt->base + PREFIX_MAX - prefix;
	uint32_t be = htobe32((uint32_t)env_len);
	size_t o = 0;

	memcpy(p, &be, sizeof(be));
	o += 4;
	p[o++] = (3u << 3) | 2u;
	o += varint_put(p + o, batch_len);
	if (seq) {
		p[o++] = (1u << 3) | 0u;
		o += varint_put(p + o, seq);
	}
	bt->seq = seq;
	bt->frame = p;
	bt->len = prefix + bt->body_len;
}

/* ---- names ---- */

static uint64_t name_hash_of(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static int names_rehash(struct agent *a, size_t cap)
{
	int32_t *t = malloc(cap * sizeof(*t));

	if (!t)
		return -1;
	for (size_t i = 0; i < cap; i++)
		t[i] = -1;
	for (size_t i = 0; i < a->n_names; i++) {
		size_t j = name_hash_of(a->name_str[i]) & (cap - 1);

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
	j = name_hash_of(name) & (a->hash_cap - 1);
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

#define GROW(field) do { void *p_ = realloc(b->field, cap * sizeof(*b->field)); if (!p_) return -1; b->field = p_; } while (0)

/* Room for one more record of type t (0 iter, 1 phase, 2 kernel); columns grow by type. */
static int building_reserve(struct building *b, int t)
{
	size_t *capp = t == 0 ? &b->iter_cap : t == 1 ? &b->ph_cap : &b->k_cap;
	size_t n = t == 0 ? b->n_iter : t == 1 ? b->n_phase : b->n_kernel, cap;

	if (n < *capp)
		return 0;
	cap = *capp ? *capp * 2 : 32;
	if (t == 0) {
		GROW(iter_rank); GROW(iter_iter); GROW(iter_start); GROW(iter_dur);
	} else if (t == 1) {
		GROW(ph_rank); GROW(ph_iter); GROW(ph_name); GROW(ph_kind); GROW(ph_group); GROW(ph_start);
		GROW(ph_dur);
	} else {
		GROW(k_rank); GROW(k_iter); GROW(k_name); GROW(k_kind); GROW(k_count); GROW(k_sum); GROW(k_min);
		GROW(k_max); GROW(k_p50); GROW(k_p99); GROW(k_sketch_off); GROW(k_sketch_len);
	}
	*capp = cap;
	return 0;
}
#undef GROW

static void building_free(struct building *b)
{
	void *arrays[] = {b->iter_rank, b->iter_iter, b->iter_start, b->iter_dur, b->ph_rank, b->ph_iter,
			  b->ph_name, b->ph_kind, b->ph_group, b->ph_start, b->ph_dur, b->k_rank, b->k_iter,
			  b->k_name, b->k_kind, b->k_count, b->k_sum, b->k_min, b->k_max, b->k_p50, b->k_p99,
			  b->k_sketch_off, b->k_sketch_len, b->sketch, b->local_of, b->local_epoch, b->names};

	for (size_t i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++)
		free(arrays[i]);
	memset(b, 0, sizeof(*b));
}

static size_t building_records(const struct building *b)
{
	return b->n_iter + b->n_phase + b->n_kernel;
}

/* The batch-local index of agent name id; -1 out of memory. */
static int64_t building_local_name(struct agent *a, uint32_t id)
{
	struct building *b = &a->b;

	if (id >= b->local_cap) {
		size_t cap = b->local_cap ? b->local_cap : 64;
		uint32_t *lo, *le;

		while (cap <= id)
			cap *= 2;
		lo = realloc(b->local_of, cap * sizeof(*lo));
		if (!lo)
			return -1;
		b->local_of = lo;
		le = realloc(b->local_epoch, cap * sizeof(*le));
		if (!le)
			return -1;
		b->local_epoch = le;
		memset(le + b->local_cap, 0, (cap - b->local_cap) * sizeof(*le));
		b->local_cap = cap;
	}
	if (b->local_epoch[id] == b->epoch)
		return b->local_of[id];
	if (b->n_names == b->names_cap) {
		size_t cap = b->names_cap ? b->names_cap * 2 : 32;
		const char **n = realloc(b->names, cap * sizeof(*n));

		if (!n)
			return -1;
		b->names = n;
		b->names_cap = cap;
	}
	b->names[b->n_names] = a->name_str[id];
	b->local_epoch[id] = b->epoch;
	b->local_of[id] = (uint32_t)b->n_names;
	b->est_bytes += strlen(a->name_str[id]) + 3;
	return (int64_t)b->n_names++;
}

static void building_reset(struct building *b)
{
	b->n_iter = b->n_phase = b->n_kernel = 0;
	b->n_names = 0;
	b->sketch_len = 0;
	b->any_sketch = false;
	b->est_bytes = 0;
	if (++b->epoch == 0) { /* wrapped: forget every mapping */
		if (b->local_epoch)
			memset(b->local_epoch, 0, b->local_cap * sizeof(*b->local_epoch));
		b->epoch = 1;
	}
}

/* Packs the current batch into a new queued batch. a.mu held; the batch must be non-empty.
 * -1 out of memory (the records stay in the batch being built). */
static int agent_seal(struct agent *a)
{
	struct building *b = &a->b;
	Culprit__V1__Batch m = CULPRIT__V1__BATCH__INIT;
	ProtobufCBinaryData *sk = NULL;
	struct batch *bt;
	size_t body;

	m.n_names = b->n_names;
	m.names = (char **)b->names;
	m.n_iter_rank = m.n_iter_iter = m.n_iter_start_us = m.n_iter_dur_us = b->n_iter;
	m.iter_rank = b->iter_rank;
	m.iter_iter = b->iter_iter;
	m.iter_start_us = b->iter_start;
	m.iter_dur_us = b->iter_dur;
	m.n_phase_rank = m.n_phase_iter = m.n_phase_name = m.n_phase_kind = m.n_phase_group =
		m.n_phase_start_us = m.n_phase_dur_us = b->n_phase;
	m.phase_rank = b->ph_rank;
	m.phase_iter = b->ph_iter;
	m.phase_name = b->ph_name;
	m.phase_kind = b->ph_kind;
	m.phase_group = b->ph_group;
	m.phase_start_us = b->ph_start;
	m.phase_dur_us = b->ph_dur;
	m.n_kernel_rank = m.n_kernel_iter = m.n_kernel_name = m.n_kernel_kind = m.n_kernel_count =
		m.n_kernel_sum_us = m.n_kernel_min_us = m.n_kernel_max_us = m.n_kernel_p50_us =
			m.n_kernel_p99_us = b->n_kernel;
	m.kernel_rank = b->k_rank;
	m.kernel_iter = b->k_iter;
	m.kernel_name = b->k_name;
	m.kernel_kind = b->k_kind;
	m.kernel_count = b->k_count;
	m.kernel_sum_us = b->k_sum;
	m.kernel_min_us = b->k_min;
	m.kernel_max_us = b->k_max;
	m.kernel_p50_us = b->k_p50;
	m.kernel_p99_us = b->k_p99;
	if (b->any_sketch && b->n_kernel) {
		if (!(sk = calloc(b->n_kernel, sizeof(*sk))))
			return -1;
		for (size_t i = 0; i < b->n_kernel; i++) {
			sk[i].len = b->k_sketch_len[i];
			sk[i].data = b->k_sketch_len[i] ? b->sketch + b->k_sketch_off[i] : NULL;
		}
		m.n_kernel_sketch = b->n_kernel;
		m.kernel_sketch = sk;
	}
	body = culprit__v1__batch__get_packed_size(&m);
	bt = calloc(1, sizeof(*bt));
	if (!bt || !(bt->base = malloc(PREFIX_MAX + body))) {
		free(bt);
		free(sk);
		return -1;
	}
	culprit__v1__batch__pack(&m, bt->base + PREFIX_MAX);
	free(sk);
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

/* Waits (a.mu held) until the queue has room; false when the timeout passed. */
static bool wait_space(struct agent *a, int timeout_ms)
{
	struct timespec dl;

	if (a->q_bytes < a->max_unacked)
		return true;
	if (timeout_ms == AGENT_NO_WAIT)
		return false;
	if (timeout_ms >= 0)
		abs_deadline(&dl, timeout_ms);
	while (a->q_bytes >= a->max_unacked) {
		if (timeout_ms < 0)
			pthread_cond_wait(&a->cv, &a->mu);
		else if (pthread_cond_timedwait(&a->cv, &a->mu, &dl) == ETIMEDOUT)
			return a->q_bytes < a->max_unacked;
	}
	return true;
}

/* Makes room for count records of est bytes in the batch being built (a.mu held): seals
 * the batch first when they would not fit, waiting for space as the policy says. */
static int make_room(struct agent *a, size_t count, size_t est)
{
	struct building *b = &a->b;
	size_t n = building_records(b);

	if (n && (n + count > a->max_records || b->est_bytes + est > BATCH_SOFT_BYTES)) {
		if (!wait_space(a, a->append_timeout))
			return AGENT_EFULL;
		if (agent_seal(a) < 0)
			return AGENT_ENOMEM;
		loop_wake(a->loop);
		n = 0;
	}
	if (n == 0) {
		b->started_ms = now_ms();
		loop_wake(a->loop); /* so the loop schedules the flush interval */
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
	if (rc == AGENT_EFULL || rc == AGENT_ENOMEM)
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
	int64_t local;

	if (building_reserve(b, 1) < 0 || (local = building_local_name(a, r->name)) < 0)
		return AGENT_ENOMEM;
	b->ph_rank[b->n_phase] = r->rank;
	b->ph_iter[b->n_phase] = r->iter;
	b->ph_name[b->n_phase] = (uint32_t)local;
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
	int64_t local;
	size_t k;

	if (building_reserve(b, 2) < 0 || (local = building_local_name(a, r->name)) < 0)
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
	b->k_name[k] = (uint32_t)local;
	b->k_kind[k] = r->kind;
	b->k_count[k] = r->count;
	b->k_sum[k] = r->sum_us;
	b->k_min[k] = r->min_us;
	b->k_max[k] = r->max_us;
	b->k_p50[k] = r->p50_us;
	b->k_p99[k] = r->p99_us;
	b->k_sketch_off[k] = b->sketch_len;
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
		free(bt);
	}
}

/* Drops batches up to durable (a.mu held). */
static void queue_ack(struct agent *a, uint64_t durable)
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

static void queue_reject(struct agent *a, uint64_t seq, const char *reason)
{
	struct batch *prev = NULL, *bt;

	for (bt = a->head; bt && bt->seq != seq; bt = bt->next)
		prev = bt;
	if (!bt) {
		alog(a, AGENT_LOG_DEBUG, "server rejected batch %llu, which is not held: %s", (unsigned long long)seq,
		     reason);
		return;
	}
	if (bt == a->c.cur) { /* never: a batch is rejected after it was read whole */
		alog(a, AGENT_LOG_WARNING, "server rejected batch %llu while it was being sent", (unsigned long long)seq);
		return;
	}
	alog(a, AGENT_LOG_WARNING, "server rejected batch %llu (%u records): %s", (unsigned long long)seq,
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
static void agent_rebase(struct agent *a, uint64_t durable)
{
	if (durable == 0)
		return;
	alog(a, AGENT_LOG_INFO, "server holds sequences up to %llu from an earlier run; continuing after them",
	     (unsigned long long)durable);
	for (struct batch *bt = a->head; bt; bt = bt->next)
		batch_set_seq(bt, bt->seq + durable);
	a->next_seq += durable;
	a->st.durable_seq = durable;
	a->max_sent_seq = durable;
}

/* ---- the connection (network thread) ---- */

static void conn_close(struct agent *a, const char *why, bool failure)
{
	struct agent_conn *c = &a->c;
	long long delay;

	if (c->fd >= 0) {
		close(c->fd);
		c->fd = -1;
	}
	if (c->state == CONN_STREAMING) {
		pthread_mutex_lock(&a->mu);
		a->st.connected = false;
		a->st.disconnects++;
		pthread_mutex_unlock(&a->mu);
	}
	if (failure) {
		if (!c->complaining) {
			alog(a, AGENT_LOG_WARNING, "%s; reconnecting", why);
			c->complaining = true;
		} else {
			alog(a, AGENT_LOG_DEBUG, "%s; reconnecting", why);
		}
	} else {
		alog(a, AGENT_LOG_INFO, "%s; reconnecting", why);
	}
	c->state = CONN_IDLE;
	free(c->ctrl);
	c->ctrl = NULL;
	c->ctrl_len = c->ctrl_off = 0;
	c->cur = NULL;
	c->cur_off = 0;
	c->last_sent = NULL;
	c->rlen = 0;
	/* exponential backoff with jitter: uniform in [d/2, d] */
	delay = (long long)a->backoff_min << (c->attempts < 20 ? c->attempts : 20);
	if (delay > a->backoff_max)
		delay = a->backoff_max;
	delay = delay / 2 + rand_r(&c->rnd) % (delay / 2 + 1);
	if (c->attempts < 30)
		c->attempts++;
	c->retry_at_ms = now_ms() + delay;
}

static int conn_queue_ctrl(struct agent *a, const frame_envelope *env)
{
	struct agent_conn *c = &a->c;
	size_t n = frame_packed_size(env);
	uint8_t *p;

	if (c->ctrl) /* a control frame still pending: heartbeats can be skipped, others wait */
		return -1;
	if (!(p = malloc(n)))
		return -1;
	frame_pack(env, p);
	c->ctrl = p;
	c->ctrl_len = n;
	c->ctrl_off = 0;
	return 0;
}

static int conn_hello(struct agent *a)
{
	Culprit__V1__Topology topo = CULPRIT__V1__TOPOLOGY__INIT;
	Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;

	topo.world = a->topo.world;
	topo.tp = a->topo.tp;
	topo.cp = a->topo.cp;
	topo.pp = a->topo.pp;
	topo.dp = a->topo.dp;
	topo.ep = a->topo.ep;
	topo.gpus_per_node = a->topo.gpus_per_node;
	topo.order = a->order;
	h.protocol_version = FRAME_PROTOCOL_VERSION;
	h.job = a->job;
	h.topology = &topo;
	h.agent_id = a->agent_id;
	h.host = a->host;
	h.n_ranks = a->n_ranks;
	h.ranks = a->ranks;
	h.token = a->token;
	pthread_mutex_lock(&a->mu);
	h.resume_seq = a->head ? a->head->seq : a->next_seq;
	pthread_mutex_unlock(&a->mu);
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	return conn_queue_ctrl(a, &env);
}

static void conn_start(struct agent *a)
{
	struct agent_conn *c = &a->c;
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
	struct addrinfo *res = NULL, *ai;
	size_t n = 0, pick;
	int rc, fd, one = 1;
	char why[256];

	rc = getaddrinfo(a->server_host, a->server_port, &hints, &res);
	if (rc != 0) {
		snprintf(why, sizeof(why), "could not resolve \"%s\": %s", a->server_host, gai_strerror(rc));
		conn_close(a, why, true);
		return;
	}
	for (ai = res; ai; ai = ai->ai_next)
		n++;
	pick = c->addr_next++ % n;
	for (ai = res; pick--; ai = ai->ai_next)
		;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, sizeof(why), "could not create socket: %s", strerror(errno));
		freeaddrinfo(res);
		conn_close(a, why, true);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	{
		int idle = 30, intvl = 10, cnt = 3;

		setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
		setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	}
	c->fd = fd;
	rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(res);
	if (rc < 0 && errno != EINPROGRESS) {
		snprintf(why, sizeof(why), "could not connect to \"%s:%s\": %s", a->server_host, a->server_port,
			 strerror(errno));
		conn_close(a, why, true);
		return;
	}
	c->state = CONN_CONNECTING;
	c->deadline_ms = now_ms() + CONNECT_TIMEOUT_MS;
}

static void conn_connected(struct agent *a)
{
	struct agent_conn *c = &a->c;
	int err = 0;
	socklen_t len = sizeof(err);
	char why[256];

	if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		err = errno;
	if (err) {
		snprintf(why, sizeof(why), "could not connect to \"%s:%s\": %s", a->server_host, a->server_port,
			 strerror(err));
		conn_close(a, why, true);
		return;
	}
	if (conn_hello(a) < 0) {
		conn_close(a, "out of memory for hello", true);
		return;
	}
	c->state = CONN_HELLO;
	c->deadline_ms = now_ms() + HELLO_TIMEOUT_MS;
}

/* Handles one frame from the server; false when the connection was closed. */
static bool conn_frame(struct agent *a, const uint8_t *body, size_t len)
{
	struct agent_conn *c = &a->c;
	frame_envelope *env = frame_unpack(body, len);
	char why[512];
	bool ok = true;

	if (!env) {
		char hex[80];

		frame_hex_sample(body, len, hex, sizeof(hex));
		snprintf(why, sizeof(why), "malformed frame from server (%zu bytes: %s)", len, hex);
		conn_close(a, why, true);
		return false;
	}
	switch (env->msg_case) {
	case CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK:
		if (c->state != CONN_HELLO) {
			conn_close(a, "unexpected hello_ack from server", true);
			ok = false;
			break;
		}
		if (!env->hello_ack->accepted) {
			snprintf(why, sizeof(why), "server refused hello: %s",
				 env->hello_ack->reason && *env->hello_ack->reason ? env->hello_ack->reason : "no reason");
			c->attempts = 30; /* retry at the slowest pace */
			c->complaining = false; /* log every refusal at warning (they are rare: backoff_max apart) */
			conn_close(a, why, true);
			ok = false;
			break;
		}
		pthread_mutex_lock(&a->mu);
		if (!a->ever_accepted) {
			a->ever_accepted = true;
			agent_rebase(a, env->hello_ack->durable_seq);
		}
		queue_ack(a, env->hello_ack->durable_seq);
		a->st.connected = true;
		a->st.connects++;
		pthread_mutex_unlock(&a->mu);
		c->max_frame = env->hello_ack->max_frame ? env->hello_ack->max_frame : 4u << 20;
		c->state = CONN_STREAMING;
		/* the backoff resets on progress (an Ack that frees batches), not on an accepted
		 * Hello alone: a batch that makes the server drop the connection every time must
		 * not turn into a tight reconnect loop */
		pthread_mutex_lock(&a->mu);
		if (!a->head)
			c->attempts = 0;
		pthread_mutex_unlock(&a->mu);
		c->last_sent = NULL;
		if (c->complaining) {
			alog(a, AGENT_LOG_INFO, "connected to \"%s:%s\" again; resending after sequence %llu",
			     a->server_host, a->server_port, (unsigned long long)env->hello_ack->durable_seq);
			c->complaining = false;
		} else {
			alog(a, AGENT_LOG_DEBUG, "connected to \"%s:%s\", durable sequence %llu", a->server_host,
			     a->server_port, (unsigned long long)env->hello_ack->durable_seq);
		}
		break;
	case CULPRIT__V1__ENVELOPE__MSG_ACK:
		pthread_mutex_lock(&a->mu);
		if (a->head && a->head->seq <= env->ack->durable_seq)
			c->attempts = 0;
		queue_ack(a, env->ack->durable_seq);
		pthread_mutex_unlock(&a->mu);
		break;
	case CULPRIT__V1__ENVELOPE__MSG_REJECT:
		pthread_mutex_lock(&a->mu);
		queue_reject(a, env->reject->seq, env->reject->reason ? env->reject->reason : "");
		pthread_mutex_unlock(&a->mu);
		break;
	case CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT:
		break;
	case CULPRIT__V1__ENVELOPE__MSG_COMMAND: {
		Culprit__V1__Command *cmd = env->command;
		uint32_t *ranks = NULL;

		if (cmd->n_ranks && !(ranks = malloc(cmd->n_ranks * sizeof(*ranks)))) {
			alog(a, AGENT_LOG_WARNING, "out of memory for command %llu", (unsigned long long)cmd->id);
			break;
		}
		if (cmd->n_ranks)
			memcpy(ranks, cmd->ranks, cmd->n_ranks * sizeof(*ranks));
		pthread_mutex_lock(&a->mu);
		free(a->cmd.ranks);
		a->cmd.id = cmd->id;
		a->cmd.kind = (uint32_t)cmd->kind;
		a->cmd.iterations = cmd->iterations;
		a->cmd.max_events = cmd->max_events;
		a->cmd.n_ranks = cmd->n_ranks;
		a->cmd.ranks = ranks;
		a->have_cmd = true;
		pthread_mutex_unlock(&a->mu);
		alog(a, AGENT_LOG_INFO, "command %llu from server: kind %d, %zu ranks, %u iterations",
		     (unsigned long long)cmd->id, (int)cmd->kind, cmd->n_ranks, cmd->iterations);
		break;
	}
	case CULPRIT__V1__ENVELOPE__MSG_GOODBYE:
		snprintf(why, sizeof(why), "server said goodbye: %s",
			 env->goodbye->reason && *env->goodbye->reason ? env->goodbye->reason : "no reason");
		conn_close(a, why, false);
		ok = false;
		break;
	default:
		snprintf(why, sizeof(why), "unexpected message %d from server", (int)env->msg_case);
		conn_close(a, why, true);
		ok = false;
		break;
	}
	frame_free(env);
	return ok;
}

static void conn_read(struct agent *a)
{
	struct agent_conn *c = &a->c;
	char why[256];

	for (;;) {
		ssize_t n;
		size_t off = 0;

		if (c->rlen == c->rcap) {
			size_t cap = c->rcap ? c->rcap * 2 : 4096;
			uint8_t *p;

			if (cap > IN_FRAME_MAX + FRAME_HEADER)
				cap = IN_FRAME_MAX + FRAME_HEADER;
			if (cap <= c->rcap || !(p = realloc(c->rbuf, cap))) {
				conn_close(a, "out of memory for a frame from server", true);
				return;
			}
			c->rbuf = p;
			c->rcap = cap;
		}
		n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n == 0) {
			conn_close(a, "server closed the connection", true);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			snprintf(why, sizeof(why), "could not receive from server: %s", strerror(errno));
			conn_close(a, why, true);
			return;
		}
		c->rlen += (size_t)n;
		for (;;) {
			uint32_t body = 0;
			const char *err = NULL;
			enum frame_status fs = frame_check(c->rbuf + off, c->rlen - off, IN_FRAME_MAX, &body, &err);

			if (fs == FRAME_NEED_MORE)
				break;
			if (fs == FRAME_MALFORMED) {
				snprintf(why, sizeof(why), "malformed frame from server: %s", err);
				conn_close(a, why, true);
				return;
			}
			if (!conn_frame(a, c->rbuf + off + FRAME_HEADER, body))
				return;
			off += FRAME_HEADER + body;
		}
		if (off) {
			memmove(c->rbuf, c->rbuf + off, c->rlen - off);
			c->rlen -= off;
		}
	}
}

/* Picks the next batch to send (a.mu held). */
static struct batch *next_batch(struct agent *a)
{
	return a->c.last_sent ? a->c.last_sent->next : a->head;
}

static void conn_write(struct agent *a)
{
	struct agent_conn *c = &a->c;
	char why[256];

	for (;;) {
		const uint8_t *p;
		size_t left;
		ssize_t n;
		bool is_ctrl;

		if (!c->cur && c->ctrl) {
			is_ctrl = true;
			p = c->ctrl + c->ctrl_off;
			left = c->ctrl_len - c->ctrl_off;
		} else {
			if (!c->cur) {
				if (c->state != CONN_STREAMING)
					return;
				pthread_mutex_lock(&a->mu);
				c->cur = next_batch(a);
				pthread_mutex_unlock(&a->mu);
				c->cur_off = 0;
				if (!c->cur)
					return;
				if (c->cur->len - FRAME_HEADER > c->max_frame) {
					alog(a, AGENT_LOG_ERROR, "batch %llu is %zu bytes, over the server's maximum of %u",
					     (unsigned long long)c->cur->seq, c->cur->len, c->max_frame);
				}
			}
			is_ctrl = false;
			p = c->cur->frame + c->cur_off;
			left = c->cur->len - c->cur_off;
		}
		n = send(c->fd, p, left, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			if (errno == EINTR)
				continue;
			snprintf(why, sizeof(why), "could not send to server: %s", strerror(errno));
			conn_close(a, why, true);
			return;
		}
		c->last_send_ms = now_ms();
		if (is_ctrl) {
			c->ctrl_off += (size_t)n;
			if (c->ctrl_off == c->ctrl_len) {
				free(c->ctrl);
				c->ctrl = NULL;
				c->ctrl_len = c->ctrl_off = 0;
			}
		} else {
			c->cur_off += (size_t)n;
			if (c->cur_off == c->cur->len) {
				pthread_mutex_lock(&a->mu);
				c->last_sent = c->cur;
				a->st.batches_sent++;
				if (c->cur->seq <= a->max_sent_seq)
					a->st.batches_resent++;
				else
					a->max_sent_seq = c->cur->seq;
				pthread_mutex_unlock(&a->mu);
				c->cur = NULL;
				c->cur_off = 0;
			}
		}
	}
}

/* Timers and what to poll for; returns the agent's next deadline (ms). */
static long long conn_tick(struct agent *a, long long now, short *events)
{
	struct agent_conn *c = &a->c;
	long long next = now + 1000;
	bool want_write = false;

	pthread_mutex_lock(&a->mu);
	if (building_records(&a->b)) {
		long long due = a->b.started_ms + a->flush_ms;

		if (now >= due && a->q_bytes < a->max_unacked) {
			if (agent_seal(a) < 0)
				due = now + 100;
		}
		if (building_records(&a->b) && due < next)
			next = due > now ? due : now + 1;
	}
	if (c->state == CONN_STREAMING && !c->cur)
		want_write = next_batch(a) != NULL;
	pthread_mutex_unlock(&a->mu);

	switch (c->state) {
	case CONN_IDLE:
		if (now >= c->retry_at_ms) {
			conn_start(a);
			return now; /* state changed: look again at once */
		}
		if (c->retry_at_ms < next)
			next = c->retry_at_ms;
		*events = 0;
		return next;
	case CONN_CONNECTING:
		if (now >= c->deadline_ms) {
			conn_close(a, "timed out connecting to server", true);
			return now;
		}
		*events = POLLOUT;
		return c->deadline_ms < next ? c->deadline_ms : next;
	case CONN_HELLO:
		if (now >= c->deadline_ms) {
			conn_close(a, "timed out waiting for hello_ack", true);
			return now;
		}
		if (c->deadline_ms < next)
			next = c->deadline_ms;
		break;
	case CONN_STREAMING:
		if (!c->ctrl && !c->cur && !want_write && now - c->last_send_ms >= a->heartbeat_ms) {
			Culprit__V1__Heartbeat hb = CULPRIT__V1__HEARTBEAT__INIT;
			frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;

			hb.time_us = wall_us();
			env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HEARTBEAT;
			env.heartbeat = &hb;
			conn_queue_ctrl(a, &env);
		}
		if (c->last_send_ms + a->heartbeat_ms < next)
			next = c->last_send_ms + a->heartbeat_ms;
		break;
	}
	*events = POLLIN;
	if (c->ctrl || c->cur || want_write)
		*events |= POLLOUT;
	return next;
}

/* A closing agent leaves the loop: best-effort Goodbye, close. (network thread) */
static void conn_goodbye(struct agent *a)
{
	struct agent_conn *c = &a->c;

	if (c->fd >= 0 && c->state == CONN_STREAMING && !c->cur && !c->ctrl) {
		Culprit__V1__Goodbye g = CULPRIT__V1__GOODBYE__INIT;
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT;
		uint8_t buf[64];
		size_t n;

		g.reason = (char *)"agent closing";
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_GOODBYE;
		env.goodbye = &g;
		n = frame_pack(&env, buf);
		if (send(c->fd, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
			alog(a, AGENT_LOG_DEBUG, "could not send goodbye: %s", strerror(errno));
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->ctrl);
	c->ctrl = NULL;
	free(c->rbuf);
	c->rbuf = NULL;
}

/* ---- the loop ---- */

static void *loop_main(void *arg)
{
	struct agent_loop *l = arg;

	for (;;) {
		long long now = now_ms(), next = now + 1000;
		size_t n = 0;
		struct agent *a, **link;
		int timeout, rc;

		pthread_mutex_lock(&l->mu);
		if (l->stop) {
			pthread_mutex_unlock(&l->mu);
			break;
		}
		/* detach closing agents */
		for (link = &l->agents; (a = *link);) {
			bool closing;

			pthread_mutex_lock(&a->mu);
			closing = a->closing;
			pthread_mutex_unlock(&a->mu);
			if (closing) {
				conn_goodbye(a);
				*link = a->loop_next;
				l->n_agents--;
				pthread_mutex_lock(&a->mu);
				a->detached = true;
				pthread_mutex_unlock(&a->mu);
				pthread_cond_broadcast(&l->cv);
			} else {
				link = &a->loop_next;
			}
		}
		if (l->n_agents + 1 > l->pfd_cap) {
			size_t cap = (l->n_agents + 1) * 2;
			struct pollfd *p = realloc(l->pfd, cap * sizeof(*p));

			if (p) {
				l->pfd = p;
				l->pfd_cap = cap;
			}
		}
		l->pfd[n++] = (struct pollfd){.fd = l->wake_rd, .events = POLLIN};
		for (a = l->agents; a && n < l->pfd_cap; a = a->loop_next) {
			short ev = 0;
			long long d = conn_tick(a, now, &ev);

			if (d < next)
				next = d;
			a->c.pidx = -1;
			if (a->c.fd >= 0 && ev) {
				a->c.pidx = (int)n;
				l->pfd[n++] = (struct pollfd){.fd = a->c.fd, .events = ev};
			}
		}
		pthread_mutex_unlock(&l->mu);

		timeout = next <= now ? 0 : (int)(next - now);
		rc = poll(l->pfd, n, timeout);
		if (rc < 0 && errno != EINTR) {
			fprintf(stderr, "error: agent loop: poll failed: %s\n", strerror(errno));
			usleep(10000);
			continue;
		}
		if (rc <= 0)
			continue;
		if (l->pfd[0].revents) {
			char buf[256];

			/* drain first, then allow new wake-ups: the other order could swallow the
			 * byte of a wake-up that found the flag already cleared, leaving the flag
			 * set with an empty pipe and every later wake-up suppressed. A wake-up
			 * suppressed between the two is harmless: this pass looks at every agent. */
			while (read(l->wake_rd, buf, sizeof(buf)) > 0)
				;
			atomic_store(&l->wake_pending, false);
		}
		pthread_mutex_lock(&l->mu);
		for (a = l->agents; a; a = a->loop_next) {
			struct agent_conn *c = &a->c;
			short re;

			if (c->pidx < 0 || (size_t)c->pidx >= n || l->pfd[c->pidx].fd != c->fd)
				continue;
			re = l->pfd[c->pidx].revents;
			if (!re)
				continue;
			if (c->state == CONN_CONNECTING) {
				conn_connected(a);
				if (c->state == CONN_HELLO)
					conn_write(a);
				continue;
			}
			if (re & (POLLIN | POLLERR | POLLHUP))
				conn_read(a);
			if (c->fd >= 0 && (re & POLLOUT))
				conn_write(a);
		}
		pthread_mutex_unlock(&l->mu);
	}
	return NULL;
}

struct agent_loop *agent_loop_new(void)
{
	struct agent_loop *l = calloc(1, sizeof(*l));
	int fds[2];

	if (!l)
		return NULL;
	if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
		free(l);
		return NULL;
	}
	l->wake_rd = fds[0];
	l->wake_wr = fds[1];
	atomic_init(&l->wake_pending, false);
	pthread_mutex_init(&l->mu, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&l->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	l->pfd_cap = 64;
	l->pfd = malloc(l->pfd_cap * sizeof(*l->pfd));
	if (!l->pfd || pthread_create(&l->thr, NULL, loop_main, l) != 0) {
		free(l->pfd);
		close(fds[0]);
		close(fds[1]);
		pthread_mutex_destroy(&l->mu);
		pthread_cond_destroy(&l->cv);
		free(l);
		return NULL;
	}
	return l;
}

void agent_loop_free(struct agent_loop *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stop = true;
	pthread_mutex_unlock(&l->mu);
	atomic_store(&l->wake_pending, false);
	loop_wake(l);
	pthread_join(l->thr, NULL);
	close(l->wake_rd);
	close(l->wake_wr);
	free(l->pfd);
	pthread_mutex_destroy(&l->mu);
	pthread_cond_destroy(&l->cv);
	free(l);
}

/* ---- life cycle ---- */

static int cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;

	return a < b ? -1 : a > b;
}

/* "host:port", "host", "[v6]:port" */
static int parse_server(struct agent *a, const char *s)
{
	const char *colon, *host = s;
	size_t hlen;
	char port[16];

	if (s[0] == '[') {
		const char *end = strchr(s, ']');

		if (!end)
			return -1;
		host = s + 1;
		hlen = (size_t)(end - host);
		colon = end[1] == ':' ? end + 1 : NULL;
		if (end[1] && !colon)
			return -1;
	} else {
		colon = strrchr(s, ':');
		hlen = colon ? (size_t)(colon - s) : strlen(s);
	}
	if (hlen == 0)
		return -1;
	if (colon) {
		char *end;
		long p = strtol(colon + 1, &end, 10);

		if (*end || p <= 0 || p > 65535)
			return -1;
		snprintf(port, sizeof(port), "%ld", p);
	} else {
		snprintf(port, sizeof(port), "%d", AGENT_DEFAULT_PORT);
	}
	a->server_host = strndup(host, hlen);
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
	free(a->server_host);
	free(a->server_port);
	free(a->job);
	free(a->agent_id);
	free(a->host);
	free(a->token);
	free(a->order);
	free(a->ranks);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	free(a);
}

static bool bad_str(const char *s, size_t max)
{
	return !s || !*s || strlen(s) > max;
}

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
		a->token = strdup(cfg->token ? cfg->token : "");
		a->order = strdup(cfg->topo.order ? cfg->topo.order : "");
		a->ranks = malloc(cfg->n_ranks * sizeof(*a->ranks));
		if (!a->job || !a->host || !a->token || !a->order || !a->ranks) {
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
		alog(a, AGENT_LOG_ERROR, "invalid configuration: %s", why);
		agent_free(a);
		return NULL;
	}
	a->topo = cfg->topo;
	a->topo.order = NULL;
	a->flush_ms = cfg->flush_interval_ms ? cfg->flush_interval_ms : 200;
	a->max_records = cfg->max_batch_records ? cfg->max_batch_records : 8192;
	a->max_unacked = cfg->max_unacked_bytes ? cfg->max_unacked_bytes : (size_t)64 << 20;
	a->append_timeout = cfg->append_timeout_ms ? cfg->append_timeout_ms : 1000;
	a->backoff_min = cfg->backoff_min_ms ? cfg->backoff_min_ms : 100;
	a->backoff_max = cfg->backoff_max_ms ? cfg->backoff_max_ms : 10000;
	if (a->backoff_max < a->backoff_min)
		a->backoff_max = a->backoff_min;
	a->heartbeat_ms = cfg->heartbeat_ms ? cfg->heartbeat_ms : 10000;
	a->next_seq = 1;
	a->st.next_seq = 1;
	a->b.epoch = 1;
	a->c.rnd = (unsigned int)(now_ms() ^ (uintptr_t)a);
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
	pthread_mutex_lock(&a->loop->mu);
	a->loop_next = a->loop->agents;
	a->loop->agents = a;
	a->loop->n_agents++;
	pthread_mutex_unlock(&a->loop->mu);
	loop_wake(a->loop);
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
			pthread_mutex_unlock(&a->mu);
			return AGENT_ETIMEDOUT;
		}
	}
	target = a->sealed_total;
	loop_wake(a->loop);
	while (a->done_total < target) {
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
	struct agent_loop *l = a->loop;
	int rc;

	if (!a)
		return 0;
	rc = agent_flush(a, timeout_ms);
	pthread_mutex_lock(&a->mu);
	a->closing = true;
	if (rc == 0 && (a->head || building_records(&a->b)))
		rc = AGENT_ETIMEDOUT;
	pthread_mutex_unlock(&a->mu);
	loop_wake(l);
	pthread_mutex_lock(&l->mu);
	for (;;) {
		bool detached;

		pthread_mutex_lock(&a->mu);
		detached = a->detached;
		pthread_mutex_unlock(&a->mu);
		if (detached)
			break;
		pthread_cond_wait(&l->cv, &l->mu);
	}
	pthread_mutex_unlock(&l->mu);
	if (a->own_loop)
		agent_loop_free(l);
	agent_free(a);
	return rc;
}

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
	default: return "unknown error";
	}
}
