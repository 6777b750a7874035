/* writer.c: see writer.h.
 *
 * One thread, one connection. The thread takes a group of queued ops (up to max_txn_records
 * records), then:
 *   1. resolves, in autocommit statements (idempotent upserts, cached only once committed):
 *      job names -> job ids, batch name dictionaries -> name ids, topology of JOB ops, and the
 *      durable seq of each (job, agent) (cached; reloaded after every reconnect);
 *   2. skips batches whose seq is already durable (resends) -- reported done, not written;
 *   3. BEGIN; binary COPY steps (iterations and phases, storage/steps.c), kernels, raw_kernels; upsert agent_progress to the highest
 *      seq per (job, agent); COMMIT. A unique violation (a resend we could not tell from the
 *      cache) rolls back and redoes the group through temporary staging tables with
 *      INSERT ... ON CONFLICT DO NOTHING;
 *   4. pushes done items, frees the ops, releases their queue space, calls wake.
 * Fencing (several culpritd on one database, lease_owner set): right after BEGIN, the lease
 * row of every job the group writes for with a lease_epoch is locked FOR KEY SHARE and
 * compared; a job whose row is gone or has another owner or epoch has its ops taken out of the
 * group (reported done as STORAGE_FENCED) and the rest is redone. The lock holds until COMMIT:
 * an instance taking the lease over locks the row FOR UPDATE first (storage/lease.c), so it
 * waits for this transaction and is the only writer after it; the owner's renewals (an UPDATE
 * of expires_at only) do not wait for it.
 * Queue space is released only after the commit: the bound covers what is in flight, and
 * nothing leaves memory before it is durable. When the database goes away the group is kept
 * and retried after a reconnect with exponential backoff; the queue fills meanwhile and
 * submit refuses (backpressure). */
#include "writer.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "clock.h"
#include "connect.h"
#include "log.h"
#include "pgbuf.h"
#include "queue.h"
#include "reports.h"
#include "sketch.h"
#include "steps.h"
#include "strmap.h"

#define DEFAULT_RECONNECT_MIN_MS 100
#define DEFAULT_RECONNECT_MAX_MS 5000
#define COPY_CHUNK (256 * 1024)

/* ---- the writer ---- */

struct job_cache {
	char *name;
	int32_t id;
	struct strmap names;    /* name -> name_id */
	struct strmap progress; /* agent -> durable seq (-1: none stored) */
	struct strmap sets;     /* phase set ("name:kind:grp,...") -> phase_sets.set_id */
};

/* Per-op state during one group. */
struct op_state {
	int32_t job_id;
	struct job_cache *job;
	bool skip;         /* resend of something durable */
	bool invalid;      /* rejected for its content (or fenced) */
	bool fenced;       /* not written: the job's lease is not op->lease_epoch */
	int32_t *name_ids; /* [the producer's name id]: database id, -1 for none */
	size_t n_name_ids;
};

enum txn_result { TXN_OK, TXN_CONFLICT, TXN_RETRY, TXN_DATA, TXN_FENCED };

struct storage_writer {
	char *dsn;
	size_t queue_max, txn_max;
	void (*wake)(void *);
	void *wake_arg;
	int reconnect_min_ms, reconnect_max_ms;
	char *lease_owner; /* NULL: no fencing */

	pthread_t thread;
	struct queue q; /* ops weighing their records; capacity released after the commit */
	pthread_mutex_t mu;
	/* under mu */
	struct storage_done *done;
	size_t done_head, done_len, done_cap;
	bool stopping;
	struct timespec stop_deadline;
	uint64_t unwritten;
	struct storage_writer_stats st;

	/* writer thread only */
	PGconn *conn;
	bool staging_ready;
	bool connected_once; /* the first connection is not a reconnection */
	struct log_complaint down;
	struct job_cache **jobs;
	size_t n_jobs, cap_jobs;
	struct strmap job_index; /* name -> index in jobs */
	struct strmap group_seq; /* "job_id:agent" -> highest seq written by the current group */
	struct pgbuf copy, scratch;
	struct steps steps;
	struct pgbuf set_key;
	struct sketch quantiles; /* decodes the sketches whose p50/p99 the agent left out */
};

/* ---- connection ---- */

static void disconnect(struct storage_writer *w)
{
	if (w->conn)
		PQfinish(w->conn);
	w->conn = NULL;
	w->staging_ready = false;
	/* a commit may have succeeded without our hearing of it: reload durable seqs */
	for (size_t i = 0; i < w->n_jobs; i++)
		strmap_free(&w->jobs[i]->progress);
	pthread_mutex_lock(&w->mu);
	w->st.connected = 0;
	pthread_mutex_unlock(&w->mu);
}

/* Server notices (and the FATAL of a shutdown) go to the log, not raw to stderr. */
static void notice(void *arg, const char *message)
{
	(void)arg;
	log_debug("writer: server says: %.*s", (int)strcspn(message, "\n"), message);
}

