/* jobs.c: see jobs.h. */
#include "clock.h"
#include "jobs.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alerts.h"
#include "cluster.h"
#include "diagnosis.h"
#include "incidents.h"
#include "lease.h"
#include "window.h"
#include "log.h"
#include "server.h"

/* iterations an open window grows by before it is diagnosed again */
#define REDIAGNOSE_ITERS 4
/* a rank is hung when its next iteration is overdue by this many iterations of the job */
#define HANG_FACTOR 3.0
/* ... its connection has delivered nothing for this long of our own time, nor has the job's
 * median rank moved (docs/operations.md, "Hangs") */
#define HANG_CONFIRM_US (5 * 1000000LL)
/* a due diagnosis of an open window waits at most this long for the ranks not yet heard from
 * in its last iteration (waits_for_ranks) */
#define DIAGNOSIS_WAIT_US (3 * 1000000LL)

/* Says an incident's change: the log (what ./run.sh shows), and the counters. */
static void announce(struct server *s, struct job *job, enum incident_change change, const struct report *r)
{
	char *text;

	if (change == INCIDENT_NONE)
		return;
	s->m.incident_changes[change]++;
	if (change == INCIDENT_RESOLVED) {
		log_info("INCIDENT %s resolved: job \"%s\" is back to its baseline", job->incident.key, job->name);
		return;
	}
	text = r ? report_to_text(r) : NULL;
	log_info("INCIDENT %s %s: job \"%s\" %s (window from iteration %u)\n%s", job->incident.key,
		 incident_change_name(change), job->name, job->incident.category, job->incident.first_iter,
		 text ? text : job->incident.summary);
	free(text);
}

/* An incident left open by the previous culpritd, waiting for its job to come back. */
struct restored {
	struct incident inc;
	double baseline_ms;            /* of its latest report's window (NaN: none) */
	uint32_t detected_iter;        /* ... the iteration at which it was detected (0: unknown) */
	char *alert;                   /* Alertmanager alert (JSON) or NULL */
	json_t *report;                /* its latest report or NULL */
	struct storage_window *window; /* taken over from another instance: its window's records (or NULL) */
};

static void restored_free(struct restored *r)
{
	if (!r)
		return;
	free(r->alert);
	json_decref(r->report);
	free(r->window);
	free(r);
}

static void restored_row(const struct storage_open_incident *row, void *arg)
{
	struct server *s = arg;
	struct restored *r = calloc(1, sizeof(*r)), *old;
	uint32_t culprits[64];
	size_t n = 0, i;
	json_t *x, *window;

	if (!r) {
		log_error("out of memory restoring incident %s", row->key);
		return;
	}
	r->report = row->report_json ? json_loads(row->report_json, 0, NULL) : NULL;
	r->alert = row->alert ? strdup(row->alert) : NULL;
	json_array_foreach(json_object_get(r->report, "suspects"), i, x)
	{
		const char *role = json_string_value(json_object_get(x, "role"));

		if (n < 64 && role && strcmp(role, "culprit") == 0)
			culprits[n++] = (uint32_t)json_integer_value(json_object_get(x, "rank"));
	}
	window = json_object_get(r->report, "window");
	r->baseline_ms = json_is_number(json_object_get(window, "baseline_iter_ms"))
				 ? json_number_value(json_object_get(window, "baseline_iter_ms"))
				 : NAN;
	r->detected_iter = (uint32_t)json_integer_value(json_object_get(window, "detected_iter"));
	incident_restore(&r->inc, row->key, row->category, row->summary, row->updates, row->opened_us, row->changed_us,
			 culprits, n);
	/* one incident per job is followed; an older one still open stays as it is */
	old = strmap_get(&s->restored, row->job);
	if (old)
		log_warning("job \"%s\": incident %s was left open too and is not followed (%s is)", row->job,
			    old->inc.key, row->key);
	if (strmap_put(&s->restored, row->job, r) < 0) {
		log_error("out of memory restoring incident %s", row->key);
		restored_free(r);
		return;
	}
	restored_free(old);
}

