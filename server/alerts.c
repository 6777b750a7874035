/* alerts.c: see alerts.h.
 *
 * On the loop: each report / incident change becomes one STORAGE_OP_REPORT carrying the
 * report, the incident row and one outbox row per configured target with its payload already
 * in the target's shape; the writer commits it in one transaction and then wakes the delivery
 * thread. The dedup key of a state change is "<incident key>/<state>/<updates>": the same
 * change queued twice (a retried op) inserts nothing the second time. */
#include "alerts.h"
#include "cluster.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>

#include "actions.h"
#include "deliver.h"
#include "log.h"
#include "server.h"
#include "writer.h"

#define SUSPECTS_LISTED 16

/* What is remembered of a job's incident between its changes: the Alertmanager alert last
 * sent firing (to resolve it, or end it when its labels change) and the first suspect's host
 * (culprits first, by rank). */
struct job_alert {
	json_t *am; /* NULL: none firing */
	char host[REPORT_NAME_MAX];
	char suspects[1024];
	char action[512], avoid[512]; /* the verdict's first action and first "avoid" (actions.h) */
};

struct alerts {
	struct storage_writer *writer; /* its own writer: an alert never waits behind records */
	struct event *writer_wake;
	struct deliver *deliver;
	int on[DELIVER_TARGETS];
	char public_url[512];
	struct storage_op *pending[ALERTS_PENDING_MAX]; /* FIFO ring of ops the writer refused (full) */
	size_t head, n;
	uint64_t dropped;
	uint64_t stored;    /* ops handed to the writer */
	struct strmap jobs; /* job name -> struct job_alert */
};

static void wake_delivery(void *arg) { deliver_wake(arg); }

/* the report writer made room: retry what waits (on the loop) */
static void writer_wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	alerts_tick(arg);
}

static void writer_wake(void *arg) { event_active(arg, EV_READ, 0); }

int alerts_start(struct server *s)
{
	struct alerts *a;
	const struct config *c = &s->cfg;
	const char *urls[DELIVER_TARGETS] = {c->alertmanager_url, c->webhook_url, c->slack_url,
					     c->pagerduty_routing_key[0] ? c->pagerduty_url : ""};
	int any = 0;

	if (!s->writer)
		return 0; /* storage off: nothing is stored, nothing delivered */
	a = calloc(1, sizeof(*a));
	if (!a)
		return -1;
	for (int t = 0; t < DELIVER_TARGETS; t++)
		any |= a->on[t] = urls[t] && urls[t][0];
	if (c->public_url[0]) {
		size_t n = strlen(c->public_url);

		snprintf(a->public_url, sizeof(a->public_url), "%.*s", (int)(c->public_url[n - 1] == '/' ? n - 1 : n),
			 c->public_url);
	} else {
		snprintf(a->public_url, sizeof(a->public_url), "http://%s", c->http_listen);
	}
	/* a writer of its own (same code, own thread and connection, small queue): reports and
	 * alerts are committed at once instead of after the records queued before them */
	a->writer_wake = event_new(s->base, -1, 0, writer_wake_cb, s);
	if (a->writer_wake) {
		struct storage_writer_config wc = {
			.dsn = s->db_dsn,
			.queue_max_records = ALERTS_PENDING_MAX,
			.max_txn_records = 64,
			.wake = writer_wake,
			.wake_arg = a->writer_wake,
			.lease_owner = s->cluster ? cluster_owner(s) : NULL,
		};

		a->writer = storage_writer_start(&wc);
	}
	if (!a->writer) {
		if (a->writer_wake)
			event_free(a->writer_wake);
		free(a);
		return -1;
	}
	if (any) {
		struct deliver_config dc = {
			.dsn = s->db_dsn,
			.webhook_secret = c->webhook_secret,
			.resend_s = (int)c->alert_resend_s,
			.backoff_max_s = (int)c->alert_backoff_max_s,
			.give_up_s = (int)c->alert_give_up_s,
		};

		for (int t = 0; t < DELIVER_TARGETS; t++)
			dc.url[t] = urls[t];
		a->deliver = deliver_start(&dc);
		if (!a->deliver) {
			storage_writer_stop(a->writer, 0);
			event_free(a->writer_wake);
			free(a);
			return -1;
		}
		static const char *const url_settings[DELIVER_TARGETS] = {"alertmanager_url", "webhook_url",
									  "slack_url", "pagerduty_url"};
		char shown[2048];

		for (int t = 0; t < DELIVER_TARGETS; t++)
			if (a->on[t])
				log_info("alerts: delivering to %s (%s)", deliver_target_name((enum deliver_target)t),
					 config_shown(c, url_settings[t], shown, sizeof(shown)));
	}
	s->alerts = a;
	return 0;
}

