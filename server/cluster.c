/* cluster.c: see cluster.h.
 *
 * Per job the loop keeps a lease entry: NONE (not looked up, or lost), ASKING (an acquire is
 * on the worker; the Hellos that wait for it are listed), OWNED (with its epoch), OTHER (the
 * owner's addresses, believed for OTHER_TTL_MS before asking again) or FAILED (the database
 * did not answer; asked again after OTHER_TTL_MS). Renewal: every lease_s / 3 one statement
 * extends every lease of this instance; an OWNED job it does not return is lost (another
 * instance took it after it expired): its connections are closed and its agents, coming
 * back, are redirected. The worker runs its statements in order, so a renewal submitted
 * after an acquisition was taken sees it (acquisitions taken after a renewal's submission are
 * not judged by it). */
#include "cluster.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "lease.h"
#include "log.h"
#include "query.h"
#include "server.h"

#define OTHER_TTL_MS 1000 /* another's lease (or a failed lookup) is believed this long */
#define MAX_WAITING 4096  /* Hellos waiting for one job's lease lookup; more are told to retry */
#define RENEW_TOKEN 0     /* result token of a renewal; an acquisition's is its lease */

enum lease_state { LEASE_NONE, LEASE_ASKING, LEASE_OWNED, LEASE_OTHER, LEASE_FAILED, LEASE_RELEASING };

struct lease {
	enum lease_state state;
	uint64_t epoch;
	uint64_t acquired_tick;       /* the tick when the acquisition was taken */
	int64_t until_ms;             /* OTHER, FAILED: believed until (clock_mono_ms) */
	int64_t asked_ms;             /* ASKING: since when (clock_mono_ms) */
	char agent_addr[256];         /* OTHER: where its agents are sent */
	int agent_room;               /* OTHER: agent connections the owner takes (0: relay them) */
	struct storage_lease_req req; /* ASKING: the statement's */
	uint64_t *waiting;            /* ASKING: connection ids of the Hellos waiting */
	size_t n_waiting, cap_waiting;
};

struct cluster {
	const struct cluster_calls *calls;
	char owner[128];
	char api_url[256];
	struct storage_query *q;
	struct event *wake, *renew_timer;
	struct strmap leases;           /* job -> struct lease */
	struct storage_lease_req renew; /* the renewal's (one at a time) */
	bool renewing;
	uint64_t tick, renew_tick;
};

/* How many more agent connections this instance takes (written with its leases: another
 * instance relays the agents of its jobs when this is 0). */
static int agent_room(const struct server *s)
{
	uint64_t agents = metrics_open_connections(&s->m) - s->m.relay_conns;

	return agents >= (uint64_t)s->cfg.max_connections ? 0 : (int)((uint64_t)s->cfg.max_connections - agents);
}

const char *cluster_owner(const struct server *s) { return s->cluster->owner; }

static struct lease *lease_of(const struct server *s, const char *job)
{
	return s->cluster ? strmap_get(&s->cluster->leases, job) : NULL;
}

uint64_t cluster_epoch(const struct server *s, const char *job)
{
	struct lease *l = lease_of(s, job);

	return l && l->state == LEASE_OWNED ? l->epoch : 0;
}

static void lost(struct server *s, const char *job, struct lease *l)
{
	log_warning("job \"%s\": its lease (epoch %" PRIu64
		    ") is another instance's now; closing its agents' connections",
		    job, l->epoch);
	l->state = LEASE_NONE;
	l->epoch = 0;
	s->m.leases_lost++;
	s->cluster->calls->lost(s, job);
}

void cluster_lost(struct server *s, const char *job)
{
	struct lease *l = lease_of(s, job);

	if (l && l->state == LEASE_OWNED)
		lost(s, job, l);
}

enum cluster_answer cluster_hello(struct server *s, const char *job, uint64_t conn_id, uint64_t *epoch, const char **to)
{
	struct cluster *c = s->cluster;
	struct lease *l = strmap_get(&c->leases, job);

