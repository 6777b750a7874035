#!/usr/bin/env bash
# bench_rest.sh: REST throughput of GET /api/v1/jobs/{job}/reports/latest under wrk, with
# culpritd pinned to one core (taskset) and wrk on another. Prints requests/s of each run and
# the median.
#
#   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2
#   tests/bench/bench_rest.sh [BUILD_DIR (build/rel)] [RUNS (5)] [SECONDS (10)] [CONNECTIONS (64)]
#
# culpritd runs with --storage false (the answer comes from memory either way); the job is
# the seed's case5 (12,960 ranks) streamed by `culprit sim`, so the report is the real one.
# Needs wrk (Debian package wrk) and taskset (util-linux); 2 cores at least.
set -euo pipefail
build=${1:-build/rel} runs=${2:-5} secs=${3:-10} conns=${4:-64}
culpritd=$build/server/culpritd culprit=$build/client/culprit
for b in "$culpritd" "$culprit"; do [ -x "$b" ] || { echo "bench_rest: no $b (build it first)" >&2; exit 2; }; done
command -v wrk >/dev/null || { echo "bench_rest: wrk is missing (apt-get install wrk)" >&2; exit 2; }
[ "$(nproc)" -ge 2 ] || { echo "bench_rest: needs 2 cores (server on one, wrk on the other)" >&2; exit 2; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
aport=$(port) hport=$(port)
dir=$(mktemp -d /tmp/bench_rest.XXXXXX)
taskset -c 0 "$culpritd" --storage false --data-dir "$dir" --agent-listen 127.0.0.1:$aport \
	--http-listen 127.0.0.1:$hport --max-connections-per-addr 2048 >"$dir/culpritd.log" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$hport/healthz" >/dev/null && break; sleep 0.1; done

taskset -c 1 "$culprit" sim --scenario case5 --server 127.0.0.1:$aport >"$dir/sim.log" 2>&1
url=http://127.0.0.1:$hport/api/v1/jobs/sim-case5/reports/latest
for _ in $(seq 300); do curl -sf "$url" -o "$dir/report.json" && break; sleep 0.1; done
[ -s "$dir/report.json" ] || { echo "bench_rest: no report" >&2; tail "$dir/culpritd.log" >&2; exit 1; }
echo "report: $(stat -c %s "$dir/report.json") bytes; culpritd on cpu 0, wrk -t1 -c$conns -d${secs}s on cpu 1"

# culpritd's CPU time (user + system, clock ticks) from /proc: on a shared machine the
# second figure, requests per CPU-second of culpritd, is what one core of its own would do
ticks() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
hz=$(getconf CLK_TCK)
figures=() percpu=()
for i in $(seq "$runs"); do
	t0=$(ticks)
	out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "$url")
	t1=$(ticks)
	rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
	n=$(awk '/requests in/ {print $1}' <<<"$out")
	errs=$(awk '/Non-2xx|Socket errors/' <<<"$out")
	cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN {printf "%.2f", (b - a) / hz}')
	pc=$(awk -v n="$n" -v c="$cpu" 'BEGIN {printf "%.0f", (c > 0 ? n / c : 0)}')
	echo "run $i: $rps requests/s ($n requests, culpritd used $cpu CPU-s: $pc requests per CPU-second) $errs"
	figures+=("$rps")
	percpu+=("$pc")
done
median() { sort -g | awk '{a[NR]=$1} END {printf "%.0f", (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "median: $(printf '%s\n' "${figures[@]}" | median) requests/s, $(printf '%s\n' "${percpu[@]}" | median) requests per culpritd CPU-second, over $runs runs"
