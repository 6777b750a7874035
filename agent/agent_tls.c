/* agent_tls.c: the agent library's TLS (OpenSSL over the non-blocking sockets of
 * agent_loop.c). The server's certificate is verified against tls_ca (or the system's
 * CAs) and its name against the host of cfg.server. Contexts are shared by the agents of a
 * process that name the same CA file (the simulator runs 1,620 agents). */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "agent_impl.h"

struct shared_ctx {
	char *ca; /* "" for the system's CAs */
	SSL_CTX *ctx;
	unsigned refs;
	struct shared_ctx *next;
};

static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct shared_ctx *ctxs;

static const char *ssl_reason(char *buf, size_t size)
{
	unsigned long e = ERR_peek_last_error();

	if (e)
		ERR_error_string_n(e, buf, size);
	else
		snprintf(buf, size, "%s", errno ? strerror(errno) : "unknown error");
	ERR_clear_error();
	return buf;
}

static SSL_CTX *ctx_new(const char *ca, char *err, size_t err_size)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
	char why[256];

	if (!ctx) {
		snprintf(err, err_size, "could not create a TLS context: %s", ssl_reason(why, sizeof(why)));
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	/* a server that closes without close_notify has closed, no more */
	SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
	/* send() semantics: partial writes, retried from wherever the frame's bytes are */
	SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	if (*ca ? SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 : SSL_CTX_set_default_verify_paths(ctx) != 1) {
		snprintf(err, err_size, "could not load the CA certificates %s%s%s: %s", *ca ? "\"" : "",
			 *ca ? ca : "of the system", *ca ? "\"" : "", ssl_reason(why, sizeof(why)));
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

int agent_tls_init(struct agent *a, const char *ca, char *err, size_t err_size)
{
	struct shared_ctx *s;

	if (!ca)
		ca = "";
	pthread_mutex_lock(&ctx_mu);
	for (s = ctxs; s && strcmp(s->ca, ca) != 0; s = s->next)
		;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s || !(s->ca = strdup(ca))) {
			free(s);
			pthread_mutex_unlock(&ctx_mu);
			snprintf(err, err_size, "out of memory");
			return -1;
		}
		if (!(s->ctx = ctx_new(ca, err, err_size))) {
			free(s->ca);
			free(s);
			pthread_mutex_unlock(&ctx_mu);
			return -1;
		}
		s->next = ctxs;
		ctxs = s;
	}
	s->refs++;
	a->tls = s->ctx;
	pthread_mutex_unlock(&ctx_mu);
	return 0;
}

void agent_tls_release(struct agent *a)
{
	struct shared_ctx **pp, *s;

	if (!a->tls)
		return;
	pthread_mutex_lock(&ctx_mu);
	for (pp = &ctxs; (s = *pp); pp = &s->next)
		if (s->ctx == a->tls) {
			if (--s->refs == 0) {
				*pp = s->next;
				SSL_CTX_free(s->ctx);
				free(s->ca);
				free(s);
			}
			break;
		}
	pthread_mutex_unlock(&ctx_mu);
	a->tls = NULL;
}

int agent_tls_start(struct agent *a, char *err, size_t err_size)
{
	struct agent_conn *c = &a->c;
	unsigned char ip[16];
	bool is_ip = inet_pton(AF_INET, a->c.host, ip) == 1 || inet_pton(AF_INET6, a->c.host, ip) == 1;

	char buf[256];

	c->ssl = SSL_new(a->tls);
	if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
		snprintf(err, err_size, "could not start TLS: %s", ssl_reason(buf, sizeof(buf)));
		return -1;
	}
	if (is_ip) {
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl), a->c.host) != 1) {
			snprintf(err, err_size, "could not set the address to verify");
			return -1;
		}
	} else if (SSL_set_tlsext_host_name(c->ssl, a->c.host) != 1 || SSL_set1_host(c->ssl, a->c.host) != 1) {
		snprintf(err, err_size, "could not set the host name to verify");
		return -1;
	}
	c->tls_want = POLLOUT;
	return 0;
}

int agent_tls_handshake(struct agent *a, char *err, size_t err_size)
{
	struct agent_conn *c = &a->c;
	int r, e;
	long v;
	char buf[256];

	ERR_clear_error();
	r = SSL_connect(c->ssl);
	if (r == 1) {
		c->tls_want = 0;
		return 1;
	}
	e = SSL_get_error(c->ssl, r);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->tls_want = e == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT;
		return 0;
	}
	v = SSL_get_verify_result(c->ssl);
	if (v != X509_V_OK)
		snprintf(err, err_size, "TLS with \"%s:%s\" failed: the server certificate is not trusted: %s",
			 a->c.host, a->c.port, X509_verify_cert_error_string(v));
	else
		snprintf(err, err_size, "TLS with \"%s:%s\" failed: %s", a->c.host, a->c.port,
			 e == SSL_ERROR_SYSCALL && !ERR_peek_last_error()
				 ? "the server closed the connection (does it speak TLS?)"
				 : ssl_reason(buf, sizeof(buf)));
	ERR_clear_error();
	return -1;
}

/* what SSL_get_error says, as recv/send would: EAGAIN to wait (c->tls_want says for what) */
static ssize_t io_result(struct agent_conn *c, int r)
{
	switch (SSL_get_error(c->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		c->tls_want = POLLIN;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_WANT_WRITE:
		c->tls_want = POLLOUT;
		errno = EAGAIN;
		return -1;
	case SSL_ERROR_ZERO_RETURN: return 0;
	case SSL_ERROR_SYSCALL:
		if (errno == 0)
			errno = ECONNRESET;
		ERR_clear_error();
		return -1;
	default:
		ERR_clear_error();
		errno = EPROTO;
		return -1;
	}
}

ssize_t agent_io_recv(struct agent_conn *c, void *buf, size_t n)
{
	int r;

	if (!c->ssl)
		return recv(c->fd, buf, n, 0);
	ERR_clear_error();
	errno = 0;
	r = SSL_read(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	if (r > 0) {
		c->tls_want = 0;
		return r;
	}
	return io_result(c, r);
}

ssize_t agent_io_send(struct agent_conn *c, const void *buf, size_t n)
{
	int r;

	if (!c->ssl)
		return send(c->fd, buf, n, MSG_NOSIGNAL);
	ERR_clear_error();
	errno = 0;
	r = SSL_write(c->ssl, buf, n > INT_MAX ? INT_MAX : (int)n);
	if (r > 0) {
		c->tls_want = 0;
		return r;
	}
	return io_result(c, r);
}

void agent_tls_close(struct agent_conn *c, bool notify)
{
	if (!c->ssl)
		return;
	if (notify)
		SSL_shutdown(c->ssl); /* best effort: one close_notify, no wait for the server's */
	SSL_free(c->ssl);
	c->ssl = NULL;
	c->tls_want = 0;
	ERR_clear_error();
}
