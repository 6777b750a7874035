/* http_conn.c: see http_conn.h.
 *
 * A connection is seen at accept by new_bev() (evhttp asks for its bufferevent); one loop
 * event per connection first settles it, in the same loop pass (before any of its bytes are
 * read): finds evhttp's connection (the bufferevent's callback argument), closes it when it
 * is over max_http_connections, sets TCP_NODELAY on its socket, and then serves as its
 * deadline. The deadline runs while a
 * request is being read and never while a route holds the request (freeing the connection
 * then would free a request a database query still answers). */
#include "http_conn.h"

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <errno.h>
#include <event2/http.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "listen.h"
#include "log.h"
#include "server.h"
#include "tls.h"

struct hconn {
	struct http_conns *hs;
	struct bufferevent *bev;
	struct evhttp_connection *evcon; /* NULL until settled */
	struct event *ev;                /* settles it (activated at accept), then its deadline */
	evutil_socket_t fd;              /* its index in by_fd; -1: no deadline (out of memory) */
	bool over;                       /* accepted over max_http_connections */
	struct hconn *prev, *next;
};

struct http_conns {
	struct server *s;
	struct hconn *head;
	struct hconn **by_fd; /* a request finds its connection by its socket */
	size_t n_by_fd;
	size_t open;
	unsigned long long refused, expired, bad_requests;
	struct listen_pause pause;
	bool listening;
	struct log_complaint over;
};

static void forget(struct hconn *c)
{
	struct http_conns *hs = c->hs;

	if (c->evcon)
		evhttp_connection_set_closecb(c->evcon, NULL, NULL);
	if (c->fd >= 0)
		hs->by_fd[c->fd] = NULL;
	if (c->prev)
		c->prev->next = c->next;
	else
		hs->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	hs->open--;
	event_free(c->ev);
	free(c);
}

static void closed(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	forget(arg);
}

static void arm(struct hconn *c)
{
	struct timeval tv = {(time_t)c->hs->s->cfg.http_timeout_s, 0};

	if (c->fd >= 0)
		evtimer_add(c->ev, &tv);
}

/* 0, or -1 when the index cannot grow (the connection then has no deadline of its own) */
static int index_fd(struct http_conns *hs, struct hconn *c)
{
	if (c->fd < 0)
		return -1;
	if ((size_t)c->fd >= hs->n_by_fd) {
		size_t n = hs->n_by_fd ? hs->n_by_fd : 256;
		struct hconn **m;

		while (n <= (size_t)c->fd)
			n *= 2;
		m = realloc(hs->by_fd, n * sizeof(*m));
		if (!m)
			return -1;
		memset(m + hs->n_by_fd, 0, (n - hs->n_by_fd) * sizeof(*m));
		hs->by_fd = m;
		hs->n_by_fd = n;
	}
	hs->by_fd[c->fd] = c;
	return 0;
}

static void settle(struct hconn *c)
{
	struct http_conns *hs = c->hs;
	void *evcon = NULL;

	bufferevent_getcb(c->bev, NULL, NULL, NULL, &evcon);
	bufferevent_decref(c->bev); /* new_bev's reference: evhttp holds its own while it lives */
	if (!evcon) {
		forget(c); /* evhttp dropped it already (out of memory) */
		return;
	}
	c->evcon = evcon;
	evhttp_connection_set_closecb(c->evcon, closed, c);
	if (c->over) {
		hs->refused++;
		log_complain(&hs->over, LOG_WARNING,
			     "http: max_http_connections (%lld) reached; closing new connections at accept",
			     (long long)hs->s->cfg.max_http_connections);
		evhttp_connection_free(c->evcon); /* closed() frees c */
		return;
	}
	if (hs->over.active && log_complaint_quiet(&hs->over, 1000))
		log_release(&hs->over, LOG_INFO, "http: below max_http_connections again");
	c->fd = bufferevent_getfd(c->bev);
	/* an answer goes out whole at once: with Nagle's algorithm the part past what one write
	 * took (16 KiB) waited for the client's delayed ACK, 40 ms an answer on a kept-alive
	 * connection */
	if (c->fd >= 0 && setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)) < 0)
		log_debug("http: could not set TCP_NODELAY: %s", strerror(errno));
	if (index_fd(hs, c) < 0)
		c->fd = -1;
	arm(c);
}

static void expire(struct hconn *c)
{
	static struct log_limit limit = {.what = "REST connections closed at their deadline"};
	char *peer = NULL;
	uint16_t port = 0;

	c->hs->expired++;
	if (log_limit_allow(&limit)) {
		evhttp_connection_get_peer(c->evcon, &peer, &port);
		log_info("http %s:%u: no whole request within http_timeout_s (%lld s); closing the connection",
			 peer ? peer : "?", (unsigned)port, (long long)c->hs->s->cfg.http_timeout_s);
	}
	evhttp_connection_free(c->evcon); /* closed() frees c */
}

