/* api_console.c: the endpoints the web console's pages read beside the jobs' own (docs/api.md):
 * GET /api/v1/jobs/{job}/heatmap, a job's rank x iteration heat map, and GET /api/v1/fleet,
 * the hosts most often a culprit across jobs.
 *
 * A heat map of a job this culpritd holds is gathered on the loop from its window (the window
 * is the loop's: it changes with every batch), GATHER_CELLS cells a loop pass so that agents'
 * batches wait no longer than a few milliseconds behind it, and encoded on a query worker
 * (heatmap.c); one of a job it does not hold is read from PostgreSQL and encoded on a query
 * worker. At most HEATMAPS_RUNNING are gathered or encoded at once (503 beyond):
 * each holds the iteration times and the metric's values twice (16 bytes a cell: 13 MB at
 * 12,960 ranks x 64 iterations, 100 MB at 100,000). */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "clock.h"
#include "log.h"
#include "heatmap.h"
#include "heatmap_db.h"
#include "jobs.h"
#include "query.h"
#include "reply.h"
#include "server.h"
#include "strmap.h"
#include "topo.h"

#define HEATMAPS_RUNNING 4
#define GATHER_CELLS 262144 /* (rank, iteration) values read from a window per loop pass: about 4 ms */
#define FLEET_DAYS_MAX 365
#define FLEET_HOSTS_MAX 500

struct heatmap_ctx {
	struct heatmap_data d;
	struct topo topo;
	struct strmap hosts; /* host name -> index + 1 (database: filled on the worker) */
	uint32_t *running;   /* the server's count of heat maps under way */
	int in_memory;       /* gathered on the loop */
	int64_t first_iter;  /* the range asked (database): < 0 the last n */
	uint32_t n_iters;
	int found;   /* database: the job is stored */
	int gzipped; /* the answer is gzip'd */

	/* gathering from the window, GATHER_CELLS a loop pass (in s->heatmaps_gathering) */
	struct server *s;
	struct evhttp_request *req;
	struct event *pass;
	struct heatmap_ctx *next; /* in s->heatmaps_gathering */
	int gathering;
	uint32_t next_rank, slot, passes;
	int name, has_slot;
	int64_t loop_us, longest_us; /* spent on the loop: in all, the longest pass */
};

/* Out of s->heatmaps_gathering: gathered (or given up). */
static void gathered(struct heatmap_ctx *c)
{
	struct heatmap_ctx **pp;

	if (!c->gathering)
		return;
	pp = &c->s->heatmaps_gathering;
	while (*pp != c)
		pp = &(*pp)->next;
	*pp = c->next;
	c->gathering = 0;
}

static void ctx_free(void *p)
{
	struct heatmap_ctx *c = p;

	gathered(c);
	if (c->pass)
		event_free(c->pass);
	(*c->running)--;
	heatmap_data_free(&c->d);
	strmap_free(&c->hosts);
	free(c);
}

static uint32_t host_index(struct heatmap_ctx *c, const char *name)
{
	struct strmap_entry *e = strmap_find(&c->hosts, name);
	uint32_t i;

	if (e)
		return (uint32_t)(e->num - 1);
	i = heatmap_add_host(&c->d, name);
	if (i == UINT32_MAX || strmap_put_num(&c->hosts, name, (int64_t)i + 1) < 0)
		return UINT32_MAX;
	return i;
}

/* Role group, group key and host of rank r. 0, or -1 out of memory. */
static int place_rank(struct heatmap_ctx *c, uint32_t r, const char *host)
{
	struct topo_coords co = topo_coords(&c->topo, r);
	uint32_t h = host_index(c, host);

	if (h == UINT32_MAX)
		return -1;
	c->d.role[r] = topo_role_group(&c->topo, r);
	c->d.host[r] = h;
	c->d.key[r] = c->d.group == HEATMAP_BY_STAGE ? co.pp : c->d.group == HEATMAP_BY_DP ? co.dp : h;
	return 0;
}

/* ---- from the window (on the loop) ---- */

static int culprits_of_report(struct heatmap_data *d, const char *text)
{
	json_t *j = text ? json_loads(text, 0, NULL) : NULL, *x;
	size_t i;
	int rc = 0;

	json_array_foreach(json_object_get(j, "suspects"), i, x)
	{
		const char *role = json_string_value(json_object_get(x, "role"));

		if (role && strcmp(role, "culprit") == 0 &&
		    heatmap_add_culprit(d, (uint32_t)json_integer_value(json_object_get(x, "rank"))) < 0)
			rc = -1;
	}
	json_decref(j);
	return rc;
}

