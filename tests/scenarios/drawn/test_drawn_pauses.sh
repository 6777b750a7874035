#!/usr/bin/env bash
# test_drawn_pauses.sh CULPRIT: job-wide pauses and passes of a few iterations page nobody
# and name nobody (docs/method.md, "Pauses and passes of a few iterations").
# - Seed 21 case 53: a rank slower from the start (standing_rank) in a job that checkpoints
#   every 13 and evaluates every 12 iterations. The pauses open an intermittent window in
#   which nobody changed: none, no culprit, the rank as an advisory. It was read as a late
#   arrival of its 16 pipeline peers, who come last in every step, with nobody waiting longer.
# - Seed 21 cases 4 and 191: a fault, and an eval pass in the window only. A rank's eval
#   pass 1.15-1.17x its peers (one sample a window, no baseline of its own) was named a
#   second compute culprit on another host.
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$here/suite.py" --culprit "$culprit" --seed 21 --jobs 1 --only 4,53,191 --keep "$dir" >"$dir/out" ||
	{ cat "$dir/out"; fail "suite.py exit $?"; }
cat "$dir/out"
culprits='[.suspects[], (.findings[].suspects[])] | map(select(.role == "culprit"))'

r=$dir/c00053.report.json
said=$(jq -r '.verdict.category' "$r")
[ "$said" = none ] || fail "c00053: verdict $said, want none (the pauses are every rank's)"
n=$(jq "$culprits | length" "$r")
[ "$n" = 0 ] || fail "c00053: $n culprits, want none"
jq -e '.verdict.summary | test("pauses alike")' "$r" >/dev/null || fail "c00053: the summary does not say every rank paused alike"
adv=$(jq -c '[.advisories[] | select(.kind == "slow_rank") | [.rank, .host]]' "$r")
[ "$adv" = '[[24,"dgx-r00-n03"]]' ] || fail "c00053: advisories $adv, want rank 24 on dgx-r00-n03"
echo "c00053: none, advisory $adv"

for c in c00004 c00191; do
	r=$dir/$c.report.json t=$dir/$c.truth.json
	got=$(jq -c "$culprits | map(.rank) | unique" "$r") want=$(jq -c '.ranks' "$t")
	[ "$got" = "$want" ] || fail "$c: culprit ranks $got, want $want"
	hosts=$(jq -c "$culprits | map(.host) | unique" "$r") whosts=$(jq -c '.hosts | unique' "$t")
	[ "$hosts" = "$whosts" ] || fail "$c: culprit hosts $hosts, want $whosts"
	echo "$c: culprits $got on $hosts"
done
grep -q '^drawn: cases=3 right=3 ' "$dir/out" || fail "the scorer does not find all 3 right"
echo "drawn pauses: ok"
