#!/usr/bin/env bash
# test_drawn_nic.sh CULPRIT: a slow NIC on a job of a few nodes, where the node is in half or
# more of every collective's instances, is that node's communication fault; the others, who
# wait for it in the next collective, are not (docs/method.md, "A slow NIC among few nodes").
# Drawn slow NICs of seed 5 (comm_nic, at most 256 ranks) on 2 and 4 nodes, with pipeline,
# data and expert parallelism, the slow node first or second: all answered none before;
# and case 105 of seed 14 (tp8 dp2: the reduce-scatter, then the norm where the other node
# waits 10x). Then slow NICs whose partners were named, since they wait as long in their
# collectives with it (docs/method.md, "A node that leaves late is the link"): seed 14's 413
# and 1426, seed 21's 39. Each case: the verdict, the culprits all on the slow node, every
# rank of it.
# Then case 105 with the phases' start offsets removed: without them the order of the two
# collectives is unknown and nothing may be named (today's behaviour, none).
set -euo pipefail
culprit=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

culprits='[.suspects[], (.findings[].suspects[])] | map(select(.role == "culprit"))'
check() { # check CASE: a communication fault of the truth's host, every rank of it
	local t=$dir/$1.truth.json r=$dir/$1.report.json
	[ -s "$r" ] || fail "$1: no report"
	local host said got want hosts
	host=$(jq -r '.hosts[0]' "$t") said=$(jq -r '.verdict.category' "$r")
	[ "$said" = communication_degradation ] || fail "$1: verdict $said, want communication_degradation of $host"
	hosts=$(jq -r "$culprits | map(.host) | unique | join(\",\")" "$r")
	[ "$hosts" = "$host" ] || fail "$1: culprit hosts $hosts, want $host"
	got=$(jq -c "$culprits | map(.rank) | unique" "$r") want=$(jq -c '.ranks' "$t")
	[ "$got" = "$want" ] || fail "$1: culprit ranks $got, want $want"
	echo "$1: communication_degradation of $host, ranks $got"
}

cases=0,1,2,7,17,20,23,30
python3 "$here/suite.py" --culprit "$culprit" --seed 5 --kinds comm_nic --max-world 256 --jobs 1 \
	--only "$cases" --keep "$dir" >"$dir/out" || { cat "$dir/out"; fail "suite.py exit $?"; }
cat "$dir/out"
for c in ${cases//,/ }; do
	check "$(printf c%05d "$c")"
done
grep -q '^drawn: cases=8 right=8 ' "$dir/out" || fail "the scorer does not find all 8 right"

mkdir "$dir/s14" "$dir/s21"
python3 "$here/suite.py" --culprit "$culprit" --seed 14 --jobs 1 --only 105,413,1426 --keep "$dir/s14" >"$dir/out14" ||
	{ cat "$dir/out14"; fail "suite.py exit $?"; }
for c in c00105 c00413 c01426; do dir=$dir/s14 check $c; done
python3 "$here/suite.py" --culprit "$culprit" --seed 21 --jobs 1 --only 39 --keep "$dir/s21" >"$dir/out21" ||
	{ cat "$dir/out21"; fail "suite.py exit $?"; }
dir=$dir/s21 check c00039

# the same job without start offsets: no order of the collectives, no culprit
(cd "$here" && python3 -c 'import gen, sys; gen.make_case(14, 105, sys.argv[1])' "$dir")
jq -c 'if .type == "phase" then del(.start_us) else . end' "$dir/c00105.jsonl" >"$dir/nostart.jsonl"
"$culprit" diagnose --format jsonl "$dir/nostart.jsonl" >"$dir/nostart.json" || fail "diagnose exit $?"
said=$(jq -r '.verdict.category' "$dir/nostart.json")
[ "$said" = none ] || fail "c00105 without starts: verdict $said, want none (no order, no culprit)"
echo "c00105 without start offsets: none"
echo "drawn nic: ok"