/* The range, the arrays, the culprits and the metric's phase slot; the values follow. */
static int gather_start(struct server *s, struct job *job, struct heatmap_ctx *c, int64_t from, uint32_t n)
{
	const struct store *st = engine_store(job->engine);
	uint32_t max = store_max_iter(st), ring = (uint32_t)s->cfg.window_iters, lowest, first = 0, last = 0;

	c->name = strcmp(c->d.metric, "step") == 0 ? -1 : store_find_name(st, c->d.metric);
	lowest = max + 1 >= ring ? max + 1 - ring : 0;
	if (store_any(st)) {
		first = from >= 0 ? (uint32_t)from : max + 1 >= n ? max + 1 - n : 0;
		first = first < lowest ? lowest : first;
		last = from >= 0 && (uint64_t)from + n - 1 < max ? (uint32_t)from + n - 1 : max;
	}
	c->topo = job->topo;
	if (heatmap_data_alloc(&c->d, job->topo.world, store_any(st) && first <= last ? last - first + 1 : 0,
			       c->name < 0) < 0 ||
	    culprits_of_report(&c->d, job->latest_report) < 0)
		return -1;
	c->d.first_iter = first;
	c->d.n_roles = topo_role_group_count(&c->topo);
	for (uint32_t p = 0; p < store_phase_count(st); p++) {
		if (heatmap_add_phase(&c->d, store_name(st, store_phase_name(st, p))) < 0)
			return -1;
		if (c->name >= 0 && store_phase_name(st, p) == (uint32_t)c->name)
			c->slot = p, c->has_slot = 1;
	}
	return 0;
}

/* The next ranks' values, GATHER_CELLS of them: 1 when every rank is done, 0 more to come,
 * -1 out of memory. */
static int gather_slice(struct heatmap_ctx *c, const struct store *st)
{
	uint32_t first = c->d.first_iter, n = c->d.n_iters, end = c->d.world;
	struct store_ring ring;
	char buf[256];

	store_ring_view(st, &ring);
	if ((uint64_t)c->next_rank + GATHER_CELLS / (n ? n : 1) < end)
		end = c->next_rank + GATHER_CELLS / (n ? n : 1);
	for (uint32_t r = c->next_rank; r < end; r++) {
		if (place_rank(c, r, store_host(st, r, buf, sizeof(buf))) < 0)
			return -1;
		for (uint32_t i = 0; i < n; i++) {
			size_t at = (size_t)r * n + i, cell = (size_t)r * ring.ring + (first + i) % ring.ring;

			c->d.step[at] = store_iter_dur(st, r, first + i);
			if (c->name >= 0) /* the ring read directly (store.h): a phase's durations of every rank */
				c->d.value[at] = c->has_slot && ring.tag[cell] == first + i + 1
							 ? ring.pdur[cell * ring.phases + c->slot]
							 : HEATMAP_NONE;
		}
	}
	c->next_rank = end;
	return end == c->d.world;
}

static void heatmap_run(struct pg_conn *conn, void *arg, struct storage_query_result *r);
static void heatmap_done(struct server *s, struct evhttp_request *req, const struct storage_query_result *res,
			 void *arg);

/* Off the loop: encoded on a query worker (here without a database). */
static void encode(struct heatmap_ctx *c)
{
	struct api_req r = {.s = c->s, .req = c->req};

	if (!c->s->writer) {
		struct storage_query_result res = {0};

		heatmap_run(NULL, c, &res);
		heatmap_done(c->s, c->req, &res, c);
		free(res.text);
		ctx_free(c);
		return;
	}
	if (api_query_fn(&r, heatmap_run, heatmap_done, c, ctx_free) < 0)
		ctx_free(c);
}

/* One loop pass of gathering (the job looked up again: it may have gone meanwhile). */
static void gather_pass(evutil_socket_t fd, short what, void *arg)
{
	struct heatmap_ctx *c = arg;
	struct job *job = strmap_get(&c->s->jobs, c->d.job);
	int64_t t0 = clock_mono_us(), t;
	int rc;

	(void)fd;
	(void)what;
	if (!job || job->topo.world != c->d.world) {
		reply_error(c->req, 503, "busy", "job \"%.200s\" was forgotten while its heat map was made; try again",
			    c->d.job);
		ctx_free(c);
		return;
	}
	rc = gather_slice(c, engine_store(job->engine));
	t = clock_mono_us() - t0;
	c->loop_us += t;
	c->longest_us = t > c->longest_us ? t : c->longest_us;
	c->passes++;
	if (rc < 0) {
		reply_error(c->req, 503, "unavailable", "out of memory");
		ctx_free(c);
	} else if (rc == 0) {
		event_active(c->pass, 0, 0);
	} else {
		log_debug("job \"%s\": heat map of %u ranks x %u iterations gathered on the loop in %u passes of at "
			  "most %.1f ms (%.1f ms in all)",
			  c->d.job, c->d.world, c->d.n_iters, c->passes, (double)c->longest_us / 1000,
			  (double)c->loop_us / 1000);
		gathered(c);
		encode(c);
	}
}

