/* deliver.c: see deliver.h.
 *
 * One thread: its event_base runs libcurl's multi interface through
 * curl_multi_socket_action (sockets and libcurl's timer become libevent events), a wake event
 * (new rows committed), a poll timer (every second: claim due rows) and a re-send timer.
 * Database calls (storage/outbox.h) block this thread only: they only hold up deliveries.
 * Delivery is at least once: a row sent whose "sent" update is lost is sent again (its
 * claim expires); receivers deduplicate by X-Culprit-Dedup-Key. */
#include "deliver.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <event2/event.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "log.h"
#include "outbox.h"

#define MAX_INFLIGHT 32
#define REQUEST_TIMEOUT_S 10 /* whole request, connection included */

static const char *const target_names[DELIVER_TARGETS] = {"alertmanager", "webhook", "slack", "pagerduty"};

const char *deliver_target_name(enum deliver_target t)
{
	return (unsigned)t < DELIVER_TARGETS ? target_names[t] : "unknown";
}

struct request {
	struct deliver *d;
	CURL *easy;
	struct curl_slist *headers;
	int64_t id; /* outbox row; 0 for a re-send */
	enum deliver_target target;
	int attempts;
	double age_s;
	char *body;
	char err[CURL_ERROR_SIZE];
	struct request *next;
};

struct sock {
	struct event *ev;
	curl_socket_t fd;
};

struct deliver {
	char *url[DELIVER_TARGETS];
	char *secret;
	int resend_s, backoff_max_s, give_up_s, backoff_min_ms;

	pthread_t thread;
	struct event_base *base;
	struct event *wake_ev, *stop_ev, *poll_ev, *resend_ev, *curl_timer;
	CURLM *multi;
	struct storage_outbox *outbox;
	struct log_complaint target_down[DELIVER_TARGETS];
	struct request *inflight;
	int n_inflight;
	int resend_inflight;
	int failing[DELIVER_TARGETS]; /* the last attempt to the target failed */
	int repoll;                   /* a row was delivered: the next of its incident may go */
	unsigned rng;

	_Atomic uint64_t sent[DELIVER_TARGETS], failures[DELIVER_TARGETS], given_up[DELIVER_TARGETS];
	_Atomic uint64_t resends, resend_failures;
	_Atomic int64_t pending;
};

/* ---- requests ---- */

static size_t discard(char *ptr, size_t size, size_t n, void *arg)
{
	(void)ptr;
	(void)arg;
	return size * n;
}

static void request_free(struct request *q)
{
	if (q->easy)
		curl_easy_cleanup(q->easy);
	curl_slist_free_all(q->headers);
	free(q->body);
	free(q);
}

static int add_header(struct request *q, const char *name, const char *value)
{
	char line[1024];
	struct curl_slist *l;

	snprintf(line, sizeof line, "%s%s", name, value);
	l = curl_slist_append(q->headers, line);
	if (!l)
		return -1;
	q->headers = l;
	return 0;
}

/* Starts a POST of body (taken) to target. Returns 0, or -1 (body freed). */
static int request_start(struct deliver *d, enum deliver_target t, int64_t id, const char *dedup_key, char *body,
			 int attempts, double age_s)
{
	struct request *q = calloc(1, sizeof(*q));
	char url[2048];

	if (!q) {
		free(body);
		return -1;
	}
	q->d = d;
	q->id = id;
	q->target = t;
	q->attempts = attempts;
	q->age_s = age_s;
	q->body = body;
	if (t == DELIVER_ALERTMANAGER) {
		size_t n = strlen(d->url[t]);

		snprintf(url, sizeof url, "%.*s/api/v2/alerts", (int)(n && d->url[t][n - 1] == '/' ? n - 1 : n),
			 d->url[t]);
	} else {
		snprintf(url, sizeof url, "%s", d->url[t]);
	}
	q->easy = curl_easy_init();
	/* "Expect:" off: libcurl would otherwise wait up to a second for "100 Continue" before
	 * sending a larger body to a server that does not send it */
	if (!q->easy || add_header(q, "Content-Type: ", "application/json") < 0 || add_header(q, "Expect:", "") < 0 ||
	    (dedup_key && add_header(q, "X-Culprit-Dedup-Key: ", dedup_key) < 0))
		goto fail;
	if (t == DELIVER_WEBHOOK && d->secret[0]) {
		unsigned char md[EVP_MAX_MD_SIZE];
		unsigned int mdlen = 0;
		char hex[2 * EVP_MAX_MD_SIZE + 8];

		if (!HMAC(EVP_sha256(), d->secret, (int)strlen(d->secret), (const unsigned char *)body, strlen(body),
			  md, &mdlen))
			goto fail;
		memcpy(hex, "sha256=", 7);
		for (unsigned int i = 0; i < mdlen; i++)
			snprintf(hex + 7 + 2 * i, 3, "%02x", md[i]);
		if (add_header(q, "X-Culprit-Signature: ", hex) < 0)
			goto fail;
	}
	curl_easy_setopt(q->easy, CURLOPT_URL, url);
	curl_easy_setopt(q->easy, CURLOPT_POST, 1L);
	curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
	curl_easy_setopt(q->easy, CURLOPT_POSTFIELDSIZE, (long)strlen(q->body));
	curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->headers);
	curl_easy_setopt(q->easy, CURLOPT_USERAGENT, "culprit");
	curl_easy_setopt(q->easy, CURLOPT_TIMEOUT, (long)REQUEST_TIMEOUT_S);
	curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(q->easy, CURLOPT_ERRORBUFFER, q->err);
	curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(q->easy, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	if (curl_multi_add_handle(d->multi, q->easy) != CURLM_OK)
		goto fail;
	q->next = d->inflight;
	d->inflight = q;
	d->n_inflight++;
	return 0;
fail:
	log_error("alerts: could not start a request to %s", target_names[t]);
	request_free(q);
	return -1;
}

