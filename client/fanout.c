/* fanout.c: one job's records to one agent per node or per rank (see fanout.h). */
#include "fanout.h"
#include "jsonl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kernel_summary.h"
#include "clock.h"

#define NO_AGENT UINT32_MAX

/* The agent library, loaded by the first fanout_new (as trace_cmd.c loads libcurl): with
 * OpenSSL and protobuf-c it costs about 6 ms of CPU at every culprit start, and most runs
 * never send. culprit is linked --as-needed without it. */
static struct {
	struct agent_loop *(*loop_new)(void);
	void (*loop_free)(struct agent_loop *loop);
	struct agent *(*new)(const struct agent_config *cfg);
	int32_t (*intern)(struct agent *a, const char *name);
	int (*add_phases)(struct agent *a, const struct record_phase *r, size_t n);
	int (*add_kernels)(struct agent *a, const struct record_kernel *r, size_t n);
	int (*add_iteration)(struct agent *a, const struct record_iter *it, const struct record_phase *ph, size_t nph,
			     const struct record_kernel *k, size_t nk);
	int (*add_raw_kernels)(struct agent *a, const struct record_raw_kernel *r, size_t n);
	int (*flush)(struct agent *a, int timeout_ms);
	int (*close)(struct agent *a, int timeout_ms);
	void (*get_stats)(struct agent *a, struct agent_stats *out);
	bool (*command)(struct agent *a, struct agent_command *out);
	const char *(*strerror)(int err);
	void (*summary_init)(struct kernel_summary *ks);
	void (*summary_free)(struct kernel_summary *ks);
	int (*summary_make)(struct kernel_summary *ks, struct record_kernel *k, const int64_t *durs, size_t n,
			    const char **why);
} ag;
static char ag_err[300]; /* why it could not be loaded, "" when it was */

/* ag's functions: its field, the library's name */
#define AG_FUNCS(X)                               \
	X(loop_new, agent_loop_new)               \
	X(loop_free, agent_loop_free)             \
	X(new, agent_new)                         \
	X(intern, agent_intern)                   \
	X(add_phases, agent_add_phases)           \
	X(add_kernels, agent_add_kernels)         \
	X(add_iteration, agent_add_iteration)     \
	X(add_raw_kernels, agent_add_raw_kernels) \
	X(flush, agent_flush)                     \
	X(close, agent_close)                     \
	X(get_stats, agent_get_stats)             \
	X(command, agent_command)                 \
	X(strerror, agent_strerror)               \
	X(summary_init, kernel_summary_init)      \
	X(summary_free, kernel_summary_free)      \
	X(summary_make, kernel_summary_make)
/* the field's type against agent.h's declaration: an assignment the compiler checks but,
 * in sizeof, never makes (no reference to link) */
#define AG_CHECK(field, fn) (void)sizeof(ag.field = fn);
/* the field from the library, an object pointer copied to a function pointer (as POSIX dlsym
 * allows); or a message and return */
