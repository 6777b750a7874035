/* receiver.c: see receiver.h. */
#include "receiver.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include "clock.h"

#define MAX_REQUEST (8 << 20)

struct rx {
	int fd;
	pthread_t thread;
	atomic_int stop;
	atomic_int down;
	int port;
	pthread_mutex_t mu;
	int fail; /* under mu */
	struct rx_hit *hits;
	size_t n, cap;
};

/* Value of header name in the header block (NUL-terminated), copied into out. */
static void header(const char *head, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l + 2, "\r\n")) {
		const char *h = l + 2;

		if (strncasecmp(h, name, n) == 0 && h[n] == ':') {
			const char *v = h + n + 1, *e;

			while (*v == ' ')
				v++;
			e = strstr(v, "\r\n");
			snprintf(out, size, "%.*s", (int)(e ? e - v : (long)strlen(v)), v);
			return;
		}
	}
}

static void serve(struct rx *r, int c)
{
	char *buf = malloc(MAX_REQUEST + 1), cl[32], *end;
	size_t len = 0, need = 0;
	struct rx_hit hit;
	int64_t deadline = clock_wall_us() + 10000000;

	if (!buf)
		return;
	memset(&hit, 0, sizeof(hit));
	for (;;) {
		struct pollfd p = {c, POLLIN, 0};
		ssize_t got;

		if (clock_wall_us() > deadline || poll(&p, 1, 100) < 0) {
			free(buf);
			return;
		}
		if (!(p.revents & (POLLIN | POLLHUP)))
			continue;
		got = read(c, buf + len, MAX_REQUEST - len);
		if (got <= 0) {
			free(buf);
			return;
		}
		len += (size_t)got;
		buf[len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end) {
			*end = '\0';
			header(buf, "Content-Length", cl, sizeof(cl));
			need = (size_t)(end - buf) + 4 + (size_t)atol(cl);
			*end = '\r';
			if (len >= need)
				break;
		}
		if (len == MAX_REQUEST) {
			free(buf);
			return;
		}
	}
	hit.at_us = clock_wall_us();
	end = strstr(buf, "\r\n\r\n");
	*end = '\0';
	sscanf(buf, "%*s %255s", hit.path);
	header(buf, "X-Culprit-Dedup-Key", hit.dedup, sizeof(hit.dedup));
	header(buf, "X-Culprit-Signature", hit.signature, sizeof(hit.signature));
	hit.body = strndup(end + 4, need - (size_t)(end + 4 - buf));
	free(buf);
	pthread_mutex_lock(&r->mu);
	hit.status = r->fail ? 500 : 200;
	if (r->fail > 0)
		r->fail--;
	if (r->n == r->cap) {
		size_t nc = r->cap ? r->cap * 2 : 64;
		struct rx_hit *nh = realloc(r->hits, nc * sizeof(*nh));

		if (nh) {
			r->hits = nh;
			r->cap = nc;
		}
	}
	if (r->n < r->cap)
		r->hits[r->n++] = hit;
	else
		free(hit.body);
	pthread_mutex_unlock(&r->mu);
	{
		char resp[128];
		int n = snprintf(resp, sizeof(resp),
				 "HTTP/1.1 %d %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", hit.status,
				 hit.status == 200 ? "OK" : "Internal Server Error");

		if (write(c, resp, (size_t)n) < 0)
			return;
	}
}

/* Accepts and serves one connection at a time. Down, it still accepts, and resets each
 * connection at once: closing the port instead let another process take it while down (a
 * webhook sent there hung until its timeout, and the receiver could not listen again). */
static void *rx_main(void *arg)
{
	struct rx *r = arg;

	while (!atomic_load(&r->stop)) {
		struct pollfd p = {r->fd, POLLIN, 0};
		int c;

		if (poll(&p, 1, 100) <= 0)
			continue;
		c = accept(r->fd, NULL, NULL);
		if (c < 0)
			continue;
		if (atomic_load(&r->down)) {
			struct linger l = {1, 0}; /* close sends a reset */

			setsockopt(c, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
			close(c);
			continue;
		}
		serve(r, c);
		close(c);
	}
	return NULL;
}

struct rx *rx_start(int *port)
{
	struct rx *r = calloc(1, sizeof(*r));
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t alen = sizeof(a);
	int one = 1;

	if (!r)
		return NULL;
	pthread_mutex_init(&r->mu, NULL);
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(r->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (r->fd < 0 || bind(r->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(r->fd, 64) < 0 ||
	    getsockname(r->fd, (struct sockaddr *)&a, &alen) < 0 || pthread_create(&r->thread, NULL, rx_main, r) != 0) {
		if (r->fd >= 0)
			close(r->fd);
		free(r);
		return NULL;
	}
	*port = r->port = ntohs(a.sin_port);
	return r;
}

void rx_down(struct rx *r, int down) { atomic_store(&r->down, down); }

void rx_fail(struct rx *r, int n)
{
	pthread_mutex_lock(&r->mu);
	r->fail = n;
	pthread_mutex_unlock(&r->mu);
}

size_t rx_hits(struct rx *r, struct rx_hit **out)
{
	size_t n;

	pthread_mutex_lock(&r->mu);
	n = r->n;
	*out = calloc(n ? n : 1, sizeof(**out));
	for (size_t i = 0; *out && i < n; i++) {
		(*out)[i] = r->hits[i];
		(*out)[i].body = strdup(r->hits[i].body ? r->hits[i].body : "");
	}
	pthread_mutex_unlock(&r->mu);
	return *out ? n : 0;
}

void rx_hits_free(struct rx_hit *h, size_t n)
{
	for (size_t i = 0; h && i < n; i++)
		free(h[i].body);
	free(h);
}

void rx_stop(struct rx *r)
{
	atomic_store(&r->stop, 1);
	pthread_join(r->thread, NULL);
	if (r->fd >= 0)
		close(r->fd);
	rx_hits_free(r->hits, r->n);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

void rx_sign(const char *key, const char *body, char *out, size_t size)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	size_t used;

	HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)body, strlen(body), md, &n);
	used = (size_t)snprintf(out, size, "sha256=");
	for (unsigned int i = 0; i < n && used + 3 <= size; i++)
		used += (size_t)snprintf(out + used, size - used, "%02x", md[i]);
}

void rx_states(const struct rx_hit *hits, size_t n, const char *key, struct rx_states *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		bool again = false;

		if (hits[i].status != 200)
			continue;
		if (strncmp(hits[i].dedup, key, strlen(key)) != 0) {
			out->other++;
			continue;
		}
		for (size_t j = 0; j < i; j++)
			again = again || (hits[j].status == 200 && strcmp(hits[j].dedup, hits[i].dedup) == 0);
		if (again)
			continue;
		if (strstr(hits[i].dedup, "/firing/")) {
			out->firing++;
			out->firing_at = i;
		} else if (strstr(hits[i].dedup, "/resolved/")) {
			out->resolved++;
			out->resolved_at = i;
		}
	}
}
