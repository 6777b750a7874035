#!/usr/bin/env bash
# tests/pg.sh: a private PostgreSQL for the tests.
#   tests/pg.sh start DIR   initdb DIR/data (once), start it listening only on a Unix socket in
#                           DIR/sock with fsync off; prints the DSN on stdout
#   tests/pg.sh stop DIR    stop it (fast), if running
# As root, PostgreSQL runs as the unprivileged user "postgres" (Debian's package creates it).
set -euo pipefail
cmd=${1:?start|stop} dir=${2:?directory}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

bindir=$(pg_config --bindir 2>/dev/null || true)
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
	bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
fi
[ -x "$bindir/pg_ctl" ] || { echo "pg.sh: no PostgreSQL server binaries (install postgresql)" >&2; exit 1; }

as_pg=()
if [ "$(id -u)" -eq 0 ]; then
	as_pg=(runuser -u postgres --)
	chown postgres: "$dir"
	# the postgres user must be able to reach DIR
	if ! runuser -u postgres -- test -x "$dir"; then
		echo "pg.sh: user postgres cannot reach $dir; make its parents searchable (chmod o+x)" >&2
		exit 1
	fi
fi

case $cmd in
start)
	mkdir -p "$dir/sock"
	[ "$(id -u)" -ne 0 ] || chown postgres: "$dir/sock"
	if [ ! -f "$dir/data/PG_VERSION" ]; then
		"${as_pg[@]}" "$bindir/initdb" -D "$dir/data" -U culprit -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 ||
			{ cat "$dir/initdb.log" >&2; exit 1; }
	fi
	"${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
		-o "-c listen_addresses='' -c unix_socket_directories='$dir/sock' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 -c shared_buffers=256MB" \
		start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
	echo "host=$dir/sock user=culprit dbname=postgres"
	;;
stop)
	if [ -f "$dir/data/postmaster.pid" ]; then
		"${as_pg[@]}" "$bindir/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
	;;
*) echo "usage: pg.sh start|stop DIR" >&2; exit 2 ;;
esac
