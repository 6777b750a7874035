/* queue.h: the bounded hand-over queue between a producer (the event loop) and worker
 * threads, used by the writer, the query workers and the diagnosis worker, each for its
 * requests and (unbounded, see below) for its results.
 *
 * Items are intrusive: embed a struct queue_item in yours and get back to it with
 * queue_entry(). Each item has a weight (1, or the records of a writer op).
 *
 * Capacity: `used` counts the weight pushed and not yet released, so what a worker has
 * taken still counts until it calls queue_release() (the bound covers what is in flight).
 * Full: push never waits; it refuses (-1) when used > 0 and used + weight > max. An item
 * heavier than max is accepted alone into an empty queue. The caller keeps its own policy
 * for a refusal: the writer and the query workers refuse the submission (backpressure to
 * their producer); the diagnosis worker refuses and the job stays due. max SIZE_MAX: no
 * bound (result lists, bounded by the requests that make them).
 *
 * Wake: a push signals one waiting taker, then calls wake(wake_arg) outside the lock (the
 * result lists wake the event loop this way).
 *
 * Close: push refuses from then on and every waiting taker returns. With drain, takers go
 * on taking what is waiting until it is empty (the writer flushes on stop); without, take
 * returns NULL at once (what is waiting is dropped: queue_drain() hands it back to free). */
#ifndef CULPRIT_QUEUE_H
#define CULPRIT_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include "attrs.h"

struct queue_item {
	struct queue_item *next;
	size_t weight;
};

#define queue_entry(it, type, member) ((type *)(void *)((char *)(it)-offsetof(type, member)))

struct queue {
	pthread_mutex_t mu;
	pthread_cond_t cv;              /* CLOCK_MONOTONIC */
	struct queue_item *head, *tail; /* waiting */
	size_t used, items;             /* pushed and not released: waiting + taken */
	size_t max;
	bool closed, drain;
	void (*wake)(void *arg);
	void *wake_arg;
};

/* wake may be NULL. 0, or -1 (nothing to destroy). */
MUST_CHECK int queue_init(struct queue *q, size_t max, void (*wake)(void *arg), void *wake_arg);
/* Call with no taker left (threads joined) and the items freed (queue_drain). */
void queue_destroy(struct queue *q);
/* 0, or -1 when full or closed (it stays the caller's). */
MUST_CHECK int queue_push(struct queue *q, struct queue_item *it, size_t weight);
/* Takes from the head: the first item always, then more while their total weight stays
 * within max_weight (0: one item). Returns them linked by next (NULL-terminated), or NULL:
 * nothing waiting and !wait, or closed (see above). With wait, blocks until then. */
struct queue_item *queue_take(struct queue *q, size_t max_weight, bool wait);
/* Gives back the capacity of taken items (their weight and count). */
void queue_release(struct queue *q, size_t weight, size_t items);
void queue_close(struct queue *q, bool drain);
/* Sleeps for up to ms or until closed: true when closed. */
bool queue_wait_closed(struct queue *q, int ms);
/* Nothing waiting and not closed. */
bool queue_idle(struct queue *q);
/* Removes everything waiting, linked by next (their capacity stays used). */
struct queue_item *queue_drain(struct queue *q);
/* used and items (both pushed and not released); either pointer may be NULL. */
void queue_count(struct queue *q, size_t *used, size_t *items);

#endif
