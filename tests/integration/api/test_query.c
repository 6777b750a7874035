/* test_query.c: storage/query.c against the test PostgreSQL: answers come back by token with
 * the row's text, no row gives NULL, a refused statement its SQLSTATE, a full queue refuses
 * the submission, an unreachable database fails with an empty SQLSTATE, and stop drops what
 * was still queued. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "query.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int wakes;

static void wake(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	wakes++;
	pthread_mutex_unlock(&mu);
}

/* waits for n results into out (by token - 1) */
static void collect(struct storage_query *q, struct storage_query_result *out, size_t n)
{
	size_t got = 0;

	for (int64_t deadline = h_now_ms() + 30000; got < n;) {
		struct storage_query_result r[8];
		size_t k = storage_query_take(q, r, 8);

		for (size_t i = 0; i < k; i++) {
			H_CHECK(r[i].token >= 1 && r[i].token <= n, NULL);
			out[r[i].token - 1] = r[i];
			got++;
		}
		H_CHECK(h_now_ms() < deadline, NULL);
		if (!k)
			poll(NULL, 0, 5);
	}
}

int main(void)
{
	char dsn[512];
	struct storage_query *q;
	struct storage_query_result res[4];

	h_db_create("culprit_test_query", dsn, sizeof(dsn));

	/* answers, no row, a refused statement */
	q = storage_query_start(&(struct storage_query_config){.dsn = dsn, .threads = 2, .queue_max = 8, .wake = wake});
	H_CHECK(q != NULL, NULL);
	H_CHECK(storage_query_submit(q, 1, "SELECT json_build_object('x', $1::int)::text", 1,
				     (const char *const[]){"7"}) == 0,
		NULL);
	H_CHECK(storage_query_submit(q, 2, "SELECT 'a' WHERE false", 0, NULL) == 0, NULL);
	H_CHECK(storage_query_submit(q, 3, "SELECT $1::timestamptz::text", 1, (const char *const[]){"not a time"}) == 0,
		NULL);
	H_CHECK(storage_query_submit(q, 4, "SELECT coalesce($1, 'null')", 1, (const char *const[]){NULL}) == 0, NULL);
	collect(q, res, 4);
	H_CHECK(!res[0].failed && res[0].text && strcmp(res[0].text, "{\"x\" : 7}") == 0, NULL);
	H_CHECK(!res[1].failed && res[1].text == NULL, NULL);
	H_CHECK(res[2].failed && strcmp(res[2].sqlstate, "22007") == 0 && strstr(res[2].error, "not a time"), NULL);
	H_CHECK(!res[3].failed && strcmp(res[3].text, "null") == 0, NULL);
	for (int i = 0; i < 4; i++)
		free(res[i].text);
	pthread_mutex_lock(&mu);
	H_CHECK(wakes >= 1, NULL);
	pthread_mutex_unlock(&mu);
	storage_query_stop(q);

	/* a full queue refuses; stop drops what is queued (and leaks nothing: ASan) */
	q = storage_query_start(&(struct storage_query_config){.dsn = dsn, .threads = 1, .queue_max = 2, .wake = wake});
	H_CHECK(storage_query_submit(q, 1, "SELECT pg_sleep(0.5)::text", 0, NULL) == 0, NULL);
	H_CHECK(storage_query_submit(q, 2, "SELECT pg_sleep(0.5)::text", 0, NULL) == 0, NULL);
	H_CHECK(storage_query_submit(q, 3, "SELECT 1", 0, NULL) == -1, NULL);
	storage_query_stop(q);

	/* an unreachable database: failed, no SQLSTATE */
	q = storage_query_start(&(struct storage_query_config){
		.dsn = "host=/nonexistent-culprit-dir port=1 user=x dbname=x connect_timeout=2", .wake = wake});
	H_CHECK(storage_query_submit(q, 1, "SELECT 1", 0, NULL) == 0, NULL);
	collect(q, res, 1);
	H_CHECK(res[0].failed && res[0].sqlstate[0] == '\0' && strstr(res[0].error, "could not connect"), NULL);
	storage_query_stop(q);
	fprintf(stderr, "test_query: ok\n");
	return 0;
}
