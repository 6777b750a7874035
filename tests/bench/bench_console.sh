#!/usr/bin/env bash
# bench_console.sh BUILD_DIR [RUNS]: the web console's figures (docs/console.md) on a Release
# build. culpritd on its embedded PostgreSQL (a fresh data directory) gets case5 streamed by
# `culprit sim --scenario case5 --iters 64` (12,960 ranks); then
#   - GET /api/v1/jobs/sim-case5/heatmap?metric=mlp (12,960 ranks x 64 iterations, from the
#     job's window): the bytes on the wire without and with Accept-Encoding: gzip, and the time
#     to the last byte (curl, median of RUNS) with culpritd's CPU time per request (all its
#     threads: what a machine of its own would take, whatever the neighbours do), and how long of it culpritd's event loop spent
#     gathering the values from the window, in all and in its longest pass (its debug log);
#   - the job page's first render in headless Chromium (a fresh browser each run, cold cache):
#     milliseconds from navigation to the report and the heat map drawn (the page's
#     performance mark culprit-job-rendered), median of RUNS.
#   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2 --target culpritd culprit
#   tests/bench/bench_console.sh build/rel 5
set -euo pipefail
build=$(cd "${1:?usage: bench_console.sh BUILD_DIR [RUNS]}" && pwd)
runs=${2:-5}
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d /tmp/culprit-bench-console.XXXXXX)
chmod 755 "$dir"
port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
agent=127.0.0.1:$(port)
http=127.0.0.1:$(port)
"$build/server/culpritd" --data-dir "$dir/var" --agent-listen "$agent" --http-listen "$http" \
	--max-connections-per-addr 4096 --log-level debug >"$dir/culpritd.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 600); do curl -fsS "http://$http/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
"$build/client/culprit" sim --scenario case5 --iters 64 --speed 0 --quiet --server "$agent"
url="http://$http/api/v1/jobs/sim-case5/heatmap?metric=mlp"
for _ in $(seq 100); do curl -fsS "http://$http/api/v1/jobs/sim-case5/reports/latest" >/dev/null 2>&1 && break; sleep 0.2; done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) * 1000 / hz }' "/proc/$pid/stat"; }
for gz in "" "gzip"; do
	before=$(cpu_ms)
	for _ in $(seq "$runs"); do
		curl -fsS -o /dev/null ${gz:+-H "Accept-Encoding: gzip"} -w '%{size_download} %{time_total}\n' "$url"
	done >"$dir/t"
	cpu=$(awk -v a="$before" -v b="$(cpu_ms)" -v n="$runs" 'BEGIN { printf "%.0f", (b - a) / n }')
	bytes=$(cut -d' ' -f1 "$dir/t" | median)
	ms=$(cut -d' ' -f2 "$dir/t" | awk '{ print $1 * 1000 }' | median)
	echo "heat map of 12,960 ranks x 64 iterations${gz:+ (gzip)}: $bytes bytes on the wire, served in $ms ms (median of $runs); culpritd's CPU $cpu ms a request"
done
log=$(grep 'heat map of 12960 ranks x 64 iterations gathered on the loop' "$dir/culpritd.log" || true)
longest=$(echo "$log" | sed -n 's/.* of at most \([0-9.]*\) ms.*/\1/p' | median)
all=$(echo "$log" | sed -n 's/.*(\([0-9.]*\) ms in all).*/\1/p' | median)
passes=$(echo "$log" | sed -n 's/.* in \([0-9]*\) passes.*/\1/p' | median)
echo "of which on culpritd's event loop (the window's values gathered): $all ms in $passes passes, the longest $longest ms (medians of $((2 * runs)))"
BENCH_HERE=$here python3 - "http://$http/" "$runs" <<'PY'
import statistics, sys
import os
sys.path.insert(0, os.path.join(os.environ["BENCH_HERE"], "../integration/console"))
from cdp import Browser
url, runs, ms = sys.argv[1], int(sys.argv[2]), []
for _ in range(runs):
    with Browser() as b:
        b.goto(url + "#/jobs/sim-case5")
        b.wait("document.body.dataset.rendered === 'job' && document.body.dataset.heatmap === 'drawn'")
        ms.append(b.eval("performance.getEntriesByName('culprit-job-rendered')[0].startTime"))
print(f"first render of the job page in headless Chromium: {statistics.median(ms):.0f} ms (median of {runs}; runs {', '.join(f'{m:.0f}' for m in ms)})")
PY
