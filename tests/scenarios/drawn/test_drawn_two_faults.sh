#!/usr/bin/env bash
# test_drawn_two_faults.sh CULPRIT: a slow GPU on one node and a slow NIC on another are two
# findings (docs/method.md, "Slow links by the collectives they take part in": hints count for a
# node with a slow instance). The compute fault opens the window and is found; the NIC's
# node is in one or two collectives slowed past the cut and in many only past the subtle
# cut, which alone named nothing. Drawn two faults of seed 14 (36: 128 ranks, PP 8; 82: 32
# ranks, TP 8 PP 2 DP 2) and of seed 99 (two_faults up to 256 ranks, 19: 48 ranks), each
# answered with the compute finding alone before the rule. Each case: both categories among
# the verdict and findings[], every culprit host a faulty one and both named, every culprit
# rank a faulty one.
# Two-node jobs (docs/method.md, "A slow NIC beside a compute fault"): every collective
# across the two nodes holds both, so no instance stands out; the NIC's node is the one
# whose ranks leave the collectives later than their co-members on the other node. Seed 14
# cases 45 (16 ranks, TP 2 DP 8), 133 (8 ranks, TP 4 DP 2 EP 2), 141 (8 ranks, TP 4 DP 2) and
# seed 21 cases 34 (8 ranks, PP 4 DP 2), 84 (16 ranks, TP 4 PP 2 DP 2, the NIC on the second
# node), 122 (16 ranks, TP 2 PP 4 DP 2), each answered with the compute finding alone before.
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$here/suite.py" --culprit "$culprit" --seed 14 --jobs 1 --only 36,82,45,133,141 --keep "$dir/s14" >"$dir/out14" ||
	{ cat "$dir/out14"; fail "suite.py seed 14 exit $?"; }
python3 "$here/suite.py" --culprit "$culprit" --seed 21 --jobs 1 --only 34,84,122 --keep "$dir/s21" >"$dir/out21" ||
	{ cat "$dir/out21"; fail "suite.py seed 21 exit $?"; }
python3 "$here/suite.py" --culprit "$culprit" --seed 99 --kinds two_faults --max-world 256 --jobs 1 --only 19 \
	--keep "$dir/s99" >"$dir/out99" || { cat "$dir/out99"; fail "suite.py seed 99 exit $?"; }
cat "$dir/out14" "$dir/out21" "$dir/out99"
culprits='[.suspects[], (.findings[].suspects[])] | map(select(.role == "culprit"))'
for c in s14/c00036 s14/c00082 s14/c00045 s14/c00133 s14/c00141 s21/c00034 s21/c00084 s21/c00122 s99/c00019; do
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
grep -q '^drawn: cases=5 right=5 ' "$dir/out14" || fail "the scorer does not find seed 14's 5 right"
grep -q '^drawn: cases=3 right=3 ' "$dir/out21" || fail "the scorer does not find seed 21's 3 right"
grep -q '^drawn: cases=1 right=1 ' "$dir/out99" || fail "the scorer does not find seed 99's case right"
echo "drawn two faults: ok"