static int connect_db(struct storage_writer *w)
{
	char msg[512];
	PGconn *c = storage_connect(w->dsn, "culprit-writer", 10, msg, sizeof msg);
	if (!c) {
		log_complain(&w->down, LOG_ERROR, "writer: could not connect to the database: %s (retrying)", msg);
		return -1;
	}
	PQsetNoticeProcessor(c, notice, NULL);
	w->conn = c;
	/* the complaint is released by the next commit, not by a connection that may fail again */
	pthread_mutex_lock(&w->mu);
	w->st.connected = 1;
	w->st.reconnects += w->connected_once;
	w->connected_once = true;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* Classifies a failed result (r may be NULL). Only errors about the content of what we send
 * are TXN_DATA (SQLSTATE classes 21 cardinality, 22 data exception, 23 integrity constraint
 * but 23514, 54 program limit): retrying cannot help. Everything else -- connection lost, server
 * shutting down, disk full, read-only after a failover, a table missing or a privilege
 * revoked (an operator can fix those) -- is retried: a batch is never dropped for it. */
static enum txn_result classify(struct storage_writer *w, PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	char msg[512];
	snprintf(msg, sizeof msg, "%s",
		 r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(w->conn));
	msg[strcspn(msg, "\n")] = '\0';
	if (state && PQstatus(w->conn) == CONNECTION_OK) {
		if (strcmp(state, "23505") == 0)
			return TXN_CONFLICT;
		/* check_violation: the writer's tables have no CHECK but their partition bounds, so
		 * this is a row routed to DEFAULT while retention attached that day's partition */
		if (strcmp(state, "23514") == 0) {
			log_warning("writer: %s: %s (partition attached meanwhile; retrying)", what, msg);
			return TXN_RETRY;
		}
		if (strncmp(state, "21", 2) == 0 || strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0 ||
		    strncmp(state, "54", 2) == 0) {
			log_error("writer: %s failed: %s [%s]", what, msg, state);
			return TXN_DATA;
		}
	}
	log_complain(&w->down, LOG_ERROR, "writer: %s failed: %s [%s] (retrying)", what, msg, state ? state : "-");
	return TXN_RETRY;
}

/* Runs a statement expecting COMMAND_OK or TUPLES_OK; returns the result or NULL (*res set). */
static PGresult *run(struct storage_writer *w, enum txn_result *res, const char *what, const char *sql, int n,
		     const char *const *params)
{
	PGresult *r = n ? PQexecParams(w->conn, sql, n, NULL, params, NULL, NULL, 0) : PQexec(w->conn, sql);
	ExecStatusType s = PQresultStatus(r);
	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
		return r;
	*res = classify(w, r, what);
	PQclear(r);
	return NULL;
}

/* ---- caches ---- */

static struct job_cache *job_get(struct storage_writer *w, const char *name, enum txn_result *res)
{
	struct strmap_entry *e = strmap_find(&w->job_index, name);
	if (e)
		return w->jobs[e->num];
	const char *p[1] = {name};
	PGresult *r = run(w, res, "job lookup",
			  "INSERT INTO jobs (name) VALUES ($1) ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name "
			  "RETURNING id",
			  1, p);
	if (!r)
		return NULL;
	int32_t id = (int32_t)atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (w->n_jobs == w->cap_jobs) {
		size_t nc = w->cap_jobs ? w->cap_jobs * 2 : 16;
		struct job_cache **nj = realloc(w->jobs, nc * sizeof *nj);
		if (!nj)
			goto oom;
		w->jobs = nj;
		w->cap_jobs = nc;
	}
	struct job_cache *j = calloc(1, sizeof *j);
	if (!j || !(j->name = strdup(name)) || strmap_put_num(&w->job_index, name, (int64_t)w->n_jobs) < 0) {
		if (j)
			free(j->name);
		free(j);
		goto oom;
	}
	j->id = id;
	w->jobs[w->n_jobs++] = j;
	return j;
oom:
	log_error("writer: out of memory caching job \"%s\"", name);
	*res = TXN_RETRY;
	return NULL;
}

/* Durable seq of (job, agent), -1 when none. -2 on failure (*res set). */
static int64_t progress_get(struct storage_writer *w, struct job_cache *j, const char *agent, enum txn_result *res)
{
	struct strmap_entry *e = strmap_find(&j->progress, agent);
	if (e)
		return e->num;
	char id[16];
	snprintf(id, sizeof id, "%" PRId32, j->id);
	const char *p[2] = {id, agent};
	PGresult *r = run(w, res, "progress lookup",
			  "SELECT durable_seq FROM agent_progress WHERE job_id = $1 AND agent = $2", 2, p);
	if (!r)
		return -2;
	int64_t v = PQntuples(r) ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : -1;
	PQclear(r);
	if (strmap_put_num(&j->progress, agent, v) < 0) {
		*res = TXN_RETRY;
		return -2;
	}
	return v;
}

/* p50/p99 the agent left to the sketch (RECORD_QUANTILES_FROM_SKETCH), read off it once. */
static void kernel_quantiles(struct storage_writer *w, struct storage_op *op)
{
	for (size_t i = 0; i < op->n_kernels; i++)
		if (op->kernels[i].p50_us == RECORD_QUANTILES_FROM_SKETCH)
			(void)record_kernel_quantiles(&op->kernels[i], &w->quantiles);
}

/* Fills st->name_ids for a batch, upserting the names the cache misses. */
static int names_resolve(struct storage_writer *w, struct storage_op *op, struct op_state *st, enum txn_result *res)
{
	struct job_cache *j = st->job;
	for (int attempt = 0;; attempt++) {
		struct pgbuf *b = &w->scratch;
		b->len = 0;
		pgbuf_put(b, "{", 1);
		size_t missing = 0;
		memset(st->name_ids, 0xff, st->n_name_ids * sizeof *st->name_ids);
		for (size_t i = 0; i < op->n_names; i++) {
			const char *nm = op->names[i] ? op->names[i] : "";
			struct strmap_entry *e = strmap_find(&j->names, nm);
			if (e) {
				st->name_ids[op->name_ids ? op->name_ids[i] : i] = (int32_t)e->num;
				continue;
			}
			if (missing++)
				pgbuf_put(b, ",", 1);
			pgbuf_array_str(b, nm);
		}
		pgbuf_put(b, "}", 2);
		if (b->failed) {
			b->failed = false;
			*res = TXN_RETRY;
			return -1;
		}
		if (missing == 0)
			return 0;
		if (attempt == 2) {
			log_error("writer: job \"%s\": could not resolve %zu names", j->name, missing);
			*res = TXN_DATA;
			return -1;
		}
		char id[16];
		snprintf(id, sizeof id, "%" PRId32, j->id);
		const char *p[2] = {id, b->p};
		PGresult *r = run(w, res, "name lookup",
				  "WITH input AS (SELECT DISTINCT unnest($2::text[]) AS name),"
				  " ins AS (INSERT INTO names (job_id, name) SELECT $1, name FROM input"
				  "  ON CONFLICT (job_id, name) DO NOTHING RETURNING name, name_id)"
				  " SELECT name, name_id FROM ins UNION ALL"
				  " SELECT n.name, n.name_id FROM names n JOIN input USING (name) WHERE n.job_id = $1",
				  2, p);
		if (!r)
			return -1;
		for (int k = 0; k < PQntuples(r); k++) {
			if (strmap_put_num(&j->names, PQgetvalue(r, k, 0), atol(PQgetvalue(r, k, 1))) < 0) {
				PQclear(r);
				*res = TXN_RETRY;
				return -1;
			}
		}
		PQclear(r);
	}
}

/* Applies a JOB op: topology and ranks (idempotent upserts, autocommit). */
static int job_apply(struct storage_writer *w, struct storage_op *op, enum txn_result *res)
{
	const struct storage_topology *t = &op->topo;
	char v[8][16];
	uint32_t nums[7] = {t->world, t->tp, t->cp, t->pp, t->dp, t->ep, t->gpus_per_node};
	for (int i = 0; i < 7; i++)
		snprintf(v[i], sizeof v[i], "%" PRIu32, nums[i]);
	char order[sizeof t->order + 1];
	memcpy(order, t->order, sizeof t->order);
	order[sizeof t->order] = '\0';
	const char *p[9] = {op->job, v[0], v[1], v[2], v[3], v[4], v[5], v[6], order};
	PGresult *r = run(w, res, "job update",
			  "INSERT INTO jobs (name, world, tp, cp, pp, dp, ep, gpus_per_node, rank_order)"
			  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (name) DO UPDATE SET"
			  " world = EXCLUDED.world, tp = EXCLUDED.tp, cp = EXCLUDED.cp, pp = EXCLUDED.pp,"
			  " dp = EXCLUDED.dp, ep = EXCLUDED.ep, gpus_per_node = EXCLUDED.gpus_per_node,"
			  " rank_order = EXCLUDED.rank_order, updated = now() RETURNING id",
			  9, p);
	if (!r)
		return -1;
	int32_t id = (int32_t)atol(PQgetvalue(r, 0, 0));
	PQclear(r);
	if (op->n_ranks == 0)
		return 0;
	/* seven arrays: rank, tp, cp, ep, dp, pp, host, NUL-separated in scratch */
	struct pgbuf *b = &w->scratch;
	b->len = 0;
	size_t off[7];
	for (int col = 0; col < 7; col++) {
		off[col] = b->len;
		pgbuf_put(b, "{", 1);
		for (size_t i = 0; i < op->n_ranks; i++) {
			const struct storage_rank *rk = &op->ranks[i];
			if (i)
				pgbuf_put(b, ",", 1);
			uint32_t x = col == 0   ? rk->rank
				     : col == 1 ? rk->tp
				     : col == 2 ? rk->cp
				     : col == 3 ? rk->ep
				     : col == 4 ? rk->dp
						: rk->pp;
			if (col == 6)
				pgbuf_array_str(b, rk->host ? rk->host : "");
			else
				pgbuf_printf(b, "%" PRIu32, x);
		}
		pgbuf_put(b, "}", 2);
	}
	if (b->failed) {
		b->failed = false;
		*res = TXN_RETRY;
		return -1;
	}
	char idb[16];
	snprintf(idb, sizeof idb, "%" PRId32, id);
	const char *q[8] = {idb};
	for (int col = 0; col < 7; col++)
		q[col + 1] = b->p + off[col];
	r = run(w, res, "ranks update",
		"INSERT INTO ranks (job_id, rank, tp, cp, ep, dp, pp, host)"
		" SELECT $1, * FROM unnest($2::int[], $3::int[], $4::int[], $5::int[], $6::int[], $7::int[], "
		"$8::text[])"
		" ON CONFLICT (job_id, rank) DO UPDATE SET tp = EXCLUDED.tp, cp = EXCLUDED.cp, ep = EXCLUDED.ep,"
		" dp = EXCLUDED.dp, pp = EXCLUDED.pp, host = EXCLUDED.host",
		8, q);
	if (!r)
		return -1;
	PQclear(r);
	return 0;
}

/* Checks a batch's content against what the database would reject late. */
static const char *batch_invalid(const struct storage_op *op)
{
	if (op->n_phases && !op->phase_iter_start_us)
		return "phases without phase_iter_start_us";
	if (op->n_kernels && !op->kernel_iter_start_us)
		return "kernels without kernel_iter_start_us";
	if (!op->agent)
		return "no agent";
	return NULL;
}

/* A record whose name id is none of the batch's names (after names_resolve). */
static const char *names_missing(const struct storage_op *op, const struct op_state *st)
{
#define UNNAMED(r) ((r).name >= st->n_name_ids || st->name_ids[(r).name] < 0)
	for (size_t i = 0; i < op->n_phases; i++)
		if (UNNAMED(op->phases[i]))
			return "phase name id not among the batch's names";
	for (size_t i = 0; i < op->n_kernels; i++)
		if (UNNAMED(op->kernels[i]))
			return "kernel name id not among the batch's names";
	for (size_t i = 0; i < op->n_raw_kernels; i++)
		if (UNNAMED(op->raw_kernels[i]))
			return "raw kernel name id not among the batch's names";
#undef UNNAMED
	return NULL;
}

/* ---- phase sets (the phases of a row of steps, stored once in phase_sets) ---- */

struct set_ctx {
	struct storage_writer *w;
	struct job_cache *j;
	enum txn_result res;
};

/* The cache key of a set in w->set_key, NUL-terminated; NULL when out of memory. */
static const char *set_key(struct storage_writer *w, const struct steps_set *set)
{
	struct pgbuf *b = &w->set_key;
	pgbuf_reset(b);
	for (size_t i = 0; i < set->n; i++)
		pgbuf_printf(b, "%" PRId32 ":%d:%d,", set->names[i], set->kinds[i], set->grps[i]);
	pgbuf_put(b, "", 1);
	return b->failed ? NULL : b->p;
}

static int64_t set_find(void *arg, const struct steps_set *set)
{
	struct set_ctx *c = arg;
	const char *key = set_key(c->w, set);
	const struct strmap_entry *e = key ? strmap_find(&c->j->sets, key) : NULL;
	return e ? e->num : -1;
}

/* Finds or stores (autocommit, idempotent) a set's id. */
static int64_t set_resolve(void *arg, const struct steps_set *set)
{
	struct set_ctx *c = arg;
	struct storage_writer *w = c->w;
	int64_t id = set_find(arg, set);
	if (id >= 0)
		return id;
	struct pgbuf *b = &w->scratch;
	size_t off[3];
	pgbuf_reset(b);
	for (int col = 0; col < 3; col++) {
		off[col] = b->len;
		pgbuf_put(b, "{", 1);
		for (size_t i = 0; i < set->n; i++)
			pgbuf_printf(b, "%s%d", i ? "," : "",
				     col == 0   ? (int)set->names[i]
				     : col == 1 ? set->kinds[i]
						: set->grps[i]);
		pgbuf_put(b, "}", 2);
	}
	const char *key = set_key(w, set);
	if (b->failed || !key) {
		c->res = TXN_RETRY;
		return -1;
	}
	char jid[16];
	snprintf(jid, sizeof jid, "%" PRId32, c->j->id);
	const char *p[4] = {jid, b->p + off[0], b->p + off[1], b->p + off[2]};
	PGresult *r =
		run(w, &c->res, "phase set lookup",
		    "INSERT INTO phase_sets (job_id, names, kinds, grps) VALUES ($1, $2, $3, $4)"
		    " ON CONFLICT (job_id, names, kinds, grps) DO UPDATE SET job_id = EXCLUDED.job_id RETURNING set_id",
		    4, p);
	if (!r)
		return -1;
	id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	if (strmap_put_num(&c->j->sets, key, id) < 0) {
		c->res = TXN_RETRY;
		return -1;
	}
	return id;
}

/* ---- COPY ---- */

static int copy_flush(struct storage_writer *w, bool all)
{
	struct pgbuf *b = &w->copy;
	if (b->failed)
		return -1;
	if (b->len == 0 || (!all && b->len < COPY_CHUNK))
		return 0;
	if (PQputCopyData(w->conn, b->p, (int)b->len) != 1)
		return -1;
	b->len = 0;
	return 0;
}

enum table { T_STEP, T_KERNEL, T_RAW, T_COUNT };
static const char *const table_names[] = {"steps", "kernels", "raw_kernels"};
static const char *const table_cols[] = {
	STEPS_COLUMNS,
	"job_id, rank, iter, name_id, ts, kind, count, sum_us, min_us, max_us, p50_us, p99_us, sketch",
	"job_id, rank, iter, name_id, ts, kind, dur_us, stream, nth",
};

static size_t table_rows(enum table t, const struct storage_op *op)
{
	return t == T_STEP ? op->n_iters + op->n_phases : t == T_KERNEL ? op->n_kernels : op->n_raw_kernels;
}

/* A raw kernel's place among those of its batch with the same key but nth (migration 011):
 * sorted by that key, ties in batch order. */
struct raw_key {
	const struct record_raw_kernel *k;
	uint32_t i;
};

static int raw_key_cmp(const void *pa, const void *pb)
{
	const struct raw_key *a = pa, *b = pb;
	const struct record_raw_kernel *x = a->k, *y = b->k;
	if (x->rank != y->rank)
		return x->rank < y->rank ? -1 : 1;
	if (x->iter != y->iter)
		return x->iter < y->iter ? -1 : 1;
	if (x->stream != y->stream)
		return x->stream < y->stream ? -1 : 1;
	if (x->start_us != y->start_us)
		return x->start_us < y->start_us ? -1 : 1;
	if (x->name != y->name)
		return x->name < y->name ? -1 : 1;
	return a->i < b->i ? -1 : a->i > b->i;
}

/* nth of each raw kernel of op: how many before it in the batch have its rank, iteration,
 * stream, start and name (0 for the first); NULL when out of memory */
static uint32_t *raw_nth(const struct storage_op *op)
{
	size_t n = op->n_raw_kernels;
	struct raw_key *x = malloc((n ? n : 1) * sizeof(*x));
	uint32_t *nth = malloc((n ? n : 1) * sizeof(*nth));
	if (!x || !nth) {
		free(x);
		free(nth);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		x[i] = (struct raw_key){&op->raw_kernels[i], (uint32_t)i};
	qsort(x, n, sizeof(*x), raw_key_cmp);
	for (size_t i = 0; i < n; i++) {
		struct raw_key prev = {i ? x[i - 1].k : NULL, x[i].i}; /* the key before, as if this one */
		nth[x[i].i] = i && raw_key_cmp(&prev, &x[i]) == 0 ? nth[x[i - 1].i] + 1 : 0;
	}
	free(x);
	return nth;
}

static void copy_row(struct pgbuf *b, enum table t, const struct storage_op *op, const struct op_state *st, size_t i,
		     const uint32_t *nth)
{
	if (t == T_RAW) {
		const struct record_raw_kernel *k = &op->raw_kernels[i];
		pgbuf_copy_tuple(b, 9);
		pgbuf_copy_int4(b, (int32_t)st->job_id);
		pgbuf_copy_int4(b, (int32_t)k->rank);
		pgbuf_copy_int4(b, (int32_t)k->iter);
		pgbuf_copy_int4(b, (int32_t)st->name_ids[k->name]);
		pgbuf_copy_timestamptz(b, k->start_us);
		pgbuf_copy_int2(b, (int16_t)k->kind);
		pgbuf_copy_int8(b, k->dur_us);
		pgbuf_copy_int4(b, (int32_t)k->stream);
		pgbuf_copy_int4(b, (int32_t)nth[i]);
	} else {
		const struct record_kernel *k = &op->kernels[i];
		pgbuf_copy_tuple(b, 13);
		pgbuf_copy_int4(b, (int32_t)st->job_id);
		pgbuf_copy_int4(b, (int32_t)k->rank);
		pgbuf_copy_int4(b, (int32_t)k->iter);
		pgbuf_copy_int4(b, (int32_t)st->name_ids[k->name]);
		pgbuf_copy_timestamptz(b, op->kernel_iter_start_us[i]);
		pgbuf_copy_int2(b, (int16_t)k->kind);
		pgbuf_copy_int4(b, (int32_t)k->count);
		pgbuf_copy_int8(b, k->sum_us);
		pgbuf_copy_int8(b, k->min_us);
		pgbuf_copy_int8(b, k->max_us);
		pgbuf_copy_int8(b, k->p50_us);
		pgbuf_copy_int8(b, k->p99_us);
		if (k->sketch && k->sketch_len) {
			pgbuf_copy_bytea(b, k->sketch, k->sketch_len);
		} else {
			pgbuf_copy_null(b);
		}
	}
}

/* COPYs one table's rows of the group into target (the table or its staging table). */
static enum txn_result copy_table(struct storage_writer *w, enum table t, const char *target, struct storage_op **ops,
				  struct op_state *sts, size_t n)
{
	size_t rows = 0;
	for (size_t i = 0; i < n; i++) {
		if (sts[i].skip || sts[i].invalid || ops[i]->type != STORAGE_OP_BATCH)
			continue;
		rows += table_rows(t, ops[i]);
	}
	if (rows == 0)
		return TXN_OK;
	char sql[256];
	snprintf(sql, sizeof sql, "COPY %s (%s) FROM STDIN (FORMAT binary)", target, table_cols[t]);
	PGresult *r = PQexec(w->conn, sql);
	if (PQresultStatus(r) != PGRES_COPY_IN) {
		enum txn_result res = classify(w, r, "copy");
		PQclear(r);
		return res;
	}
	PQclear(r);
	struct pgbuf *b = &w->copy;
	pgbuf_reset(b);
	pgbuf_copy_header(b);
	int ok = 0;
	for (size_t i = 0; i < n && ok == 0; i++) {
		const struct storage_op *op = ops[i];
		if (sts[i].skip || sts[i].invalid || op->type != STORAGE_OP_BATCH)
			continue;
		if (t == T_STEP) {
			struct set_ctx c = {w, sts[i].job, TXN_OK};
			if (steps_copy(&w->steps, b, op, sts[i].job_id, sts[i].name_ids, sts[i].n_name_ids, set_find,
				       &c) < 0)
				b->failed = true; /* out of memory (every set was resolved) */
			ok = copy_flush(w, false);
			continue;
		}
		size_t m = table_rows(t, op);
		uint32_t *nth = t == T_RAW ? raw_nth(op) : NULL;
		if (t == T_RAW && !nth) {
			b->failed = true;
			ok = -1;
			break;
		}
		for (size_t k = 0; k < m && ok == 0; k++) {
			copy_row(b, t, op, &sts[i], k, nth);
			ok = copy_flush(w, false);
		}
		free(nth);
	}
	pgbuf_copy_trailer(b);
	if (ok == 0)
		ok = copy_flush(w, true);
	if (ok < 0 && b->failed)
		log_error("writer: out of memory building COPY data");
	PQputCopyEnd(w->conn, ok < 0 ? "culprit writer: could not send COPY data" : NULL);
	enum txn_result res = TXN_OK;
	while ((r = PQgetResult(w->conn)) != NULL) {
		if (res == TXN_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
			res = classify(w, r, table_names[t]);
		PQclear(r);
	}
	if (res == TXN_OK && ok < 0)
		res = TXN_RETRY;
	b->failed = false;
	return res;
}

/* Highest seq per (job, agent) among the written batches of the group (w->group_seq). */
static enum txn_result progress_upsert(struct storage_writer *w)
{
	struct pgbuf *b = &w->scratch;
	b->len = 0;
	size_t off[3], count = 0;
	for (int col = 0; col < 3; col++) {
		off[col] = b->len;
		pgbuf_put(b, "{", 1);
		count = 0;
		for (size_t i = 0; i < w->group_seq.cap; i++) {
			const struct strmap_entry *e = &w->group_seq.slots[i];
			if (!e->key)
				continue;
			const char *colon = strchr(e->key, ':');
			if (count++)
				pgbuf_put(b, ",", 1);
			if (col == 0)
				pgbuf_put(b, e->key, (size_t)(colon - e->key));
			else if (col == 1)
				pgbuf_array_str(b, colon + 1);
			else
				pgbuf_printf(b, "%" PRId64, e->num);
		}
		pgbuf_put(b, "}", 2);
	}
	if (count == 0)
		return TXN_OK;
	if (b->failed) {
		b->failed = false;
		return TXN_RETRY;
	}
	const char *p[3] = {b->p + off[0], b->p + off[1], b->p + off[2]};
	enum txn_result res = TXN_OK;
	PGresult *r = run(w, &res, "progress update",
			  "INSERT INTO agent_progress (job_id, agent, durable_seq)"
			  " SELECT * FROM unnest($1::int[], $2::text[], $3::bigint[])"
			  " ON CONFLICT (job_id, agent) DO UPDATE SET"
			  " durable_seq = GREATEST(agent_progress.durable_seq, EXCLUDED.durable_seq), updated = now()",
			  3, p);
	if (!r)
		return res;
	PQclear(r);
	return TXN_OK;
}

static enum txn_result ensure_staging(struct storage_writer *w)
{
	if (w->staging_ready)
		return TXN_OK;
	enum txn_result res = TXN_OK;
	PGresult *r = run(w, &res, "staging tables",
			  "SET client_min_messages = warning;"
			  "CREATE TEMP TABLE IF NOT EXISTS stage_steps (LIKE steps) ON COMMIT DELETE ROWS;"
			  "CREATE TEMP TABLE IF NOT EXISTS stage_kernels (LIKE kernels) ON COMMIT DELETE ROWS;"
			  "CREATE TEMP TABLE IF NOT EXISTS stage_raw_kernels (LIKE raw_kernels) ON COMMIT DELETE ROWS;"
			  "RESET client_min_messages",
			  0, NULL);
	if (!r)
		return res;
	PQclear(r);
	w->staging_ready = true;
	return TXN_OK;
}

/* Phase 1 for the whole group (autocommit). */
static enum txn_result resolve(struct storage_writer *w, struct storage_op **ops, struct op_state *sts, size_t n)
{
	enum txn_result res = TXN_OK;
	strmap_free(&w->group_seq);
	for (size_t i = 0; i < n; i++) {
		struct storage_op *op = ops[i];
		struct op_state *st = &sts[i];
		if (st->invalid)
			continue;
		if (!op->job || !op->job[0]) {
			log_error("writer: op without a job name rejected");
			st->invalid = true;
			continue;
		}
		if (op->type == STORAGE_OP_JOB) {
			if (job_apply(w, op, &res) < 0) {
				if (res != TXN_DATA)
					return res;
				st->invalid = true; /* logged by classify */
			}
			continue;
		}
		if (op->type == STORAGE_OP_REPORT) {
			st->job = job_get(w, op->job, &res);
			if (!st->job)
				return res;
			st->job_id = st->job->id;
			continue;
		}
		const char *why = batch_invalid(op);
		if (why) {
			log_error("writer: job \"%s\" agent \"%s\" seq %" PRIu64 ": batch rejected: %s", op->job,
				  op->agent ? op->agent : "", op->seq, why);
			st->invalid = true;
			continue;
		}
		st->job = job_get(w, op->job, &res);
		if (!st->job)
			return res == TXN_DATA ? TXN_DATA : res;
		st->job_id = st->job->id;
		int64_t durable = progress_get(w, st->job, op->agent, &res);
		if (durable == -2)
			return res;
		/* a resend of something durable, or of an earlier op of this very group */
		char key[160];
		snprintf(key, sizeof key, "%" PRId32 ":%s", st->job_id, op->agent);
		struct strmap_entry *g = strmap_find(&w->group_seq, key);
		st->skip = (durable >= 0 && op->seq <= (uint64_t)durable) || (g && op->seq <= (uint64_t)g->num);
		if (st->skip)
			continue;
		kernel_quantiles(w, op);
		if (op->n_names > 0) {
			if (!st->name_ids) {
				for (size_t k = 0; k < op->n_names; k++) {
					size_t id = op->name_ids ? op->name_ids[k] : k;
					st->n_name_ids = id >= st->n_name_ids ? id + 1 : st->n_name_ids;
				}
				st->name_ids = malloc(st->n_name_ids * sizeof *st->name_ids);
				if (!st->name_ids)
					return TXN_RETRY;
			}
			if (names_resolve(w, op, st, &res) < 0) {
				if (res != TXN_DATA)
					return res;
				log_error("writer: job \"%s\" agent \"%s\" seq %" PRIu64
					  ": batch rejected: its names were refused",
					  op->job, op->agent, op->seq);
				st->invalid = true;
				continue;
			}
		}
		if ((why = names_missing(op, st))) {
			log_error("writer: job \"%s\" agent \"%s\" seq %" PRIu64 ": batch rejected: %s", op->job,
				  op->agent, op->seq, why);
			st->invalid = true;
			continue;
		}
		struct set_ctx c = {w, st->job, TXN_RETRY};
		if (steps_copy(&w->steps, NULL, op, st->job_id, st->name_ids, st->n_name_ids, set_resolve, &c) < 0) {
			if (c.res != TXN_DATA)
				return c.res;
			st->invalid = true; /* logged by classify */
			continue;
		}
		if (strmap_put_num(&w->group_seq, key, (int64_t)op->seq) < 0)
			return TXN_RETRY;
	}
	return TXN_OK;
}

/* Fencing (in the transaction): TXN_FENCED with the ops of the jobs whose lease is not
 * their epoch marked fenced, TXN_OK when every job is still ours. */
static enum txn_result fence(struct storage_writer *w, struct storage_op **ops, struct op_state *sts, size_t n)
{
	enum txn_result res = TXN_OK;
	bool fenced = false;

	for (size_t i = 0; i < n; i++) {
		char epoch[24];
		bool checked = false;

		if (!ops[i]->lease_epoch || sts[i].invalid || sts[i].skip || ops[i]->type == STORAGE_OP_JOB)
			continue;
		for (size_t k = 0; k < i && !checked; k++) /* once per job (groups are small) */
			checked = ops[k]->lease_epoch && !sts[k].skip && ops[k]->type != STORAGE_OP_JOB &&
				  ops[k]->lease_epoch == ops[i]->lease_epoch && strcmp(ops[k]->job, ops[i]->job) == 0 &&
				  !sts[k].invalid;
		if (checked)
			continue;
		const char *params[2] = {ops[i]->job, w->lease_owner};
		PGresult *r =
			run(w, &res, "lease check",
			    "SELECT epoch FROM job_leases WHERE job = $1 AND owner = $2 FOR KEY SHARE", 2, params);
		if (!r)
			return res;
		snprintf(epoch, sizeof epoch, "%" PRIu64, ops[i]->lease_epoch);
		bool ours = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), epoch) == 0;
		PQclear(r);
		if (ours)
			continue;
		log_warning(
			"writer: job \"%s\": lease epoch %s is no longer this instance's; its records are not written",
			ops[i]->job, epoch);
		for (size_t k = i; k < n; k++) {
			if (ops[k]->type != STORAGE_OP_JOB && !sts[k].invalid && !sts[k].skip &&
			    strcmp(ops[k]->job, ops[i]->job) == 0)
				sts[k].invalid = sts[k].fenced = fenced = true;
		}
	}
	return fenced ? TXN_FENCED : TXN_OK;
}

/* One attempt at the group's transaction. */
static enum txn_result write_txn(struct storage_writer *w, struct storage_op **ops, struct op_state *sts, size_t n,
				 bool staged)
{
	enum txn_result res = TXN_OK;
	if (staged && (res = ensure_staging(w)) != TXN_OK)
		return res;
	PGresult *r = run(w, &res, "begin", "BEGIN", 0, NULL);
	if (!r)
		return res;
	PQclear(r);
	if (w->lease_owner)
		res = fence(w, ops, sts, n);
	for (int t = 0; t < T_COUNT && res == TXN_OK; t++) {
		char target[32];
		snprintf(target, sizeof target, "%s%s", staged ? "stage_" : "", table_names[t]);
		res = copy_table(w, (enum table)t, target, ops, sts, n);
		if (res == TXN_OK && staged) {
			char sql[256];
			snprintf(sql, sizeof sql, "INSERT INTO %s SELECT * FROM stage_%s ON CONFLICT DO NOTHING",
				 table_names[t], table_names[t]);
			r = run(w, &res, "insert from staging", sql, 0, NULL);
			if (r)
				PQclear(r);
		}
	}
	for (size_t i = 0; i < n && res == TXN_OK; i++) {
		if (ops[i]->type != STORAGE_OP_REPORT || sts[i].invalid)
			continue;
		const char *what = "report";
		r = storage_report_write(w->conn, sts[i].job_id, ops[i], &what);
		if (r) {
			res = classify(w, r, what);
			PQclear(r);
		}
	}
	if (res == TXN_OK)
		res = progress_upsert(w);
	if (res == TXN_OK) {
		r = run(w, &res, "commit", "COMMIT", 0, NULL);
		if (r) {
			/* COMMIT of a failed transaction answers ROLLBACK */
			if (strcmp(PQcmdStatus(r), "COMMIT") != 0)
				res = TXN_RETRY;
			PQclear(r);
		}
		return res;
	}
	if (PQstatus(w->conn) == CONNECTION_OK)
		PQclear(PQexec(w->conn, "ROLLBACK"));
	return res;
}

static void backoff_wait(struct storage_writer *w, int *delay_ms)
{
	queue_wait_closed(&w->q, *delay_ms);
	*delay_ms *= 2;
	if (*delay_ms > w->reconnect_max_ms)
		*delay_ms = w->reconnect_max_ms;
}

static bool give_up(struct storage_writer *w)
{
	pthread_mutex_lock(&w->mu);
	bool g = w->stopping && clock_mono_passed(&w->stop_deadline);
	pthread_mutex_unlock(&w->mu);
	return g;
}

static void push_done(struct storage_writer *w, const struct storage_op *op, int failed)
{
	if (w->done_len == w->done_cap || w->done_head + w->done_len == w->done_cap) {
		if (w->done_head > 0) {
			memmove(w->done, w->done + w->done_head, w->done_len * sizeof *w->done);
			w->done_head = 0;
		}
		if (w->done_len == w->done_cap) {
			size_t nc = w->done_cap ? w->done_cap * 2 : 256;
			struct storage_done *nd = realloc(w->done, nc * sizeof *nd);
			if (!nd) {
				log_error("writer: out of memory: done notification for job \"%s\" seq %" PRIu64
					  " lost",
					  op->job, op->seq);
				return;
			}
			w->done = nd;
			w->done_cap = nc;
		}
	}
	struct storage_done *d = &w->done[w->done_head + w->done_len++];
	memset(d, 0, sizeof *d);
	d->source = op->source;
	snprintf(d->job, sizeof d->job, "%s", op->job ? op->job : "");
	snprintf(d->agent, sizeof d->agent, "%s", op->agent ? op->agent : "");
	d->seq = op->seq;
	d->failed = failed;
}

/* Releases a finished group: done items, caches, queue space, stats, wake. */
static void finish(struct storage_writer *w, struct storage_op **ops, struct op_state *sts, size_t n, bool committed,
		   bool staged)
{
	if (committed) {
		for (size_t i = 0; i < n; i++) {
			if (ops[i]->type != STORAGE_OP_BATCH || sts[i].skip || sts[i].invalid)
				continue;
			struct strmap_entry *e = strmap_find(&sts[i].job->progress, ops[i]->agent);
			if (!e || e->num < (int64_t)ops[i]->seq)
				/* out of memory: a resend of the batch meets the database's keys instead */
				IGNORE_RESULT(strmap_put_num(&sts[i].job->progress, ops[i]->agent, (int64_t)ops[i]->seq));
		}
	}
	size_t records = 0, written = 0;
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < n; i++) {
		size_t rec = storage_op_records(ops[i]);
		records += rec;
		if (ops[i]->type == STORAGE_OP_BATCH) {
			push_done(w, ops[i], sts[i].fenced ? STORAGE_FENCED : sts[i].invalid);
			if (sts[i].fenced)
				w->st.fenced_batches++;
			else if (sts[i].invalid)
				w->st.failed_batches++;
			else if (sts[i].skip)
				w->st.skipped_batches++;
			else
				written +=
					ops[i]->n_iters + ops[i]->n_phases + ops[i]->n_kernels + ops[i]->n_raw_kernels;
		}
	}
	w->st.committed_records += written;
	if (committed)
		w->st.committed_txns++;
	if (staged)
		w->st.conflicts++;
	pthread_mutex_unlock(&w->mu);
	queue_release(&w->q, records, n);
	for (size_t i = 0; i < n; i++) {
		if (committed && ops[i]->type == STORAGE_OP_REPORT && !sts[i].invalid && ops[i]->durable)
			ops[i]->durable(ops[i]->durable_arg);
		free(sts[i].name_ids);
		storage_op_free(ops[i]);
	}
	if (w->wake)
		w->wake(w->wake_arg);
}

