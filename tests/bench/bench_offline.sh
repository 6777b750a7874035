#!/usr/bin/env bash
# bench_offline.sh: `culprit diagnose` of the case5 scenario as interchange JSONL (12,960 ranks,
# 12 iterations: 1.87 M lines, 33 MB gzip) against tests/bench/ref_diagnose.py, a small Python
# reference, in the same run, alternating. Prints each run and the medians of wall and CPU
# (user + system) seconds, and culprit's speed as a multiple of the reference's.
#
#   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target culprit
#   tests/bench/bench_offline.sh [BUILD_DIR (build/rel)] [RUNS (5)] [PLAIN: 1 for an uncompressed file]
set -euo pipefail
build=${1:-build/rel} runs=${2:-5} plain=${3:-0}
culprit=$build/client/culprit ref=$(dirname "$0")/ref_diagnose.py
[ -x "$culprit" ] || { echo "bench_offline: no $culprit (build it first)" >&2; exit 2; }
work=$(mktemp -d /tmp/bench_offline.XXXXXX)
trap 'rm -rf "$work"' EXIT
in=$work/case5.jsonl.gz
"$culprit" sim --scenario case5 --iters 12 --seed 11 --out "$in"
if [ "$plain" = 1 ]; then gunzip "$in"; in=$work/case5.jsonl; fi
echo "input: $in, $(stat -c %s "$in") bytes"
t() { /usr/bin/time -f "%e %U %S %M" -o "$work/t" "$@" >"$work/out" && cat "$work/t"; }
for i in $(seq "$runs"); do
	c=$(t "$culprit" diagnose "$in")
	jq -e '[.suspects[] | select(.role == "culprit") | .rank] | sort == [10352,10353,10354,10355,10356,10357,10358,10359]' \
		"$work/out" >/dev/null || { echo "bench_offline: culprit diagnose lost the culprits" >&2; exit 1; }
	p=$(t python3 "$ref" "$in")
	grep -c "on node-1294" "$work/out" | grep -qx 8 || { echo "bench_offline: the reference lost the culprits" >&2; exit 1; }
	echo "$c $p" | awk -v i="$i" '{ printf "run %d: culprit %.2f s (CPU %.2f s, %d MiB), reference %.2f s (CPU %.2f s, %d MiB)\n",
		i, $1, $2 + $3, $4 / 1024, $5, $6 + $7, $8 / 1024 }'
	echo "$c $p" >>"$work/all"
done
awk '{ cw[NR] = $1; cc[NR] = $2 + $3; pw[NR] = $5; pc[NR] = $6 + $7 }
	function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { n = NR; a = med(cw, n); b = med(cc, n); c = med(pw, n); d = med(pc, n)
		printf "medians of %d: culprit %.2f s wall, %.2f s CPU; reference %.2f s wall, %.2f s CPU: culprit %.1fx faster (wall), %.1fx (CPU)\n",
			n, a, b, c, d, c / a, d / b }' "$work/all"