int jobs_load_incidents(struct server *s)
{
	char err[512];
	int n = storage_open_incidents_load(s->db_dsn, restored_row, s, err, sizeof(err));

	if (n < 0) {
		log_error("could not load the open incidents: %s", err);
		return -1;
	}
	if (s->restored.len)
		log_info("%zu incidents were left open; each continues when its job's agents return", s->restored.len);
	return 0;
}

/* Taken over from another instance: the names of the records the old owner stored, interned
 * as the job's (a window cut short when the job is out of names). */
static void window_names(struct server *s, struct job *job, struct storage_window *w)
{
	for (size_t i = 0; i < w->n_phases; i++) {
		uint32_t id = jobs_intern(job, w->names[w->phases[i].name], (uint32_t)s->cfg.max_names_per_job);

		if (id >= JOBS_NAMES_FULL) {
			log_warning("job \"%s\": its window is not read back whole (names)", job->name);
			w->n_phases = i;
			w->n_kernels = 0;
			break;
		}
		w->phases[i].name = id;
	}
	for (size_t i = 0; i < w->n_kernels; i++) {
		uint32_t id = jobs_intern(job, w->names[w->kernels[i].name], (uint32_t)s->cfg.max_names_per_job);

		if (id >= JOBS_NAMES_FULL) {
			log_warning("job \"%s\": its window is not read back whole (names)", job->name);
			w->n_kernels = i;
			break;
		}
		w->kernels[i].name = id;
	}
}

_Static_assert(offsetof(struct record_iter, iter) == offsetof(struct record_phase, iter) &&
		       offsetof(struct record_iter, iter) == offsetof(struct record_kernel, iter),
	       "records keep their iteration at the same place");

/* Moves the records (n of size bytes) of iterations before first to the front, each part in
 * its order; returns how many they are (n when out of memory: all go first). */
static size_t records_before(void *base, size_t n, size_t size, uint32_t first)
{
	char *a = base, *front;
	size_t nb = 0, j = 0;
	uint32_t it;

	for (size_t i = 0; i < n; i++) {
		memcpy(&it, a + i * size + offsetof(struct record_iter, iter), sizeof(it));
		nb += it < first;
	}
	if (nb == 0 || nb == n || !(front = malloc(nb * size)))
		return nb == 0 ? 0 : n;
	for (size_t i = 0, k = 0; i < n; i++) {
		memcpy(&it, a + i * size + offsetof(struct record_iter, iter), sizeof(it));
		if (it < first)
			memcpy(front + k++ * size, a + i * size, size);
		else
			memmove(a + j++ * size, a + i * size, size);
	}
	memmove(a + nb * size, a, j * size);
	memcpy(a, front, nb * size);
	free(front);
	return nb;
}

/* The job is back: its open incident continues. Taken over from another instance, the
 * records the old owner stored are read back around it: those before the window first (the
 * baseline the diagnosis compares the window with: the victims' own past), then the window
 * is resumed, then its records (so that the window neither closes on the baseline's
 * iterations nor opens again as a new one). */
static void restore_incident(struct server *s, struct job *job)
{
	struct restored *r = strmap_del(&s->restored, job->name);
	struct storage_window *w;
	size_t bi = 0, bp = 0, bk = 0;

	if (!r)
		return;
	job->incident = r->inc;
	if ((w = r->window)) {
		window_names(s, job, w);
		bi = records_before(w->iters, w->n_iters, sizeof(*w->iters), r->inc.first_iter);
		bp = records_before(w->phases, w->n_phases, sizeof(*w->phases), r->inc.first_iter);
		bk = records_before(w->kernels, w->n_kernels, sizeof(*w->kernels), r->inc.first_iter);
		jobs_add_records(s, job, w->iters, bi, w->phases, bp, w->kernels, bk);
	}
	/* the anomalous window goes on from where it was: it closes (and the incident resolves)
	 * when the job is back at the baseline it had then. A hang has no window: the hang
	 * check resolves it when every rank reports again. */
	if (strcmp(r->inc.category, "hang") != 0 && r->baseline_ms > 0)
		engine_resume_window(job->engine, r->inc.first_iter, r->detected_iter, r->baseline_ms);
	alerts_restore(s, job->name, r->alert, r->report);
	log_info("job \"%s\": incident %s continues (%s, %u updates so far%s)", job->name, r->inc.key, r->inc.category,
		 r->inc.updates, engine_l1(job->engine)->open ? "; window resumed" : "");
	if (w) {
		jobs_add_records(s, job, w->iters + bi, w->n_iters - bi, w->phases + bp, w->n_phases - bp,
				 w->kernels + bk, w->n_kernels - bk);
		log_info("job \"%s\": window read back from the database: %zu iterations, %zu phases, %zu kernels (%zu, %zu "
			 "and %zu of them before it)",
			 job->name, w->n_iters, w->n_phases, w->n_kernels, bi, bp, bk);
	}
	restored_free(r);
}

