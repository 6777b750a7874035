#!/usr/bin/env bash
# test_drawn_nodes.sh CULPRIT: a slow node in a pipeline-parallel job whose nodes hold
# several stages (a stage is fewer ranks than a node) is the node's compute fault, not the
# heavy stage's (docs/method.md, "A slow node is not a stage"). Drawn slow nodes of seed 99
# (compute_node, at most 256 ranks): 3, 4, 26 and 30 have two to four stages per node and
# were answered stage_imbalance; 5 and 12 are nodes that are one whole stage each, where
# the stage is a right answer too and must stay one. Each case: the verdict, and for a
# compute verdict every rank of the slow node named culprit, none other, and its host.
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

python3 "$here/suite.py" --culprit "$culprit" --seed 99 --kinds compute_node --max-world 256 --jobs 1 \
	--only 3,4,26,30,5,12 --keep "$dir" >"$dir/out" || { cat "$dir/out"; fail "suite.py exit $?"; }
cat "$dir/out"
culprits='[.suspects[], (.findings[].suspects[])] | map(select(.role == "culprit"))'
for c in 3 4 26 30 5 12; do
	case=$(printf c%05d "$c")
	t=$dir/$case.truth.json r=$dir/$case.report.json
	[ -s "$r" ] || fail "$case: no report"
	want=$(jq -c '.ranks' "$t") host=$(jq -r '.hosts[0]' "$t")
	said=$(jq -r '.verdict.category' "$r")
	case $c in
	5 | 12)
		# the node is the whole stage: either answer, but a stage answer names the stage
		if [ "$said" = stage_imbalance ]; then
			[ "$(jq '.verdict.stage' "$r")" = "$(jq '.ranks[0] / (.tp * .dp) | floor' "$t")" ] ||
				fail "$case: stage $(jq '.verdict.stage' "$r"), not the slow node's"
			continue
		fi ;;
	esac
	[ "$said" = compute_degradation ] || fail "$case: verdict $said, want compute_degradation of $host"
	got=$(jq -c "$culprits | map(.rank) | unique" "$r")
	[ "$got" = "$want" ] || fail "$case: culprit ranks $got, want $want"
	hosts=$(jq -r "$culprits | map(.host) | unique | join(\",\")" "$r")
	[ "$hosts" = "$host" ] || fail "$case: culprit hosts $hosts, want $host"
	echo "$case: compute_degradation of $host, ranks $got"
done
grep -q '^drawn: cases=6 right=6 ' "$dir/out" || fail "the scorer does not find all 6 right"
echo "drawn nodes: ok"
