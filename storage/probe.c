/* probe.c: see probe.h. */
#include "probe.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libpq-fe.h>

#include "clock.h"
#include "connect.h"

#define PROBE_INTERVAL_MS 1000

struct storage_probe {
	char *dsn;
	int timeout_s;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t wake;
	/* under mu */
	bool stopping;
	int64_t last_ok_ms;
	char error[256];
};

static void set_result(struct storage_probe *p, bool ok, const char *error)
{
	pthread_mutex_lock(&p->mu);
	if (ok)
		p->last_ok_ms = clock_mono_ms();
	snprintf(p->error, sizeof(p->error), "%s", ok ? "" : error);
	pthread_mutex_unlock(&p->mu);
}

/* One "SELECT 1" on c within the deadline: true when answered. */
static bool ask(struct storage_probe *p, PGconn *c, char *err, size_t err_size)
{
	int64_t deadline = clock_mono_ms() + (int64_t)p->timeout_s * 1000;
	PGresult *r;
	bool ok = true;

	if (!PQsendQuery(c, "SELECT 1")) {
		snprintf(err, err_size, "%s", PQerrorMessage(c));
		return false;
	}
	while (PQisBusy(c)) {
		struct pollfd pfd = {.fd = PQsocket(c), .events = POLLIN};
		int64_t left = deadline - clock_mono_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) == 0) {
			snprintf(err, err_size, "no answer to \"SELECT 1\" within %d s", p->timeout_s);
			return false;
		}
		if (!PQconsumeInput(c)) {
			snprintf(err, err_size, "%s", PQerrorMessage(c));
			return false;
		}
	}
	while ((r = PQgetResult(c))) {
		if (PQresultStatus(r) != PGRES_TUPLES_OK) {
			snprintf(err, err_size, "%s", PQresultErrorMessage(r));
			ok = false;
		}
		PQclear(r);
	}
	err[strcspn(err, "\n")] = '\0';
	return ok;
}

static void *run(void *arg)
{
	struct storage_probe *p = arg;
	PGconn *c = NULL;
	char err[256], options[64];

	snprintf(options, sizeof(options), "-c statement_timeout=%d", p->timeout_s * 1000);
	for (;;) {
		struct timespec until;
		bool ok;

		err[0] = '\0';
		if (!c)
			c = storage_connect_opts(p->dsn, "culprit-probe", p->timeout_s, options, err, sizeof(err));
		ok = c && ask(p, c, err, sizeof(err));
		if (!ok && c) { /* whatever it was doing, it is dropped: the next one connects again */
			PQfinish(c);
			c = NULL;
		}
		set_result(p, ok, err);
		pthread_mutex_lock(&p->mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += PROBE_INTERVAL_MS / 1000;
		while (!p->stopping && pthread_cond_timedwait(&p->wake, &p->mu, &until) != ETIMEDOUT)
			;
		if (p->stopping) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		pthread_mutex_unlock(&p->mu);
	}
	if (c)
		PQfinish(c);
	return NULL;
}

struct storage_probe *storage_probe_start(const char *dsn, int timeout_s)
{
	struct storage_probe *p = calloc(1, sizeof(*p));

	if (!p || !(p->dsn = strdup(dsn))) {
		free(p);
		return NULL;
	}
	p->timeout_s = timeout_s < 2 ? 2 : timeout_s; /* libpq's connect_timeout takes 2 at least */
	p->last_ok_ms = clock_mono_ms();
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->wake, NULL);
	if (pthread_create(&p->thread, NULL, run, p) != 0) {
		pthread_mutex_destroy(&p->mu);
		pthread_cond_destroy(&p->wake);
		free(p->dsn);
		free(p);
		return NULL;
	}
	return p;
}

int64_t storage_probe_last_ok_ms(struct storage_probe *p, char *err, size_t err_size)
{
	int64_t t;

	pthread_mutex_lock(&p->mu);
	t = p->last_ok_ms;
	snprintf(err, err_size, "%s", p->error);
	pthread_mutex_unlock(&p->mu);
	return t;
}

void storage_probe_stop(struct storage_probe *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_signal(&p->wake);
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->wake);
	free(p->dsn);
	free(p);
}
