#!/usr/bin/env bash
# run.sh: the drawn suite. Draws N jobs with known answers (gen.py, written apart from
# `culprit sim`), runs `culprit diagnose` on each and prints per-kind precision and recall,
# the % right, false alarms on healthy cases and every wrong case (score.py).
#   tests/scenarios/drawn/run.sh [--cases N] [--seed S] [--culprit PATH] [--keep DIR]
#                                [--jobs J] [--min-right PCT] [--max-world W] [--kinds K1,K2]
# --keep DIR keeps every truth and report, and the JSONL input of the wrong cases of at most
# 256 ranks.
# Exit 1 when fewer than PCT % of the cases are right (default 0), 2 when diagnose failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../../.." && pwd)
culprit=$root/build/test/client/culprit
args=()
while (($#)); do
	case $1 in
	--culprit) culprit=$2; shift 2 ;;
	--cases | --seed | --keep | --jobs | --min-right | --max-world | --kinds) args+=("$1" "$2"); shift 2 ;;
	*) echo "run.sh: unknown argument \"$1\"" >&2; exit 2 ;;
	esac
done
[ -x "$culprit" ] || { echo "run.sh: no culprit binary at $culprit (build it or pass --culprit)" >&2; exit 2; }
exec python3 "$here/suite.py" --culprit "$culprit" "${args[@]}"
