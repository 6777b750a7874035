#!/usr/bin/env bash
# bench_ingest_cpu.sh: what the ingest path with PostgreSQL costs, in CPU seconds per million
# phase records, per process: PostgreSQL (its postmaster and every child: the writer's backend,
# WAL writer, checkpointer, ...), culpritd and the agents (bench_ingest). CPU time, unlike
# records/s, barely depends on what else runs on a shared machine, so it says what a quiet
# one would sustain: a core gives PostgreSQL 1e6 / (its CPU-s per million) records/s, and
# the whole path needs the sum of the three per record. Prints each run and the medians.
#
#   cmake -S . -B build/rel -DCMAKE_BUILD_TYPE=Release && cmake --build build/rel -j2
#   tests/bench/bench_ingest_cpu.sh [BUILD_DIR (build/rel)] [RUNS (3)] [SECONDS OF APPENDS (1)]
#
# Each run: a fresh private cluster (tests/pg.sh settings: fsync off, shared_buffers 256MB),
# culpritd on it, bench_ingest with 1,620 node agents appending for SECONDS (then waiting for
# every acknowledgement), the records counted in the database. All agents come from
# 127.0.0.1: culpritd gets --max-connections-per-addr 2048 (the default, 256, refuses most of
# them, and bench_ingest then stops with a message instead of waiting).
set -euo pipefail
build=${1:-build/rel} runs=${2:-3} secs=${3:-1}
culpritd=$build/server/culpritd bench=$build/tests/bench/bench_ingest
for b in "$culpritd" "$bench"; do [ -x "$b" ] || { echo "bench_ingest_cpu: no $b (build it first)" >&2; exit 2; }; done
bindir=$(pg_config --bindir 2>/dev/null || true)
[ -x "$bindir/initdb" ] || bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
hz=$(getconf CLK_TCK)
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ticks() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat" 2>/dev/null || echo 0; } # own + reaped children
psql_() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$bindir/psql" "$@"; else "$bindir/psql" "$@"; fi; }

work=$(mktemp -d /tmp/bench_ingest_cpu.XXXXXX)
chmod 755 "$work"
cp_pid=
cleanup() {
	[ -n "$cp_pid" ] && kill -TERM "$cp_pid" 2>/dev/null && wait "$cp_pid" 2>/dev/null || true
	tests/pg.sh stop "$work/pg" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT

results=()
for run in $(seq "$runs"); do
	rm -rf "$work/pg"
	dsn=$(tests/pg.sh start "$work/pg")
	aport=$(port) hport=$(port)
	"$culpritd" --db "$dsn" --agent-listen "127.0.0.1:$aport" --http-listen "127.0.0.1:$hport" \
		--max-connections-per-addr 2048 --log-level warning >"$work/culpritd.log" 2>&1 &
	cp_pid=$!
	for _ in $(seq 120); do curl -fsS "http://127.0.0.1:$hport/healthz" >/dev/null 2>&1 && break; sleep 0.5; done
	pm=$(head -1 "$work/pg/data/postmaster.pid")
	# the postmaster's ticks include its reaped children; live children are added one by one
	pg_ticks() { local t; t=$(ticks "$pm"); for p in $(pgrep -P "$pm"); do t=$((t + $(ticks "$p"))); done; echo "$t"; }
	pg0=$(pg_ticks) c0=$(ticks "$cp_pid") t0=$(date +%s.%N)
	if ! /usr/bin/time -o "$work/time" -f "%U %S" "$bench" --server "127.0.0.1:$aport" --agents 1620 \
		--seconds "$secs" >/dev/null 2>"$work/bench.err"; then
		cat "$work/bench.err" >&2
		exit 1
	fi
	b=$(tail -1 "$work/time")
	t1=$(date +%s.%N) pg1=$(pg_ticks) c1=$(ticks "$cp_pid")
	rows=$(psql_ -h "$work/pg/sock" -U culprit -d postgres -Atc "SELECT count(*) FROM phases")
	kill -TERM "$cp_pid"
	wait "$cp_pid" || true
	cp_pid=
	tests/pg.sh stop "$work/pg"
	line=$(awk -v r="$rows" -v p=$((pg1 - pg0)) -v c=$((c1 - c0)) -v hz="$hz" -v b="$b" -v t0="$t0" -v t1="$t1" 'BEGIN {
		split(b, u, " "); m = r / 1e6;
		printf "%.3f %.3f %.3f %.0f %.1f", p / hz / m, c / hz / m, (u[1] + u[2]) / m, r / (t1 - t0), r / 1e6 }')
	read -r pgc cc bc rate mrows <<<"$line"
	printf "run %d: %s M rows, %s rows/s end to end; CPU-s per million rows: postgres %s, culpritd %s, agents %s\n" \
		"$run" "$mrows" "$rate" "$pgc" "$cc" "$bc"
	results+=("$pgc $cc $bc $rate")
done
printf '%s\n' "${results[@]}" | awk '
	{ pg[NR] = $1; cd[NR] = $2; ag[NR] = $3; rt[NR] = $4 }
	function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	END { n = NR; p = med(pg, n); c = med(cd, n); a = med(ag, n); r = med(rt, n)
		printf "medians: postgres %.2f, culpritd %.2f, agents %.2f CPU-s per million rows; %.0f rows/s end to end here\n", p, c, a, r
		one = 1e6 / p; two = 2e6 / (p + c + a)
		printf "on a quiet 2-core machine: postgres given one core %.0f rows/s, the whole path given both %.0f rows/s: at most %.0f rows/s\n", one, two, one < two ? one : two }'
