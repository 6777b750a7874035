/* test_queue.c: the bounded queue the worker threads share. The full rule (an item heavier
 * than what is left is refused, one heavier than the bound goes alone into an empty queue,
 * capacity comes back only on release), takes grouped by weight, wake on push, a taker
 * blocked on an empty queue woken by a push and by close, close with and without drain. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>

#include "queue.h"

struct item {
	int id;
	struct queue_item link;
};

static int id_of(const struct queue_item *it) { return queue_entry(it, struct item, link)->id; }

static void full_rule(void **state)
{
	struct queue q;
	struct item it[5] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}, {.id = 4}};
	size_t used, items;

	(void)state;
	assert_int_equal(queue_init(&q, 10, NULL, NULL), 0);
	assert_int_equal(queue_push(&q, &it[0].link, 25), 0); /* heavier than the bound, alone */
	assert_int_equal(queue_push(&q, &it[1].link, 1), -1);
	struct queue_item *t = queue_take(&q, 100, false);
	assert_ptr_equal(t, &it[0].link);
	assert_null(t->next);
	assert_int_equal(queue_push(&q, &it[1].link, 1), -1); /* taken still counts */
	queue_release(&q, 25, 1);
	assert_int_equal(queue_push(&q, &it[1].link, 4), 0);
	assert_int_equal(queue_push(&q, &it[2].link, 6), 0); /* exactly full */
	assert_int_equal(queue_push(&q, &it[3].link, 1), -1);
	queue_count(&q, &used, &items);
	assert_int_equal(used, 10);
	assert_int_equal(items, 2);
	queue_destroy(&q);
}

static void take_by_weight(void **state)
{
	struct queue q;
	struct item it[5] = {{.id = 0}, {.id = 1}, {.id = 2}, {.id = 3}, {.id = 4}};
	static const size_t w[5] = {3, 3, 3, 5, 1};

	(void)state;
	assert_int_equal(queue_init(&q, 100, NULL, NULL), 0);
	assert_null(queue_take(&q, 10, false));
	for (int i = 0; i < 5; i++)
		assert_int_equal(queue_push(&q, &it[i].link, w[i]), 0);
	struct queue_item *t = queue_take(&q, 7, false); /* 3 + 3; a third would be 9 */
	assert_int_equal(id_of(t), 0);
	assert_int_equal(id_of(t->next), 1);
	assert_null(t->next->next);
	t = queue_take(&q, 0, false); /* one */
	assert_int_equal(id_of(t), 2);
	assert_null(t->next);
	t = queue_take(&q, 2, false); /* the first even when heavier than asked */
	assert_int_equal(id_of(t), 3);
	assert_null(t->next);
	assert_true(!queue_idle(&q));
	t = queue_drain(&q);
	assert_int_equal(id_of(t), 4);
	assert_true(queue_idle(&q));
	queue_destroy(&q);
}

static int wakes;
static void wake(void *arg)
{
	assert_ptr_equal(arg, &wakes);
	wakes++;
}

struct taker {
	struct queue *q;
	struct queue_item *got;
};

static void *take_blocking(void *arg)
{
	struct taker *t = arg;

	t->got = queue_take(t->q, 0, true);
	return NULL;
}

static void wake_and_block(void **state)
{
	struct queue q;
	struct item a = {.id = 7};
	struct taker t = {&q, NULL};
	pthread_t th;

	(void)state;
	assert_int_equal(queue_init(&q, 4, wake, &wakes), 0);
	assert_int_equal(pthread_create(&th, NULL, take_blocking, &t), 0);
	assert_int_equal(queue_push(&q, &a.link, 1), 0); /* before or after it waits: it gets it */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_ptr_equal(t.got, &a.link);
	assert_int_equal(wakes, 1);
	assert_int_equal(pthread_create(&th, NULL, take_blocking, &t), 0);
	queue_close(&q, false); /* wakes the waiting taker empty-handed */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_null(t.got);
	assert_true(queue_wait_closed(&q, 60000)); /* returns at once */
	queue_destroy(&q);
}

static void close_drain(void **state)
{
	struct queue q;
	struct item it[3] = {{.id = 0}, {.id = 1}, {.id = 2}};

	(void)state;
	assert_int_equal(queue_init(&q, 10, NULL, NULL), 0);
	assert_false(queue_wait_closed(&q, 1));
	assert_int_equal(queue_push(&q, &it[0].link, 1), 0);
	assert_int_equal(queue_push(&q, &it[1].link, 1), 0);
	queue_close(&q, true);
	assert_int_equal(queue_push(&q, &it[2].link, 1), -1); /* closed */
	assert_false(queue_idle(&q));
	struct queue_item *t = queue_take(&q, 0, true); /* drain: what waits is still handed out */
	assert_int_equal(id_of(t), 0);
	t = queue_take(&q, 0, true);
	assert_int_equal(id_of(t), 1);
	assert_null(queue_take(&q, 0, true)); /* empty and closed: does not block */
	queue_destroy(&q);

	assert_int_equal(queue_init(&q, 10, NULL, NULL), 0);
	assert_int_equal(queue_push(&q, &it[0].link, 1), 0);
	queue_close(&q, false);
	assert_null(queue_take(&q, 0, true)); /* no drain: nothing more is taken */
	t = queue_drain(&q);
	assert_int_equal(id_of(t), 0); /* handed back to free */
	queue_destroy(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(full_rule),
		cmocka_unit_test(take_by_weight),
		cmocka_unit_test(wake_and_block),
		cmocka_unit_test(close_drain),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