	if (!l) {
		if (!(l = calloc(1, sizeof(*l))) || strmap_put(&c->leases, job, l) < 0) {
			free(l);
			return CLUSTER_BUSY;
		}
	}
	if ((l->state == LEASE_OTHER || l->state == LEASE_FAILED) && clock_mono_ms() >= l->until_ms)
		l->state = LEASE_NONE;
	switch (l->state) {
	case LEASE_OWNED: *epoch = l->epoch; return CLUSTER_OWNED;
	case LEASE_OTHER: *to = l->agent_addr; return l->agent_room > 0 ? CLUSTER_REDIRECT : CLUSTER_RELAY;
	case LEASE_FAILED:
	case LEASE_RELEASING: return CLUSTER_BUSY;
	case LEASE_NONE:
		l->req = (struct storage_lease_req){.owner = c->owner,
						    .agent_addr = s->cfg.advertise_agent_addr,
						    .api_url = c->api_url,
						    .lease_s = (int)s->cfg.lease_s,
						    .window_iters = (uint32_t)s->cfg.window_iters,
						    .agent_room = agent_room(s)};
		snprintf(l->req.job, sizeof(l->req.job), "%s", job);
		if (storage_query_submit_fn(c->q, (uint64_t)(uintptr_t)l, storage_lease_acquire, &l->req) < 0)
			return CLUSTER_BUSY;
		l->state = LEASE_ASKING;
		l->asked_ms = clock_mono_ms();
		/* fall through */
	case LEASE_ASKING:
		if (l->n_waiting == l->cap_waiting) {
			size_t cap = l->cap_waiting ? l->cap_waiting * 2 : 8;
			uint64_t *w = cap <= MAX_WAITING ? realloc(l->waiting, cap * sizeof(*w)) : NULL;

			if (!w)
				return CLUSTER_BUSY;
			l->waiting = w;
			l->cap_waiting = cap;
		}
		l->waiting[l->n_waiting++] = conn_id;
		return CLUSTER_WAIT;
	}
	return CLUSTER_BUSY;
}

static void apply_progress(struct server *s, const char *job, const char *lines)
{
	while (*lines) {
		const char *tab = strchr(lines, '\t'), *nl = tab ? strchr(tab, '\n') : NULL;
		char agent[128];

		if (!nl)
			return;
		snprintf(agent, sizeof(agent), "%.*s", (int)(tab - lines), lines);
		s->cluster->calls->progress(s, job, agent, strtoull(tab + 1, NULL, 10));
		lines = nl + 1;
	}
}

static void acquired(struct server *s, struct lease *l, struct storage_query_result *r)
{
	struct storage_lease *got = (struct storage_lease *)r->text;
	const char *job = l->req.job;

	if (r->failed || !got) {
		log_warning("job \"%s\": could not look up its lease: %s", job, r->error);
		l->state = LEASE_FAILED;
		l->until_ms = clock_mono_ms() + OTHER_TTL_MS;
	} else if (got->owned) {
		l->state = LEASE_OWNED;
		l->epoch = got->epoch;
		l->acquired_tick = ++s->cluster->tick;
		s->m.leases_acquired++;
		log_info("job \"%s\": lease acquired (epoch %" PRIu64 ") in %" PRId64 " ms: %" PRId64
			 " waiting for the lease row, %" PRId64 " reading the job back",
			 job, got->epoch, clock_mono_ms() - l->asked_ms, got->lock_ms, got->read_ms);
		apply_progress(s, job, got->data);
		s->cluster->calls->taken_over(s, job, got);
	} else {
		l->state = LEASE_OTHER;
		l->until_ms = clock_mono_ms() + OTHER_TTL_MS;
		snprintf(l->agent_addr, sizeof(l->agent_addr), "%s", got->agent_addr);
		l->agent_room = got->agent_room;
	}
	if (got)
		free(got->window); /* NULL when jobs_taken_over took it */
	free(r->text);
	/* the waiting Hellos go on (each looks at the lease again) */
	uint64_t *waiting = l->waiting;
	size_t n = l->n_waiting;

	l->waiting = NULL;
	l->n_waiting = l->cap_waiting = 0;
	for (size_t i = 0; i < n; i++)
		s->cluster->calls->resume(s, waiting[i]);
	free(waiting);
}