static int same_topology(const struct job_topology *a, const struct job_topology *b)
{
	return a->world == b->world && a->tp == b->tp && a->cp == b->cp && a->pp == b->pp && a->dp == b->dp &&
	       a->ep == b->ep && a->gpus_per_node == b->gpus_per_node && strcmp(a->order, b->order) == 0;
}

struct job *jobs_get_or_create(struct server *s, const char *name, const struct job_topology *wire, char *err,
			       size_t err_size)
{
	struct job *job = strmap_get(&s->jobs, name);
	struct engine_config ec;

	if (job) {
		/* the first agent that says what the ranks run on (not while a diagnosis reads the
		 * store: the next agent's Hello will say it again) */
		if (wire->device[0] && !job->diagnosing && !store_device(engine_store(job->engine))[0])
			store_set_device(engine_store(job->engine), wire->device);
		if (!same_topology(&job->wire_topo, wire)) {
			snprintf(err, err_size, "job \"%s\" is known with another topology (world %u, pp %u, dp %u)",
				 name, job->topo.world, job->topo.pp, job->topo.dp);
			return NULL;
		}
		return job;
	}
	job = calloc(1, sizeof(*job));
	if (!job) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	if (topo_init(&job->topo, wire->world, wire->tp, wire->cp, wire->pp, wire->dp, wire->ep, wire->order,
		      wire->gpus_per_node, err, err_size) < 0) {
		free(job);
		return NULL;
	}
	memset(&ec, 0, sizeof(ec));
	ec.store.ring_iters = (uint32_t)s->cfg.window_iters;
	ec.store.live = 1;
	job->engine = engine_create(&job->topo, &ec);
	job->heard_us = calloc(wire->world, sizeof(int64_t));
	if (!job->engine || !job->heard_us || strmap_put(&s->jobs, name, job) < 0) {
		if (job->engine)
			engine_destroy(job->engine);
		free(job->heard_us);
		free(job);
		snprintf(err, err_size, "out of memory for the window of job \"%s\"", name);
		return NULL;
	}
	store_set_job(engine_store(job->engine), name);
	store_set_device(engine_store(job->engine), wire->device);
	snprintf(job->name, sizeof(job->name), "%s", name);
	job->wire_topo = *wire;
	s->m.jobs++;
	log_info("job \"%s\": new, world %u (tp %u, cp %u, pp %u, dp %u, ep %u), window of %lld iterations: %.1f MiB",
		 name, wire->world, wire->tp, wire->cp, wire->pp, wire->dp, wire->ep, (long long)s->cfg.window_iters,
		 (double)store_memory(engine_store(job->engine)) / (1 << 20));
	restore_incident(s, job);
	return job;
}

uint32_t jobs_intern(struct job *job, const char *name, uint32_t max_names)
{
	struct store *st = engine_store(job->engine);
	uint32_t known = store_name_count(st);
	int id = store_find_name(st, name);

	if (id >= 0)
		return (uint32_t)id;
	if (job->diagnosing) { /* its id now; the store learns it when the diagnosis is back */
		if ((id = held_find_name(&job->held, name)) >= 0)
			return known + (uint32_t)id;
		if (known + job->held.nnames >= max_names)
			return JOBS_NAMES_FULL;
		id = held_add_name(&job->held, name);
		return id < 0 ? UINT32_MAX : known + (uint32_t)id;
	}
	if (known >= max_names)
		return JOBS_NAMES_FULL;
	id = store_intern_name(st, name);

	return id < 0 ? UINT32_MAX : (uint32_t)id;
}

