/* diagnosis.c: see diagnosis.h. */
#include "diagnosis.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "clock.h"
#include "queue.h"

/* a request, and then its result: one allocation, made when it is submitted (a result
 * never fails to come back for want of memory: the job would wait for it forever) */
struct request {
	struct queue_item link;
	const struct store *store; /* the caller's */
	struct diagnose_input in;
	char server[512]; /* in.server points here: the caller's string may change meanwhile */
	struct diagnosis_result r;
};

struct diagnosis {
	pthread_t thread;
	struct queue requests; /* bounded by queue_max, the one running included */
	struct queue results;  /* wakes the loop */
};

static void *worker(void *arg)
{
	struct diagnosis *d = arg;
	struct queue_item *it;

	while ((it = queue_take(&d->requests, 0, true))) {
		struct request *q = queue_entry(it, struct request, link);
		double t0 = clock_mono_s() * 1e3;

		q->r.failed = diagnose_run(q->store, &q->in, NULL, &q->r.report) < 0;
		q->r.run_ms = clock_mono_s() * 1e3 - t0;
		queue_release(&d->requests, 1, 1);
		IGNORE_RESULT(queue_push(&d->results, &q->link, 1)); /* unbounded: never refused */
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

		free(queue_entry(it, struct request, link));
		it = next;
	}
	for (it = queue_drain(&d->results); it;) {
		struct request *r = queue_entry(it, struct request, link);

		it = it->next;
		report_free(&r->r.report);
		free(r);
	}
	queue_destroy(&d->requests);
	queue_destroy(&d->results);
	free(d);
}

int diagnosis_submit(struct diagnosis *d, const char *job, const struct store *store, const struct diagnose_input *in,
		     uint64_t token)
{
	struct request *q = calloc(1, sizeof(*q));

	if (!q)
		return -1;
	strncpy(q->r.job, job, sizeof(q->r.job) - 1);
	q->store = store;
	q->in = *in;
	if (in->server) {
		snprintf(q->server, sizeof(q->server), "%s", in->server);
		q->in.server = q->server;
	}
	q->r.token = token;
	if (queue_push(&d->requests, &q->link, 1) < 0) {
		free(q);
		return -1;
	}
	return 0;
}

size_t diagnosis_take(struct diagnosis *d, struct diagnosis_result *out, size_t max)
{
	struct queue_item *it = max ? queue_take(&d->results, max, false) : NULL;
	size_t n = 0;

	while (it) {
		struct request *r = queue_entry(it, struct request, link);

		it = it->next;
		out[n++] = r->r;
		free(r);
	}
	queue_release(&d->results, n, n);
	return n;
}