struct renew_scan {
	struct server *s;
	const char *held; /* "job\tepoch\n" lines */
	char lost[16][128];
	size_t n_lost;
};

static bool holds(const char *lines, const char *job, uint64_t epoch)
{
	char want[160];
	size_t len = (size_t)snprintf(want, sizeof(want), "%s\t%" PRIu64 "\n", job, epoch);

	for (const char *p = lines; p && *p; p = strchr(p, '\n') + 1) {
		if (strncmp(p, want, len) == 0)
			return true;
		if (!strchr(p, '\n'))
			break;
	}
	return false;
}

static void judge(const char *job, void *value, void *arg)
{
	struct renew_scan *rs = arg;
	struct lease *l = value;

	if (l->state == LEASE_OWNED && l->acquired_tick < rs->s->cluster->renew_tick &&
	    !holds(rs->held, job, l->epoch) && rs->n_lost < 16)
		snprintf(rs->lost[rs->n_lost++], sizeof(rs->lost[0]), "%s", job);
}

static void renewed(struct server *s, struct storage_query_result *r)
{
	struct cluster *c = s->cluster;
	struct renew_scan rs = {.s = s, .held = r->text ? r->text : ""};

	c->renewing = false;
	if (r->failed) {
		/* the writer's fencing keeps a lease that lapses meanwhile safe */
		log_warning("could not renew the job leases: %s", r->error);
		return;
	}
	strmap_each(&c->leases, judge, &rs);
	for (size_t i = 0; i < rs.n_lost; i++)
		lost(s, rs.lost[i], strmap_get(&c->leases, rs.lost[i]));
	free(r->text);
}

#define RELEASE_BIT 1 /* in a result token: a release of the lease the rest points to */

void cluster_release(struct server *s, const char *job)
{
	struct lease *l = lease_of(s, job);

	if (!l || l->state != LEASE_OWNED)
		return;
	l->req.epoch = l->epoch; /* job and owner as acquired */
	if (storage_query_submit_fn(s->cluster->q, (uint64_t)(uintptr_t)l | RELEASE_BIT, storage_lease_release,
				    &l->req) < 0) {
		log_warning("job \"%s\": its lease is not given back (queue full); it expires", job);
		l->state = LEASE_NONE; /* no longer renewed */
		return;
	}
	l->state = LEASE_RELEASING;
}

static void released(struct server *s, struct lease *l, struct storage_query_result *r)
{
	if (r->failed)
		log_warning("job \"%s\": could not give its lease back: %s; it expires", l->req.job, r->error);
	free(r->text);
	if (l->state != LEASE_RELEASING)
		return;
	strmap_del(&s->cluster->leases, l->req.job);
	free(l->waiting);
	free(l);
}

/* Entries that say nothing now (not owned, nothing asked, nobody waiting): dropped a few at a
 * time, so that the map holds the jobs this instance owns and those it heard of lately. */
struct prune_scan {
	char names[64][128];
	size_t n;
};

static void note_stale(const char *job, void *value, void *arg)
{
	struct prune_scan *ps = arg;
	struct lease *l = value;

	if (ps->n < 64 && (l->state == LEASE_NONE ||
			   ((l->state == LEASE_OTHER || l->state == LEASE_FAILED) && clock_mono_ms() >= l->until_ms)))
		snprintf(ps->names[ps->n++], sizeof(ps->names[0]), "%s", job);
}

