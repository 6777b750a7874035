/* tls.c: see tls.h. */
#include "tls.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "server.h"

/* OpenSSL's latest error as text, the queue cleared */
static const char *ssl_reason(char *buf, size_t size)
{
	unsigned long e = ERR_peek_last_error();

	if (e)
		ERR_error_string_n(e, buf, size);
	else
		snprintf(buf, size, "unknown error");
	ERR_clear_error();
	return buf;
}

bool tls_wanted(const struct config *cfg) { return cfg->tls_cert[0] || cfg->tls_key[0]; }

struct ssl_ctx_st *tls_context_new(const struct config *cfg, char *err, size_t err_size)
{
	SSL_CTX *ctx;
	char why[256];

	if (!cfg->tls_cert[0] || !cfg->tls_key[0]) {
		config_fail(err, err_size, "setting \"%s\" must be set too: TLS needs a certificate and its key",
			    cfg->tls_cert[0] ? "tls_key" : "tls_cert");
		return NULL;
	}
	ctx = SSL_CTX_new(TLS_server_method());
	if (!ctx) {
		config_fail(err, err_size, "could not create a TLS context: %s", ssl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert) != 1) {
		config_fail(err, err_size, "setting \"tls_cert\": could not load \"%s\": %s", cfg->tls_cert,
			    ssl_reason(why, sizeof(why)));
		goto bad;
	}
	if (SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key, SSL_FILETYPE_PEM) != 1) {
		config_fail(err, err_size, "setting \"tls_key\": could not load \"%s\": %s", cfg->tls_key,
			    ssl_reason(why, sizeof(why)));
		goto bad;
	}
	if (SSL_CTX_check_private_key(ctx) != 1) {
		config_fail(err, err_size, "setting \"tls_key\": \"%s\" is not the key of the certificate in \"%s\"",
			    cfg->tls_key, cfg->tls_cert);
		ERR_clear_error();
		goto bad;
	}
	return ctx;
bad:
	SSL_CTX_free(ctx);
	return NULL;
}

void tls_context_free(struct ssl_ctx_st *ctx)
{
	SSL_CTX_free(ctx); /* connections still open hold a reference of their own */
}

int tls_check_reload(const struct config *old, const struct config *next, char *err, size_t err_size)
{
	if (tls_wanted(old) != tls_wanted(next)) {
		config_fail(err, err_size, "setting \"tls_cert\": turning TLS %s needs a restart of culpritd",
			    tls_wanted(next) ? "on" : "off");
		return -1;
	}
	return 0;
}

struct bufferevent *tls_agent_bufferevent(struct server *s, evutil_socket_t fd)
{
	SSL *ssl = SSL_new(s->tls);
	struct bufferevent *bev;

	if (!ssl)
		return NULL;
	bev = bufferevent_openssl_socket_new(s->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		SSL_free(ssl);
		return NULL;
	}
	/* an agent that goes away without close_notify is an end of stream, not an error */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

bool tls_failed(struct bufferevent *bev, char *buf, size_t size)
{
	unsigned long e, last = 0;

	if (!bufferevent_openssl_get_ssl(bev))
		return false;
	bool any = false;

	/* libevent queues SSL_get_error()'s code (library 0), then OpenSSL's own errors */
	while ((e = bufferevent_get_openssl_error(bev))) {
		any = true;
		if (ERR_GET_LIB(e) != 0)
			last = e;
	}
	if (!any)
		return false;
	if (last)
		ERR_error_string_n(last, buf, size);
	else
		snprintf(buf, size, "TLS protocol error (a client that does not speak TLS?)");
	return true;
}

struct bufferevent *tls_http_bufferevent(struct server *s, struct event_base *base)
{
	SSL *ssl = SSL_new(s->tls);
	struct bufferevent *bev;

	/* NULL makes evhttp fall back to a plain socket: tls_request_ok() then refuses every
	 * request on that connection */
	if (!ssl)
		return NULL;
	bev = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	if (!bev) {
		SSL_free(ssl);
		return NULL;
	}
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

bool tls_request_ok(const struct server *s, struct evhttp_request *req)
{
	struct evhttp_connection *conn;

	if (!s->tls)
		return true;
	conn = evhttp_request_get_connection(req);
	return conn && bufferevent_openssl_get_ssl(evhttp_connection_get_bufferevent(conn)) != NULL;
}
