/* test_ingest_exact.c: 1,620 node agents (12,960 ranks, the seed's job shape) stream N
 * iterations (CULPRIT_INGEST_ITERS, default 5) into the real culpritd on a real PostgreSQL;
 * PostgreSQL ends with exactly the records sent: the same counts, the same duration sums,
 * no key twice. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "fleet.h"
#include "harness.h"

static struct h_proc proc;

int main(void)
{
	char dsn[512], dir[600];
	const char *extra[] = {"--db", dsn, "--log-level", "warning", NULL};
	const char *env = getenv("CULPRIT_INGEST_ITERS");
	uint32_t iters = env && atoi(env) > 0 ? (uint32_t)atoi(env) : 5;
	struct fleet *f;
	struct agent_stats st;
	int64_t t0;
	uint32_t connected;

	h_db_create("test_ingest_exact", dsn, sizeof(dsn));
	h_tmpdir("ingest_exact", dir, sizeof(dir));
	t0 = h_now_ms();
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	fprintf(stderr, "culpritd ready in %.1f s\n", (double)(h_now_ms() - t0) / 1000.0);
	t0 = h_now_ms();
	f = fleet_new("ingest-exact", 1620, proc.agent_port);
	fleet_stream(f, 0, iters);
	H_CHECK(fleet_flush(f, 300000) == 0, &proc);
	connected = fleet_stats(f, &st);
	fprintf(stderr,
		"%u iterations of 12960 ranks: %llu records in %.1f s, %llu batches (%llu resent), %llu connects\n",
		iters, (unsigned long long)st.records_appended, (double)(h_now_ms() - t0) / 1000.0,
		(unsigned long long)st.batches_sealed, (unsigned long long)st.batches_resent,
		(unsigned long long)st.connects);
	H_CHECK(st.records_dropped == 0, &proc);
	H_CHECK(st.batches_rejected == 0, &proc);
	H_CHECK(st.batches_acked == st.batches_sealed, &proc);
	H_CHECK(connected == 1620, &proc);
	H_CHECK(fleet_check_db(dsn, "ingest-exact", fleet_sent(f)) == 0, &proc);
	t0 = h_now_ms();
	fleet_free(f);
	fprintf(stderr, "agents closed in %.1f s\n", (double)(h_now_ms() - t0) / 1000.0);
	t0 = h_now_ms();
	H_CHECK(h_proc_stop(&proc, SIGTERM, 60000) == 0, &proc);
	fprintf(stderr, "culpritd stopped in %.1f s\n", (double)(h_now_ms() - t0) / 1000.0);
	fprintf(stderr, "ok\n");
	return 0;
}
