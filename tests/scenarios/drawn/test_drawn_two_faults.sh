#!/usr/bin/env bash
# test_drawn_two_faults.sh CULPRIT: a slow GPU on one node and a slow NIC on another are two
# findings (docs/method.md, "communication_degradation by slow links": hints count for a
# node with a slow instance). The compute fault opens the window and is found; the NIC's
# node is in one or two collectives slowed past the cut and in many only past the subtle
# cut, which alone named nothing. Drawn two faults of seed 14 (36: 128 ranks, PP 8; 82: 32
# ranks, TP 8 PP 2 DP 2) and of seed 99 (two_faults up to 256 ranks, 19: 48 ranks), each
# answered with the compute finding alone before the rule. Each case: both categories among
# the verdict and findings[], every culprit host a faulty one and both named, every culprit
# rank a faulty one.
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$here/suite.py" --culprit "$culprit" --seed 14 --jobs 1 --only 36,82 --keep "$dir/s14" >"$dir/out14" ||
	{ cat "$dir/out14"; fail "suite.py seed 14 exit $?"; }
python3 "$here/suite.py" --culprit "$culprit" --seed 99 --kinds two_faults --max-world 256 --jobs 1 --only 19 \
	--keep "$dir/s99" >"$dir/out99" || { cat "$dir/out99"; fail "suite.py seed 99 exit $?"; }
cat "$dir/out14" "$dir/out99"
culprits='[.suspects[], (.findings[].suspects[])] | map(select(.role == "culprit"))'
for c in s14/c00036 s14/c00082 s99/c00019; do
	t=$dir/$c.truth.json r=$dir/$c.report.json
	[ -s "$r" ] || fail "$c: no report"
	cats=$(jq -c '[.verdict.category, .findings[].category] | unique' "$r")
	[ "$cats" = '["communication_degradation","compute_degradation"]' ] ||
		fail "$c: categories $cats, want compute_degradation and communication_degradation"
	hosts=$(jq -c "$culprits | map(.host) | unique" "$r") want=$(jq -c '.hosts' "$t")
	[ "$hosts" = "$want" ] || fail "$c: culprit hosts $hosts, want $want"
	extra=$(jq -c --slurpfile t "$t" "$culprits | map(.rank) | unique - \$t[0].ranks" "$r")
	[ "$extra" = "[]" ] || fail "$c: healthy ranks $extra named culprits"
	echo "$c: compute and communication findings on $hosts"
done
grep -q '^drawn: cases=2 right=2 ' "$dir/out14" || fail "the scorer does not find seed 14's 2 right"
grep -q '^drawn: cases=1 right=1 ' "$dir/out99" || fail "the scorer does not find seed 99's case right"
echo "drawn two faults: ok"
