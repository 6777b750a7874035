#!/usr/bin/env bash
# run.sh: the main job. Installs what is missing, builds (release), starts culpritd on its
# embedded PostgreSQL (data and culpritd's log in ./var), streams a simulated 12,960-rank job
# with the seed's fault into it (culprit sim --scenario case5), and prints where to look (the
# job's page in the web console), then the incident culpritd opens: its diagnosis and action.
# Ctrl-C stops everything it started.
# CULPRIT_BUILD_DIR: use the binaries of that build directory instead (no install, no build).
set -euo pipefail
cd "$(dirname "$0")"

build=${CULPRIT_BUILD_DIR:-}
if [ -z "$build" ]; then
	source ./install-deps.sh
	culprit_install_deps
	build=build/release
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
	cmake --build "$build" -j"$(nproc)" >"$build.log" 2>&1 || { cat "$build.log" >&2; exit 1; }
	echo "built $build/server/culpritd and $build/client/culprit"
fi

data=${CULPRIT_DATA_DIR:-./var}
agent=${CULPRIT_AGENT_LISTEN:-127.0.0.1:7433}
http=${CULPRIT_HTTP_LISTEN:-127.0.0.1:7434}
log=$data/culpritd.log
mkdir -p "$data"
# as root, the embedded PostgreSQL runs as "postgres" and must reach the data directory
[ "$(id -u)" -ne 0 ] || chmod 755 "$data"

# the text of culpritd's log lines, without their time and level
# ("2026-01-01 00:00:00.000 UTC INFO    ")
text() { cut -c37-; }

# a session of its own, so that Ctrl-C reaches run.sh alone, which then stops culpritd once
# (SIGTERM: drain and stop its PostgreSQL)
# all 1,620 simulated node agents connect from 127.0.0.1: allow them (default 256 an address)
: >"$log"
setsid "$build/server/culpritd" --data-dir "$data" --agent-listen "$agent" --http-listen "$http" \
	--max-connections-per-addr 2048 >>"$log" 2>&1 &
culpritd=$!
stop() {
	trap - INT TERM EXIT
	[ -n "${sim:-}" ] && kill "$sim" 2>/dev/null || true
	kill -TERM "$culpritd" 2>/dev/null && wait "$culpritd" 2>/dev/null || true
}
trap stop INT TERM EXIT

for _ in $(seq 600); do
	curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
	kill -0 "$culpritd" 2>/dev/null || { echo "culpritd did not start; its log ($log):" >&2; cat "$log" >&2; exit 1; }
	sleep 0.1
done
job=sim-case5
api=http://$http/api/v1
echo "culpritd is up: agents on $agent, the web console and REST API on http://$http"
echo "  its log: $log (PostgreSQL runs embedded in $data)"
grep -E '^.{28}(WARNING|ERROR)' "$log" | text | sed 's/^/  /' || true
echo
echo "the job's page (open it in a browser): http://$http/#/jobs/$job"
echo
echo "streaming the simulated job $job into culpritd: 12,960 ranks on 1,620 node agents, the"
echo "compute of node-1294's 8 GPUs 5.7x slower from iteration 6 on (progress: $data/sim.log) ..."
setsid "$build/client/culprit" sim --scenario case5 --server "$agent" >"$data/sim.log" 2>&1 &
sim=$!
# out-of-band monitoring reports "port down" on the culprits' node, as in the real incident,
# once the job is known
until curl -fsS "$api/jobs/$job" >/dev/null 2>&1; do
	kill -0 "$sim" 2>/dev/null || break
	sleep 0.2
done
curl -fsS -X POST "$api/events" -H 'Content-Type: application/json' \
	-d "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"ts_us\":$(date +%s)000000,\"source\":\"oob\",\"detail\":\"eth3\"}" \
	>/dev/null && echo "posted an out-of-band port_down event on node-1294 (POST /api/v1/events)"
echo
# the incident as culpritd says it: from its "INCIDENT ... firing" line to the end of that entry
until grep -q 'INCIDENT .* firing' "$log"; do
	kill -0 "$sim" 2>/dev/null || break
	sleep 0.2
done
text <"$log" | awk '/^INCIDENT .* firing/ { on = 1 } on && $0 == "" { exit } on'
wait "$sim" || true
sim=
for _ in $(seq 50); do
	grep -q 'INCIDENT .* resolved' "$log" && break
	sleep 0.1
done
text <"$log" | grep '^INCIDENT .* resolved' || true
echo
echo "the job's page: http://$http/#/jobs/$job"
echo "its latest report (JSON), its incidents, out-of-band events and culpritd's metrics:"
printf '  curl %s\n' "$api/jobs/$job/reports/latest" "$api/jobs/$job/incidents" "$api/events" "http://$http/metrics"
echo
echo "culpritd keeps running; Ctrl-C stops it (and its PostgreSQL)."
wait "$culpritd"
