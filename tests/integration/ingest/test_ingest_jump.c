/* test_ingest_jump.c: one agent of a job sends iteration 1, then iteration 2^31 - 1; another
 * agent of the same job then sends 100 honest batches, each acknowledged within 50 ms
 * (the window once stepped to 2^31 one iteration at a time: 13 s of a frozen event loop,
 * then about as much for every batch of the job). The jump and the other absurd values
 * (iteration starts before 2000 or a day ahead, a wrapped kernel call count, a sketch that
 * does not decode, a raw kernel starting in 1970) are each refused with their reason in a Reject, counted, and the
 * connection stays. culpritd runs without storage: an Ack then waits for the event loop
 * only, which is what is measured, not for PostgreSQL. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

static struct h_proc proc;

/* Sends b and expects a Reject of it whose reason holds `why`. */
static void expect_reject(int fd, const struct h_batch *b, const char *why)
{
	frame_envelope *e;

	h_send_batch(fd, b);
	e = h_recv_env(fd, 10000);
	if (!e || e->msg_case != CULPRIT__V1__ENVELOPE__MSG_REJECT || e->reject->seq != b->seq ||
	    !strstr(e->reject->reason, why)) {
		fprintf(stderr, "batch %llu: expected a Reject for \"%s\", got %s\n", (unsigned long long)b->seq, why,
			!e                                                 ? "nothing"
			: e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT ? e->reject->reason
									   : "another message");
		h_dump_log(&proc);
		exit(1);
	}
	fprintf(stderr, "refused: %s\n", e->reject->reason);
	frame_free(e);
}

int main(void)
{
	char dir[600];
	const char *extra[] = {"--storage", "false", NULL};
	const struct h_hello jumper = {.job = "jump",
				       .agent = "jumper",
				       .world = 16,
				       .pp = 1,
				       .dp = 16,
				       .ep = 1,
				       .first_rank = 0,
				       .n_ranks = 8};
	const struct h_hello honest = {.job = "jump",
				       .agent = "honest",
				       .world = 16,
				       .pp = 1,
				       .dp = 16,
				       .ep = 1,
				       .first_rank = 8,
				       .n_ranks = 8};
	const uint8_t garbage[] = {0xD5, 2, 0x80}; /* a truncated varint */
	int64_t now_us = (int64_t)time(NULL) * 1000000, worst = 0, total = 0;
	double rejected0;
	int a, h;

	h_tmpdir("ingest_jump", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	a = h_connect(proc.agent_port);
	h = h_connect(proc.agent_port);
	H_CHECK(a >= 0 && h >= 0 && h_hello_ok(a, &jumper) && h_hello_ok(h, &honest), &proc);
	rejected0 = h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"rejected\"}");

	h_send_batch(
		a, &(struct h_batch){
			   .seq = 1, .first_rank = 0, .n_ranks = 8, .iter = 1, .start_us = now_us, .kernel_count = 5});
	H_CHECK(h_wait_ack(a, 1), &proc);
	expect_reject(a,
		      &(struct h_batch){.seq = 2,
					.first_rank = 0,
					.n_ranks = 8,
					.iter = (1u << 31) - 1,
					.start_us = now_us,
					.kernel_count = 5},
		      "iteration more than window + 1,000,000 past the job's");
	expect_reject(
		a,
		&(struct h_batch){.seq = 3, .first_rank = 0, .n_ranks = 8, .iter = 2, .start_us = 0, .kernel_count = 5},
		"iteration start before 2000 or more than a day ahead");
	expect_reject(a,
		      &(struct h_batch){.seq = 4,
					.first_rank = 0,
					.n_ranks = 8,
					.iter = 2,
					.start_us = now_us + 2 * 86400 * 1000000LL,
					.kernel_count = 5},
		      "iteration start before 2000 or more than a day ahead");
	expect_reject(a,
		      &(struct h_batch){.seq = 5,
					.first_rank = 0,
					.n_ranks = 8,
					.iter = 2,
					.start_us = now_us,
					.kernel_count = UINT32_MAX},
		      "kernel call count negative or wrapped");
	expect_reject(a,
		      &(struct h_batch){.seq = 6,
					.first_rank = 0,
					.n_ranks = 8,
					.iter = 2,
					.start_us = now_us,
					.kernel_count = 5,
					.sketch = garbage,
					.sketch_len = sizeof(garbage)},
		      "kernel sketch does not decode");
	expect_reject(a,
		      &(struct h_batch){.seq = 7,
					.first_rank = 0,
					.n_ranks = 8,
					.iter = 2,
					.start_us = now_us,
					.kernel_count = 5,
					.raw_start_us = 1000000},
		      "raw kernel start before 2000 or more than a day ahead");
	H_CHECK(h_get_metric(proc.http_port, "culprit_agent_batches_total{outcome=\"rejected\"}") == rejected0 + 6,
		&proc);
	H_CHECK(h_log_wait(&proc, "batch 2 refused: iteration more than window", 1, 5000), &proc);

	/* the honest agent: every Ack within 50 ms */
	for (uint32_t i = 0; i < 100; i++) {
		int64_t t0 = h_now_ms(), dt;

		h_send_batch(h, &(struct h_batch){.seq = i + 1,
						  .first_rank = 8,
						  .n_ranks = 8,
						  .iter = 1 + i,
						  .start_us = now_us + i * 30000LL,
						  .kernel_count = 5});
		H_CHECK(h_wait_ack(h, i + 1), &proc);
		dt = h_now_ms() - t0;
		total += dt;
		worst = dt > worst ? dt : worst;
		if (dt > 50) {
			fprintf(stderr, "batch %u acknowledged after %lld ms\n", i + 1, (long long)dt);
			h_dump_log(&proc);
			return 1;
		}
	}
	fprintf(stderr, "100 honest batches after the jump: Ack latency worst %lld ms, mean %.1f ms\n",
		(long long)worst, (double)total / 100);
	/* the jumper's connection stayed and still works */
	h_send_batch(a, &(struct h_batch){.seq = 8,
					  .first_rank = 0,
					  .n_ranks = 8,
					  .iter = 2,
					  .start_us = now_us,
					  .kernel_count = 5,
					  .raw_start_us = now_us});
	H_CHECK(h_wait_ack(a, 8), &proc);
	close(a);
	close(h);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	fprintf(stderr, "ok\n");
	return 0;
}