const char *jobs_name(const struct job *job, uint32_t id)
{
	uint32_t known = store_name_count(engine_store(job->engine));

	if (id >= known && id - known < job->held.nnames)
		return job->held.names[id - known];
	return store_name(engine_store(job->engine), id);
}

static void set_hosts(struct job *job, const uint32_t *ranks, size_t n, const char *host)
{
	for (size_t i = 0; i < n; i++)
		store_set_host(engine_store(job->engine), ranks[i], host);
}

void jobs_set_hosts(struct job *job, const uint32_t *ranks, size_t n, const char *host)
{
	if (!job->diagnosing)
		set_hosts(job, ranks, n, host);
	else if (held_hosts(&job->held, ranks, n, host) < 0)
		log_warning("job \"%s\": the hosts of %zu ranks are not kept (out of memory)", job->name, n);
}

int jobs_add_event(struct job *job, const char *host, const char *kind, int64_t ts_us, const char *source,
		   const char *detail, size_t max)
{
	struct store *st = engine_store(job->engine);

	if (store_event_count(st) + job->held.events >= max)
		return -1;
	if (job->diagnosing)
		return held_event(&job->held, host, kind, ts_us, source, detail);
	return store_add_event(st, host, kind, ts_us, source, detail);
}

void jobs_heard(struct job *job, const uint32_t *ranks, size_t n, int64_t wall_now_us)
{
	for (size_t i = 0; i < n; i++)
		if (ranks[i] < job->topo.world)
			job->heard_us[ranks[i]] = wall_now_us;
}

/* The records go into the window; L1 looks at the iterations they completed. */
static void take_records(struct server *s, struct job *job, const struct record_iter *iters, size_t n_iters,
			 const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
			 size_t n_kernels)
{
	struct store *st = engine_store(job->engine);
	enum incident_change change;
	int ev;

	for (size_t i = 0; i < n_iters; i++)
		job->dropped += store_add_iter(st, &iters[i]) != 0;
	for (size_t i = 0; i < n_phases; i++)
		job->dropped += store_add_phase(st, &phases[i]) != 0;
	for (size_t i = 0; i < n_kernels; i++)
		job->dropped += store_add_kernel(st, &kernels[i], NULL, 0) != 0;
	job->records += n_iters + n_phases + n_kernels;
	ev = engine_poll(job->engine);
	if (ev & ENGINE_CLOSED) {
		const struct l1 *l = engine_l1(job->engine);

		if (ev & ENGINE_OPENED) /* a rise inside the window: it ends, a new one begins */
			log_info("job \"%s\": anomalous window closed by a rise at iteration %u", job->name,
				 l->first_iter);
		else
			log_info("job \"%s\": anomalous window %u-%u closed", job->name, l->first_iter, l->last_iter);
		change = incident_recover(&job->incident, clock_wall_us());
		announce(s, job, change, NULL);
		if (change != INCIDENT_NONE)
			alerts_report(s, job->name, &job->incident, NULL, NULL, change);
	}
	if (ev & ENGINE_OPENED) {
		const struct l1 *l = engine_l1(job->engine);

		log_info("job \"%s\": anomalous window opened at iteration %u (baseline %.0f ms)", job->name,
			 l->first_iter, l->baseline_ms);
		job->due = 1;
	}
	/* while the window is open, diagnose again as it grows */
	if (engine_l1(job->engine)->open && store_max_iter(st) >= job->last_diag_iter + REDIAGNOSE_ITERS)
		job->due = 1;
}

void jobs_add_records(struct server *s, struct job *job, const struct record_iter *iters, size_t n_iters,
		      const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
		      size_t n_kernels)
{
	size_t n = n_iters + n_phases + n_kernels;

	if (!job->diagnosing) {
		take_records(s, job, iters, n_iters, phases, n_phases, kernels, n_kernels);
		jobs_diagnose_due(s, job);
	} else if (held_batch(&job->held, iters, n_iters, phases, n_phases, kernels, n_kernels) == 0) {
		s->m.window_held += n;
	} else { /* stored all the same (the writer has them), but not diagnosed */
		s->m.window_not_held += n;
		job->records += n;
		job->dropped += n;
	}
}

/* What came for the job while a diagnosis read its window goes into it, in order. */
struct release {
	struct server *s;
	struct job *job;
};