/* Writes a group until it is durable, rejected, or the stop deadline passed (returns -1). */
static int write_group(struct storage_writer *w, struct storage_op **ops, size_t n);

static void set_busy(struct storage_writer *w, int64_t since_ms)
{
	pthread_mutex_lock(&w->mu);
	w->st.busy_since_ms = since_ms;
	pthread_mutex_unlock(&w->mu);
}

/* Writes a group; while it does, the stats say since when (a writer that waits on a hung
 * server shows how long). */
static int process(struct storage_writer *w, struct storage_op **ops, size_t n)
{
	int rc;

	set_busy(w, clock_mono_ms());
	rc = write_group(w, ops, n);
	set_busy(w, 0);
	return rc;
}

static int write_group(struct storage_writer *w, struct storage_op **ops, size_t n)
{
	struct op_state *sts;
	while ((sts = calloc(n, sizeof *sts)) == NULL) {
		log_error("writer: out of memory");
		if (give_up(w)) {
			for (size_t i = 0; i < n; i++)
				storage_op_free(ops[i]);
			return -1;
		}
		struct timespec ts = {0, 100000000L};
		nanosleep(&ts, NULL);
	}
	int delay = w->reconnect_min_ms;
	bool staged = false;
	for (;;) {
		if (!w->conn) {
			if (connect_db(w) < 0) {
				if (give_up(w))
					goto fail;
				backoff_wait(w, &delay);
				continue;
			}
		}
		enum txn_result res = resolve(w, ops, sts, n);
		if (res == TXN_OK)
			res = write_txn(w, ops, sts, n, staged);
		if (res == TXN_OK) {
			log_release(&w->down, LOG_INFO, "writer: writing to the database again");
			finish(w, ops, sts, n, true, staged);
			free(sts);
			return 0;
		}
		if (res == TXN_FENCED)
			continue; /* the group again without the fenced ops */
		if (res == TXN_CONFLICT && !staged) {
			staged = true;
			continue;
		}
		if (res == TXN_RETRY || res == TXN_CONFLICT) {
			/* a fresh session: the server may have ended this one (admin shutdown) before
			 * libpq noticed, and the durable seqs are reloaded */
			disconnect(w);
			if (give_up(w))
				goto fail;
			backoff_wait(w, &delay);
			continue;
		}
		/* TXN_DATA: the content of some op is refused. Alone, it is rejected; in a group, each
		 * op is written on its own to find it. */
		if (n == 1) {
			sts[0].invalid = true;
			log_error("writer: job \"%s\" agent \"%s\" seq %" PRIu64 ": batch rejected by the database",
				  ops[0]->job ? ops[0]->job : "", ops[0]->agent ? ops[0]->agent : "", ops[0]->seq);
			finish(w, ops, sts, n, false, false);
			free(sts);
			return 0;
		}
		for (size_t i = 0; i < n; i++)
			free(sts[i].name_ids);
		free(sts);
		for (size_t i = 0; i < n; i++) {
			if (write_group(w, &ops[i], 1) < 0) {
				for (size_t k = i + 1; k < n; k++)
					storage_op_free(ops[k]);
				return -1;
			}
		}
		return 0;
	}
fail:
	/* given up (stopping, database unreachable): the ops are dropped; the queue keeps
	 * counting their records so that stop can say how many records were not written */
	for (size_t i = 0; i < n; i++) {
		free(sts[i].name_ids);
		storage_op_free(ops[i]);
	}
	free(sts);
	return -1;
}