static void free_job_alert(const char *key, void *value, void *arg)
{
	struct job_alert *ja = value;

	(void)key;
	(void)arg;
	json_decref(ja->am);
	free(ja);
}

void alerts_stop(struct server *s, int timeout_ms)
{
	struct alerts *a = s->alerts;

	if (!a)
		return;
	/* what the loop handed over is committed (within the stop's deadline), then delivery stops */
	if (storage_writer_stop(a->writer, timeout_ms))
		log_warning("alerts: some reports and incident changes were not stored");
	event_free(a->writer_wake);
	deliver_stop(a->deliver);
	if (a->n)
		log_warning("alerts: %zu reports were not stored (the database did not take them in time)", a->n);
	for (; a->n; a->n--, a->head = (a->head + 1) % ALERTS_PENDING_MAX)
		storage_op_free(a->pending[a->head]);
	strmap_each(&a->jobs, free_job_alert, NULL);
	strmap_free(&a->jobs);
	free(a);
	s->alerts = NULL;
}

/* ---- payloads ---- */

static void rfc3339(int64_t us, char *out, size_t size)
{
	time_t t = (time_t)(us / 1000000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
		 tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(us % 1000000 / 1000));
}

static const char *severity(const char *category)
{
	return strcmp(category, "stage_imbalance") == 0 ? "warning" : "critical";
}

struct listed {
	uint32_t rank;
	int late; /* a late arriver, not a culprit */
	const char *host;
};

