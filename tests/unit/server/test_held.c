/* test_held.c: the hold of a job under diagnosis (server/held.c) gives back what it held in
 * arrival order, with copies of kernel sketches and strings (the sender's memory is gone by
 * then), names first in index order, NULL strings as NULL; refuses an entry past
 * HELD_MAX_BYTES whole; and a sink that holds again while released writes a fresh hold. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "held.h"

struct seen {
	char log[1024];
	struct held *again; /* held into while released */
};

static void say(struct seen *s, const char *fmt, ...)
{
	va_list ap;
	size_t n = strlen(s->log);

	va_start(ap, fmt);
	vsnprintf(s->log + n, sizeof(s->log) - n, fmt, ap);
	va_end(ap);
}

static void on_name(void *arg, const char *name) { say(arg, "name %s;", name); }

static void on_batch(void *arg, const struct record_iter *it, size_t ni, const struct record_phase *ph, size_t np,
		     const struct record_kernel *k, size_t nk)
{
	struct seen *s = arg;

	say(s, "batch %zu/%zu/%zu", ni, np, nk);
	for (size_t i = 0; i < ni; i++)
		say(s, " i%u.%u=%lld", it[i].rank, it[i].iter, (long long)it[i].dur_us);
	for (size_t i = 0; i < np; i++)
		say(s, " p%u=%lld", ph[i].name, (long long)ph[i].dur_us);
	for (size_t i = 0; i < nk; i++)
		say(s, " k%u[%.*s]", k[i].name, k[i].sketch ? (int)k[i].sketch_len : 1,
		    k[i].sketch ? (const char *)k[i].sketch : "-");
	say(s, ";");
	if (s->again)
		assert_int_equal(held_batch(s->again, it, ni, NULL, 0, NULL, 0), 0);
}

static void on_hosts(void *arg, const uint32_t *ranks, size_t n, const char *host)
{
	say(arg, "hosts %zu from %u %s;", n, n ? ranks[0] : 0, host ? host : "(null)");
}

static void on_event(void *arg, const char *host, const char *kind, int64_t ts, const char *source, const char *detail)
{
	say(arg, "event %s %s %lld %s %s;", host, kind, (long long)ts, source ? source : "(null)",
	    detail ? detail : "(null)");
}

static void in_order(void **state)
{
	struct held h = {0}, again = {0};
	struct seen s = {{0}, &again};
	struct held_sink sink = {on_name, on_batch, on_hosts, on_event, &s};
	struct record_iter it[2] = {{1, 7, 100, 5000}, {2, 7, 100, 5100}};
	struct record_phase ph = {1, 7, 3, 0, 0, 0, 2500};
	char sk1[] = "abc", sk2[] = "defgh";
	struct record_kernel k[3] = {{.rank = 1, .iter = 7, .name = 4, .sketch = (uint8_t *)sk1, .sketch_len = 3},
				     {.rank = 1, .iter = 7, .name = 5},
				     {.rank = 2, .iter = 7, .name = 4, .sketch = (uint8_t *)sk2, .sketch_len = 5}};
	uint32_t ranks[2] = {8, 9};
	char host[] = "gpu-1";

	(void)state;
	assert_int_equal(held_add_name(&h, "gemm"), 0);
	assert_int_equal(held_add_name(&h, "nccl"), 1);
	assert_int_equal(held_find_name(&h, "nccl"), 1);
	assert_int_equal(held_find_name(&h, "other"), -1);
	assert_int_equal(held_hosts(&h, ranks, 2, host), 0);
	assert_int_equal(held_batch(&h, it, 2, &ph, 1, k, 3), 0);
	assert_int_equal(held_event(&h, "gpu-1", "xid", 42, NULL, "79"), 0);
	assert_int_equal(h.events, 1);
	/* the sender's memory is reused before the release */
	memset(sk1, 'x', 3);
	memset(sk2, 'y', 5);
	memset(it, 0, sizeof(it));
	strcpy(host, "gone!");
	held_release(&h, &sink);
	assert_string_equal(s.log, "name gemm;name nccl;hosts 2 from 8 gpu-1;"
				   "batch 2/1/3 i1.7=5000 i2.7=5100 p3=2500 k4[abc] k5[-] k4[defgh];"
				   "event gpu-1 xid 42 (null) 79;");
	/* emptied, and what the sink held went to a fresh hold */
	assert_int_equal(h.len, 0);
	assert_int_equal(h.nnames, 0);
	assert_int_equal(held_find_name(&h, "gemm"), -1);
	assert_true(again.len > 0);
	held_free(&again);
	held_free(&h);
}

static void bounded(void **state)
{
	struct held h = {0};
	size_t n = HELD_MAX_BYTES / sizeof(struct record_iter) / 2;
	struct record_iter *it = calloc(n, sizeof(*it));

	(void)state;
	assert_non_null(it);
	assert_int_equal(held_batch(&h, it, n, NULL, 0, NULL, 0), 0);
	size_t len = h.len;
	/* a second half and more does not fit: refused whole, the first kept */
	assert_int_equal(held_batch(&h, it, n + 1, NULL, 0, NULL, 0), -1);
	assert_int_equal(h.len, len);
	assert_int_equal(held_batch(&h, it, 10, NULL, 0, NULL, 0), 0);
	assert_true(held_bytes(&h) <= HELD_MAX_BYTES);
	held_free(&h);
	free(it);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(in_order),
		cmocka_unit_test(bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
