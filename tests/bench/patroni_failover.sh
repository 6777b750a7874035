#!/bin/sh
# patroni_failover.sh: culpritd writing through a PostgreSQL failover under Patroni.
#
# Starts etcd and two PostgreSQL servers managed by Patroni (synchronous replication) on
# loopback, culpritd with a two-host DSN (target_session_attrs=read-write), and a simulated
# job streaming into it; then kills the leader (Patroni and its PostgreSQL, SIGKILL: the
# machine dying). Prints how long the writer was without a database, and compares the
# records the agents had acknowledged with the rows stored. Not part of ./test.sh (needs
# root for the postgres user, and ~2 minutes); run by hand:
#
#   tests/bench/patroni_failover.sh [-b BUILD_DIR] [-i ITERS] [-s STEP_SECONDS]
#
# Needs: apt-get install patroni etcd-server postgresql.
set -eu

build=build/rel
iters=90
step=0.5
while getopts b:i:s: o; do
	case $o in
	b) build=$OPTARG ;;
	i) iters=$OPTARG ;;
	s) step=$OPTARG ;;
	*) exit 2 ;;
	esac
done
for cmd in patroni etcd psql; do
	command -v $cmd >/dev/null || { echo "patroni_failover: $cmd is missing (apt-get install patroni etcd-server postgresql)" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "patroni_failover: run as root (PostgreSQL runs as the user postgres)" >&2; exit 2; }
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
culpritd=$build/server/culpritd
culprit=$build/client/culprit
[ -x "$culpritd" ] && [ -x "$culprit" ] || { echo "patroni_failover: build $build first" >&2; exit 2; }

dir=$(mktemp -d /tmp/patroni.XXXXXX)
chmod 755 "$dir"
pids=""
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	pkill -9 -f "$dir/" 2>/dev/null || true
	sleep 1
	[ -n "${KEEP:-}" ] && echo "kept $dir" || rm -rf "$dir"
}
trap cleanup EXIT INT TERM

etcd --name e1 --data-dir "$dir/etcd" --listen-client-urls http://127.0.0.1:23791 \
	--advertise-client-urls http://127.0.0.1:23791 --listen-peer-urls http://127.0.0.1:23801 \
	--initial-advertise-peer-urls http://127.0.0.1:23801 --initial-cluster e1=http://127.0.0.1:23801 \
	>"$dir/etcd.log" 2>&1 &
pids="$pids $!"

