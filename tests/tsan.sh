#!/usr/bin/env bash
# tests/tsan.sh: the tests that exercise culpritd's threads under ThreadSanitizer: test.sh
# with a build of its own (build/tsan, CULPRIT_TSAN) and the selection below. Any report,
# from a test or from a culpritd it started, fails the run. Arguments replace the selection.
set -euo pipefail
cd "$(dirname "$0")/.."

# unit tests (test_jsonl and test_import: the JSONL reader's decoding threads), and the
# integration tests of each thread: storage writer (storage_writer,
# test_ingest_*), query workers (test_query, test_api_*, test_http_conns), diagnosis worker
# (test_online_hang, test_window_held, test_api_capture), alert delivery (test_alert_*, test_job_retire),
# retention (storage_retention), leases (test_cluster), the action hook runner
# (test_action_slurm), the console (test_console), shutdown and the database lost
# (test_fault_sigterm, test_fault_db_down), the database hung (test_fault_db_stall: the
# liveness check's thread). Left out, for time (TSan runs them 5-10x slower and their
# deadlines are for the ASan build): test_ingest_restart (300 s here),
# test_cluster_failover, test_api_events, test_fault_webhook_down; and the torch, real-data,
# installed-tree, load and memory tests.
default='^(test_(record|jsonl|import|frame|strmap|agent|storage_writer_queue|storage_pgbuf|storage_rest|engine|auth|log|queue|server_config|sketch|store|l2)|storage_(writer|retention)|test_ingest_(exact|seq)|test_refused|test_query|test_api_(endpoints|metrics|capture)|test_http_conns|test_online_hang|test_window_held|test_alert_(webhook|outbox|hang)|test_job_retire|test_action_slurm|test_cluster|test_console|test_fault_(sigterm|db_down|db_stall))$'
[ $# -gt 0 ] || set -- -R "$default"

# reports go to files as well as failing the process: a culpritd's report fails the run
# even when its test does not notice the exit code
reports=$(pwd)/build/tsan-reports
rm -rf "$reports" && mkdir -p "$reports" && chmod 777 "$reports"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(pwd)/tests/tsan.supp log_path=$reports/tsan"
rc=0
CULPRIT_TEST_BUILD=build/tsan CULPRIT_TEST_SANITIZER=-DCULPRIT_TSAN=ON ./test.sh "$@" || rc=$?
if compgen -G "$reports/tsan.*" >/dev/null; then
	echo "tsan.sh: ThreadSanitizer reports:" >&2
	cat "$reports"/tsan.* >&2
	rc=1
fi
exit $rc
