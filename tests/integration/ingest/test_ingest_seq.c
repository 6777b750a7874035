/* test_ingest_seq.c: a Batch sequence number cannot poison an agent. A hand-written client
 * says Hello with a victim's agent id ("node-0", a host name) and sends seq 2^64 - 1, then
 * a jump ahead, then 0: each closes its connection as a protocol violation (a log line, the
 * malformed-frame counter) and stores nothing. A Hello whose resume_seq is far past the
 * agent's last sequence is refused with the reason. Then 36 node agents of the agent library
 * (node-0 among them) stream a job: PostgreSQL holds exactly what they sent. culpritd is
 * restarted (the durable sequences read back from PostgreSQL), the poison is tried again and
 * refused again, the agents stream more: again exactly what they sent. A hand-written
 * agent whose batch 3 was rejected just before the restart goes on at 4 (its Hello's
 * resume_seq says so) and is stored. Before the fix the
 * poison was acknowledged, stored as durable_seq = -1, and every later batch of node-0
 * dropped as a resend, across restarts. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alerttest.h"
#include "fleet.h"
#include "frame.h"
#include "harness.h"

#define JOB "seq-poison"
#define JOB2 "seq-hand"
#define NODES 36 /* world 288 = pp 9 x dp 32, ep 32: fleet.c's topology */

static struct h_proc proc;
static const struct h_hello node0 = {
	.job = JOB, .agent = "node-0", .world = NODES * 8, .pp = 9, .dp = NODES * 8 / 9, .ep = 32, .n_ranks = 8};
static const struct h_hello hand = {
	.job = JOB2, .agent = "hand", .world = NODES * 8, .pp = 9, .dp = NODES * 8 / 9, .ep = 32, .n_ranks = 8};

/* A Batch with seq closes the connection without an Ack, and stores nothing. strict: the
 * close is counted as a protocol violation (not so while the victim's agent is running: its
 * reconnect may replace the poisoner's connection first). */
static void poison(const char *dsn, const struct h_hello *victim, uint64_t seq, int strict)
{
	int fd = h_connect(proc.agent_port);
	double malformed0 = h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}");
	long long progress0 = at_sql_long(dsn, "SELECT count(*) + coalesce(sum(durable_seq), 0) FROM agent_progress");
	long long iters0 = at_sql_long(dsn, "SELECT count(*) FROM iterations");
	frame_envelope *e;

	H_CHECK(fd >= 0 && h_hello_ok(fd, victim), &proc);
	h_send_batch(fd, &(struct h_batch){.seq = seq,
					   .first_rank = 0,
					   .n_ranks = 8,
					   .iter = 0,
					   .start_us = (int64_t)time(NULL) * 1000000,
					   .kernel_count = 5});
	e = h_recv_env(fd, 5000);
	if (e) {
		fprintf(stderr, "seq %llu: answered with message %d instead of a close\n", (unsigned long long)seq,
			(int)e->msg_case);
		h_dump_log(&proc);
		exit(1);
	}
	H_CHECK(h_peer_closed(fd, 5000), &proc);
	close(fd);
	H_CHECK(!strict || h_get_metric(proc.http_port, "culprit_agent_frames_total{outcome=\"malformed\"}") ==
				   malformed0 + 1,
		&proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) + coalesce(sum(durable_seq), 0) FROM agent_progress") == progress0,
		&proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM iterations") == iters0, &proc);
}

static void poisons(const char *dsn, const struct h_hello *victim, uint64_t last, int strict)
{
	frame_envelope *e;
	struct h_hello far = *victim;
	int fd;

	poison(dsn, victim, UINT64_MAX, strict);
	poison(dsn, victim, last + 2, strict);
	poison(dsn, victim, 0, strict);
	H_CHECK(!strict || h_log_wait(&proc, "protocol violation: batch sequence 18446744073709551615 out of order", 1,
				      5000),
		&proc);
	/* a resume_seq far ahead is refused, with the reason */
	far.resume_seq = UINT64_MAX;
	fd = h_connect(proc.agent_port);
	H_CHECK(fd >= 0, &proc);
	h_send_hello_as(fd, &far);
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && !e->hello_ack->accepted &&
			strstr(e->hello_ack->reason, "resume_seq 18446744073709551615 is more than 65536 past"),
		&proc);
	frame_free(e);
	H_CHECK(h_peer_closed(fd, 5000), &proc);
	close(fd);
}