static void release_name(void *arg, const char *name)
{
	struct release *r = arg;
	uint32_t want = store_name_count(engine_store(r->job->engine));

	/* a name's id was given when it was held: the store must give the same */
	if (store_intern_name(engine_store(r->job->engine), name) != (int)want)
		log_error("job \"%s\": name \"%s\" did not get its id %u (out of memory)", r->job->name, name, want);
}

static void release_batch(void *arg, const struct record_iter *iters, size_t n_iters,
			  const struct record_phase *phases, size_t n_phases, const struct record_kernel *kernels,
			  size_t n_kernels)
{
	struct release *r = arg;

	take_records(r->s, r->job, iters, n_iters, phases, n_phases, kernels, n_kernels);
}

static void release_hosts(void *arg, const uint32_t *ranks, size_t n, const char *host)
{
	set_hosts(((struct release *)arg)->job, ranks, n, host);
}

static void release_event(void *arg, const char *host, const char *kind, int64_t ts_us, const char *source,
			  const char *detail)
{
	struct release *r = arg;

	if (store_add_event(engine_store(r->job->engine), host, kind, ts_us, source, detail) < 0)
		log_warning("job \"%s\": an event is not kept (out of memory)", r->job->name);
}

static void release_held(struct server *s, struct job *job)
{
	struct release r = {s, job};
	struct held_sink sink = {release_name, release_batch, release_hosts, release_event, &r};

	held_release(&job->held, &sink);
}

/* 1 while a due diagnosis of an open window waits for ranks that reported before but not
 * yet its last iteration. The quorum (95% of the ranks) completes an iteration while the
 * others' records may still be on their way (behind a relay, from a loaded agent), and the
 * rank not heard from may be the culprit: without it, the peers that wait for it look slow
 * themselves. After DIAGNOSIS_WAIT_US it runs without them (a rank that stopped is the hang
 * check's), and the log says so. */
static int waits_for_ranks(struct job *job)
{
	const struct store *st = engine_store(job->engine);
	const struct l1 *l = engine_l1(job->engine);
	uint32_t seen = store_ranks_seen(st), have;
	int64_t now = clock_wall_us();

	if (!job->wait_since_us) /* the iteration waited for is the one the window had then */
		job->wait_iter = l->last_iter;
	/* none: an iteration the ring no longer holds, or a window resumed after a restart */
	have = store_iter_ranks(st, job->wait_iter);
	if (!l->open || job->hang_now_us || have == 0 || have >= seen) {
		job->wait_since_us = 0;
		return 0;
	}
	if (!job->wait_since_us)
		job->wait_since_us = now;
	if (now - job->wait_since_us < DIAGNOSIS_WAIT_US)
		return 1;
	log_warning("job \"%s\": diagnosing without %u of its %u ranks, not heard from in iteration %u after %.0f s",
		    job->name, seen - have, seen, job->wait_iter, (double)(now - job->wait_since_us) / 1e6);
	job->wait_since_us = 0;
	return 0;
}

void jobs_diagnose_due(struct server *s, struct job *job)
{
	struct diagnose_input in;

	if (!job->due || job->diagnosing || !s->diagnosis || waits_for_ranks(job))
		return;
	diagnose_input_from_l1(&in, engine_l1(job->engine), job->hang_now_us);
	in.server = s->cfg.public_url[0] ? s->cfg.public_url : s->cfg.http_listen; /* for the actions' commands */
	in.l2_keep = &job->l2;
	if (diagnosis_submit(s->diagnosis, job->name, engine_store(job->engine), &in, 0) < 0) {
		s->m.diagnoses_refused++; /* queue full: stays due, tried again at the next batch or tick */
		return;
	}
	job->due = 0;
	job->hang_now_us = 0;
	job->diagnosing = 1;
	job->last_diag_iter = store_max_iter(engine_store(job->engine));
}

/* A hang has no window: its iteration is the last one its first-stopped culprits reported
 * (a window the job had closed before is another story), and its incident is keyed by it. */
static void hang_iteration(struct report *r, const struct store *snap)
{
	uint32_t first = UINT32_MAX, it;
	int64_t end;

	for (size_t i = 0; i < r->nsuspects; i++)
		if (r->suspects[i].role == REPORT_CULPRIT && store_rank_last(snap, r->suspects[i].rank, &it, &end) &&
		    it < first)
			first = it;
	r->has_window = 0;
	r->first_iter = r->last_iter = first != UINT32_MAX ? first : store_max_iter(snap);
}