static void prune(struct cluster *c)
{
	struct prune_scan ps = {.n = 0};

	strmap_each(&c->leases, note_stale, &ps);
	for (size_t i = 0; i < ps.n; i++) {
		struct lease *l = strmap_del(&c->leases, ps.names[i]);

		free(l->waiting);
		free(l);
	}
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	struct storage_query_result res[32];
	size_t n;

	(void)fd;
	(void)what;
	while ((n = storage_query_take(s->cluster->q, res, 32)) > 0) {
		for (size_t i = 0; i < n; i++) {
			if (res[i].token == RENEW_TOKEN)
				renewed(s, &res[i]);
			else if (res[i].token & RELEASE_BIT)
				released(s, (struct lease *)(uintptr_t)(res[i].token & ~(uint64_t)RELEASE_BIT),
					 &res[i]);
			else
				acquired(s, (struct lease *)(uintptr_t)res[i].token, &res[i]);
		}
	}
}

static void wake(void *arg) { event_active(((struct server *)arg)->cluster->wake, 0, 0); }

static void renew_cb(evutil_socket_t fd, short what, void *arg)
{
	struct server *s = arg;
	struct cluster *c = s->cluster;

	(void)fd;
	(void)what;
	prune(c);
	if (c->renewing)
		return;
	c->renew = (struct storage_lease_req){
		.owner = c->owner, .lease_s = (int)s->cfg.lease_s, .agent_room = agent_room(s)};
	if (storage_query_submit_fn(c->q, RENEW_TOKEN, storage_lease_renew, &c->renew) == 0) {
		c->renewing = true;
		c->renew_tick = ++c->tick;
	}
}

int cluster_start(struct server *s, const struct cluster_calls *calls)
{
	struct cluster *c = calloc(1, sizeof(*c));
	struct timeval every = {(time_t)(s->cfg.lease_s / 3), (suseconds_t)(s->cfg.lease_s % 3) * 333333};
	char host[64] = "localhost";

	if (!c)
		return -1;
	s->cluster = c;
	c->calls = calls;
	if (s->cfg.instance_id[0]) {
		snprintf(c->owner, sizeof(c->owner), "%s", s->cfg.instance_id);
	} else {
		gethostname(host, sizeof(host) - 1);
		snprintf(c->owner, sizeof(c->owner), "%s:%ld", host, (long)getpid());
	}
	if (s->cfg.advertise_api_url[0])
		snprintf(c->api_url, sizeof(c->api_url), "%s", s->cfg.advertise_api_url);
	else
		snprintf(c->api_url, sizeof(c->api_url), "http://%s", s->cfg.http_listen);
	c->wake = event_new(s->base, -1, 0, wake_cb, s);
	c->renew_timer = event_new(s->base, -1, EV_PERSIST, renew_cb, s);
	c->q = storage_query_start(&(struct storage_query_config){.dsn = s->db_dsn,
								  .threads = 1,
								  .queue_max = 1024,
								  .statement_timeout_ms = 5000,
								  .wake = wake,
								  .wake_arg = s});
	if (!c->wake || !c->renew_timer || !c->q || event_add(c->renew_timer, &every) < 0) {
		log_error("could not start the job leases");
		return -1;
	}
	log_info("instance \"%s\": jobs are owned through leases of %lld s; agents of this instance's jobs are sent to "
		 "%s",
		 c->owner, (long long)s->cfg.lease_s, s->cfg.advertise_agent_addr);
	return 0;
}

static void free_lease(const char *job, void *value, void *arg)
{
	struct lease *l = value;

	(void)job;
	(void)arg;
	free(l->waiting);
	free(l);
}

void cluster_stop(struct server *s)
{
	struct cluster *c = s->cluster;
	char err[256] = "";

	if (!c)
		return;
	if (c->q)
		storage_query_stop(c->q);
	if (storage_lease_release_all(s->db_dsn, c->owner, err, sizeof(err)) < 0)
		log_warning("could not give the job leases back: %s; they expire within %lld s", err,
			    (long long)s->cfg.lease_s);
	else
		log_info("job leases given back");
	if (c->wake)
		event_free(c->wake);
	if (c->renew_timer)
		event_free(c->renew_timer);
	strmap_each(&c->leases, free_lease, NULL);
	strmap_free(&c->leases);
	free(c);
	s->cluster = NULL;
}
