#!/usr/bin/env bash
# test_cli.sh CULPRIT: `culprit sim --out` then `culprit diagnose`, end to end, and the
# exit codes and messages on bad input.
set -euo pipefail
culprit=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$culprit" sim --scenario compute_straggler --iters 30 --seed 3 --out "$dir/s.jsonl.gz"
gzip -t "$dir/s.jsonl.gz" || fail "sim --out .gz did not write gzip"
"$culprit" diagnose "$dir/s.jsonl.gz" >"$dir/r.json"
jq -e '.verdict.category == "compute_degradation"' "$dir/r.json" >/dev/null || fail "category"
jq -e '[.suspects[] | select(.role == "culprit") | .rank] == [517]' "$dir/r.json" >/dev/null || fail "culprit set"
jq -e '[.suspects[] | select(.role == "culprit") | .host] == ["node-64"]' "$dir/r.json" >/dev/null || fail "host"
jq -e '.suspects[0].evidence[0].phase == "mlp" and .suspects[0].coords.pp == 2' "$dir/r.json" >/dev/null || fail "evidence"
jq -e '(.window.first_iter | type) == "number" and .lost_ms_per_iter > 0 and (.victims.ranks > 0)' "$dir/r.json" >/dev/null || fail "window fields"
# numbers as a reader wants them: no binary noise (67.400000000000006), no NaN
! grep -Eq '[0-9]\.[0-9]{5,}' "$dir/r.json" || fail "a number with more than 4 decimals: $(grep -Eo '[0-9]+\.[0-9]{5,}' "$dir/r.json" | head -1)"
! grep -qi 'nan' "$dir/r.json" || fail "nan in the report"
"$culprit" diagnose --text "$dir/s.jsonl.gz" >"$dir/r.txt"
grep -q "compute_degradation" "$dir/r.txt" && grep -q "rank 517 on node-64" "$dir/r.txt" || fail "--text"

# a job with 20 kernel names per rank, none of the culprit's top 4 a communication kernel
"$culprit" sim --scenario compute_straggler --iters 30 --kernels 20 --out "$dir/k.jsonl.gz"
"$culprit" diagnose "$dir/k.jsonl.gz" >"$dir/k.json" || fail "diagnose with 20 kernels: exit $?"
jq -e '.verdict.category == "compute_degradation" and
	([.suspects[] | select(.role == "culprit") | [.rank, .host]] == [[517, "node-64"]])' \
	"$dir/k.json" >/dev/null || fail "20 kernels: $(head -c 600 "$dir/k.json")"

# plain JSONL, hang
"$culprit" sim --scenario hang --iters 30 --out "$dir/h.jsonl"
"$culprit" diagnose --format jsonl "$dir/h.jsonl" >"$dir/h.json"
jq -e '.verdict.category == "hang" and ([.suspects[].rank] == [777])' "$dir/h.json" >/dev/null || fail "hang"

# refused(FILE PATTERN): diagnose exits 2 and its message matches PATTERN (file:line)
refused() {
	local rc=0
	"$culprit" diagnose "$1" >/dev/null 2>"$dir/err" || rc=$?
	[ "$rc" -eq 2 ] && grep -q "$2" "$dir/err" || fail "$(basename "$1"): exit $rc, $(cat "$dir/err")"
}

# malformed line: exit 2 with file:line
head -5 "$dir/h.jsonl" >"$dir/bad.jsonl"
echo '{"type":"iter","rank":1,' >>"$dir/bad.jsonl"
refused "$dir/bad.jsonl" "bad.jsonl:6:"

# a record with a missing field
head -3 "$dir/h.jsonl" >"$dir/bad2.jsonl"
echo '{"type":"iter","job":"x","rank":1,"iter":2}' >>"$dir/bad2.jsonl"
refused "$dir/bad2.jsonl" 'bad2.jsonl:4: missing field "dur_us"'

# a duration no int64 holds (1e300): the line is refused, nothing overflows
head -1 "$dir/h.jsonl" >"$dir/bad3.jsonl"
echo '{"type":"kernel","job":"x","rank":0,"iter":0,"name":"k","kind":"compute","count":2,"durs_us":[1,1e300]}' >>"$dir/bad3.jsonl"
refused "$dir/bad3.jsonl" 'bad3.jsonl:2: invalid field "durs_us"'

# unknown format
set +e
"$culprit" diagnose --format kineto "$dir/h.jsonl" >/dev/null 2>&1; rc1=$?
"$culprit" diagnose --format bogus "$dir/h.jsonl" >/dev/null 2>&1; rc2=$?
"$culprit" diagnose "$dir/nonexistent" >/dev/null 2>&1; rc3=$?
"$culprit" sim --scenario nope --out "$dir/x" >/dev/null 2>&1; rc4=$?
"$culprit" sim --scenario hang --kernels 201 --out "$dir/x" >/dev/null 2>&1; rc5=$?
set -e
[ "$rc1" -eq 2 ] && [ "$rc2" -eq 2 ] && [ "$rc3" -eq 2 ] && [ "$rc4" -eq 2 ] && [ "$rc5" -eq 2 ] ||
	fail "exit codes $rc1 $rc2 $rc3 $rc4 $rc5"
echo ok