/* Delay before attempt n+1: min(cap, min * 2^(n-1)), times a jitter in [0.5, 1]. */
static int64_t backoff_ms(struct deliver *d, int attempts)
{
	int64_t ms = d->backoff_min_ms, cap = (int64_t)d->backoff_max_s * 1000;

	for (int i = 1; i < attempts && ms < cap; i++)
		ms *= 2;
	if (ms > cap)
		ms = cap;
	return ms / 2 + (int64_t)(rand_r(&d->rng) % (unsigned)(ms / 2 + 1));
}

/* The target answers again after failures: its rows waiting out their backoff are due now,
 * so that a backlog goes out at once rather than each row at its own next attempt (the ones
 * in flight keep their claim). */
static void target_back(struct deliver *d, enum deliver_target t)
{
	int64_t ids[MAX_INFLIGHT];
	size_t n = 0;

	for (struct request *q = d->inflight; q; q = q->next)
		if (q->id > 0 && n < MAX_INFLIGHT)
			ids[n++] = q->id;
	/* a failure is logged by the outbox; the rows are due after their backoff anyway */
	IGNORE_RESULT(storage_outbox_target_back(d->outbox, target_names[t], ids, n));
	d->repoll = 1;
}

static void request_done(struct deliver *d, struct request *q, CURLcode cc)
{
	long code = 0;
	char why[CURL_ERROR_SIZE + 64];

	curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &code);
	if (cc == CURLE_OK && code >= 200 && code < 300) {
		log_release(&d->target_down[q->target], LOG_INFO, "alerts: delivering to %s again",
			    target_names[q->target]);
		if (d->failing[q->target])
			target_back(d, q->target);
		d->failing[q->target] = 0;
		if (q->id == 0) {
			atomic_fetch_add(&d->resends, 1);
			return;
		}
		atomic_fetch_add(&d->sent[q->target], 1);
		d->repoll = 1;
		/* a failure is logged by the outbox; the row is sent again, and its dedup key tells the receiver */
		IGNORE_RESULT(storage_outbox_sent(d->outbox, q->id));
		return;
	}
	if (cc != CURLE_OK)
		snprintf(why, sizeof why, "%s", q->err[0] ? q->err : curl_easy_strerror(cc));
	else
		snprintf(why, sizeof why, "HTTP status %ld", code);
	log_complain(&d->target_down[q->target], LOG_WARNING, "alerts: delivery to %s failed: %s (retrying)",
		     target_names[q->target], why);
	d->failing[q->target] = 1;
	if (q->id == 0) {
		atomic_fetch_add(&d->resend_failures, 1);
		return;
	}
	atomic_fetch_add(&d->failures[q->target], 1);
	{
		int64_t ms = backoff_ms(d, q->attempts);
		int give_up = q->age_s + (double)ms / 1000.0 > d->give_up_s;

		if (give_up) {
			atomic_fetch_add(&d->given_up[q->target], 1);
			log_error("alerts: gave up delivering alert %" PRId64 " to %s after %d attempts: %s", q->id,
				  target_names[q->target], q->attempts, why);
		}
		/* a failure is logged by the outbox; the row is claimed again when due */
		IGNORE_RESULT(storage_outbox_retry(d->outbox, q->id, why, ms, give_up));
	}
}

static void check_multi(struct deliver *d)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(d->multi, &left))) {
		struct request *q = NULL, **pp;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&q);
		{
			CURLcode cc = m->data.result; /* m is invalid after remove_handle */

			curl_multi_remove_handle(d->multi, q->easy);
			for (pp = &d->inflight; *pp; pp = &(*pp)->next)
				if (*pp == q) {
					*pp = q->next;
					break;
				}
			d->n_inflight--;
			if (q->id == 0)
				d->resend_inflight = 0;
			request_done(d, q, cc);
		}
		request_free(q);
	}
	if (d->repoll) {
		d->repoll = 0;
		event_active(d->wake_ev, EV_READ, 0);
	}
}

