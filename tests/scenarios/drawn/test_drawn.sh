#!/usr/bin/env bash
# test_drawn.sh CULPRIT: smoke test of the drawn suite end to end (generator, `culprit
# diagnose` on each case, scorer). It checks that the pieces work, not the engine's score:
# every case diagnosed (exit 0, a report with a known category), the scorer's summary line
# printed and parsed, and the scorer's self-check (a perfect report is right; a wrong
# category, a healthy rank named culprit or a missed culprit is wrong).
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$here/run.sh" --culprit "$culprit" --cases 20 --max-world 128 --keep "$dir/k" --min-right 0 >"$dir/out" ||
	fail "run.sh exit $?: $(tail -20 "$dir/out")"
cat "$dir/out"
line=$(grep '^drawn: ' "$dir/out") || fail "no summary line"
[[ $line =~ cases=20\ right=([0-9]+)\ right_pct=([0-9.]+)\ false_alarms=([0-9]+)\ failed=0 ]] ||
	fail "summary line: $line"
grep -q '^per drawn kind' "$dir/out" && grep -q '^wrong cases' "$dir/out" || fail "figures missing"
n=$(ls "$dir"/k/*.report.json | wc -l)
[ "$n" -eq 20 ] || fail "$n reports for 20 cases"
for r in "$dir"/k/*.report.json; do
	jq -e '.verdict.category | IN("compute_degradation", "communication_degradation", "host_delay",
		"stage_imbalance", "kernel_stall", "hang", "none")' "$r" >/dev/null || fail "bad report $r"
done
python3 "$here/score.py" --self-check "$dir/k" || fail "scorer self-check"
# the same seed draws the same cases
python3 "$here/gen.py" --index 3 --max-world 128 --out "$dir/a" >/dev/null
python3 "$here/gen.py" --index 3 --max-world 128 --out "$dir/b" >/dev/null
cmp -s "$dir/a/c00003.jsonl" "$dir/b/c00003.jsonl" || fail "generator is not deterministic"
cmp -s "$dir/a/c00003.truth.json" "$dir/k/c00003.truth.json" || fail "gen.py and the suite draw different cases"
echo "drawn smoke: ok"