/* ---- from PostgreSQL (on a query worker) ---- */

static int sink_job(void *arg, const struct storage_topology *t, uint32_t first_iter, uint32_t n_iters)
{
	struct heatmap_ctx *c = arg;
	char err[128];

	c->found = 1;
	if (topo_init(&c->topo, t->world, t->tp, t->cp, t->pp, t->dp, t->ep, t->order, t->gpus_per_node, err,
		      sizeof(err)) < 0)
		return heatmap_data_alloc(&c->d, 0, 0, 1); /* a topology culpritd would refuse: no rows */
	if (heatmap_data_alloc(&c->d, t->world, n_iters, strcmp(c->d.metric, "step") == 0) < 0)
		return -1;
	c->d.first_iter = first_iter;
	c->d.n_roles = topo_role_group_count(&c->topo);
	for (uint32_t r = 0; r < c->d.world; r++) { /* the default node; then the hosts the ranks rows name */
		char buf[32];

		snprintf(buf, sizeof(buf), "node-%u", topo_node(&c->topo, r));
		if (place_rank(c, r, buf) < 0)
			return -1;
	}
	return 0;
}

static int sink_host(void *arg, uint32_t rank, const char *host)
{
	struct heatmap_ctx *c = arg;
	uint32_t h;

	if (rank >= c->d.world)
		return 0;
	if ((h = host_index(c, host)) == UINT32_MAX)
		return -1;
	c->d.host[rank] = h;
	if (c->d.group == HEATMAP_BY_NODE)
		c->d.key[rank] = h;
	return 0;
}

static int sink_phase(void *arg, const char *name) { return heatmap_add_phase(&((struct heatmap_ctx *)arg)->d, name); }

static int sink_culprit(void *arg, uint32_t rank) { return heatmap_add_culprit(&((struct heatmap_ctx *)arg)->d, rank); }

static int sink_cell(void *arg, uint32_t rank, uint32_t iter, int64_t step_us, int64_t value_us)
{
	struct heatmap_ctx *c = arg;
	size_t at;

	if (rank >= c->d.world || iter < c->d.first_iter || iter - c->d.first_iter >= c->d.n_iters)
		return 0;
	at = (size_t)rank * c->d.n_iters + (iter - c->d.first_iter);
	if (step_us >= 0 && step_us < HEATMAP_NONE)
		c->d.step[at] = (uint32_t)step_us;
	if (c->d.value != c->d.step && value_us >= 0 && value_us < HEATMAP_NONE)
		c->d.value[at] = (uint32_t)value_us;
	return 0;
}

static void oom(struct storage_query_result *r)
{
	r->failed = 1;
	snprintf(r->error, sizeof(r->error), "out of memory");
	snprintf(r->sqlstate, sizeof(r->sqlstate), "53200");
}

/* the query worker: read (a job not in memory), then encode */
static void heatmap_run(struct pg_conn *conn, void *arg, struct storage_query_result *r)
{
	struct heatmap_ctx *c = arg;

	if (!c->in_memory) {
		struct storage_heatmap_sink sink = {sink_job, sink_host, sink_phase, sink_culprit, sink_cell, c};
		int rc = storage_heatmap_read(conn, c->d.job, c->d.metric, c->first_iter, c->n_iters, &sink, r);

		if (rc <= 0) {
			if (rc < 0 && !r->failed)
				oom(r);
			return;
		}
	}
	r->text = heatmap_encode(&c->d, &r->len, &c->gzipped);
	if (!r->text)
		oom(r);
}

static void heatmap_done(struct server *s, struct evhttp_request *req, const struct storage_query_result *res,
			 void *arg)
{
	struct heatmap_ctx *c = arg;
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	(void)s;
	if (res->failed) {
		api_reply_db_error(req, res);
		return;
	}
	if (!c->in_memory && !c->found) {
		reply_error(req, 404, "unknown job", "no job \"%.200s\" is stored", c->d.job);
		return;
	}
	evhttp_add_header(h, "Content-Type", "application/octet-stream");
	evhttp_add_header(h, "Vary", "Accept-Encoding");
	if (c->gzipped)
		evhttp_add_header(h, "Content-Encoding", "gzip");
	evbuffer_add(evhttp_request_get_output_buffer(req), res->text, res->len);
	reply_send(req, 200);
}