static void conn_event(evutil_socket_t fd, short what, void *arg)
{
	struct hconn *c = arg;

	(void)fd;
	(void)what;
	if (!c->evcon)
		settle(c);
	else
		expire(c);
}

static struct bufferevent *new_bev(struct event_base *base, void *arg)
{
	struct server *s = arg;
	struct http_conns *hs = s->http_conns;
	struct bufferevent *bev =
		s->tls ? tls_http_bufferevent(s, base) : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	struct hconn *c = bev ? calloc(1, sizeof(*c)) : NULL;

	if (hs->listening)
		listen_pause_ok(&hs->pause);
	if (c)
		c->ev = event_new(base, -1, 0, conn_event, c);
	if (!c || !c->ev) {
		free(c);
		return bev; /* out of memory: evhttp's own timeout is all it gets */
	}
	c->hs = hs;
	c->bev = bev;
	c->fd = -1;
	c->over = hs->open >= (size_t)s->cfg.max_http_connections;
	c->next = hs->head;
	if (hs->head)
		hs->head->prev = c;
	hs->head = c;
	hs->open++;
	bufferevent_incref(bev); /* settle() looks at it even if evhttp dropped it */
	event_active(c->ev, EV_TIMEOUT, 0);
	return bev;
}

int http_conn_start(struct server *s)
{
	s->http_conns = calloc(1, sizeof(*s->http_conns));
	if (!s->http_conns)
		return -1;
	s->http_conns->s = s;
	evhttp_set_bevcb(s->http, new_bev, s);
	return 0;
}

int http_conn_listening(struct server *s, struct evhttp_bound_socket *bound)
{
	struct http_conns *hs = s->http_conns;

	if (listen_pause_init(&hs->pause, evhttp_bound_socket_get_listener(bound), "HTTP connection") < 0)
		return -1;
	hs->listening = true;
	return 0;
}

static struct hconn *find(struct http_conns *hs, struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	evutil_socket_t fd = evcon ? bufferevent_getfd(evhttp_connection_get_bufferevent(evcon)) : -1;
	struct hconn *c = fd >= 0 && (size_t)fd < hs->n_by_fd ? hs->by_fd[fd] : NULL;

	return c && c->evcon == evcon ? c : NULL;
}

void http_conn_request(struct server *s, struct evhttp_request *req)
{
	struct hconn *c = s->http_conns ? find(s->http_conns, req) : NULL;

	if (c)
		event_del(c->ev);
}

void http_conn_answered(struct server *s, struct evhttp_request *req)
{
	struct hconn *c = s->http_conns ? find(s->http_conns, req) : NULL;

	if (c)
		arm(c);
}

void http_conn_bad_request(struct server *s, struct evhttp_request *req, const char *why)
{
	static struct log_limit limit = {.what = "bad REST requests"};
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	char *peer = NULL;
	uint16_t port = 0;

	if (s->http_conns)
		s->http_conns->bad_requests++;
	if (!log_limit_allow(&limit))
		return;
	if (evcon)
		evhttp_connection_get_peer(evcon, &peer, &port);
	log_info("http %s:%u: %s; closing the connection", peer ? peer : "?", (unsigned)port, why);
}

void http_conn_metrics(const struct server *s, FILE *f)
{
	const struct http_conns *hs = s->http_conns;

	if (!hs)
		return;
	fprintf(f,
		"# HELP culprit_http_connections Open REST connections.\n"
		"# TYPE culprit_http_connections gauge\nculprit_http_connections %zu\n"
		"# HELP culprit_http_refused_total REST connections closed at accept over max_http_connections.\n"
		"# TYPE culprit_http_refused_total counter\nculprit_http_refused_total %llu\n"
		"# HELP culprit_http_deadline_closed_total REST connections closed because a request was not whole "
		"within http_timeout_s.\n"
		"# TYPE culprit_http_deadline_closed_total counter\nculprit_http_deadline_closed_total %llu\n"
		"# HELP culprit_http_bad_requests_total REST requests refused (400) for ambiguous framing "
		"(conflicting Content-Length, Transfer-Encoding other than chunked).\n"
		"# TYPE culprit_http_bad_requests_total counter\nculprit_http_bad_requests_total %llu\n"
		"# HELP culprit_accept_errors_total Failed accepts (out of file descriptors), by listener.\n"
		"# TYPE culprit_accept_errors_total counter\n"
		"culprit_accept_errors_total{listener=\"http\"} %llu\nculprit_accept_errors_total{listener=\"agent\"} "
		"%llu\n",
		hs->open, hs->refused, hs->expired, hs->bad_requests, hs->pause.errors, s->agent_pause.errors);
}

void http_conn_stop(struct server *s)
{
	struct http_conns *hs = s->http_conns;

	if (!hs)
		return;
	while (hs->head) {
		if (!hs->head->evcon)
			bufferevent_decref(hs->head->bev);
		forget(hs->head);
	}
	if (hs->listening)
		listen_pause_free(&hs->pause);
	free(hs->by_fd);
	free(hs);
	s->http_conns = NULL;
}
