#!/usr/bin/env bash
# test_realdata_cli.sh CULPRIT DATA_DIR: `culprit diagnose` on the real traces of
# tests/data gives the answers their publishers describe (docs/importers.md). A missing
# data directory fails the test.
set -uo pipefail
culprit=$1
data=$2
fail() { echo "FAIL: $*" >&2; [ -n "${out:-}" ] && [ -f "$out" ] && cat "$out" >&2; exit 1; }
[ -d "$data" ] || fail "the real data directory $data is missing (tests/data)"
command -v jq >/dev/null || fail "jq is needed"
tmp=$(mktemp -d "${CULPRIT_TEST_TMP:-/tmp}/realdata-cli.XXXXXX") || fail "mktemp"
trap 'rm -rf "$tmp"' EXIT
out=$tmp/r.json

# param-dlrm-8rank: host delay; per collective the last arrivers (ranks 7, 4, 5: the
# shortest NCCL kernels) are late_arriver; the ranks with the most NCCL time (1, 3) are not
# suspects; no culprit.
"$culprit" diagnose --format kineto "$data"/param-dlrm-8rank/rank-*.json.gz >"$out" || fail "param: exit $?"
jq -e '.verdict.category == "host_delay"' "$out" >/dev/null || fail "param: verdict"
jq -e '[.suspects[] | select(.role == "culprit")] | length == 0' "$out" >/dev/null || fail "param: a culprit"
jq -e '[.suspects[] | select(.role == "late_arriver") | .rank] | sort == [4, 5, 7]' "$out" >/dev/null ||
	fail "param: late arrivers"
jq -e '[.suspects[].rank] | (index(1) == null and index(3) == null)' "$out" >/dev/null ||
	fail "param: a waiting rank is a suspect"
# a directory: its trace files in natural order (LICENSE skipped with a warning), the same answer
"$culprit" diagnose "$data"/param-dlrm-8rank/ >"$out" 2>"$tmp/err" || fail "param dir: exit $? $(cat "$tmp/err")"
jq -e '[.suspects[] | select(.role == "late_arriver") | .rank] | sort == [4, 5, 7]' "$out" >/dev/null ||
	fail "param dir: late arrivers"
grep -q "param-dlrm-8rank/: 8 trace files; 1 other files skipped (such as LICENSE)" "$tmp/err" ||
	fail "param dir: warning $(cat "$tmp/err")"
# auto detection gives the same
"$culprit" diagnose "$data"/param-dlrm-8rank/rank-*.json.gz | jq -e '.verdict.category == "host_delay"' >/dev/null ||
	fail "param: auto"

# bytedance-whatif ST: stage imbalance at pp 3, no single-rank culprit; SE: stage 1
for t in ST:3 SE:1; do
	trial=${t%:*} stage=${t#*:}
	"$culprit" diagnose --format chrome "$data/bytedance-whatif/timeline-$trial.json.gz" >"$out" || fail "$trial: exit $?"
	jq -e --argjson s "$stage" '.verdict.category == "stage_imbalance" and .verdict.stage == $s' "$out" >/dev/null ||
		fail "$trial: stage imbalance at $stage"
	jq -e '[.suspects[] | select(.role == "culprit")] | length == 0' "$out" >/dev/null || fail "$trial: a culprit"
	# the time lost within 10% of the published what-if: the step with only this stage at
	# its recorded durations over the ideal step (blocking_decompose_by_stage), less the
	# ideal step (step_t_noblk, seconds)
	jq -e --argjson s "$stage" --slurpfile pub "$data/bytedance-whatif/result-$trial.json" '
		($pub[0] | (.blocking_decompose_by_stage[$s | tostring] - 1) * ([.step_t_noblk[]][0]) * 1000) as $want |
		(.lost_ms_per_iter - $want | fabs) <= 0.1 * $want' "$out" >/dev/null ||
		fail "$trial: time lost $(jq .lost_ms_per_iter "$out") ms, not within 10% of the published what-if"
done
# the layout by flags instead of the meta file
"$culprit" diagnose --format chrome --pp 4 --tp 1 "$data/bytedance-whatif/timeline-ST.json.gz" |
	jq -e '.verdict.category == "stage_imbalance"' >/dev/null || fail "ST with --pp"

# alibaba-pai job 1: a window in the middle of the run naming worker 6; job 2: none
"$culprit" diagnose "$data/alibaba-pai/job_1_norm.csv" >"$out" || fail "pai 1: exit $?"
jq -e '.window.first_iter > 60 and .window.last_iter < 240' "$out" >/dev/null || fail "pai 1: window not in the middle"
jq -e '[.suspects[] | select(.role == "culprit") | .rank] == [6]' "$out" >/dev/null || fail "pai 1: worker 6"
jq -e '.suspects[0].host == "worker-6"' "$out" >/dev/null || fail "pai 1: host"
"$culprit" diagnose --format csv "$data/alibaba-pai/job_2_norm.csv" >"$out" || fail "pai 2: exit $?"
jq -e '.window == null and .verdict.category == "none"' "$out" >/dev/null || fail "pai 2: a window"

# every HTA file
for f in "$data"/hta-single-rank/*.json.gz; do
	"$culprit" diagnose "$f" >"$out" || fail "$f: exit $?"
done

# bad input: exit 2, the file and a position in the message
head -c 20000 "$data/param-dlrm-8rank/rank-0.json.gz" >"$tmp/t.json.gz"
"$culprit" diagnose --format kineto "$tmp/t.json.gz" 2>"$tmp/err" >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "truncated gzip: exit $rc"
grep -q "t.json.gz: byte [0-9]*:" "$tmp/err" || fail "truncated gzip: message $(cat "$tmp/err")"
printf ',worker,gpu,batch_time_norm\n0,0,1,5\n' >"$tmp/c.csv"
"$culprit" diagnose --format csv "$tmp/c.csv" 2>"$tmp/err" >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "csv: exit $rc"
grep -q 'c.csv:1: missing column "time"' "$tmp/err" || fail "csv: message $(cat "$tmp/err")"
echo '{"traceEvents":[{"ph":"X","ts":1,"dur":' >"$tmp/j.json"
"$culprit" diagnose "$tmp/j.json" 2>"$tmp/err" >/dev/null; rc=$?
[ $rc -eq 2 ] || fail "truncated json: exit $rc"
grep -q "j.json: byte" "$tmp/err" || fail "truncated json: message $(cat "$tmp/err")"
echo "ok"