/* culprits first, each role by rank: the order of the report's summary */
static int cmp_listed(const void *a, const void *b)
{
	const struct listed *x = a, *y = b;

	if (x->late != y->late)
		return x->late - y->late;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The suspects annotation ("0 (node-0, culprit), ...", sorted) and the host label (the
 * first one's host) from the n suspects in v (sorted here). */
static void list_suspects(struct job_alert *ja, struct listed *v, size_t n)
{
	size_t used = 0;

	if (n == 0)
		return;
	qsort(v, n, sizeof(v[0]), cmp_listed);
	snprintf(ja->host, sizeof(ja->host), "%s", v[0].host);
	ja->suspects[0] = '\0';
	for (size_t i = 0; i < n && i < SUSPECTS_LISTED && used + 100 < sizeof(ja->suspects); i++)
		used += (size_t)snprintf(ja->suspects + used, sizeof(ja->suspects) - used, "%s%u (%s, %s)",
					 i ? ", " : "", v[i].rank, v[i].host, v[i].late ? "late arriver" : "culprit");
	if (n > SUSPECTS_LISTED && used + 32 < sizeof(ja->suspects))
		snprintf(ja->suspects + used, sizeof(ja->suspects) - used, " and %zu more", n - SUSPECTS_LISTED);
}

static void note_suspects(struct job_alert *ja, const struct report *r)
{
	struct listed *v = r && r->nsuspects ? calloc(r->nsuspects, sizeof(*v)) : NULL;

	if (!v)
		return;
	for (size_t i = 0; i < r->nsuspects; i++)
		v[i] = (struct listed){r->suspects[i].rank, r->suspects[i].role != REPORT_CULPRIT, r->suspects[i].host};
	list_suspects(ja, v, r->nsuspects);
	free(v);
}

/* the verdict's first action and first "avoid", for the annotations */
static void note_actions(struct job_alert *ja, const struct report *r)
{
	const struct report_finding *f = r && r->nfindings ? &r->findings[0] : NULL;

	if (!r)
		return;
	ja->action[0] = ja->avoid[0] = '\0';
	for (size_t i = 0; f && i < f->nactions; i++) {
		int no = strcmp(f->actions[i].kind, "avoid") == 0;
		char *to = no ? ja->avoid : ja->action;

		if (!to[0])
			snprintf(to, sizeof(ja->action), "%s", f->actions[i].text);
	}
}

/* note_actions from a stored report (JSON) */
static void note_actions_json(struct job_alert *ja, json_t *report)
{
	json_t *acts = json_object_get(json_array_get(json_object_get(report, "findings"), 0), "actions"), *x;
	size_t i;

	ja->action[0] = ja->avoid[0] = '\0';
	json_array_foreach(acts, i, x)
	{
		const char *kind = json_string_value(json_object_get(x, "kind"));
		const char *text = json_string_value(json_object_get(x, "text"));
		char *to = kind && strcmp(kind, "avoid") == 0 ? ja->avoid : ja->action;

		if (text && !to[0])
			snprintf(to, sizeof(ja->action), "%s", text);
	}
}

/* note_suspects from a stored report (JSON) */
static void note_suspects_json(struct job_alert *ja, json_t *report)
{
	json_t *sus = json_object_get(report, "suspects"), *x;
	size_t n = json_array_size(sus), i;
	struct listed *v = n ? calloc(n, sizeof(*v)) : NULL;

	if (!v)
		return;
	json_array_foreach(sus, i, x)
	{
		const char *host = json_string_value(json_object_get(x, "host"));
		const char *role = json_string_value(json_object_get(x, "role"));

		v[i] = (struct listed){(uint32_t)json_integer_value(json_object_get(x, "rank")),
				       !role || strcmp(role, "culprit") != 0, host ? host : ""};
	}
	list_suspects(ja, v, n);
	free(v);
}

static struct job_alert *job_alert_of(struct alerts *a, const char *job)
{
	struct job_alert *ja = strmap_get(&a->jobs, job);

	if (!ja) {
		ja = calloc(1, sizeof(*ja));
		if (!ja || strmap_put(&a->jobs, job, ja) < 0) {
			free(ja);
			return NULL;
		}
	}
	return ja;
}

void alerts_forget(struct server *s, const char *job)
{
	struct job_alert *ja = s->alerts ? strmap_del(&s->alerts->jobs, job) : NULL;

	if (ja)
		free_job_alert(job, ja, NULL);
}

void alerts_restore(struct server *s, const char *job, const char *alert_json, json_t *report)
{
	struct alerts *a = s->alerts;
	struct job_alert *ja;

	if (!a)
		return;
	ja = job_alert_of(a, job);
	if (!ja) {
		log_error("alerts: out of memory; the alerts of job \"%s\" name no suspects", job);
		return;
	}
	json_decref(ja->am);
	ja->am = alert_json ? json_loads(alert_json, 0, NULL) : NULL;
	note_suspects_json(ja, report);
	note_actions_json(ja, report);
}

/* One report or incident change as the builders see it. */
struct alert_msg {
	const char *job;
	const struct incident *inc;
	const struct job_alert *ja;
	const char *json; /* the report, or NULL */
	enum incident_change change;
	char report_url[1024], job_url[1024], dedup[300];
};

/* The Alertmanager alert of the incident's current state (no endsAt). */
static json_t *am_alert(const struct alert_msg *m)
{
	const struct incident *inc = m->inc;
	const struct job_alert *ja = m->ja;
	char starts[64];
	json_t *labels = json_object(), *ann = json_object(), *al = json_object();

	rfc3339(inc->opened_us, starts, sizeof(starts));
	json_object_set_new(labels, "alertname", json_string("CulpritIncident"));
	/* not "job": that is Prometheus's own target label, which routes of a shared
	 * Alertmanager match on */
	json_object_set_new(labels, "training_job", json_string(m->job));
	json_object_set_new(labels, "category", json_string(inc->category));
	json_object_set_new(labels, "severity", json_string(severity(inc->category)));
	if (ja->host[0])
		json_object_set_new(labels, "host", json_string(ja->host));
	json_object_set_new(labels, "incident", json_string(inc->key));
	json_object_set_new(ann, "summary", json_string(inc->summary));
	json_object_set_new(ann, "suspects", json_string(ja->suspects));
	json_object_set_new(ann, "action", json_string(ja->action));
	if (ja->avoid[0])
		json_object_set_new(ann, "avoid", json_string(ja->avoid));
	json_object_set_new(ann, "report_url", json_string(m->report_url));
	json_object_set_new(ann, "job_url", json_string(m->job_url));
	json_object_set_new(al, "labels", labels);
	json_object_set_new(al, "annotations", ann);
	json_object_set_new(al, "startsAt", json_string(starts));
	json_object_set_new(al, "generatorURL", json_string(m->job_url));
	return al;
}

static json_t *ended(json_t *alert, int64_t us)
{
	char ends[64];
	json_t *c = json_deep_copy(alert);

	rfc3339(us, ends, sizeof(ends));
	if (c)
		json_object_set_new(c, "endsAt", json_string(ends));
	return c;
}

static char *dump(json_t *o)
{
	char *text = o ? json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10)) : NULL;

	json_decref(o);
	return text;
}