#define AG_LOAD(field, fn)                                                                             \
	if (!(p = dlsym(h, #fn))) {                                                                    \
		snprintf(ag_err, sizeof(ag_err), "the agent library %s has no %s", AGENT_SONAME, #fn); \
		return;                                                                                \
	}                                                                                              \
	memcpy(&ag.field, &p, sizeof(p));

/* The library by its soname, found as culprit's own libraries are (its run path: the build
 * tree's agent directory, or the installed library directory); else by the directories that
 * run path names, relative to culprit itself (under a sanitizer, dlopen searches from the
 * sanitizer's runtime, whose run path is not culprit's). NULL with ag_err set. */
static void *ag_open(void)
{
	void *h = dlopen(AGENT_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (h)
		return h;
	snprintf(ag_err, sizeof(ag_err), "cannot load the agent library: %s", dlerror());
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash = n > 0 ? memrchr(exe, '/', (size_t)n) : NULL;
	if (!slash)
		return NULL;
	*slash = 0;
	static const char *const rel[] = {AGENT_DIR_BUILD, AGENT_DIR_INSTALL};
	for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]) && !h; i++) {
		char path[sizeof(exe) + 300];
		snprintf(path, sizeof(path), "%s/%s/%s", exe, rel[i], AGENT_SONAME);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	}
	if (h)
		ag_err[0] = 0;
	return h;
}

static void ag_load(void)
{
	AG_FUNCS(AG_CHECK)
	void *h = ag_open(), *p;
	if (!h)
		return;
	AG_FUNCS(AG_LOAD)
}

struct fanout_host {
	char *name;
	uint32_t agent; /* node mode: index in agents, NO_AGENT before the first record */
};

#define FANOUT_GIVE_UP_REFUSED 3 /* connections in a row the server ends before HelloAck: then fail */

struct fanout {
	struct fanout_config cfg;
	char *job, *order, *token, *server;
	struct agent_topology topo;
	struct agent_loop **loops;
	uint32_t n_loops;
	/* hosts */
	struct fanout_host *hosts;
	size_t n_hosts, hosts_cap;
	uint32_t *rank_host;  /* per rank: index in hosts */
	uint32_t *rank_agent; /* per rank: index in agents, NO_AGENT before its first record */
	bool moved;           /* a host line moved a rank off its default node */
	long long t0_ms;      /* fanout_new */
	/* agents */
	struct agent **agents;
	size_t n_agents, agents_cap;
	_Atomic uint64_t records; /* read by fanout_get_stats from other threads */
	char refusal[512];        /* why the server refused an agent (fanout_refusal) */
	/* scratch */
	struct record_phase *ph;
	size_t ph_cap;
	struct record_kernel *k;
	size_t k_cap;
	struct record_raw_kernel *raw;
	size_t raw_cap;
	/* replay: the records of the last (rank, iteration) seen, sent together when another
	 * one starts, so that phases travel with their iteration (agent_add_iteration) */
	bool pending, pend_has_it;
	struct agent *pend_agent;
	struct record_iter pend_it;
	uint32_t pend_rank, pend_iter;
	uint32_t sealed_iter; /* every agent's batch was sealed when this iteration began */
	uint32_t synced_iter; /* ... and everything before it acknowledged */
	size_t n_pend_ph, n_pend_k, pend_sk;
	uint8_t *sk_buf;
	size_t sk_cap;
	struct kernel_summary ks; /* turns raw durations into a summary and a sketch */
	/* default log: rate limit */
	pthread_mutex_t log_mu;
	time_t log_sec;
	uint64_t log_suppressed;
};

static void default_log(void *arg, enum agent_log_level level, const char *msg)
{
	struct fanout *f = arg;
	time_t now = time(NULL);

	if (level < AGENT_LOG_WARNING)
		return;
	pthread_mutex_lock(&f->log_mu);
	if (now != f->log_sec) {
		if (f->log_suppressed)
			fprintf(stderr, "warning: %llu more agent messages suppressed\n",
				(unsigned long long)f->log_suppressed);
		fprintf(stderr, "%s: %s\n", level == AGENT_LOG_ERROR ? "error" : "warning", msg);
		f->log_sec = now;
		f->log_suppressed = 0;
	} else {
		f->log_suppressed++;
	}
	pthread_mutex_unlock(&f->log_mu);
}

static int64_t host_find_or_add(struct fanout *f, const char *name)
{
	/* linear over hosts would be O(n^2) for 1,620 nodes from host lines; a node name
	 * "node-K" that matches the default naming is looked up directly */
	unsigned long k;
	char tail;

	if (sscanf(name, "node-%lu%c", &k, &tail) == 1 && k < f->n_hosts && strcmp(f->hosts[k].name, name) == 0)
		return (int64_t)k;
	for (size_t i = 0; i < f->n_hosts; i++)
		if (strcmp(f->hosts[i].name, name) == 0)
			return (int64_t)i;
	if (f->n_hosts == f->hosts_cap) {
		size_t cap = f->hosts_cap ? f->hosts_cap * 2 : 64;
		struct fanout_host *h = realloc(f->hosts, cap * sizeof(*h));

		if (!h)
			return -1;
		f->hosts = h;
		f->hosts_cap = cap;
	}
	if (!(f->hosts[f->n_hosts].name = strdup(name)))
		return -1;
	f->hosts[f->n_hosts].agent = NO_AGENT;
	return (int64_t)f->n_hosts++;
}

struct fanout *fanout_new(const struct fanout_config *cfg, const struct fanout_job *job, char *err, size_t err_size)
{
	struct fanout *f;
	uint32_t gpn = job->topo.gpus_per_node ? job->topo.gpus_per_node : 8;

	if (!job->job || !*job->job || job->topo.world == 0 || job->topo.world > 10000000) {
		snprintf(err, err_size, "a job needs a name and a world size of 1 to 10000000");
		return NULL;
	}
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	(void)pthread_once(&once, ag_load);
	if (ag_err[0]) {
		snprintf(err, err_size, "%s", ag_err);
		return NULL;
	}
	if (!(f = calloc(1, sizeof(*f)))) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&f->log_mu, NULL);
	ag.summary_init(&f->ks);
	f->cfg = *cfg;
	f->t0_ms = clock_mono_ms();
	f->job = strdup(job->job);
	f->order = strdup(job->topo.order ? job->topo.order : "");
	f->token = strdup(cfg->token ? cfg->token : "");
	f->server = strdup(cfg->server ? cfg->server : "");
	f->topo = job->topo;
	f->topo.order = f->order;
	f->topo.gpus_per_node = gpn;
	f->cfg.server = f->server;
	f->cfg.token = f->token;
	if (cfg->loops) {
		f->n_loops = cfg->loops;
	} else {
		/* a poll pass costs O(sockets of its loop): about 512 agents per network thread */
		uint64_t expect = cfg->per_rank ? job->topo.world : job->topo.world / gpn + 1;

		f->n_loops = (uint32_t)(expect / 512 + 1);
		if (f->n_loops < 2)
			f->n_loops = 2;
		if (f->n_loops > 32)
			f->n_loops = 32;
	}
	f->loops = calloc(f->n_loops, sizeof(*f->loops));
	f->rank_host = malloc(job->topo.world * sizeof(*f->rank_host));
	f->rank_agent = malloc(job->topo.world * sizeof(*f->rank_agent));
	if (!f->job || !f->order || !f->token || !f->server || !f->loops || !f->rank_host || !f->rank_agent)
		goto oom;
	for (uint32_t i = 0; i < f->n_loops; i++)
		if (!(f->loops[i] = ag.loop_new()))
			goto oom;
	/* default hosts: node-K for K = rank / gpus_per_node, in order, so that node-K is hosts[K] */
	for (uint32_t r = 0; r < job->topo.world; r++) {
		if (r % gpn == 0) {
			char name[32];

			snprintf(name, sizeof(name), "node-%u", r / gpn);
			if (f->n_hosts == f->hosts_cap) {
				size_t cap = f->hosts_cap ? f->hosts_cap * 2 : 64;
				struct fanout_host *h = realloc(f->hosts, cap * sizeof(*h));

				if (!h)
					goto oom;
				f->hosts = h;
				f->hosts_cap = cap;
			}
			if (!(f->hosts[f->n_hosts].name = strdup(name)))
				goto oom;
			f->hosts[f->n_hosts++].agent = NO_AGENT;
		}
		f->rank_host[r] = r / gpn;
		f->rank_agent[r] = NO_AGENT;
	}
	return f;
oom:
	snprintf(err, err_size, "out of memory");
	fanout_abandon(f, 0);
	return NULL;
}

