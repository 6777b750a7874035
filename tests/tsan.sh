#!/usr/bin/env bash
# tests/tsan.sh: the tests that exercise culpritd's threads (storage writer, query workers,
# diagnosis worker, alert delivery, retention, leases) under ThreadSanitizer, built into
# build/tsan with a private PostgreSQL as in test.sh. Any report, from a test or from a
# culpritd it started, fails the run. Arguments replace the default ctest selection.
set -euo pipefail
cd "$(dirname "$0")/.."
source ./install-deps.sh
culprit_install_deps test

build=build/tsan
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCULPRIT_TSAN=ON -DCULPRIT_WERROR=ON >/dev/null
cmake --build "$build" -j"$(nproc)"

export CULPRIT_TEST_TMP=$(pwd)/$build/tmp
mkdir -p "$CULPRIT_TEST_TMP"
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$CULPRIT_TEST_TMP"; then
	CULPRIT_TEST_TMP=$(mktemp -d /tmp/culprit-tsan.XXXXXX)
	chmod 755 "$CULPRIT_TEST_TMP"
fi
pgdir=$CULPRIT_TEST_TMP/testpg
stop_pg() {
	pkill -TERM -f "culpritd .*$CULPRIT_TEST_TMP" 2>/dev/null && sleep 2 || true
	tests/pg.sh stop "$pgdir"
}
trap stop_pg EXIT
export CULPRIT_TEST_DSN
CULPRIT_TEST_DSN=$(tests/pg.sh start "$pgdir")
export CULPRIT_SOURCE_DIR=$(pwd)

# reports go to files as well as failing the process: a culpritd's report fails the run
# even when its test does not notice the exit code
reports=$CULPRIT_TEST_TMP/tsan-reports
rm -rf "$reports" && mkdir -p "$reports"
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$(pwd)/tests/tsan.supp log_path=$reports/tsan"

# unit tests, and the integration tests of each thread: storage writer (storage_writer,
# test_ingest_exact), query workers (test_query, test_api_endpoints), diagnosis worker
# (test_online_hang, test_api_capture), alert delivery (test_alert_webhook,
# test_alert_outbox), retention (storage_retention), leases (test_cluster), shutdown
# (test_fault_sigterm), database loss (test_fault_db_down)
default='^(test_(record|frame|strmap|agent|storage_writer_queue|storage_pgbuf|storage_rest|engine|auth|log|queue|server_config|sketch|store)|storage_writer|storage_retention|test_ingest_exact|test_query|test_api_endpoints|test_online_hang|test_api_capture|test_alert_webhook|test_alert_outbox|test_cluster|test_fault_sigterm|test_fault_db_down)$'
rc=0
if [ $# -eq 0 ]; then
	ctest --test-dir "$build" --output-on-failure -j2 --timeout 900 -R "$default" || rc=$?
else
	ctest --test-dir "$build" --output-on-failure -j2 --timeout 900 "$@" || rc=$?
fi
if compgen -G "$reports/tsan.*" >/dev/null; then
	echo "tsan.sh: ThreadSanitizer reports:" >&2
	cat "$reports"/tsan.* >&2
	rc=1
fi
exit $rc