/* Alertmanager: the alert of the incident's state, with the one it replaces ended (its labels
 * changed) or itself ended (resolved); ja->am keeps what fires, *keep its text for the
 * incident row. NULL when there is nothing to send. */
static char *payload_alertmanager(const struct alert_msg *m, struct job_alert *ja, char **keep_text)
{
	json_t *arr = json_array();

	if (m->change == INCIDENT_RESOLVED) {
		if (ja->am)
			json_array_append_new(arr, ended(ja->am, m->inc->changed_us));
		json_decref(ja->am);
		ja->am = NULL;
	} else {
		json_t *now = am_alert(m);

		/* labels changed (category, host): the old alert ends */
		if (ja->am && !json_equal(json_object_get(ja->am, "labels"), json_object_get(now, "labels")))
			json_array_append_new(arr, ended(ja->am, m->inc->changed_us));
		json_array_append(arr, now);
		*keep_text = json_dumps(now, JSON_COMPACT | JSON_REAL_PRECISION(10));
		json_decref(ja->am);
		ja->am = now;
	}
	if (!json_array_size(arr)) {
		json_decref(arr);
		return NULL;
	}
	return dump(arr);
}

/* The signed webhook: the incident's state with the report as it is. */
static char *payload_webhook(const struct alert_msg *m)
{
	const struct incident *inc = m->inc;
	const struct job_alert *ja = m->ja;
	char opened[64], changed[64], *rest, *out;
	const char *rep = m->json ? m->json : "null";
	size_t n;

	rfc3339(inc->opened_us, opened, sizeof(opened));
	rfc3339(inc->changed_us, changed, sizeof(changed));
	rest = dump(json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:s, s:s, "
			      "s:s, s:s, s:s, s:s, "
			      "s:s?}}",
			      "dedup_key", m->dedup, "state", incident_change_name(m->change), "incident", "key",
			      inc->key, "job", m->job, "category", inc->category, "state",
			      m->change == INCIDENT_RESOLVED ? "resolved" : "open", "summary", inc->summary,
			      "first_iter", (json_int_t)inc->first_iter, "updates", (json_int_t)inc->updates, "opened",
			      opened, "changed", changed, "host", ja->host, "suspects", ja->suspects, "action",
			      ja->action, "avoid", ja->avoid, "report_url", m->report_url, "job_url", m->job_url,
			      "resolution", inc->open || !inc->resolution[0] ? NULL : inc->resolution));
	if (!rest)
		return NULL;
	/* the report goes in as it is: {"report":<json>,<rest without its "{">} */
	n = strlen(rep) + strlen(rest) + 16;
	out = malloc(n);
	if (out)
		snprintf(out, n, "{\"report\":%s,%s", rep, rest + 1);
	free(rest);
	return out;
}

static char *payload_slack(const struct alert_msg *m)
{
	const struct incident *inc = m->inc;
	const struct job_alert *ja = m->ja;
	char text[4096];

	if (m->change == INCIDENT_RESOLVED)
		snprintf(text, sizeof(text), ":white_check_mark: *resolved*: job `%s` %s (%s)\n%s", m->job,
			 strcmp(inc->resolution, "ended") == 0 ? "ended" : "is back to its baseline", inc->category,
			 m->job_url);
	else
		snprintf(text, sizeof(text),
			 ":rotating_light: *%s* job `%s`: %s on %s\n%s\nsuspects: %s\n"
			 "action: %s\n%s%s%s%s",
			 incident_change_name(m->change), m->job, inc->category, ja->host[0] ? ja->host : "?",
			 inc->summary, ja->suspects, ja->action, ja->avoid[0] ? "not this: " : "", ja->avoid,
			 ja->avoid[0] ? "\n" : "", m->job_url);
	return dump(json_pack("{s:s}", "text", text));
}