/* ---- libcurl on libevent ---- */

static void sock_cb(evutil_socket_t fd, short what, void *arg)
{
	struct deliver *d = arg;
	int running, flags = (what & EV_READ ? CURL_CSELECT_IN : 0) | (what & EV_WRITE ? CURL_CSELECT_OUT : 0);

	curl_multi_socket_action(d->multi, fd, flags, &running);
	check_multi(d);
}

static int curl_sock(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
	struct deliver *d = userp;
	struct sock *k = socketp;
	short kind;

	(void)e;
	if (what == CURL_POLL_REMOVE) {
		if (k) {
			event_free(k->ev);
			free(k);
		}
		curl_multi_assign(d->multi, s, NULL);
		return 0;
	}
	kind = (short)((what & CURL_POLL_IN ? EV_READ : 0) | (what & CURL_POLL_OUT ? EV_WRITE : 0) | EV_PERSIST);
	if (!k) {
		k = calloc(1, sizeof(*k));
		if (!k)
			return -1;
		k->fd = s;
		curl_multi_assign(d->multi, s, k);
	} else {
		event_free(k->ev);
	}
	k->ev = event_new(d->base, s, kind, sock_cb, d);
	if (!k->ev || event_add(k->ev, NULL) < 0)
		return -1;
	return 0;
}

static void curl_timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct deliver *d = arg;
	int running;

	(void)fd;
	(void)what;
	curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi(d);
}

static int curl_timer(CURLM *m, long timeout_ms, void *userp)
{
	struct deliver *d = userp;
	struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};

	(void)m;
	if (timeout_ms < 0)
		evtimer_del(d->curl_timer);
	else
		evtimer_add(d->curl_timer, &tv);
	return 0;
}

/* ---- polling the outbox ---- */

static void claimed(const struct storage_outbox_due *row, void *arg)
{
	struct deliver *d = arg;
	int t = -1;
	char *body;

	for (int k = 0; k < DELIVER_TARGETS; k++)
		if (strcmp(row->target, target_names[k]) == 0)
			t = k;
	if (t < 0 || !d->url[t][0]) {
		/* queued for a target no longer configured: stays pending for a culpritd that has
		 * it (its claim expires) */
		log_complain(&d->target_down[t < 0 ? 0 : t], LOG_WARNING,
			     "alerts: outbox row %" PRId64 " is for target \"%s\", not configured here", row->id,
			     row->target);
		return;
	}
	body = strdup(row->payload);
	if (body)
		request_start(d, (enum deliver_target)t, row->id, row->dedup_key, body, row->attempts, row->age_s);
}

static void poll_outbox(struct deliver *d)
{
	int slots = MAX_INFLIGHT - d->n_inflight, running;
	int64_t pending;

	if (slots > 0)
		IGNORE_RESULT(storage_outbox_claim(d->outbox, slots, claimed, d)); /* -1 logged by the outbox */
	pending = storage_outbox_pending(d->outbox);
	if (pending >= 0)
		atomic_store(&d->pending, pending);
	curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi(d);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	poll_outbox(arg);
}

static void resend_cb(evutil_socket_t fd, short what, void *arg)
{
	struct deliver *d = arg;
	char *body;
	int running;

	(void)fd;
	(void)what;
	if (!d->url[DELIVER_ALERTMANAGER][0] || d->resend_inflight)
		return;
	/* every open incident: those a previous culpritd left open are restored and followed by
	 * this one (jobs_load_incidents) */
	if (storage_outbox_open_alerts(d->outbox, &body) < 0)
		return;
	if (body && request_start(d, DELIVER_ALERTMANAGER, 0, NULL, body, 0, 0) == 0)
		d->resend_inflight = 1;
	curl_multi_socket_action(d->multi, CURL_SOCKET_TIMEOUT, 0, &running);
	check_multi(d);
}

static void stop_cb(evutil_socket_t fd, short what, void *arg)
{
	struct deliver *d = arg;

	(void)fd;
	(void)what;
	event_base_loopbreak(d->base);
}

static void *deliver_main(void *arg)
{
	struct deliver *d = arg;

	poll_outbox(d);
	event_base_dispatch(d->base);
	return NULL;
}

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

struct deliver *deliver_start(const struct deliver_config *cfg)
{
	struct deliver *d = calloc(1, sizeof(*d));
	struct timeval second = {1, 0}, resend = {cfg->resend_s > 0 ? cfg->resend_s : 60, 0};
	int failed = 0;

