/* test_writer_queue.c: the writer's op arena and its bounded queue, without a database (the
 * DSN points nowhere, so nothing ever leaves the queue): backpressure, the oversized-op rule,
 * and stop reporting what was not written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "log.h"
#include "writer.h"

static void test_arena(void **state)
{
	(void)state;
	struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, 100);
	assert_non_null(op);
	assert_int_equal(op->type, STORAGE_OP_BATCH);
	assert_null(op->link.next);
	void *a = storage_op_alloc(op, 40);
	assert_non_null(a);
	assert_int_equal((uintptr_t)a % 16, 0);
	char *s = storage_op_strdup(op, "mlp");
	assert_non_null(s);
	assert_string_equal(s, "mlp");
	assert_int_equal((uintptr_t)s % 16, 0);
	assert_true((char *)s >= (char *)a + 40);
	assert_null(storage_op_alloc(op, 100)); /* exhausted */
	assert_non_null(storage_op_alloc(op, 8));
	storage_op_free(op);
	op = storage_op_new(STORAGE_OP_JOB, 0);
	assert_non_null(op);
	assert_null(storage_op_alloc(op, 1));
	assert_non_null(storage_op_alloc(op, 0));
	storage_op_free(op);
}

static struct storage_op *batch(size_t phases)
{
	struct storage_op *op = storage_op_new(STORAGE_OP_BATCH, 64);
	assert_non_null(op);
	op->job = storage_op_strdup(op, "J");
	op->agent = storage_op_strdup(op, "a");
	op->n_phases = phases; /* never written: no database */
	return op;
}

static int wakes;
static void wake(void *arg)
{
	(void)arg;
	wakes++;
}

static void test_backpressure(void **state)
{
	(void)state;
	log_set_level(LOG_ERROR); /* the failing connection is expected */
	struct storage_writer_config cfg = {.dsn = "host=/nonexistent/culprit-test user=x dbname=x",
					    .queue_max_records = 10,
					    .max_txn_records = 4,
					    .wake = wake,
					    .reconnect_min_ms = 10,
					    .reconnect_max_ms = 20};
	struct storage_writer *w = storage_writer_start(&cfg);
	assert_non_null(w);
	assert_int_equal(storage_writer_submit(w, batch(6)), 0);
	assert_int_equal(storage_writer_submit(w, batch(4)), 0);
	struct storage_op *op = batch(1);
	assert_int_equal(storage_writer_submit(w, op), -1); /* full: the caller keeps op */
	assert_int_equal(storage_writer_submit(w, op), -1);
	storage_op_free(op);
	struct storage_writer_stats st;
	storage_writer_stats(w, &st);
	assert_int_equal(st.queued_records, 10);
	assert_int_equal(st.queued_ops, 2);
	assert_int_equal(st.refused_full, 2);
	assert_int_equal(st.committed_records, 0);
	assert_int_equal(st.connected, 0);
	struct storage_done d[4];
	assert_int_equal(storage_writer_take_done(w, d, 4), 0);
	assert_int_equal(storage_writer_stop(w, 50), 10);
	assert_int_equal(wakes, 0);
}

static void test_oversized(void **state)
{
	(void)state;
	struct storage_writer_config cfg = {.dsn = "host=/nonexistent/culprit-test user=x dbname=x",
					    .queue_max_records = 10,
					    .max_txn_records = 4,
					    .reconnect_min_ms = 10,
					    .reconnect_max_ms = 20};
	struct storage_writer *w = storage_writer_start(&cfg);
	assert_non_null(w);
	/* larger than the whole queue: accepted when the queue is empty, else refused */
	assert_int_equal(storage_writer_submit(w, batch(25)), 0);
	struct storage_op *op = batch(25);
	assert_int_equal(storage_writer_submit(w, op), -1);
	storage_op_free(op);
	/* a JOB op counts one record */
	op = storage_op_new(STORAGE_OP_JOB, 16);
	op->job = storage_op_strdup(op, "J");
	assert_int_equal(storage_writer_submit(w, op), -1);
	storage_op_free(op);
	assert_int_equal(storage_writer_stop(w, 0), 25);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_arena),
		cmocka_unit_test(test_backpressure),
		cmocka_unit_test(test_oversized),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