const char *fanout_job_name(const struct fanout *f) { return f->job; }

int fanout_set_host(struct fanout *f, uint32_t rank, const char *host, const char **why)
{
	int64_t h;

	if (rank >= f->topo.world) {
		*why = "rank outside the job's world";
		return -1;
	}
	if (!host || !*host || strlen(host) > 200) {
		*why = "host must be 1 to 200 bytes";
		return -1;
	}
	if ((h = host_find_or_add(f, host)) < 0) {
		*why = "out of memory";
		return -1;
	}
	if ((uint32_t)h == f->rank_host[rank])
		return 0;
	if (f->rank_agent[rank] != NO_AGENT || f->hosts[h].agent != NO_AGENT ||
	    f->hosts[f->rank_host[rank]].agent != NO_AGENT) {
		*why = "host line after records of that rank or host (host lines must come first)";
		return -1;
	}
	f->rank_host[rank] = (uint32_t)h;
	f->moved = true;
	return 0;
}

static int add_agent(struct fanout *f, struct agent *a)
{
	if (f->n_agents == f->agents_cap) {
		size_t cap = f->agents_cap ? f->agents_cap * 2 : 64;
		struct agent **p = realloc(f->agents, cap * sizeof(*p));

		if (!p)
			return -1;
		f->agents = p;
		f->agents_cap = cap;
	}
	f->agents[f->n_agents++] = a;
	return 0;
}