/* PagerDuty's Events API v2: trigger or resolve, deduplicated by the incident's key. */
static char *payload_pagerduty(const struct alert_msg *m, const char *routing_key)
{
	const struct incident *inc = m->inc;
	const struct job_alert *ja = m->ja;
	char summary[1024];

	snprintf(summary, sizeof(summary), "%s: job %s on %s: %s", inc->category, m->job, ja->host[0] ? ja->host : "?",
		 inc->summary);
	return dump(json_pack(
		"{s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s, s:s}}, "
		"s:[{s:s, s:s}]}",
		"routing_key", routing_key, "event_action", m->change == INCIDENT_RESOLVED ? "resolve" : "trigger",
		"dedup_key", inc->key, "payload", "summary", summary, "source", ja->host[0] ? ja->host : m->job,
		"severity", severity(inc->category), "component", m->job, "group", inc->category, "custom_details",
		"suspects", ja->suspects, "action", ja->action, "avoid", ja->avoid, "report_url", m->report_url,
		"job_url", m->job_url, "state", m->dedup, "links", "href", m->job_url, "text", "culprit job page"));
}

/* ---- the op ---- */

struct strings {
	const char *v[16 + 3 * DELIVER_TARGETS];
	size_t n, bytes;
};

static const char *keep(struct strings *ss, const char *s)
{
	if (s && ss->n < sizeof(ss->v) / sizeof(ss->v[0])) {
		ss->v[ss->n++] = s;
		ss->bytes += strlen(s) + 1;
	}
	return s;
}

static char *dup_in(struct storage_op *op, const char *s) { return s ? storage_op_strdup(op, s) : NULL; }

static void submit(struct server *s, struct alerts *a, struct storage_op *op)
{
	if (a->n == 0 && storage_writer_submit(a->writer, op) == 0) {
		a->stored++;
		return;
	}
	if (a->n == ALERTS_PENDING_MAX) {
		a->dropped++;
		log_warning("alerts: the database is behind; a report of job \"%s\" was dropped (%" PRIu64 " so far)",
			    op->job, a->dropped);
		storage_op_free(op);
		return;
	}
	a->pending[(a->head + a->n) % ALERTS_PENDING_MAX] = op;
	a->n++;
}

/* The op that stores the report, the incident row and the outbox rows: one arena, its
 * strings first counted, then copied. NULL out of memory. */
static struct storage_op *report_op(struct server *s, const struct alert_msg *m, const struct report *r,
				    int has_incident, char *const *payload, const char *am_keep)
{
	const struct incident *inc = m->inc;
	struct strings ss = {0};
	struct storage_op *op;

	keep(&ss, m->job);
	keep(&ss, m->json);
	keep(&ss, r ? r->category : NULL);
	if (has_incident) {
		keep(&ss, inc->key);
		keep(&ss, inc->category);
		keep(&ss, inc->summary);
		keep(&ss, "resolved");
		keep(&ss, inc->resolution);
		keep(&ss, am_keep);
	}
	for (int t = 0; t < DELIVER_TARGETS; t++)
		if (payload[t]) {
			keep(&ss, deliver_target_name((enum deliver_target)t));
			keep(&ss, m->dedup);
			keep(&ss, payload[t]);
		}
	op = storage_op_new(STORAGE_OP_REPORT,
			    ss.bytes + 16 * ss.n + DELIVER_TARGETS * sizeof(struct storage_outbox_row) + 64);
	if (!op)
		return NULL;
	op->job = dup_in(op, m->job);
	op->lease_epoch = cluster_epoch(s, m->job); /* a deposed owner pages nothing */
	op->report_json = dup_in(op, m->json);
	if (r) {
		op->first_iter = r->first_iter;
		op->last_iter = r->last_iter;
		op->category = dup_in(op, r->category);
	}
	if (has_incident) {
		op->incident.key = dup_in(op, inc->key);
		op->incident.category = dup_in(op, inc->category);
		op->incident.summary = dup_in(op, inc->summary);
		op->incident.state = dup_in(op, inc->open ? "open" : "resolved");
		op->incident.resolution = dup_in(op, inc->open || !inc->resolution[0] ? NULL : inc->resolution);
		op->incident.updates = inc->updates;
		op->incident.opened_us = inc->opened_us;
		op->incident.changed_us = inc->changed_us;
		op->incident.alert = dup_in(op, am_keep);
	}
	op->outbox = storage_op_alloc(op, DELIVER_TARGETS * sizeof(struct storage_outbox_row));
	for (int t = 0; t < DELIVER_TARGETS && op->outbox; t++) {
		struct storage_outbox_row *o;

		if (!payload[t])
			continue;
		o = &op->outbox[op->n_outbox++];
		o->target = dup_in(op, deliver_target_name((enum deliver_target)t));
		o->dedup_key = dup_in(op, m->dedup);
		o->payload = dup_in(op, payload[t]);
	}
	return op;
}

