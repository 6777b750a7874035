/* queue.c: see queue.h. */
#include "queue.h"

#include <time.h>

#include "clock.h"

int queue_init(struct queue *q, size_t max, void (*wake)(void *arg), void *wake_arg)
{
	pthread_condattr_t ca;
	int ok;

	*q = (struct queue){.max = max, .wake = wake, .wake_arg = wake_arg};
	if (pthread_condattr_init(&ca) != 0)
		return -1;
	ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&q->cv, &ca) == 0;
	pthread_condattr_destroy(&ca);
	if (!ok)
		return -1;
	if (pthread_mutex_init(&q->mu, NULL) != 0) {
		pthread_cond_destroy(&q->cv);
		return -1;
	}
	return 0;
}

void queue_destroy(struct queue *q)
{
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->mu);
}

int queue_push(struct queue *q, struct queue_item *it, size_t weight)
{
	pthread_mutex_lock(&q->mu);
	if (q->closed || (q->used > 0 && (weight > q->max || q->used > q->max - weight))) {
		pthread_mutex_unlock(&q->mu);
		return -1;
	}
	it->next = NULL;
	it->weight = weight;
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	q->used += weight;
	q->items++;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->mu);
	if (q->wake)
		q->wake(q->wake_arg);
	return 0;
}

struct queue_item *queue_take(struct queue *q, size_t max_weight, bool wait)
{
	struct queue_item *first, *last;
	size_t weight;

	pthread_mutex_lock(&q->mu);
	while (wait && !q->closed && !q->head)
		pthread_cond_wait(&q->cv, &q->mu);
	if (!q->head || (q->closed && !q->drain)) {
		pthread_mutex_unlock(&q->mu);
		return NULL;
	}
	first = last = q->head;
	weight = first->weight;
	while (last->next && weight + last->next->weight <= max_weight) {
		last = last->next;
		weight += last->weight;
	}
	q->head = last->next;
	if (!q->head)
		q->tail = NULL;
	last->next = NULL;
	pthread_mutex_unlock(&q->mu);
	return first;
}

void queue_release(struct queue *q, size_t weight, size_t items)
{
	pthread_mutex_lock(&q->mu);
	q->used -= weight;
	q->items -= items;
	pthread_mutex_unlock(&q->mu);
}

void queue_close(struct queue *q, bool drain)
{
	pthread_mutex_lock(&q->mu);
	q->closed = true;
	q->drain = drain;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->mu);
}

bool queue_wait_closed(struct queue *q, int ms)
{
	struct timespec until = clock_mono_after(ms);
	bool closed;

	pthread_mutex_lock(&q->mu);
	while (!q->closed && !clock_mono_passed(&until))
		pthread_cond_timedwait(&q->cv, &q->mu, &until);
	closed = q->closed;
	pthread_mutex_unlock(&q->mu);
	return closed;
}

bool queue_idle(struct queue *q)
{
	pthread_mutex_lock(&q->mu);
	bool idle = !q->head && !q->closed;
	pthread_mutex_unlock(&q->mu);
	return idle;
}

struct queue_item *queue_drain(struct queue *q)
{
	pthread_mutex_lock(&q->mu);
	struct queue_item *all = q->head;
	q->head = q->tail = NULL;
	pthread_mutex_unlock(&q->mu);
	return all;
}

void queue_count(struct queue *q, size_t *used, size_t *items)
{
	pthread_mutex_lock(&q->mu);
	if (used)
		*used = q->used;
	if (items)
		*items = q->items;
	pthread_mutex_unlock(&q->mu);
}
