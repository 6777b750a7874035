/* diagnosis.c: see diagnosis.h. */
#include "diagnosis.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"
#include "queue.h"

struct request {
	struct queue_item link;
	char job[128];
	struct store *snapshot;
	struct diagnose_input in;
	char server[512]; /* in.server points here: the caller's string may change meanwhile */
	uint64_t token;
	int prepare; /* only write the snapshot's pages (diagnosis_prepare) */
};

struct result {
	struct queue_item link;
	struct diagnosis_result r;
};

struct diagnosis {
	pthread_t thread;
	struct queue requests; /* bounded by queue_max, the one running included */
	struct queue results;  /* wakes the loop */
};

static void request_free(struct request *q)
{
	store_destroy(q->snapshot);
	free(q);
}

static void *worker(void *arg)
{
	struct diagnosis *d = arg;
	struct queue_item *it;

	while ((it = queue_take(&d->requests, 0, true))) {
		struct request *q = queue_entry(it, struct request, link);
		struct result *res = calloc(1, sizeof(*res));
		double t0;

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
			free(q);
		} else {
			request_free(q);
		}
		queue_release(&d->requests, 1, 1);
		if (res)
			queue_push(&d->results, &res->link, 1); /* unbounded: never refused */
	}
	return NULL;
}

struct diagnosis *diagnosis_start(size_t queue_max, void (*wake)(void *arg), void *arg)
{
	struct diagnosis *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	if (queue_init(&d->requests, queue_max, NULL, NULL) != 0) {
		free(d);
		return NULL;
	}
	if (queue_init(&d->results, SIZE_MAX, wake, arg) != 0) {
		queue_destroy(&d->requests);
		free(d);
		return NULL;
	}
	if (pthread_create(&d->thread, NULL, worker, d) != 0) {
		queue_destroy(&d->requests);
		queue_destroy(&d->results);
		free(d);
		return NULL;
	}
	return d;
}

void diagnosis_stop(struct diagnosis *d)
{
	struct queue_item *it;

	if (!d)
		return;
	queue_close(&d->requests, false);
	pthread_join(d->thread, NULL);
	for (it = queue_drain(&d->requests); it;) {
		struct queue_item *next = it->next;

		request_free(queue_entry(it, struct request, link));
		it = next;
	}
	for (it = queue_drain(&d->results); it;) {
		struct result *r = queue_entry(it, struct result, link);

		it = it->next;
		report_free(&r->r.report);
		store_destroy(r->r.snapshot);
		free(r);
	}
	queue_destroy(&d->requests);
	queue_destroy(&d->results);
	free(d);
}

static int submit(struct diagnosis *d, const char *job, struct store *snapshot, const struct diagnose_input *in,
		  uint64_t token, int prepare)
{
	struct request *q = calloc(1, sizeof(*q));

	if (!q)
		return -1;
	strncpy(q->job, job, sizeof(q->job) - 1);
	q->snapshot = snapshot;
	q->prepare = prepare;
	q->in = *in;
	if (in->server) {
		snprintf(q->server, sizeof(q->server), "%s", in->server);
		q->in.server = q->server;
	}
	q->token = token;
	if (queue_push(&d->requests, &q->link, 1) < 0) {
		free(q); /* the snapshot stays the caller's */
		return -1;
	}
	return 0;
}

int diagnosis_submit(struct diagnosis *d, const char *job, struct store *snapshot, const struct diagnose_input *in,
		     uint64_t token)
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
	struct queue_item *it = max ? queue_take(&d->results, max, false) : NULL;
	size_t n = 0;

	while (it) {
		struct result *r = queue_entry(it, struct result, link);

		it = it->next;
		out[n++] = r->r;
		free(r);
	}
	queue_release(&d->results, n, n);
	return n;
}
