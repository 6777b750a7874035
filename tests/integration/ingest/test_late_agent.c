/* test_late_agent.c: the culprit's node agent is late. compute_straggler (1,024 ranks on 128
 * node agents of the agent library, tests/integration/ingest/simfeed.h) streams into the real
 * culpritd, node-64's agent (ranks 512-519, rank 517 the straggler) three iterations behind
 * the others from the fault's start on. The quorum (95% of the ranks) completes the window's
 * iterations without node-64, whose peers then look slow in every collective it belongs to:
 * a diagnosis of that window named node-64's link (communication_degradation) before node-64's
 * records came, and paged for it (test_cluster_relay saw this once, behind a relay).
 *
 * Checked: the first report, the one the incident fires with, and every later one name rank
 * 517 on node-64 as the compute culprit (culpritd waits for the ranks not heard from in the
 * window's last iteration, up to 3 s); the log says no diagnosis ran without them; every
 * record sent is in PostgreSQL. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "alerttest.h"
#include "harness.h"
#include "simfeed.h"

#define JOB "sim-compute_straggler"
#define ITERS 30 /* the fault starts at ITERS / 3 = 10 */

int main(void)
{
	static struct h_proc proc;
	char dsn[512], dir[600];
	const char *extra[] = {"--db", dsn, NULL};
	struct fanout_stats st;
	struct simfeed *sf;
	long first_id;

	h_db_create("test_late_agent", dsn, sizeof(dsn));
	h_tmpdir("late_agent", dir, sizeof(dir));
	H_CHECK(h_culpritd_start(&proc, dir, extra) == 0, &proc);
	sf = simfeed_start(&(struct simfeed_config){.scenario = "compute_straggler",
						    .iters = ITERS,
						    .port = proc.agent_port,
						    .lag_host = 64,
						    .lag_iters = 3,
						    .lag_from = ITERS / 3});
	H_CHECK(simfeed_finish(sf, 60000, &st) == 0, &proc);
	H_CHECK(st.dropped_records == 0 && st.rejected_batches == 0 && st.acked_batches == st.sealed_batches, &proc);
	H_CHECK(fleet_check_db(dsn, JOB, simfeed_sent(sf)) == 0, &proc);

	/* the first report (the incident fires with it) and one after it */
	for (int64_t deadline = h_now_ms() + 30000;; poll(NULL, 0, 100)) {
		if (at_sql_long(dsn, "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB
				     "'") >= 2)
			break;
		H_CHECK(h_now_ms() < deadline, &proc);
	}
	first_id = at_sql_long(dsn, "SELECT min(r.id) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB
				    "'");
	fprintf(stderr, "%ld reports, the first %ld\n",
		at_sql_long(dsn, "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB "'"),
		first_id);
	H_CHECK(first_id > 0, &proc);
	H_CHECK(at_sql_long(dsn, "SELECT count(*) FROM reports r JOIN jobs j ON j.id = r.job_id WHERE j.name = '" JOB
				 "' AND (r.category <> 'compute_degradation'"
				 " OR r.json->'suspects'->0->>'rank' <> '517' OR r.json->'suspects'->0->>'host' <> 'node-64'"
				 " OR r.json->'suspects'->0->>'role' <> 'culprit')") == 0,
		&proc);
	H_CHECK(h_count_lines(proc.log_path, "INCIDENT " JOB "/10/compute_degradation firing") == 1, &proc);
	H_CHECK(h_count_lines(proc.log_path, "diagnosing without") == 0, &proc);

	int status = h_proc_stop(&proc, SIGTERM, 60000);
	H_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, &proc);
	simfeed_free(sf);
	fprintf(stderr, "ok\n");
	return 0;
}
