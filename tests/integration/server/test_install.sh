#!/usr/bin/env bash
# test_install.sh BUILD_DIR: `cmake --install` into a fresh prefix installs the binaries, the
# migrations, the Grafana dashboards, provisioning and grants.sql, the OpenAPI description, the
# alert rules (their runbook_url under the prefix) and an example culpritd.conf (which
# `culpritd -t` accepts), the web console; the systemd unit's
# paths are the prefix's, `systemd-analyze verify` accepts it and `systemd-analyze security`
# scores it under 4 (when systemd-analyze exists). The installed culpritd applies the
# installed migrations, not the checkout's: a migration added to the prefix only is applied;
# and serves the installed console, not the checkout's: a file added to the prefix only is
# served.
set -euo pipefail
build=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
p=$dir/prefix
cmake --install "$build" --prefix "$p" >/dev/null
for f in bin/culpritd bin/culprit share/culprit/migrations/001_initial.sql share/culprit/culprit-alerts.yml \
	share/culprit/openapi.yaml share/culprit/culpritd.conf.example share/culprit/grafana/grants.sql \
	share/culprit/grafana/dashboards/culprit-job.json share/culprit/grafana/dashboards/culprit-phases.json \
	share/culprit/grafana/provisioning/dashboards/culprit.yaml share/culprit/grafana/provisioning/datasources/culprit.yaml \
	lib/systemd/system/culpritd.service share/man/man8/culpritd.8 share/man/man5/culpritd.conf.5 share/man/man1/culprit.1 \
	share/culprit/console/index.html share/culprit/console/app.js share/culprit/console/job.js; do
	[ -s "$p/$f" ] || fail "$f is not installed"
done
"$p/bin/culpritd" -t --config "$p/share/culprit/culpritd.conf.example" >/dev/null || fail "culpritd -t refuses the example"
grep -qF "\"file://$p/share/doc/culprit\" }}/operations.md#culpritddown" "$p/share/culprit/culprit-alerts.yml" ||
	fail "the installed alert rules' runbook_url is not under the prefix"
unit=$p/lib/systemd/system/culpritd.service
grep -q "^ExecStart=$p/bin/culpritd " "$unit" || fail "ExecStart is not the prefix's: $(grep ExecStart= "$unit")"
! grep -q /usr/local "$unit" || fail "the unit still names /usr/local"
if command -v systemd-analyze >/dev/null; then
	systemd-analyze verify "$unit" || fail "systemd-analyze verify refuses the unit"
	score=$(systemd-analyze security --offline=true "$unit" 2>/dev/null | sed -n 's/.*Overall exposure level for .*: \([0-9.]*\).*/\1/p')
	echo "systemd-analyze security: $score"
	awk -v s="$score" 'BEGIN { exit !(s != "" && s < 4) }' || fail "systemd-analyze security scores $score"
fi
# the installed migrations: one more, only in the prefix, is applied by the installed culpritd
if [ -n "${CULPRIT_TEST_DSN:-}" ]; then
	db=test_install_$$
	psql "$CULPRIT_TEST_DSN" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
	dsn="$CULPRIT_TEST_DSN dbname=$db"
	printf 'CREATE TABLE installed_migration_marker (x int);\n' >"$p/share/culprit/migrations/999_marker.sql"
	printf 'installed\n' >"$p/share/culprit/console/marker.txt"
	port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
	http=127.0.0.1:$(port)
	env -u CULPRIT_MIGRATIONS_DIR -u CULPRIT_CONSOLE_DIR "$p/bin/culpritd" --db="$dsn" --agent-listen=127.0.0.1:$(port) \
		--http-listen=$http --data-dir="$dir/data" >"$dir/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do grep -q "culpritd ready" "$dir/log" && break; sleep 0.1; done
	console=$(curl -fsS "http://$http/console/marker.txt" || true)
	kill $pid 2>/dev/null || true
	wait $pid || true
	grep -q "culpritd ready" "$dir/log" || { cat "$dir/log"; fail "the installed culpritd did not start"; }
	[ "$(psql "$dsn" -Atc "SELECT to_regclass('installed_migration_marker') IS NOT NULL")" = t ] ||
		{ cat "$dir/log"; fail "the installed culpritd did not apply the installed migrations"; }
	[ "$console" = installed ] || { cat "$dir/log"; fail "the installed culpritd does not serve the installed console"; }
	psql "$CULPRIT_TEST_DSN" -qc "DROP DATABASE $db" >/dev/null
fi
echo ok