/* The agent serving rank, created on first use. */
static struct agent *agent_of(struct fanout *f, uint32_t rank, const char **why)
{
	struct agent_config cfg = {0};
	uint32_t h, *ranks = NULL, one = rank;
	size_t n = 0;
	char id[256];
	struct agent *a;

	if (rank >= f->topo.world) {
		*why = "rank outside the job's world";
		return NULL;
	}
	if (f->rank_agent[rank] != NO_AGENT)
		return f->agents[f->rank_agent[rank]];
	h = f->rank_host[rank];
	if (!f->cfg.per_rank && f->hosts[h].agent != NO_AGENT) {
		/* cannot happen: a node agent is recorded for each of its ranks */
		f->rank_agent[rank] = f->hosts[h].agent;
		return f->agents[f->hosts[h].agent];
	}
	cfg.server = f->cfg.server;
	cfg.job = f->job;
	cfg.topo = f->topo;
	cfg.host = f->hosts[h].name;
	cfg.token = f->token;
	cfg.tls = f->cfg.tls;
	cfg.tls_ca = f->cfg.tls_ca;
	cfg.flush_interval_ms = f->cfg.flush_interval_ms;
	cfg.max_batch_records = f->cfg.max_batch_records ? f->cfg.max_batch_records : 4096;
	cfg.max_unacked_bytes = f->cfg.max_unacked_bytes ? f->cfg.max_unacked_bytes : (size_t)4 << 20;
	cfg.append_timeout_ms = AGENT_WAIT_FOREVER;
	cfg.backoff_min_ms = 50;
	cfg.backoff_max_ms = 2000;
	cfg.give_up_refused = FANOUT_GIVE_UP_REFUSED;
	cfg.loop = f->loops[f->n_agents % f->n_loops];
	cfg.log = f->cfg.log ? f->cfg.log : default_log;
	cfg.log_arg = f->cfg.log ? f->cfg.log_arg : f;
	if (f->cfg.per_rank) {
		snprintf(id, sizeof(id), "%s/rank-%u", f->hosts[h].name, rank);
		cfg.agent_id = id;
		cfg.ranks = &one;
		cfg.n_ranks = 1;
	} else {
		uint32_t gpn = f->topo.gpus_per_node;

		cfg.agent_id = f->hosts[h].name;
		if (!(ranks = malloc(f->topo.world * sizeof(*ranks)))) {
			*why = "out of memory";
			return NULL;
		}
		if (!f->moved) { /* every rank on its default node: the node's block */
			for (uint32_t r = h * gpn; r < f->topo.world && r < (h + 1) * gpn; r++)
				ranks[n++] = r;
		} else {
			for (uint32_t r = 0; r < f->topo.world; r++)
				if (f->rank_host[r] == h)
					ranks[n++] = r;
		}
		cfg.ranks = ranks;
		cfg.n_ranks = n;
	}
	a = ag.new(&cfg);
	if (!a || add_agent(f, a) < 0) {
		if (a)
			ag.close(a, 0);
		free(ranks);
		*why = "could not create an agent";
		return NULL;
	}
	if (f->cfg.per_rank) {
		f->rank_agent[rank] = (uint32_t)(f->n_agents - 1);
	} else {
		f->hosts[h].agent = (uint32_t)(f->n_agents - 1);
		for (size_t i = 0; i < n; i++)
			f->rank_agent[ranks[i]] = (uint32_t)(f->n_agents - 1);
	}
	free(ranks);
	return a;
}