static void *writer_main(void *arg)
{
	struct storage_writer *w = arg;
	struct storage_op **group = NULL;
	size_t group_cap = 0;
	int idle_delay = w->reconnect_min_ms;
	for (;;) {
		/* connected before the first records (at start, or after a failure while idle), so
		 * that /readyz and the metrics tell the truth on an idle culpritd */
		while (!w->conn && queue_idle(&w->q) && connect_db(w) < 0)
			backoff_wait(w, &idle_delay);
		idle_delay = w->reconnect_min_ms;
		/* stopping: drain until the deadline (or the queue is empty), then leave the rest
		 * unwritten */
		if (give_up(w))
			break;
		struct queue_item *it = queue_take(&w->q, w->txn_max, true);
		if (!it)
			break;
		size_t n = 0;
		while (it) {
			if (n == group_cap) {
				size_t nc = group_cap ? group_cap * 2 : 64;
				struct storage_op **ng;
				while ((ng = realloc(group, nc * sizeof *ng)) == NULL) {
					log_error("writer: out of memory");
					struct timespec ts = {0, 100000000L};
					nanosleep(&ts, NULL);
				}
				group = ng;
				group_cap = nc;
			}
			group[n++] = queue_entry(it, struct storage_op, link);
			it = it->next;
		}
		if (process(w, group, n) < 0)
			break; /* stopping with the database unreachable */
	}
	free(group);
	/* Whatever is still queued or in flight was not written (the queue counts both). */
	struct queue_item *it = queue_drain(&w->q);
	size_t unwritten;
	queue_count(&w->q, &unwritten, NULL);
	w->unwritten = unwritten;
	while (it) {
		struct queue_item *next = it->next;
		storage_op_free(queue_entry(it, struct storage_op, link));
		it = next;
	}
	return NULL;
}

