#!/usr/bin/env bash
# test.sh: every test. Installs what is missing, builds with ASan+UBSan, starts a private
# PostgreSQL under the build tree, runs ctest (unit, scenarios, integration), stops it.
set -euo pipefail
cd "$(dirname "$0")"
source ./install-deps.sh
culprit_install_deps test

build=${CULPRIT_TEST_BUILD:-build/test}
werror=OFF
[ -n "${CI:-}" ] && werror=ON
# CULPRIT_TEST_SANITIZER: the sanitizer's CMake option (tests/tsan.sh: -DCULPRIT_TSAN=ON)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug ${CULPRIT_TEST_SANITIZER:--DCULPRIT_SANITIZE=ON} -DCULPRIT_WERROR=$werror >/dev/null
cmake --build "$build" -j"$(nproc)"

# Scratch space of the tests, with the test PostgreSQL in it. As root PostgreSQL runs as
# "postgres", which must reach these directories; a checkout under a private home cannot be
# reached, so then they go to a directory of their own under /tmp.
export CULPRIT_TEST_TMP=$(pwd)/$build/tmp
mkdir -p "$CULPRIT_TEST_TMP"
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$CULPRIT_TEST_TMP"; then
	CULPRIT_TEST_TMP=$(mktemp -d /tmp/culprit-test.XXXXXX)
	chmod 755 "$CULPRIT_TEST_TMP"
fi
pgdir=$CULPRIT_TEST_TMP/testpg
stop_pg() {
	# whatever a failed test left running under the scratch directory, then the database
	pkill -TERM -f "culpritd .*$CULPRIT_TEST_TMP" 2>/dev/null && sleep 2 || true
	pkill -TERM -f "^$(pwd)/$build/client/culprit " 2>/dev/null || true # sims and replays
	tests/pg.sh stop "$pgdir"
}
trap stop_pg EXIT
export CULPRIT_TEST_DSN
CULPRIT_TEST_DSN=$(tests/pg.sh start "$pgdir")
export CULPRIT_SOURCE_DIR=$(pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

ctest --test-dir "$build" --output-on-failure -j2 --timeout 600 "$@"

# libFuzzer targets (clang, build/fuzz), each for a bounded time: CULPRIT_FUZZ_SECONDS
# (default 10; 0 skips; skipped too when ctest was given arguments). About two minutes in
# all for the 9 targets (tests/fuzz/run.sh).
fuzz_secs=${CULPRIT_FUZZ_SECONDS:-10}
if [ "$fuzz_secs" != 0 ] && [ $# -eq 0 ]; then
	tests/fuzz/run.sh "$fuzz_secs"
fi