/* The message for an agent the server refused (AGENT_EREFUSED), kept in f->refusal. */
static const char *refusal(struct fanout *f, struct agent *a)
{
	struct agent_stats st;

	ag.get_stats(a, &st);
	snprintf(f->refusal, sizeof(f->refusal), "culpritd \"%s\" refused the connections of this job's agents (%s)%s",
		 f->server, st.refusal,
		 strncmp(st.refusal, "server refused hello", 20) == 0
			 ? ""
			 : ": it closed them before answering Hello, as it does over a connection limit such as "
			   "max_connections_per_addr (docs/operations.md)");
	return f->refusal;
}

static int append_rc(struct fanout *f, struct agent *a, int rc, const char **why)
{
	if (rc == 0)
		return 0;
	*why = rc == AGENT_EINVAL     ? "invalid record (negative duration, bad kind or group)"
	       : rc == AGENT_EREFUSED ? refusal(f, a)
				      : ag.strerror(rc);
	return -1;
}

#define PEND_MAX 4096       /* records held for one (rank, iteration) before they go anyway */
#define SEAL_EVERY_ITERS 4  /* replay: every agent's batch is sealed this often (iterations) */
#define SYNC_EVERY_ITERS 24 /* replay: and acknowledged this often, within the window's 64 */
#define SYNC_TIMEOUT_MS 60000

static int grow_scratch(struct fanout *f, size_t nph, size_t nk, const char **why)
{
	if (nph > f->ph_cap) {
		size_t cap = f->ph_cap ? f->ph_cap * 2 : 64;
		struct record_phase *p;

		while (cap < nph)
			cap *= 2;
		if (!(p = realloc(f->ph, cap * sizeof(*p)))) {
			*why = "out of memory";
			return -1;
		}
		f->ph = p;
		f->ph_cap = cap;
	}
	if (nk > f->k_cap) {
		size_t cap = f->k_cap ? f->k_cap * 2 : 64;
		struct record_kernel *p;

		while (cap < nk)
			cap *= 2;
		if (!(p = realloc(f->k, cap * sizeof(*p)))) {
			*why = "out of memory";
			return -1;
		}
		f->k = p;
		f->k_cap = cap;
	}
	return 0;
}

static int grow_raw(struct fanout *f, size_t n, const char **why)
{
	if (n > f->raw_cap) {
		struct record_raw_kernel *p = realloc(f->raw, n * sizeof(*p));

		if (!p) {
			*why = "out of memory";
			return -1;
		}
		f->raw = p;
		f->raw_cap = n;
	}
	return 0;
}

/* Points the kernels' sketches into f->sk_buf (it may have moved while it grew). */
static void point_sketches(struct fanout *f, size_t nk)
{
	size_t off = 0;

	for (size_t i = 0; i < nk; i++)
		if (f->k[i].sketch_len) {
			f->k[i].sketch = f->sk_buf + off;
			off += f->k[i].sketch_len;
		}
}

/* Sends the pending group: one agent_add_iteration when its iteration record is there. */
static int pend_flush(struct fanout *f, const char **why)
{
	struct agent *a = f->pend_agent;
	int rc = 0;

	if (!f->pending)
		return 0;
	f->pending = false;
	point_sketches(f, f->n_pend_k);
	if (f->pend_has_it) {
		rc = ag.add_iteration(a, &f->pend_it, f->ph, f->n_pend_ph, f->k, f->n_pend_k);
	} else {
		if (f->n_pend_ph)
			rc = ag.add_phases(a, f->ph, f->n_pend_ph);
		if (rc == 0 && f->n_pend_k)
			rc = ag.add_kernels(a, f->k, f->n_pend_k);
	}
	f->pend_has_it = false;
	f->n_pend_ph = f->n_pend_k = f->pend_sk = 0;
	return append_rc(f, a, rc, why);
}

/* Makes (rank, iter) the pending group, sending the previous one when it differs. */
static struct agent *pend_join(struct fanout *f, uint32_t rank, uint32_t iter, const char **why)
{
	struct agent *a = agent_of(f, rank, why);

