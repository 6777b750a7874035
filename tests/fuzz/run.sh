#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS]: builds the libFuzzer targets with clang into build/fuzz
# (-DCULPRIT_FUZZ=ON) and runs each for SECONDS (default 20) on a copy of its seed corpus
# (corpus/<name without fuzz_>). Exit 1 when a fuzzer finds a crash (its log is printed).
# Callable from test.sh; about 30 s of building plus SECONDS per target.
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-20}
[ "$secs" -ge 1 ] || { echo "usage: run.sh [SECONDS >= 1]" >&2; exit 2; }
build=${CULPRIT_FUZZ_BUILD:-build/fuzz}
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCULPRIT_FUZZ=ON >/dev/null
targets=$(sed -n 's/^culprit_fuzz_target(\(fuzz_[a-z_]*\) .*/\1/p' tests/fuzz/CMakeLists.txt)
targets="$targets fuzz_import_jsonl fuzz_import_kineto fuzz_import_chrome fuzz_import_csv"
cmake --build "$build" -j2 --target $targets >/dev/null
work=$(mktemp -d /tmp/culprit-fuzz.XXXXXX)
trap 'rm -rf "$work"' EXIT
rc=0
for t in $targets; do
	name=${t#fuzz_}
	mkdir -p "$work/$name"
	[ -d "tests/fuzz/corpus/$name" ] && cp -r "tests/fuzz/corpus/$name/." "$work/$name/"
	if "$build/tests/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=1024 \
		-artifact_prefix="$work/$t-" "$work/$name" >"$work/$t.log" 2>&1; then
		echo "$t: ok ($(grep -o 'Done [0-9]* runs' "$work/$t.log" | tail -1))"
	else
		echo "$t: FAILED"
		tail -40 "$work/$t.log"
		# the input is gone with $work: print it, so that a failure in CI can be replayed
		for a in "$work/$t-"*; do
			[ -f "$a" ] || continue
			echo "input $(basename "$a") ($(wc -c <"$a") bytes, hex; replay: xxd -r -p >FILE):"
			od -An -tx1 -v "$a" | head -c 16384 | tr -d ' \n' | fold -w 64
			echo
		done
		rc=1
	fi
done
exit $rc