void alerts_report(struct server *s, const char *job, const struct incident *inc, const struct report *r,
		   const char *json, enum incident_change change)
{
	struct alerts *a = s->alerts;
	struct job_alert *ja;
	struct alert_msg m = {.job = job, .inc = inc, .json = json, .change = change};
	char *payload[DELIVER_TARGETS] = {0};
	char *am_keep = NULL, *name;
	int has_incident = change != INCIDENT_NONE || inc->open;
	struct storage_op *op;

	actions_report(s, job, inc, r, change);
	if (!a || (!json && !has_incident))
		return;
	ja = job_alert_of(a, job);
	if (!ja) {
		log_error("alerts: out of memory; report of job \"%s\" not stored", job);
		return;
	}
	m.ja = ja;
	if (change == INCIDENT_FIRING || change == INCIDENT_UPDATED) {
		note_suspects(ja, r);
		note_actions(ja, r);
	}
	snprintf(m.report_url, sizeof(m.report_url), "%s/api/v1/jobs/%s/reports/latest", a->public_url, job);
	/* the job's page in the web console (console/app.js reads the name back from the fragment) */
	name = evhttp_encode_uri(job);
	snprintf(m.job_url, sizeof(m.job_url), "%s/#/jobs/%s", a->public_url, name ? name : "");
	free(name);
	snprintf(m.dedup, sizeof(m.dedup), "%s/%s/%u", inc->key, incident_change_name(change), inc->updates);
	if (change != INCIDENT_NONE) {
		if (a->on[DELIVER_ALERTMANAGER])
			payload[DELIVER_ALERTMANAGER] = payload_alertmanager(&m, ja, &am_keep);
		if (a->on[DELIVER_WEBHOOK])
			payload[DELIVER_WEBHOOK] = payload_webhook(&m);
		if (a->on[DELIVER_SLACK])
			payload[DELIVER_SLACK] = payload_slack(&m);
		if (a->on[DELIVER_PAGERDUTY])
			payload[DELIVER_PAGERDUTY] = payload_pagerduty(&m, s->cfg.pagerduty_routing_key);
	}
	op = report_op(s, &m, r, has_incident, payload, am_keep);
	if (!op) {
		log_error("alerts: out of memory; report of job \"%s\" not stored", job);
	} else {
		if (op->n_outbox && a->deliver) {
			op->durable = wake_delivery;
			op->durable_arg = a->deliver;
		}
		submit(s, a, op);
	}
	for (int t = 0; t < DELIVER_TARGETS; t++)
		free(payload[t]);
	free(am_keep);
}

void alerts_tick(struct server *s)
{
	struct alerts *a = s->alerts;
	struct deliver_stats st;

	if (!a)
		return;
	while (a->n && storage_writer_submit(a->writer, a->pending[a->head]) == 0) {
		a->head = (a->head + 1) % ALERTS_PENDING_MAX;
		a->n--;
		a->stored++;
	}
	deliver_get_stats(a->deliver, &st);
	for (int t = 0; t < DELIVER_TARGETS; t++) {
		s->m.alert_sent[t] = st.sent[t];
		s->m.alert_failures[t] = st.failures[t];
		s->m.alert_given_up[t] = st.given_up[t];
	}
	s->m.alert_resends = st.resends;
	s->m.alert_resend_failures = st.resend_failures;
	s->m.alert_pending = st.pending;
	s->m.alert_ops_waiting = a->n;
	s->m.alert_ops_dropped = a->dropped;
	s->m.reports_queued = a->stored;
}

size_t alerts_uncommitted(struct server *s)
{
	struct alerts *a = s->alerts;
	struct storage_writer_stats st;

	if (!a)
		return 0;
	storage_writer_stats(a->writer, &st);
	return a->n + (size_t)st.queued_ops;
}
