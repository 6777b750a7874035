/* diagnosis.c: see diagnosis.h. */
#include "diagnosis.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"

struct request {
	char job[128];
	struct store *snapshot;
	struct diagnose_input in;
	char server[512]; /* in.server points here: the caller's string may change meanwhile */
	uint64_t token;
	int prepare; /* only write the snapshot's pages (diagnosis_prepare) */
	struct request *next;
};

struct result {
	struct diagnosis_result r;
	struct result *next;
};

struct diagnosis {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct request *head, *tail;
	size_t pending, queue_max;
	struct result *done_head, *done_tail;
	int stop;
	void (*wake)(void *arg);
	void *wake_arg;
};

static void *worker(void *arg)
{
	struct diagnosis *d = arg;

	pthread_mutex_lock(&d->mu);
	for (;;) {
		struct request *q;
		struct result *res;
		double t0;

		while (!d->stop && !d->head)
			pthread_cond_wait(&d->cond, &d->mu);
		if (d->stop)
			break;
		q = d->head;
		d->head = q->next;
		if (!d->head)
			d->tail = NULL;
		pthread_mutex_unlock(&d->mu);

		res = calloc(1, sizeof(*res));
		if (res) {
			memcpy(res->r.job, q->job, sizeof(res->r.job));
			res->r.token = q->token;
			t0 = clock_mono_s() * 1e3;
			if (q->prepare)
				store_snapshot_touch(q->snapshot);
			else
				res->r.failed = diagnose_run(q->snapshot, &q->in, NULL, &res->r.report) < 0;
			res->r.run_ms = clock_mono_s() * 1e3 - t0;
			res->r.prepared = q->prepare;
			res->r.snapshot = q->snapshot;
		} else {
			store_destroy(q->snapshot);
		}
		free(q);

		pthread_mutex_lock(&d->mu);
		d->pending--;
		if (res) {
			if (d->done_tail)
				d->done_tail->next = res;
			else
				d->done_head = res;
			d->done_tail = res;
		}
		pthread_mutex_unlock(&d->mu);
		d->wake(d->wake_arg);
		pthread_mutex_lock(&d->mu);
	}
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

struct diagnosis *diagnosis_start(size_t queue_max, void (*wake)(void *arg), void *arg)
{
	struct diagnosis *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cond, NULL);
	d->queue_max = queue_max;
	d->wake = wake;
	d->wake_arg = arg;
	if (pthread_create(&d->thread, NULL, worker, d) != 0) {
		free(d);
		return NULL;
	}
	return d;
}

void diagnosis_stop(struct diagnosis *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->mu);
	d->stop = 1;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->mu);
	pthread_join(d->thread, NULL);
	while (d->head) {
		struct request *q = d->head;

		d->head = q->next;
		store_destroy(q->snapshot);
		free(q);
	}
	while (d->done_head) {
		struct result *r = d->done_head;

		d->done_head = r->next;
		report_free(&r->r.report);
		store_destroy(r->r.snapshot);
		free(r);
	}
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cond);
	free(d);
}

static int submit(struct diagnosis *d, const char *job, struct store *snapshot, const struct diagnose_input *in,
		  uint64_t token, int prepare)
{
	struct request *q;

	pthread_mutex_lock(&d->mu);
	if (d->pending >= d->queue_max) {
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	q = calloc(1, sizeof(*q));
	if (!q) {
		pthread_mutex_unlock(&d->mu);
		return -1;
	}
	strncpy(q->job, job, sizeof(q->job) - 1);
	q->snapshot = snapshot;
	q->prepare = prepare;
	q->in = *in;
	if (in->server) {
		snprintf(q->server, sizeof(q->server), "%s", in->server);
		q->in.server = q->server;
	}
	q->token = token;
	if (d->tail)
		d->tail->next = q;
	else
		d->head = q;
	d->tail = q;
	d->pending++;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->mu);
	return 0;
}

int diagnosis_submit(struct diagnosis *d, const char *job, struct store *snapshot,
		     const struct diagnose_input *in, uint64_t token)
{
	return submit(d, job, snapshot, in, token, 0);
}

int diagnosis_prepare(struct diagnosis *d, const char *job, struct store *blank)
{
	struct diagnose_input none;

	memset(&none, 0, sizeof(none));
	return submit(d, job, blank, &none, 0, 1);
}

size_t diagnosis_take(struct diagnosis *d, struct diagnosis_result *out, size_t max)
{
	size_t n = 0;

	pthread_mutex_lock(&d->mu);
	while (n < max && d->done_head) {
		struct result *r = d->done_head;

		d->done_head = r->next;
		if (!d->done_head)
			d->done_tail = NULL;
		out[n++] = r->r;
		free(r);
	}
	pthread_mutex_unlock(&d->mu);
	return n;
}

size_t diagnosis_pending(struct diagnosis *d)
{
	size_t n;

	pthread_mutex_lock(&d->mu);
	n = d->pending;
	pthread_mutex_unlock(&d->mu);
	return n;
}