void jobs_diagnosis_results(struct server *s)
{
	struct diagnosis_result res[16];
	enum incident_change change;
	size_t n;

	while ((n = diagnosis_take(s->diagnosis, res, 16)) > 0) {
		for (size_t i = 0; i < n; i++) {
			/* a job is not forgotten while a diagnosis reads its window */
			struct job *job = strmap_get(&s->jobs, res[i].job);
			json_t *j;
			bool hang;

			s->m.diagnoses++;
			s->m.diagnosis_ms_sum += res[i].run_ms;
			metrics_observe_diagnosis(&s->m, res[i].run_ms);
			if (!job || res[i].failed) {
				report_free(&res[i].report);
				if (job) {
					job->diagnosing = 0;
					release_held(s, job);
					jobs_diagnose_due(s, job);
				}
				continue;
			}
			job->diagnosing = 0;
			job->diagnoses++;
			hang = res[i].report.category && !strcmp(res[i].report.category, "hang");
			if (hang)
				hang_iteration(&res[i].report, engine_store(job->engine));
			j = report_to_json(&res[i].report);
			if (j) {
				free(job->latest_report);
				job->latest_report = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(10));
				json_decref(j);
			}
			/* a job that ended opens no incident with a diagnosis that comes back late */
			change = incident_report(&job->incident, job->name, &res[i].report,
						 (engine_l1(job->engine)->open || hang) && !job->ended_us,
						 clock_wall_us());
			announce(s, job, change, &res[i].report);
			alerts_report(s, job->name, &job->incident, &res[i].report, job->latest_report, change);
			report_free(&res[i].report);
			/* the report is of the window as it was: now what came meanwhile */
			release_held(s, job);
			jobs_diagnose_due(s, job);
		}
	}
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* Median over the ranks seen of their last iteration's end (0: none seen). One pass over
 * the ranks, once a second. */
static int64_t median_end_us(struct job *job)
{
	const struct store *st = engine_store(job->engine);
	uint32_t world = job->topo.world, iter, n = 0;
	int64_t *ends = malloc(world * sizeof(int64_t)), end, m;

	if (!ends)
		return 0;
	for (uint32_t r = 0; r < world; r++)
		if (store_rank_last(st, r, &iter, &end))
			ends[n++] = end;
	qsort(ends, n, sizeof(int64_t), cmp_i64);
	m = n ? ends[n / 2] : 0;
	free(ends);
	return m;
}

void jobs_check_hang(struct server *s, struct job *job, int64_t wall_now_us)
{
	const struct l1 *l = engine_l1(job->engine);
	int64_t now, median = median_end_us(job);
	int hang_open = job->incident.open && !strcmp(job->incident.category, "hang");
	double yardstick = l1_baseline(l);
	uint32_t *late;
	size_t n, silent = 0;

	if (median <= 0 || job->live_agents == 0 || isnan(yardstick))
		return;
	/* the job's clock: where its median rank has got to, running on at our speed since it
	 * last moved. The median, not the newest rank: agents that send a step's records in
	 * bursts (replays, accelerated simulations) make the newest rank run far ahead */
	if (median > job->clock_end_us) {
		job->clock_end_us = median;
		job->clock_wall_us = wall_now_us;
	}
	now = job->clock_end_us + (wall_now_us - job->clock_wall_us);
	/* in a slow window, "overdue" is measured against the slow iterations */
	if (l->open && l1_window_ms(l) > yardstick)
		yardstick = l1_window_ms(l);
	late = malloc(job->topo.world * sizeof(uint32_t));
	if (!late)
		return;
	n = diagnose_hung(engine_store(job->engine), now, yardstick, HANG_FACTOR, late, job->topo.world);
	if (n == 0) {
		free(late);
		if (hang_open) {
			enum incident_change change = incident_recover(&job->incident, wall_now_us);

			log_info("job \"%s\": every rank reports again", job->name);
			announce(s, job, change, NULL);
			alerts_report(s, job->name, &job->incident, NULL, NULL, change);
		}
		return;
	}
	/* late records are not a hang: agents behind on a loaded machine (or sending a step's
	 * records in a burst) keep their connections busy and the job goes on without waiting.
	 * Ranks stopped when their connections have delivered nothing for a while and the
	 * job's other ranks wait for them (its median rank does not move either). */
	for (size_t i = 0; i < n; i++)
		silent += wall_now_us - job->heard_us[late[i]] >= HANG_CONFIRM_US;
	free(late);
	if (silent == 0 || wall_now_us - job->clock_wall_us < HANG_CONFIRM_US || job->incident.open ||
	    job->diagnosing || wall_now_us < job->next_hang_diag_us)
		return;
	job->next_hang_diag_us = wall_now_us + 10 * 1000000LL; /* not every tick */
	job->due = 1;
	job->hang_now_us = now;
	jobs_diagnose_due(s, job);
}

