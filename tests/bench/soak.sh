#!/usr/bin/env bash
# tests/bench/soak.sh: a soak benchmark (a program that prints figures, not a CI test).
#
#   tests/bench/soak.sh [-b BUILD] [-s SECONDS] [-p STEP_SECONDS] [-i INTERVAL] [-d DIR] [-m MIN_FREE_GB] [-n] [-- SIM ARGS...]
#
# Starts a private PostgreSQL (tests/pg.sh, fsync off) in DIR/pg and culpritd on it, streams the
# simulated case5 job (12,960 ranks on 1,620 node agents) at one iteration every STEP_SECONDS
# (default 1) in real time (`culprit sim --step-seconds STEP --iters SECONDS/STEP`), and every INTERVAL seconds samples
# culpritd's RSS, its open descriptors (/proc/PID/fd), the database's size and the queue
# metrics of /metrics. At the end it prints the table of samples and, for each column, the
# slope of a least-squares line through them (growth per hour), and whether culpritd is alive.
#
# Defaults: build/hr (Release), 3600 s, 10 s, /tmp/culprit-soak-$USER. The soak stops early
# (and says so) when the file system of DIR has less than MIN_FREE_GB (default 15) free:
# one step of case5 is ~155,000 records, ~21 MB in PostgreSQL (137 bytes a record).
# -n runs culpritd with --storage false and no PostgreSQL: the whole rate through the agent
# path, the windows and the diagnoses for as long as wanted (an hour at one step a second is
# about 76 GB in PostgreSQL, more than a small disk holds). committed_records is then the
# records culpritd accepted (culprit_records_total) and db_mib is -1.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=build/hr secs=3600 step=1 every=10 dir=/tmp/culprit-soak-${USER:-$(id -un)} min_free=15 storage=true
while getopts b:s:p:i:d:m:n o; do
	case $o in
	b) build=$OPTARG ;; s) secs=$OPTARG ;; p) step=$OPTARG ;; i) every=$OPTARG ;; d) dir=$OPTARG ;; m) min_free=$OPTARG ;;
	n) storage=false ;;
	*) sed -n 2,21p "$0" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ -x "$build/server/culpritd" ] && [ -x "$build/client/culprit" ] ||
	{ echo "soak.sh: build $build first (cmake --build $build --target culpritd culprit)" >&2; exit 2; }

mkdir -p "$dir"
[ "$(id -u)" -ne 0 ] || chmod 755 "$dir"
agent=127.0.0.1:${SOAK_AGENT_PORT:-7533} http=127.0.0.1:${SOAK_HTTP_PORT:-7534}
if [ $storage = true ]; then
	dsn=$(tests/pg.sh start "$dir/pg")
	db=(--db "$dsn")
else
	dsn= db=(--storage false)
fi
psql_q() { [ -n "$dsn" ] && psql "$dsn" -XAtqc "$1" 2>/dev/null || echo -1; }
pids=()
stop() {
	trap - INT TERM EXIT
	for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	[ -z "$dsn" ] || tests/pg.sh stop "$dir/pg" >/dev/null 2>&1 || true
}
trap stop INT TERM EXIT

"$build/server/culpritd" "${db[@]}" --data-dir "$dir/var" --agent-listen "$agent" --http-listen "$http" \
	--max-connections-per-addr 4096 >"$dir/culpritd.log" 2>&1 &
cpid=$!
pids+=("$cpid")
for _ in $(seq 600); do
	curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
	kill -0 "$cpid" 2>/dev/null || { echo "culpritd did not start:" >&2; tail -20 "$dir/culpritd.log" >&2; exit 1; }
	sleep 0.1
done

iters=$(awk -v s="$secs" -v p="$step" 'BEGIN { printf "%d", s / p }')
"$build/client/culprit" sim --scenario case5 --iters "$iters" --step-seconds "$step" --server "$agent" --quiet "$@" \
	>"$dir/sim.log" 2>&1 &
spid=$!
pids+=("$spid")

metric() { # NAME [LABELS]: the value of one sample line of /metrics in $m
	awk -v n="$1" '$1 == n { print $2; found = 1; exit } END { if (!found) print -1 }' <<<"$m"
}
committed() { # records committed to PostgreSQL, or accepted when there is none
	if [ -n "$dsn" ]; then
		metric culprit_writer_committed_records_total
	else
		awk '/^culprit_records_total\{.*outcome="accepted"/ { s += $2 } END { printf "%.0f\n", s }' <<<"$m"
	fi
}
samples=$dir/samples.tsv
printf 't_s\trss_mib\tfds\twriter_queue\tblocked_conns\talert_ops_waiting\toutbox_pending\tapi_pending\tcommitted_records\tdb_mib\n' >"$samples"
t0=$(date +%s)
stopped_early=
while :; do
	now=$(date +%s)
	t=$((now - t0))
	alive=1
	kill -0 "$cpid" 2>/dev/null || alive=0
	[ $alive = 1 ] || { echo "soak.sh: culpritd DIED at t=$t s" >&2; break; }
	m=$(curl -fsS --max-time 5 "http://$http/metrics" 2>/dev/null || true)
	rss=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$cpid/status")
	fds=$(ls "/proc/$cpid/fd" | wc -l)
	dbmib=$(psql_q "select pg_database_size(current_database()) / 1048576")
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rss" "$fds" "$(metric culprit_writer_queue_records)" \
		"$(metric 'culprit_agent_connections{state="blocked"}')" "$(metric culprit_alert_ops_waiting)" \
		"$(metric culprit_alert_outbox_pending)" "$(metric culprit_api_pending_requests)" \
		"$(committed)" "$dbmib" >>"$samples"
	kill -0 "$spid" 2>/dev/null || break
	free_gb=$(df -P --block-size=1G "$dir" | awk 'NR == 2 { print $4 }')
	if [ "$free_gb" -lt "$min_free" ]; then
		stopped_early="disk: ${free_gb} GiB free < $min_free GiB at t=$t s"
		echo "soak.sh: stopping early: $stopped_early" >&2
		kill -TERM "$spid" 2>/dev/null || true
		break
	fi
	sleep "$((every - ($(date +%s) - now)))" 2>/dev/null || true
done
wait "$spid" 2>/dev/null && sim_rc=0 || sim_rc=$?
alive=no
kill -0 "$cpid" 2>/dev/null && alive=yes

echo "soak: case5, 12,960 ranks on 1,620 node agents, one step every $step s for $secs s ($iters steps), culpritd $build (${dsn:+PostgreSQL $dir/pg}${dsn:-no storage})"
[ -z "$stopped_early" ] || echo "stopped early: $stopped_early"
column -t "$samples"
echo
awk -F'\t' 'NR == 1 { for (i = 2; i <= NF; i++) name[i] = $i; nf = NF; next }
	{ n++; x = $1 / 3600; sx += x; sxx += x * x
	  for (i = 2; i <= nf; i++) { y[i] += $i; xy[i] += x * $i; if (n == 1) first[i] = $i; last[i] = $i } }
	END { d = n * sxx - sx * sx
	  printf "%-20s %14s %14s %16s\n", "column", "first", "last", "slope per hour"
	  for (i = 2; i <= nf; i++)
		printf "%-20s %14s %14s %16.1f\n", name[i], first[i], last[i], (d > 0 ? (n * xy[i] - sx * y[i]) / d : 0) }' "$samples"
echo
echo "sim: $(tail -2 "$dir/sim.log" | tr '\n' ' ')"
echo "sim exit status $sim_rc; culpritd alive at the end: $alive; samples in $samples, log in $dir/culpritd.log"
