/* tls.h: TLS on the agent listener and the REST API (OpenSSL through libevent's
 * bufferevent_openssl), on when tls_cert and tls_key are set (docs/operations.md,
 * "Security"). TLS 1.2 at least. SIGHUP re-reads the certificate and key (a rotated
 * certificate serves new connections; open ones keep theirs); turning TLS on or off needs a
 * restart. */
#ifndef CULPRIT_TLS_H
#define CULPRIT_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include <event2/util.h>
#include "attrs.h"

struct config;
struct server;
struct bufferevent;
struct event_base;
struct evhttp_request;
struct ssl_ctx_st;

/* Whether cfg asks for TLS (tls_cert or tls_key set). */
bool tls_wanted(const struct config *cfg);
/* A server context from cfg's certificate chain and key: NULL with a message naming the
 * setting in err. Only when tls_wanted(cfg). */
struct ssl_ctx_st *tls_context_new(const struct config *cfg, char *err, size_t err_size);
void tls_context_free(struct ssl_ctx_st *ctx);
/* Checks that a reload keeps TLS on or off (0), or -1 with a message in err. */
MUST_CHECK int tls_check_reload(const struct config *old, const struct config *next, char *err, size_t err_size);

/* An accepted agent socket wrapped for the server side of a handshake (s->tls set), or
 * NULL (the caller closes fd). */
struct bufferevent *tls_agent_bufferevent(struct server *s, evutil_socket_t fd);
/* When the last error on bev came from TLS (a failed handshake: a plaintext client, a
 * client that does not trust the certificate): true with OpenSSL's reason in buf. */
bool tls_failed(struct bufferevent *bev, char *buf, size_t size);
/* A new HTTPS connection's bufferevent (s->tls set; evhttp sets its socket), or NULL: evhttp
 * then falls back to a plain socket and tls_request_ok() refuses every request on it. */
struct bufferevent *tls_http_bufferevent(struct server *s, struct event_base *base);
/* false when TLS is configured and req did not come over it (fail closed: see tls.c). */
bool tls_request_ok(const struct server *s, struct evhttp_request *req);

#endif