	if (!a)
		return NULL;
	if (f->pending && (f->pend_rank != rank || f->pend_iter != iter || f->n_pend_ph + f->n_pend_k >= PEND_MAX) &&
	    pend_flush(f, why) < 0)
		return NULL;
	if (!f->pending && (iter >= f->sealed_iter + SEAL_EVERY_ITERS || iter + SEAL_EVERY_ITERS <= f->sealed_iter)) {
		/* a file holds many iterations per agent: sealing every agent's batch every few
		 * iterations keeps the agents within a few iterations of each other at the
		 * server, whose window is a ring of iterations (a batch of one agent's whole run
		 * would wrap it before the others' arrived) */
		bool sync = iter >= f->synced_iter + SYNC_EVERY_ITERS || iter + SYNC_EVERY_ITERS <= f->synced_iter;

		for (size_t i = 0; i < f->n_agents; i++)
			(void)ag.flush(f->agents[i], 0); /* seals; the acks are not awaited */
		/* and every few dozen iterations waits until the server has taken everything
		 * so far: it may read one agent's many small batches in one go */
		for (size_t i = 0; sync && i < f->n_agents; i++)
			(void)ag.flush(f->agents[i], SYNC_TIMEOUT_MS);
		if (sync)
			f->synced_iter = iter;
		f->sealed_iter = iter;
	}
	if (!f->pending) {
		f->pending = true;
		f->pend_agent = a;
		f->pend_rank = rank;
		f->pend_iter = iter;
	}
	return a;
}

int fanout_iter(struct fanout *f, const struct record_iter *r, const char **why)
{
	if (f->pending && f->pend_has_it && pend_flush(f, why) < 0) /* the same iteration twice */
		return -1;
	if (!pend_join(f, r->rank, r->iter, why))
		return -1;
	f->pend_it = *r;
	f->pend_has_it = true;
	f->records++;
	return 0;
}

int fanout_phase(struct fanout *f, const struct record_phase *r, const char *name, const char **why)
{
	struct agent *a = pend_join(f, r->rank, r->iter, why);
	int32_t id;

	if (!a)
		return -1;
	if ((id = ag.intern(a, name)) < 0) {
		*why = "phase name empty or longer than 255 bytes";
		return -1;
	}
	if (grow_scratch(f, f->n_pend_ph + 1, 0, why) < 0)
		return -1;
	f->ph[f->n_pend_ph] = *r;
	f->ph[f->n_pend_ph++].name = (uint32_t)id;
	f->records++;
	return 0;
}

/* Appends a sketch's bytes to f->sk_buf at *sk_off (the caller points the kernels' sketches
 * into the buffer once all are there: it may move while it grows). */
static int keep_sketch(struct fanout *f, size_t *sk_off, const uint8_t *data, size_t len, const char **why)
{
	if (*sk_off + len > f->sk_cap) {
		size_t cap = f->sk_cap ? f->sk_cap : 4096;
		uint8_t *p;

		while (cap < *sk_off + len)
			cap *= 2;
		if (!(p = realloc(f->sk_buf, cap))) {
			*why = "out of memory";
			return -1;
		}
		f->sk_buf = p;
		f->sk_cap = cap;
	}
	memcpy(f->sk_buf + *sk_off, data, len);
	*sk_off += len;
	return 0;
}

/* Fills count and the summary fields of k from durs (agent/kernel_summary.c) and keeps its
 * sketch, if any, in f->sk_buf. */
static int summarize(struct fanout *f, struct record_kernel *k, const int64_t *durs, size_t ndurs, size_t *sk_off,
		     const char **why)
{
	if (ag.summary_make(&f->ks, k, durs, ndurs, why) < 0 ||
	    (k->sketch_len && keep_sketch(f, sk_off, k->sketch, k->sketch_len, why) < 0))
		return -1;
	k->sketch = NULL;
	return 0;
}

