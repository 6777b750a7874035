#!/bin/sh
# same_reports.sh: `culprit diagnose` of two builds over many inputs, their reports compared
# byte for byte (a change meant to be faster only must not change a report).
#
#   tests/bench/same_reports.sh OLD_CULPRIT NEW_CULPRIT [WORKDIR]
#
# Inputs: the JSONL files under tests/ (the fuzz seeds), every file of tests/data, 30 drawn cases of seed 14 (tests/scenarios/drawn/gen.py, kept
# in WORKDIR/drawn) and each `culprit sim` scenario with seeds 1 and 2 (WORKDIR/sim; made
# once, reused). Each input is diagnosed as JSON and as --text; stdout, stderr and the exit
# status must be the same. Prints one line per difference and a count; exit 1 on any.
set -u
old=$1
new=$2
work=${3:-/tmp/culprit-same-reports}
here=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work/drawn" "$work/sim" "$work/out"
if [ ! -e "$work/drawn/.done" ]; then
	python3 - "$here/tests/scenarios/drawn" "$work/drawn" <<'PY' || exit 2
import sys
sys.path.insert(0, sys.argv[1])
import gen
for i in range(30):
    gen.make_case(14, i, sys.argv[2])
PY
	touch "$work/drawn/.done"
fi
if [ ! -e "$work/sim/.done" ]; then
	for sc in healthy case5 compute_straggler link_degradation stage_imbalance kernel_stall host_delay hang; do
		for seed in 1 2; do
			"$old" sim --scenario "$sc" --seed "$seed" --out "$work/sim/$sc.$seed.jsonl.gz" >/dev/null || exit 2
		done
	done
	touch "$work/sim/.done"
fi
list=$work/inputs
{
	find "$here/tests" -name '*.jsonl*' -type f
	find "$here/tests/data" -type f ! -name 'README*' ! -name 'LICENSE*'
	find "$work/drawn" "$work/sim" -name '*.jsonl*' -type f
} | sort >"$list"
total=0
same=0
while read -r f; do
	for mode in json text; do
		opt=
		[ "$mode" = text ] && opt=--text
		total=$((total + 1))
		"$old" diagnose $opt "$f" >"$work/out/old.out" 2>"$work/out/old.err"
		echo "rc $?" >>"$work/out/old.err"
		"$new" diagnose $opt "$f" >"$work/out/new.out" 2>"$work/out/new.err"
		echo "rc $?" >>"$work/out/new.err"
		if cmp -s "$work/out/old.out" "$work/out/new.out" && cmp -s "$work/out/old.err" "$work/out/new.err"; then
			same=$((same + 1))
		else
			echo "differs ($mode): $f"
		fi
	done
done <"$list"
echo "inputs: $(wc -l <"$list"), reports: $total, identical: $same"
[ "$same" -eq "$total" ]
