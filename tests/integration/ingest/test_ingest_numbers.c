/* test_ingest_numbers.c: every number keeps its value, on a real culpritd and PostgreSQL.
 * A value the database cannot hold is refused at ingest with the reason, and what is stored
 * reads back through the REST API as it was sent:
 *   - iteration 3,000,000,000 (a record's, a phase's, a kernel summary's): Reject "iteration
 *     3000000000 is over 2147483647" (it was acknowledged and stored as -1,294,967,296);
 *   - iteration 2^31 - 1 with a duration of 5 days (over 32 bits of microseconds): stored,
 *     and GET .../ranks/0/iterations returns both as sent;
 *   - a Hello with gpus_per_node 3,000,000,000: refused with the reason;
 *   - nothing negative in the database afterwards. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <libpq-fe.h>

#include "frame.h"
#include "harness.h"

#define BIG 3000000000u
#define TOP 2147483647u
#define FIVE_DAYS_US (5LL * 86400 * 1000000)

static struct h_proc proc;

static long long sql_long(const char *dsn, const char *sql)
{
	PGconn *c = PQconnectdb(dsn);
	PGresult *r = PQexec(c, sql);
	long long v = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	PQfinish(c);
	return v;
}

/* Sends hb; the Reject's reason (malloc'd), or NULL when acknowledged. */
static char *send_one(int fd, const struct h_batch *hb)
{
	frame_envelope *e;
	char *why = NULL;

	h_send_batch(fd, hb);
	e = h_recv_env(fd, 20000);
	H_CHECK(e && (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK || e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT),
		&proc);
	if (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT) {
		H_CHECK(e->reject->seq == hb->seq, &proc);
		why = strdup(e->reject->reason);
		fprintf(stderr, "batch %llu refused: %s\n", (unsigned long long)hb->seq, why);
	} else {
		H_CHECK(e->ack->durable_seq == hb->seq, &proc);
	}
	frame_free(e);
	return why;
}

/* A batch of rank 0's iteration iter whose phase (kernel: kernel summary) says phase_iter;
 * the Reject's reason (malloc'd), or NULL when acknowledged. */
static char *send_mixed(int fd, uint64_t seq, uint32_t iter, uint32_t phase_iter, int kernel)
{
	frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
	Culprit__V1__Batch b = CULPRIT__V1__BATCH__INIT;
	char *names[] = {(char *)"mlp"};
	uint32_t rank = 0, zero = 0, one = 1;
	int64_t start = (int64_t)time(NULL) * 1000000, dur = 30000, noff = -1;
	char *why = NULL;

	b.seq = seq;
	b.names = names, b.n_names = 1;
	b.iter_rank = &rank, b.n_iter_rank = 1;
	b.iter_iter = &iter, b.n_iter_iter = 1;
	b.iter_start_us = &start, b.n_iter_start_us = 1;
	b.iter_dur_us = &dur, b.n_iter_dur_us = 1;
	if (kernel) {
		b.kernel_rank = &rank, b.n_kernel_rank = 1;
		b.kernel_iter = &phase_iter, b.n_kernel_iter = 1;
		b.kernel_name = &zero, b.n_kernel_name = 1;
		b.kernel_count = &one, b.n_kernel_count = 1;
		b.kernel_sum_us = &dur, b.n_kernel_sum_us = 1;
		b.kernel_min_us = &dur, b.n_kernel_min_us = 1;
		b.kernel_max_us = &dur, b.n_kernel_max_us = 1;
	} else {
		b.phase_rank = &rank, b.n_phase_rank = 1;
		b.phase_iter = &phase_iter, b.n_phase_iter = 1;
		b.phase_name = &zero, b.n_phase_name = 1;
		b.phase_kind = &zero, b.n_phase_kind = 1;
		b.phase_group = &zero, b.n_phase_group = 1;
		b.phase_start_us = &noff, b.n_phase_start_us = 1;
		b.phase_dur_us = &dur, b.n_phase_dur_us = 1;
	}
	env.msg_case = CULPRIT__V1__ENVELOPE__MSG_BATCH;
	env.batch = &b;
	h_send_env(fd, &env);
	e = h_recv_env(fd, 20000);
	H_CHECK(e && (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_ACK || e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT),
		&proc);
	if (e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT) {
		why = strdup(e->reject->reason);
		fprintf(stderr, "batch %llu refused: %s\n", (unsigned long long)seq, why);
	}
	frame_free(e);
	return why;
}