struct storage_writer *storage_writer_start(const struct storage_writer_config *cfg)
{
	struct storage_writer *w = calloc(1, sizeof *w);
	if (!w)
		return NULL;
	w->dsn = strdup(cfg->dsn ? cfg->dsn : "");
	w->lease_owner = cfg->lease_owner ? strdup(cfg->lease_owner) : NULL;
	sketch_init(&w->quantiles);
	w->queue_max = cfg->queue_max_records ? cfg->queue_max_records : 1000000;
	w->txn_max = cfg->max_txn_records ? cfg->max_txn_records : 50000;
	w->wake = cfg->wake;
	w->wake_arg = cfg->wake_arg;
	w->reconnect_min_ms = cfg->reconnect_min_ms > 0 ? cfg->reconnect_min_ms : DEFAULT_RECONNECT_MIN_MS;
	w->reconnect_max_ms = cfg->reconnect_max_ms > 0 ? cfg->reconnect_max_ms : DEFAULT_RECONNECT_MAX_MS;
	if (w->reconnect_max_ms < w->reconnect_min_ms)
		w->reconnect_max_ms = w->reconnect_min_ms;
	if (!w->dsn || (cfg->lease_owner && !w->lease_owner) || queue_init(&w->q, w->queue_max, NULL, NULL) != 0) {
		free(w->dsn);
		free(w->lease_owner);
		free(w);
		return NULL;
	}
	if (pthread_mutex_init(&w->mu, NULL) != 0) {
		queue_destroy(&w->q);
		free(w->dsn);
		free(w->lease_owner);
		free(w);
		return NULL;
	}
	if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
		log_error("writer: could not start the writer thread: %s", strerror(errno));
		queue_destroy(&w->q);
		pthread_mutex_destroy(&w->mu);
		free(w->dsn);
		free(w->lease_owner);
		free(w);
		return NULL;
	}
	return w;
}