static int accepts_gzip(struct evhttp_request *req)
{
	const char *ae = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept-Encoding");

	return ae && strstr(ae, "gzip") != NULL;
}

void api_jobs_heatmap(struct api_req *r)
{
	struct job *job = strmap_get(&r->s->jobs, r->seg[1]);
	const char *metric = evhttp_find_header(&r->query, "metric"), *group = evhttp_find_header(&r->query, "group"),
		   *rows = evhttp_find_header(&r->query, "rows");
	int64_t from, iters;
	unsigned long a = 0, b = 0;
	struct heatmap_ctx *c;
	int g = group ? heatmap_group_parse(group) : HEATMAP_BY_NODE, n = 0;

	if (metric && (!metric[0] || strlen(metric) > 255)) {
		reply_error(r->req, 400, "bad parameter", "metric is step or a phase's name (1-255 bytes)");
		return;
	}
	if (g < 0) {
		reply_error(r->req, 400, "bad parameter", "group is node, stage or dp, not \"%.32s\"", group);
		return;
	}
	if (rows && (sscanf(rows, "%lu-%lu%n", &a, &b, &n) != 2 || rows[n] || b < a || b > INT32_MAX)) {
		reply_error(r->req, 400, "bad parameter", "rows is a range A-B of rows (0-based), not \"%.32s\"", rows);
		return;
	}
	if (api_param_int(r, "from_iter", 0, INT32_MAX, -1, &from) < 0 ||
	    api_param_int(r, "iters", 1, HEATMAP_ITERS_MAX, 64, &iters) < 0)
		return;
	if (!job && !r->s->writer) {
		reply_error(r->req, 404, "unknown job", "no job \"%.200s\" is known to this culpritd", r->seg[1]);
		return;
	}
	if (r->s->heatmaps >= HEATMAPS_RUNNING) {
		reply_error(r->req, 503, "busy", "%d heat maps are being made; try again", HEATMAPS_RUNNING);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		reply_error(r->req, 503, "unavailable", "out of memory");
		return;
	}
	r->s->heatmaps++;
	c->running = &r->s->heatmaps;
	snprintf(c->d.job, sizeof(c->d.job), "%s", r->seg[1]);
	snprintf(c->d.metric, sizeof(c->d.metric), "%s", metric ? metric : "step");
	c->d.group = (enum heatmap_group)g;
	c->d.has_rows = rows != NULL;
	c->d.row_from = (uint32_t)a;
	c->d.row_to = (uint32_t)b;
	c->d.gzip = accepts_gzip(r->req);
	c->d.source = job ? "memory" : "database";
	c->first_iter = from;
	c->n_iters = (uint32_t)iters;
	c->in_memory = job != NULL;
	c->s = r->s;
	c->req = r->req;
	if (job) { /* gathered a slice a loop pass, starting now */
		c->pass = event_new(r->s->base, -1, 0, gather_pass, c);
		if (!c->pass || gather_start(r->s, job, c, from, (uint32_t)iters) < 0) {
			reply_error(r->req, 503, "unavailable", "out of memory");
			ctx_free(c);
			return;
		}
		c->gathering = 1;
		c->next = r->s->heatmaps_gathering;
		r->s->heatmaps_gathering = c;
		gather_pass(-1, 0, c);
		return;
	}
	encode(c); /* read from PostgreSQL and encoded on a query worker */
}

void api_console_stop(struct server *s)
{
	while (s->heatmaps_gathering) { /* their requests went with evhttp_free() */
		struct heatmap_ctx *c = s->heatmaps_gathering;

		s->heatmaps_gathering = c->next;
		c->gathering = 0;
		ctx_free(c);
	}
}

void api_fleet(struct api_req *r)
{
	int64_t days, limit;
	char d[16], l[16];

	if (api_param_int(r, "days", 1, FLEET_DAYS_MAX, 7, &days) < 0 ||
	    api_param_int(r, "limit", 1, FLEET_HOSTS_MAX, 50, &limit) < 0)
		return;
	snprintf(d, sizeof(d), "%" PRId64, days);
	snprintf(l, sizeof(l), "%" PRId64, limit);
	api_query(r, 200, "no answer", STORAGE_REST_FLEET, (const char *const[]){d, l});
}