int main(void)
{
	char dir[600], dsn[512], path[256], *body = NULL, *why;
	const char *extra[] = {"--db", dsn, NULL};
	const struct h_hello agent = {.job = "numbers", .agent = "a0", .world = 8, .pp = 1, .dp = 8, .ep = 1, .n_ranks = 8};
	int64_t now_us = (int64_t)time(NULL) * 1000000;
	json_t *j, *it;
	int fd;

	h_db_create("test_ingest_numbers", dsn, sizeof(dsn));
	h_tmpdir("ingest_numbers", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	fd = h_connect(proc.agent_port);
	H_CHECK(fd >= 0 && h_hello_ok(fd, &agent), &proc);

	/* iteration 3,000,000,000: a record's, a phase's, a kernel summary's */
	why = send_one(fd, &(struct h_batch){.seq = 1, .n_ranks = 8, .iter = BIG, .start_us = now_us});
	H_CHECK(why && strstr(why, "iteration 3000000000 is over 2147483647"), &proc);
	free(why);
	why = send_mixed(fd, 2, 5, BIG, 0);
	H_CHECK(why && strstr(why, "phase iteration 3000000000 is over 2147483647"), &proc);
	free(why);
	why = send_mixed(fd, 3, 5, BIG, 1);
	H_CHECK(why && strstr(why, "kernel summary iteration 3000000000 is over 2147483647"), &proc);
	free(why);

	/* 2^31 - 1 and five days: stored as they are */
	why = send_one(fd, &(struct h_batch){.seq = 4,
					     .n_ranks = 8,
					     .iter = TOP,
					     .start_us = now_us - FIVE_DAYS_US,
					     .dur_us = FIVE_DAYS_US,
					     .kernel_count = 1});
	H_CHECK(why == NULL, &proc);
	snprintf(path, sizeof(path), "/api/v1/jobs/numbers/ranks/0/iterations?from_iter=%u&to_iter=%u", TOP - 1, TOP);
	H_CHECK(h_http(proc.http_port, "GET", path, NULL, &body) == 200, &proc);
	j = json_loads(body, 0, NULL);
	it = json_array_get(json_object_get(j, "iterations"), 0);
	fprintf(stderr, "read back: %s\n", body);
	H_CHECK(json_array_size(json_object_get(j, "iterations")) == 1, &proc);
	H_CHECK(json_integer_value(json_object_get(it, "iter")) == TOP, &proc);
	H_CHECK(json_integer_value(json_object_get(it, "dur_us")) == FIVE_DAYS_US, &proc);
	H_CHECK(json_integer_value(json_object_get(it, "start_us")) == now_us - FIVE_DAYS_US, &proc);
	json_decref(j);
	free(body);
	close(fd);

	/* a Hello whose gpus_per_node the database would wrap */
	{
		frame_envelope env = CULPRIT__V1__ENVELOPE__INIT, *e;
		Culprit__V1__Hello h = CULPRIT__V1__HELLO__INIT;
		Culprit__V1__Topology t = CULPRIT__V1__TOPOLOGY__INIT;
		uint32_t rank = 0;

		t.world = 1, t.tp = 1, t.cp = 1, t.pp = 1, t.dp = 1, t.ep = 1, t.gpus_per_node = BIG;
		h.protocol_version = FRAME_PROTOCOL_VERSION;
		h.job = (char *)"gpus", h.agent_id = (char *)"g0", h.topology = &t, h.ranks = &rank, h.n_ranks = 1;
		env.msg_case = CULPRIT__V1__ENVELOPE__MSG_HELLO;
		env.hello = &h;
		fd = h_connect(proc.agent_port);
		h_send_env(fd, &env);
		e = h_recv_env(fd, 10000);
		H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && !e->hello_ack->accepted &&
				strstr(e->hello_ack->reason, "gpus_per_node 3000000000 is over 65536"),
			&proc);
		frame_free(e);
		close(fd);
	}

	H_CHECK(h_proc_stop(&proc, SIGTERM, 30000) == 0, &proc);
	H_CHECK(sql_long(dsn, "SELECT count(*) FROM iterations WHERE iter < 0 OR dur_us < 0") == 0, &proc);
	H_CHECK(sql_long(dsn, "SELECT count(*) FROM phases WHERE iter < 0") == 0, &proc);
	H_CHECK(sql_long(dsn, "SELECT count(*) FROM kernels WHERE iter < 0") == 0, &proc);
	H_CHECK(sql_long(dsn, "SELECT count(*) FROM jobs WHERE gpus_per_node < 0") == 0, &proc);
	H_CHECK(sql_long(dsn, "SELECT max(iter) FROM iterations") == TOP, &proc);
	printf("numbers: iterations over 2^31 - 1 and gpus_per_node over 65536 refused; 2^31 - 1 and 5 days stored and "
	       "read back\n");
	return 0;
}