static void free_job(const char *key, void *value, void *arg)
{
	struct job *job = value;

	(void)key;
	(void)arg;
	free(job->latest_report);
	free(job->heard_us);
	held_free(&job->held);
	l2_free(&job->l2);
	engine_destroy(job->engine);
	free(job);
}

static void forget(struct server *s, struct job *job)
{
	alerts_forget(s, job->name);
	strmap_del(&s->jobs, job->name);
	s->m.jobs--;
	free_job(job->name, job, NULL);
}

/* Resolves job's open incident as ended: its agents left (or, restored, never came back). */
static void resolve_left(struct server *s, struct job *job, int64_t now_us, const char *why)
{
	char summary[sizeof(job->incident.summary)];
	enum incident_change change = incident_end(&job->incident, now_us);

	if (change == INCIDENT_NONE)
		return;
	snprintf(summary, sizeof(summary), "%s; the last diagnosis said: %.300s", why, job->incident.summary);
	snprintf(job->incident.summary, sizeof(job->incident.summary), "%s", summary);
	s->m.incident_changes[change]++;
	log_info("INCIDENT %s resolved: job \"%s\": %s", job->incident.key, job->name, why);
	alerts_report(s, job->name, &job->incident, NULL, NULL, change);
}

/* names collected while a map is walked (it is not changed meanwhile), at most cap; due
 * counts them all */
struct retire_scan {
	int64_t now_us, after_us;
	char (*names)[128], (*ended)[128];
	size_t n, n_ended, cap, due, due_ended;
};

static void note_retirable(const char *key, void *value, void *arg)
{
	struct retire_scan *rs = arg;
	struct job *job = value;

	(void)key;
	if (job->live_agents)
		return;
	if (!job->alone_since_us)
		job->alone_since_us = rs->now_us;
	if (job->goodbye && !job->ended_us && !job->deposed) {
		rs->due_ended++;
		if (rs->n_ended < rs->cap)
			snprintf(rs->ended[rs->n_ended++], sizeof(rs->ended[0]), "%s", job->name);
	}
	if ((rs->now_us - job->alone_since_us < rs->after_us && !job->deposed) || job->diagnosing)
		return;
	rs->due++;
	if (rs->n < rs->cap)
		snprintf(rs->names[rs->n++], sizeof(rs->names[0]), "%s", job->name);
}

/* What the job's agents made durable stays in s->agents: an agent coming back is told where
 * to go on, and the writer would take a sequence restarted from 1 for a resend. */
static void retire(struct server *s, const char *name, int64_t now_us, int64_t after_s)
{
	struct job *job = strmap_get(&s->jobs, name);
	char why[160];

	if (job->deposed) { /* its incident is the new owner's */
		forget(s, job);
		log_info("job \"%s\": forgotten (another instance owns it)", name);
		return;
	}
	snprintf(why, sizeof(why), "its agents left: none connected for %lld s", (long long)after_s);
	resolve_left(s, job, now_us, why);
	forget(s, job);
	if (s->cluster)
		cluster_release(s, name);
	log_info("job \"%s\": forgotten after %lld s without agents (its records and reports stay in the database)",
		 name, (long long)after_s);
}

void jobs_lost(struct server *s, const char *name)
{
	struct job *job = strmap_get(&s->jobs, name);

	if (job)
		job->deposed = 1; /* forgotten by the next jobs_retire, once its diagnosis is back */
}