uint64_t storage_writer_stop(struct storage_writer *w, int timeout_ms)
{
	if (!w)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	w->stop_deadline = clock_mono_after(timeout_ms > 0 ? timeout_ms : 0);
	pthread_mutex_unlock(&w->mu);
	queue_close(&w->q, true);
	pthread_join(w->thread, NULL);
	uint64_t unwritten = w->unwritten;
	if (unwritten)
		log_error("writer: stopped with %" PRIu64 " records not written", unwritten);
	if (w->conn)
		PQfinish(w->conn);
	for (size_t i = 0; i < w->n_jobs; i++) {
		strmap_free(&w->jobs[i]->names);
		strmap_free(&w->jobs[i]->progress);
		strmap_free(&w->jobs[i]->sets);
		free(w->jobs[i]->name);
		free(w->jobs[i]);
	}
	free(w->jobs);
	strmap_free(&w->job_index);
	strmap_free(&w->group_seq);
	pgbuf_free(&w->copy);
	pgbuf_free(&w->scratch);
	steps_free(&w->steps);
	pgbuf_free(&w->set_key);
	sketch_free(&w->quantiles);
	free(w->done);
	queue_destroy(&w->q);
	pthread_mutex_destroy(&w->mu);
	free(w->dsn);
	free(w->lease_owner);
	free(w);
	return unwritten;
}