	if (!d)
		return NULL;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		free(d);
		return NULL;
	}
	d->outbox = storage_outbox_open(cfg->dsn);
	d->secret = dup_or_empty(cfg->webhook_secret);
	failed |= !d->outbox || !d->secret;
	for (int t = 0; t < DELIVER_TARGETS; t++) {
		d->url[t] = dup_or_empty(cfg->url[t]);
		failed |= !d->url[t];
	}
	d->resend_s = cfg->resend_s;
	d->backoff_max_s = cfg->backoff_max_s > 0 ? cfg->backoff_max_s : 300;
	d->give_up_s = cfg->give_up_s > 0 ? cfg->give_up_s : 86400;
	d->backoff_min_ms = cfg->backoff_min_ms > 0 ? cfg->backoff_min_ms : 1000;
	/* rows a previous culpritd left waiting out their backoff go at the first success */
	for (int t = 0; t < DELIVER_TARGETS; t++)
		d->failing[t] = 1;
	d->rng = (unsigned)time(NULL) ^ (unsigned)(uintptr_t)d;
	atomic_store(&d->pending, -1);
	d->base = failed ? NULL : event_base_new();
	d->multi = d->base ? curl_multi_init() : NULL;
	if (!d->multi)
		goto fail;
	curl_multi_setopt(d->multi, CURLMOPT_SOCKETFUNCTION, curl_sock);
	curl_multi_setopt(d->multi, CURLMOPT_SOCKETDATA, d);
	curl_multi_setopt(d->multi, CURLMOPT_TIMERFUNCTION, curl_timer);
	curl_multi_setopt(d->multi, CURLMOPT_TIMERDATA, d);
	d->wake_ev = event_new(d->base, -1, 0, wake_cb, d);
	d->stop_ev = event_new(d->base, -1, 0, stop_cb, d);
	d->poll_ev = event_new(d->base, -1, EV_PERSIST, wake_cb, d);
	d->resend_ev = event_new(d->base, -1, EV_PERSIST, resend_cb, d);
	d->curl_timer = evtimer_new(d->base, curl_timer_cb, d);
	if (!d->wake_ev || !d->stop_ev || !d->poll_ev || !d->resend_ev || !d->curl_timer ||
	    event_add(d->poll_ev, &second) < 0 || event_add(d->resend_ev, &resend) < 0)
		goto fail;
	if (pthread_create(&d->thread, NULL, deliver_main, d) != 0)
		goto fail;
	return d;
fail:
	log_error("alerts: could not start the delivery thread");
	d->thread = 0;
	/* not started: free what was made */
	if (d->wake_ev)
		event_free(d->wake_ev);
	if (d->stop_ev)
		event_free(d->stop_ev);
	if (d->poll_ev)
		event_free(d->poll_ev);
	if (d->resend_ev)
		event_free(d->resend_ev);
	if (d->curl_timer)
		event_free(d->curl_timer);
	if (d->multi)
		curl_multi_cleanup(d->multi);
	if (d->base)
		event_base_free(d->base);
	for (int t = 0; t < DELIVER_TARGETS; t++)
		free(d->url[t]);
	storage_outbox_close(d->outbox);
	free(d->secret);
	free(d);
	curl_global_cleanup();
	return NULL;
}

void deliver_wake(struct deliver *d)
{
	if (d)
		event_active(d->wake_ev, EV_READ, 0);
}

void deliver_get_stats(struct deliver *d, struct deliver_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->pending = -1;
	if (!d)
		return;
	for (int t = 0; t < DELIVER_TARGETS; t++) {
		out->sent[t] = atomic_load(&d->sent[t]);
		out->failures[t] = atomic_load(&d->failures[t]);
		out->given_up[t] = atomic_load(&d->given_up[t]);
	}
	out->resends = atomic_load(&d->resends);
	out->resend_failures = atomic_load(&d->resend_failures);
	out->pending = atomic_load(&d->pending);
	out->connected = storage_outbox_connected(d->outbox);
}

void deliver_stop(struct deliver *d)
{
	if (!d)
		return;
	event_active(d->stop_ev, EV_READ, 0);
	pthread_join(d->thread, NULL);
	while (d->inflight) {
		struct request *q = d->inflight;

		d->inflight = q->next;
		curl_multi_remove_handle(d->multi, q->easy);
		request_free(q);
	}
	event_free(d->wake_ev);
	event_free(d->stop_ev);
	event_free(d->poll_ev);
	event_free(d->resend_ev);
	event_free(d->curl_timer);
	curl_multi_cleanup(d->multi); /* removes the socket events through curl_sock */
	event_base_free(d->base);
	storage_outbox_close(d->outbox);
	for (int t = 0; t < DELIVER_TARGETS; t++)
		free(d->url[t]);
	free(d->secret);
	free(d);
	curl_global_cleanup();
}
