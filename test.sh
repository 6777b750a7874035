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
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCULPRIT_SANITIZE=ON -DCULPRIT_WERROR=$werror >/dev/null
cmake --build "$build" -j"$(nproc)"

pgdir=$(pwd)/$build/testpg
# As root PostgreSQL runs as "postgres", which must reach the directory; a checkout under a
# private home cannot be, so fall back to a private directory under /tmp.
if [ "$(id -u)" -eq 0 ] && ! runuser -u postgres -- test -x "$(pwd)/$build"; then
	pgdir=$(mktemp -d /tmp/culprit-testpg.XXXXXX)
	chmod 755 "$pgdir"
fi
stop_pg() { tests/pg.sh stop "$pgdir"; }
trap stop_pg EXIT
export CULPRIT_TEST_DSN
CULPRIT_TEST_DSN=$(tests/pg.sh start "$pgdir")
export CULPRIT_SOURCE_DIR=$(pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

ctest --test-dir "$build" --output-on-failure -j2 --timeout 600 "$@"