int storage_writer_submit(struct storage_writer *w, struct storage_op *op)
{
	if (queue_push(&w->q, &op->link, storage_op_records(op)) == 0)
		return 0;
	pthread_mutex_lock(&w->mu);
	w->st.refused_full++;
	pthread_mutex_unlock(&w->mu);
	return -1;
}

size_t storage_writer_take_done(struct storage_writer *w, struct storage_done *out, size_t max)
{
	pthread_mutex_lock(&w->mu);
	size_t n = w->done_len < max ? w->done_len : max;
	if (n > 0)
		memcpy(out, w->done + w->done_head, n * sizeof *out);
	w->done_head += n;
	w->done_len -= n;
	if (w->done_len == 0)
		w->done_head = 0;
	pthread_mutex_unlock(&w->mu);
	return n;
}

void storage_writer_stats(struct storage_writer *w, struct storage_writer_stats *out)
{
	size_t records, ops;
	queue_count(&w->q, &records, &ops);
	pthread_mutex_lock(&w->mu);
	*out = w->st;
	pthread_mutex_unlock(&w->mu);
	out->queued_records = records;
	out->queued_ops = ops;
}

int storage_progress_load(const char *dsn, void (*cb)(const char *, const char *, uint64_t, void *), void *arg,
			  char *err, size_t err_size)
{
	PGconn *c = PQconnectdb(dsn);
	if (PQstatus(c) != CONNECTION_OK) {
		snprintf(err, err_size, "could not connect to the database: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQfinish(c);
		return -1;
	}
	PGresult *r = PQexec(c, "SELECT j.name, p.agent, p.durable_seq FROM agent_progress p"
				" JOIN jobs j ON j.id = p.job_id ORDER BY j.name, p.agent");
	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		snprintf(err, err_size, "could not read agent progress: %s", PQerrorMessage(c));
		err[strcspn(err, "\n")] = '\0';
		PQclear(r);
		PQfinish(c);
		return -1;
	}
	for (int i = 0; i < PQntuples(r); i++)
		cb(PQgetvalue(r, i, 0), PQgetvalue(r, i, 1), strtoull(PQgetvalue(r, i, 2), NULL, 10), arg);
	PQclear(r);
	PQfinish(c);
	return 0;
}
