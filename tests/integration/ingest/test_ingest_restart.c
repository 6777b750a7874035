/* test_ingest_restart.c: 1,620 node agents stream into the real culpritd; in the middle of
 * the stream culpritd is killed with SIGKILL (nothing flushed, nothing said) and started
 * again on the same port. The agents reconnect, learn the durable sequence from HelloAck and
 * resend the rest: PostgreSQL ends with exactly the records sent, none lost, none twice. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "fleet.h"
#include "harness.h"

static struct h_proc proc;

struct killer {
	struct fleet *f;
	const char *dsn, *dir, *listen;
	struct agent_stats at_kill;
	int64_t down_ms;
};

/* Waits until part of the stream is acknowledged (the rest in flight or not yet sent),
 * SIGKILLs culpritd, and starts it again on the same agent port. */
static void *killer_main(void *arg)
{
	struct killer *k = arg;
	const char *extra[] = {"--db", k->dsn, "--log-level", "warning", "--agent-listen", k->listen, NULL};
	int64_t t0;

	for (int64_t deadline = h_now_ms() + 120000; h_now_ms() < deadline;) {
		fleet_stats(k->f, &k->at_kill);
		if (k->at_kill.batches_acked >= 1500)
			break;
		poll(NULL, 0, 2);
	}
	h_proc_stop(&proc, SIGKILL, 10000); /* sends SIGKILL and reaps it */
	t0 = h_now_ms();
	H_CHECK(proc.pid == 0, &proc);
	/* the agents keep appending and reconnecting while it is down */
	poll(NULL, 0, 300);
	H_CHECK(h_culpritd_start(&proc, k->dir, extra) == 0, &proc);
	k->down_ms = h_now_ms() - t0;
	return NULL;
}

int main(void)
{
	char dsn[512], dir[600], listen[64];
	const char *env = getenv("CULPRIT_INGEST_ITERS");
	uint32_t iters = env && atoi(env) > 0 ? (uint32_t)atoi(env) : 6;
	struct fleet *f;
	struct agent_stats st;
	struct killer k;
	pthread_t thr;

	h_db_create("test_ingest_restart", dsn, sizeof(dsn));
	h_tmpdir("ingest_restart", dir, sizeof(dir));
	{
		const char *extra[] = {"--db", dsn, "--log-level", "warning", NULL};

		H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	}
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", proc.agent_port);

	f = fleet_new("ingest-restart", 1620, proc.agent_port);
	k = (struct killer){.f = f, .dsn = dsn, .dir = dir, .listen = listen};
	pthread_create(&thr, NULL, killer_main, &k);
	fleet_stream(f, 0, iters);
	pthread_join(thr, NULL);
	fprintf(stderr, "killed culpritd with %llu of %llu batches acknowledged; down for %.1f s\n",
		(unsigned long long)k.at_kill.batches_acked, (unsigned long long)k.at_kill.batches_sealed,
		(double)k.down_ms / 1000.0);
	H_CHECK(fleet_flush(f, 300000) == 0, &proc);
	fleet_stats(f, &st);
	fprintf(stderr, "%llu records, %llu batches, %llu resent after the restart, %llu connects, %llu disconnects\n",
		(unsigned long long)st.records_appended, (unsigned long long)st.batches_sealed,
		(unsigned long long)st.batches_resent, (unsigned long long)st.connects,
		(unsigned long long)st.disconnects);
	/* killed in the middle: some acknowledged, more to come */
	H_CHECK(k.at_kill.batches_acked > 0 && k.at_kill.batches_acked < st.batches_sealed, &proc);
	H_CHECK(st.disconnects >= 1620, &proc);   /* every agent lost its connection */
	H_CHECK(st.connects >= 2 * 1620, &proc);  /* and came back */
	H_CHECK(st.records_dropped == 0 && st.batches_rejected == 0, &proc);
	H_CHECK(st.batches_acked == st.batches_sealed, &proc);
	H_CHECK(fleet_check_db(dsn, "ingest-restart", fleet_sent(f)) == 0, &proc);
	fleet_free(f);
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "ok\n");
	return 0;
}