node() { # name pgport restport
	mkdir -p "$dir/$1"
	cat >"$dir/$1.yml" <<EOF
scope: culprit
namespace: /rehearsal/
name: $1
restapi: {listen: 127.0.0.1:$3, connect_address: 127.0.0.1:$3}
etcd3: {hosts: 127.0.0.1:23791}
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 2
    retry_timeout: 4
    synchronous_mode: true
    postgresql: {use_pg_rewind: false, parameters: {wal_level: replica, max_wal_senders: 5, hot_standby: "on"}}
  initdb: [{encoding: UTF8}, {locale: C}]
  pg_hba:
  - local all all trust
  - host all all 127.0.0.1/32 trust
  - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:$2
  connect_address: 127.0.0.1:$2
  data_dir: $dir/$1/data
  bin_dir: $pgbin
  unix_socket_directories: $dir/$1
  parameters: {unix_socket_directories: $dir/$1, fsync: "off"}
  authentication:
    superuser: {username: postgres, password: postgres}
    replication: {username: replicator, password: replicator}
EOF
	chown -R postgres "$dir"
	runuser -u postgres -- patroni "$dir/$1.yml" >"$dir/$1.log" 2>&1 &
	pids="$pids $!"
}
leader() { # the name of the leader, or nothing
	for port in 18008 18009; do
		curl -fsS "http://127.0.0.1:$port/primary" >/dev/null 2>&1 && { [ $port = 18008 ] && echo pg1 || echo pg2; return; }
	done
	true
}
wait_for() { # seconds command...
	t=$1; shift
	i=0
	while ! "$@" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt $((t * 10)) ] || return 1
		sleep 0.1
	done
}
sync_ready() { curl -fsS http://127.0.0.1:18008/cluster | grep -q '"sync_standby"'; }

sleep 1
node pg1 55431 18008
wait_for 60 sh -c '[ -n "$(curl -fsS http://127.0.0.1:18008/primary)" ]' || { echo "patroni_failover: pg1 did not become primary; see $dir/pg1.log" >&2; tail -n 20 "$dir/pg1.log" >&2; exit 1; }
node pg2 55432 18009
wait_for 120 sync_ready || { echo "patroni_failover: pg2 never became the synchronous standby; see $dir/pg2.log" >&2; tail -n 20 "$dir/pg2.log" >&2; exit 1; }
echo "patroni: leader $(leader), synchronous standby ready"

dsn="host=127.0.0.1,127.0.0.1 port=55431,55432 user=postgres dbname=postgres target_session_attrs=read-write"
"$culpritd" --db "$dsn" --agent-listen 127.0.0.1:17633 --http-listen 127.0.0.1:17634 \
	--data-dir "$dir/culpritd" --max-connections-per-addr 4000 >"$dir/culpritd.log" 2>&1 &
cpid=$!
pids="$pids $cpid"
wait_for 60 curl -fsS http://127.0.0.1:17634/readyz || { echo "patroni_failover: culpritd not ready" >&2; tail "$dir/culpritd.log" >&2; exit 1; }

"$culprit" sim --scenario compute_straggler --iters "$iters" --step-seconds "$step" --server 127.0.0.1:17633 \
	--timeout 300 >"$dir/sim.log" 2>&1 &
spid=$!
sleep "$(echo "$iters * $step / 3" | bc)"
old=$(leader)
[ "$old" = pg1 ] && port=18008 || port=18009
pmpid=$(head -n 1 "$dir/$old/data/postmaster.pid")
t0=$(date +%s.%N)
pkill -9 -f "$dir/$old.yml" # runuser and patroni
kill -9 "$pmpid"            # the postmaster; its backends exit when they notice
echo "killed the leader $old (patroni and its postgres, pid $pmpid)"
wait_for 60 sh -c "[ -n \"\$(curl -fsS http://127.0.0.1:$([ $old = pg1 ] && echo 18009 || echo 18008)/primary)\" ]" ||
	{ echo "patroni_failover: no new leader within 60 s" >&2; exit 1; }
t1=$(date +%s.%N)
echo "new leader $(leader) after $(echo "$t1 - $t0" | bc) s"
wait "$spid" || true
t2=$(date +%s.%N)
tail -n 1 "$dir/sim.log"
acked=$(sed -n 's/^sim: \([0-9]*\) records.*/\1/p' "$dir/sim.log")
stored=$(psql "$dsn" -Atc "SELECT (SELECT count(*) FROM iterations i JOIN jobs j ON j.id = i.job_id WHERE j.name = 'sim-compute_straggler')
	+ (SELECT count(*) FROM phases p JOIN jobs j ON j.id = p.job_id WHERE j.name = 'sim-compute_straggler')
	+ (SELECT count(*) FROM kernels k JOIN jobs j ON j.id = k.job_id WHERE j.name = 'sim-compute_straggler')")
grep -E "writer: |storage" "$dir/culpritd.log" | sed 's/^/culpritd: /' | tail -n 6
echo "records the agents sent and had acknowledged: $acked; rows stored: $stored"
echo "failover: leader killed at 0 s, new leader at $(echo "$t1 - $t0" | bc) s, the job ended at $(echo "$t2 - $t0" | bc) s"
[ "$acked" = "$stored" ] && echo "ok: nothing lost, nothing doubled" || { echo "MISMATCH"; exit 1; }