void jobs_taken_over(struct server *s, const char *name, struct storage_lease *l)
{
	struct job *job = strmap_get(&s->jobs, name);

	/* what this instance had of the job before another took it over is stale */
	if (job && job->diagnosing) {
		log_warning("job \"%s\": taken back while a diagnosis of its old window runs; its incident goes on "
			    "from memory",
			    name);
		return; /* the job stays: nothing is restored into it */
	}
	if (job)
		forget(s, job);
	storage_lease_incidents(l, restored_row, s);
	struct restored *r = strmap_get(&s->restored, name);

	if (r && l->window) {
		r->window = l->window;
		l->window = NULL;
	}
}

static void note_restored(const char *key, void *value, void *arg)
{
	struct retire_scan *rs = arg;

	(void)value;
	if (rs->n < rs->cap)
		snprintf(rs->names[rs->n++], sizeof(rs->names[0]), "%s", key);
}

/* The job's agents all left, the last one saying Goodbye: the job ended, its incident with it. */
static void end(struct server *s, const char *name, int64_t now_us)
{
	struct job *job = strmap_get(&s->jobs, name);

	job->ended_us = now_us;
	log_info("job \"%s\": ended (its agents left, the last saying goodbye)", name);
	resolve_left(s, job, now_us, "the job ended: its agents left");
}

/* Every job due is retired in one call: the names are collected first (the map is not
 * changed while walked), counted, then taken; so are the jobs that ended. */
void jobs_retire(struct server *s, int64_t wall_now_us, int64_t started_us)
{
	int64_t after_s = s->cfg.job_retire_s, after_us = after_s * 1000000;
	struct retire_scan rs = {.now_us = wall_now_us, .after_us = after_us};
	char(*names)[128] = NULL, (*ended)[128] = NULL;

	strmap_each(&s->jobs, note_retirable, &rs);
	if (rs.due || rs.due_ended) {
		size_t due = rs.due, n_ended = rs.due_ended;
		rs = (struct retire_scan){.now_us = wall_now_us, .after_us = after_us, .cap = due > n_ended ? due : n_ended};
		rs.names = names = malloc((rs.cap ? rs.cap : 1) * sizeof(*names));
		rs.ended = ended = malloc((rs.cap ? rs.cap : 1) * sizeof(*ended));
		if (!names || !ended) {
			free(names);
			free(ended);
			log_warning("out of memory retiring %zu jobs; trying again in a second", rs.cap);
			return;
		}
		strmap_each(&s->jobs, note_retirable, &rs);
		for (size_t i = 0; i < rs.n_ended; i++)
			end(s, ended[i], wall_now_us);
		for (size_t i = 0; i < rs.n; i++)
			retire(s, names[i], wall_now_us, after_s);
		free(names);
		free(ended);
		names = ended = NULL;
	}
	if (s->restored.len && wall_now_us - started_us >= after_us) {
		struct retire_scan q = {.cap = s->restored.len};

		if (!(q.names = names = malloc(q.cap * sizeof(*names))))
			return;
		strmap_each(&s->restored, note_restored, &q);
		for (size_t i = 0; i < q.n; i++) {
			struct restored *r = strmap_del(&s->restored, names[i]);
			struct job *job = calloc(1, sizeof(*job));
			char why[160];

			if (job) { /* the incident's own job struct, for its alerts */
				snprintf(job->name, sizeof(job->name), "%s", names[i]);
				job->incident = r->inc;
				alerts_restore(s, job->name, r->alert, r->report);
				snprintf(why, sizeof(why),
					 "its agents did not come back within %lld s of culpritd's start",
					 (long long)after_s);
				resolve_left(s, job, wall_now_us, why);
				alerts_forget(s, job->name);
				free(job);
			}
			restored_free(r);
		}
	}
	free(names);
}

static void free_restored(const char *key, void *value, void *arg)
{
	(void)key;
	(void)arg;
	restored_free(value);
}

void jobs_free_all(struct server *s)
{
	strmap_each(&s->restored, free_restored, NULL);
	strmap_free(&s->restored);
	strmap_each(&s->jobs, free_job, NULL);
	strmap_free(&s->jobs);
}