static void stream(struct fleet *f, const char *dsn, uint32_t first, uint32_t n)
{
	struct agent_stats st, node0;

	fleet_stream(f, first, n);
	H_CHECK(fleet_flush(f, 120000) == 0, &proc);
	fleet_stats(f, &st);
	fleet_agent_stats(f, 0, &node0);
	fprintf(stderr, "iterations %u..%u: %llu batches sealed, %llu acked, %llu rejected; node-0 durable %llu\n",
		first, first + n - 1, (unsigned long long)st.batches_sealed, (unsigned long long)st.batches_acked,
		(unsigned long long)st.batches_rejected, (unsigned long long)node0.durable_seq);
	H_CHECK(st.records_dropped == 0 && st.batches_rejected == 0, &proc);
	H_CHECK(st.batches_acked == st.batches_sealed, &proc);
	H_CHECK(fleet_check_db(dsn, JOB, fleet_sent(f)) == 0, &proc);
}

/* The hand-written agent sends batch seq of iteration seq - 1 and waits for its Ack. */
static void hand_batch(int fd, uint64_t seq)
{
	h_send_batch(fd, &(struct h_batch){.seq = seq,
					   .first_rank = 0,
					   .n_ranks = 8,
					   .iter = (uint32_t)seq - 1,
					   .start_us = (int64_t)time(NULL) * 1000000,
					   .kernel_count = 5});
	H_CHECK(h_wait_ack(fd, seq), &proc);
}

int main(void)
{
	char dsn[512], dir[600], listen[64];
	const char *extra[] = {"--db", dsn, NULL, NULL, NULL};
	struct fleet *f;
	frame_envelope *e;
	long long durable;
	int fd;

	h_db_create("test_ingest_seq", dsn, sizeof(dsn));
	h_tmpdir("ingest_seq", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);

	/* before the victim ever connected */
	poisons(dsn, &node0, 0, 1);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM agent_progress") == 0, &proc);

	f = fleet_new(JOB, NODES, proc.agent_port);
	stream(f, dsn, 0, 3);
	durable = at_sql_long(dsn, "SELECT durable_seq FROM agent_progress WHERE agent = 'node-0'");
	H_CHECK(durable >= 1, &proc);
	/* while the victim runs (the poisoner's Hello replaces its connection) */
	poisons(dsn, &node0, (uint64_t)durable, 0);
	stream(f, dsn, 3, 3);

	/* an agent with durable batches, not connected across the restart */
	fd = h_connect(proc.agent_port);
	H_CHECK(fd >= 0 && h_hello_ok(fd, &hand), &proc);
	hand_batch(fd, 1);
	hand_batch(fd, 2);
	/* batch 3 is rejected (a rank it does not serve): its sequence is consumed, but only in
	 * culpritd's memory */
	h_send_batch(fd, &(struct h_batch){.seq = 3,
					   .first_rank = 8,
					   .n_ranks = 8,
					   .iter = 2,
					   .start_us = (int64_t)time(NULL) * 1000000,
					   .kernel_count = 5});
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_REJECT && e->reject->seq == 3, &proc);
	frame_free(e);
	close(fd);

	/* restart: the durable sequences come back from PostgreSQL, the check is the same */
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);
	extra[2] = "--agent-listen";
	extra[3] = listen;
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	{
		int port = proc.agent_port;

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
		proc.agent_port = port; /* --agent-listen above wins over the harness's */
	}
	poisons(dsn, &hand, 2, 1);
	/* the agent goes on at 4 and says so in Hello (resume_seq): the restarted culpritd takes
	 * 3 as consumed */
	fd = h_connect(proc.agent_port);
	H_CHECK(fd >= 0, &proc);
	{
		struct h_hello resume = hand;

		resume.resume_seq = 4;
		h_send_hello_as(fd, &resume);
	}
	e = h_recv_env(fd, 10000);
	H_CHECK(e && e->msg_case == CULPRIT__V1__ENVELOPE__MSG_HELLO_ACK && e->hello_ack->accepted &&
			e->hello_ack->durable_seq == 2,
		&proc);
	frame_free(e);
	hand_batch(fd, 2); /* a resend: acknowledged again */
	hand_batch(fd, 4);
	close(fd);
	H_CHECK(at_sql_long(dsn,
			    "SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = '" JOB2
			    "'") == 3 * 8,
		&proc);

	durable = at_sql_long(dsn, "SELECT durable_seq FROM agent_progress WHERE agent = 'node-0'");
	poisons(dsn, &node0, (uint64_t)durable, 0);
	stream(f, dsn, 6, 3);
	H_CHECK(at_sql_long(dsn, "SELECT min(durable_seq) FROM agent_progress") >= 1, &proc);
	fleet_free(f);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "ok\n");
	return 0;
}