int fanout_kernel(struct fanout *f, const struct record_kernel *r, const char *name, const int64_t *durs, size_t ndurs,
		  const char **why)
{
	struct agent *a = pend_join(f, r->rank, r->iter, why);
	struct record_kernel *k;
	int32_t id;

	if (!a)
		return -1;
	if ((id = ag.intern(a, name)) < 0) {
		*why = "kernel name empty or longer than 255 bytes";
		return -1;
	}
	if (grow_scratch(f, 0, f->n_pend_k + 1, why) < 0)
		return -1;
	k = &f->k[f->n_pend_k];
	*k = *r;
	k->name = (uint32_t)id;
	if (durs && ndurs) {
		if (summarize(f, k, durs, ndurs, &f->pend_sk, why) < 0)
			return -1;
	} else if (r->sketch_len) { /* a sketch of the caller's: keep a copy until the group goes */
		if (keep_sketch(f, &f->pend_sk, r->sketch, r->sketch_len, why) < 0)
			return -1;
		k->sketch = NULL;
	}
	f->n_pend_k++;
	f->records++;
	return 0;
}

int fanout_rank_iter(struct fanout *f, const struct record_iter *it, const struct record_phase *ph,
		     const char *const *pnames, size_t nph, const struct record_kernel *k, const char *const *knames,
		     const int64_t *const *kdurs, const size_t *kndurs, size_t nk, const char **why)
{
	struct agent *a;
	size_t off = 0;

	if (pend_flush(f, why) < 0 || !(a = agent_of(f, it->rank, why)) || grow_scratch(f, nph, nk, why) < 0)
		return -1;
	for (size_t i = 0; i < nph; i++) {
		int32_t id = ag.intern(a, pnames[i]);

		if (id < 0) {
			*why = "phase name empty or longer than 255 bytes";
			return -1;
		}
		f->ph[i] = ph[i];
		f->ph[i].name = (uint32_t)id;
	}
	for (size_t i = 0; i < nk; i++) {
		int32_t id = ag.intern(a, knames[i]);

		if (id < 0) {
			*why = "kernel name empty or longer than 255 bytes";
			return -1;
		}
		f->k[i] = k[i];
		f->k[i].name = (uint32_t)id;
		f->k[i].sketch = NULL;
		f->k[i].sketch_len = 0;
		if (kdurs && kndurs && kdurs[i] && kndurs[i] &&
		    summarize(f, &f->k[i], kdurs[i], kndurs[i], &off, why) < 0)
			return -1;
	}
	point_sketches(f, nk);
	f->records += 1 + nph + nk;
	return append_rc(f, a, ag.add_iteration(a, it, f->ph, nph, f->k, nk), why);
}

void fanout_each_command(struct fanout *f, void (*cb)(void *arg, const struct agent_command *cmd), void *arg)
{
	for (size_t i = 0; i < f->n_agents; i++) {
		struct agent_command cmd;

		if (!ag.command(f->agents[i], &cmd))
			continue;
		cb(arg, &cmd);
		free(cmd.ranks);
	}
}

int fanout_raw_kernels(struct fanout *f, const struct record_raw_kernel *r, const char *const *names, size_t n,
		       const char **why)
{
	struct agent *a;

	if (n == 0)
		return 0;
	if (pend_flush(f, why) < 0 || !(a = agent_of(f, r[0].rank, why)) || grow_raw(f, n, why) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int32_t id = ag.intern(a, names[i]);

		if (id < 0 || r[i].rank != r[0].rank) {
			*why = id < 0 ? "kernel name empty or longer than 255 bytes" : "raw kernels of several ranks";
			return -1;
		}
		f->raw[i] = r[i];
		f->raw[i].name = (uint32_t)id;
	}
	f->records += n;
	return append_rc(f, a, ag.add_raw_kernels(a, f->raw, n), why);
}

void fanout_kick(struct fanout *f)
{
	const char *why = NULL;

	if (pend_flush(f, &why) < 0)
		fprintf(stderr, "warning: could not send records of rank %u iteration %u: %s\n", f->pend_rank,
			f->pend_iter, why);
	for (size_t i = 0; i < f->n_agents; i++)
		ag.flush(f->agents[i], 0);
}

