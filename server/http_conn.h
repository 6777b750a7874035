/* http_conn.h: the REST API's connections: at most max_http_connections at once (more are
 * closed at accept), a deadline of http_timeout_s for each request (headers and body, from
 * accept or from the end of the previous answer: a client that trickles a request slowly is
 * closed when it passes), and accept errors on the HTTP listener (EMFILE) pause accepting
 * instead of spinning. libevent 2.1's evhttp has no hook per connection, so the bufferevent
 * callback (evhttp_set_bevcb) is where a connection is seen first. */
#ifndef CULPRIT_HTTP_CONN_H
#define CULPRIT_HTTP_CONN_H

#include <stdio.h>
#include "attrs.h"

struct server;
struct evhttp_bound_socket;
struct evhttp_request;

/* After evhttp_new: installs the bufferevent callback (TLS or plain). 0 or -1. */
MUST_CHECK int http_conn_start(struct server *s);
/* After the bind: watches the listener for accept errors. 0 or -1. */
int http_conn_listening(struct server *s, struct evhttp_bound_socket *bound);
/* A whole request arrived (the route runs): its deadline stops until the answer is sent. */
void http_conn_request(struct server *s, struct evhttp_request *req);
/* The answer to req went out: the connection's next request has http_timeout_s from now. */
void http_conn_answered(struct server *s, struct evhttp_request *req);
/* req is refused for why (bad framing): counted, logged (a few a second); the caller answers
 * 400 with Connection: close. */
void http_conn_bad_request(struct server *s, struct evhttp_request *req, const char *why);
void http_conn_metrics(const struct server *s, FILE *f);
/* After evhttp_free (which closed every connection). */
void http_conn_stop(struct server *s);

#endif