static void add_stats(struct fanout_stats *st, const struct agent_stats *as)
{
	st->agents++;
	st->connected += as->connected;
	st->acked_batches += as->batches_acked;
	st->sealed_batches += as->batches_sealed;
	st->rejected_batches += as->batches_rejected;
	st->rejected_records += as->records_rejected;
	st->dropped_records += as->records_dropped;
	st->resent_batches += as->batches_resent;
	st->connects += as->connects;
	st->disconnects += as->disconnects;
	st->unacked_bytes += as->unacked_bytes;
	st->unacked_batches += as->unacked_batches;
}

void fanout_get_stats(struct fanout *f, struct fanout_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (size_t i = 0; i < f->n_agents; i++) {
		struct agent_stats as;

		ag.get_stats(f->agents[i], &as);
		add_stats(st, &as);
	}
	st->records = f->records;
}

void fanout_print_progress(struct fanout *f, const char *prefix, double secs)
{
	struct fanout_stats st;

	fanout_get_stats(f, &st);
	fprintf(stderr,
		"%s: %llu records in %.1f s (%.0f/s), %llu agents (%llu connected), %llu/%llu batches acknowledged",
		prefix, (unsigned long long)st.records, secs, secs > 0 ? (double)st.records / secs : 0.0,
		(unsigned long long)st.agents, (unsigned long long)st.connected, (unsigned long long)st.acked_batches,
		(unsigned long long)st.sealed_batches);
	if (st.rejected_batches)
		fprintf(stderr, ", %llu rejected", (unsigned long long)st.rejected_batches);
	if (st.resent_batches)
		fprintf(stderr, ", %llu resent", (unsigned long long)st.resent_batches);
	fprintf(stderr, "\n");
}

void fanout_abandon(struct fanout *f, int timeout_ms) { IGNORE_RESULT(fanout_close(f, timeout_ms, NULL)); }

int fanout_close(struct fanout *f, int timeout_ms, struct fanout_stats *st)
{
	long long deadline = clock_mono_ms() + (timeout_ms < 0 ? 0 : timeout_ms);
	int rc = 0;

	if (!f)
		return 0;
	fanout_kick(f);
	for (size_t i = 0; i < f->n_agents && !f->refusal[0]; i++) {
		/* in slices of a second, so that a long wait (server down) says what it waits for */
		for (;;) {
			long long left = timeout_ms < 0 ? 1000 : deadline - clock_mono_ms();
			int slice = left > 1000 ? 1000 : left > 0 ? (int)left : 0;
			int frc = ag.flush(f->agents[i], slice);

			if (frc == 0)
				break;
			if (frc == AGENT_EREFUSED) {
				refusal(f, f->agents[i]);
				rc = -1;
				break;
			}
			if (timeout_ms >= 0 && clock_mono_ms() >= deadline) {
				rc = -1;
				break;
			}
			if (f->cfg.progress_prefix)
				fanout_print_progress(f, f->cfg.progress_prefix,
						      (double)(clock_mono_ms() - f->t0_ms) / 1000.0);
		}
	}
	if (st) {
		fanout_get_stats(f, st);
		snprintf(st->refusal, sizeof(st->refusal), "%s", f->refusal);
		if (st->rejected_batches || st->dropped_records)
			rc = -1;
	}
	for (size_t i = 0; i < f->n_agents; i++)
		ag.close(f->agents[i], 0);
	for (uint32_t i = 0; f->loops && i < f->n_loops; i++)
		ag.loop_free(f->loops[i]);
	for (size_t i = 0; i < f->n_hosts; i++)
		free(f->hosts[i].name);
	free(f->hosts);
	free(f->loops);
	free(f->agents);
	free(f->rank_host);
	free(f->rank_agent);
	free(f->ph);
	free(f->k);
	free(f->raw);
	free(f->sk_buf);
	ag.summary_free(&f->ks);
	free(f->job);
	free(f->order);
	free(f->token);
	free(f->server);
	pthread_mutex_destroy(&f->log_mu);
	free(f);
	return rc;
}

struct fanout_job fanout_job_of(const struct jsonl_job *j)
{
	return (struct fanout_job){.job = j->job,
				   .topo = {.world = j->world,
					    .tp = j->tp,
					    .cp = j->cp,
					    .pp = j->pp,
					    .dp = j->dp,
					    .ep = j->ep,
					    .gpus_per_node = j->gpus_per_node,
					    .order = j->order}};
}
