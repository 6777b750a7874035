#!/usr/bin/env bash
# run.sh: the main job. Installs what is missing, builds (release), starts culpritd on its
# embedded PostgreSQL (data in ./var), streams a simulated 12,960-rank job with the seed's
# fault into it (culprit sim --scenario case5), and prints the job's page in the web console
# first, then the live diagnosis. Ctrl-C stops everything it started.
set -euo pipefail
cd "$(dirname "$0")"
source ./install-deps.sh
culprit_install_deps

build=build/release
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >"$build.log" 2>&1 || { cat "$build.log" >&2; exit 1; }
echo "built $build/server/culpritd and $build/client/culprit"

data=${CULPRIT_DATA_DIR:-./var}
agent=${CULPRIT_AGENT_LISTEN:-127.0.0.1:7433}
http=${CULPRIT_HTTP_LISTEN:-127.0.0.1:7434}
mkdir -p "$data"
# as root, the embedded PostgreSQL runs as "postgres" and must reach the data directory
[ "$(id -u)" -ne 0 ] || chmod 755 "$data"

# a session of its own, so that Ctrl-C reaches run.sh alone, which then stops culpritd once
# (SIGTERM: drain and stop its PostgreSQL)
# all 1,620 simulated node agents connect from 127.0.0.1: allow them (default 256 an address)
setsid "$build/server/culpritd" --data-dir "$data" --agent-listen "$agent" --http-listen "$http" \
	--max-connections-per-addr 2048 &
culpritd=$!
stop() {
	trap - INT TERM EXIT
	[ -n "${sim:-}" ] && kill "$sim" 2>/dev/null || true
	kill -TERM "$culpritd" 2>/dev/null && wait "$culpritd" 2>/dev/null || true
}
trap stop INT TERM EXIT

for _ in $(seq 600); do
	curl -fsS "http://$http/healthz" >/dev/null 2>&1 && break
	kill -0 "$culpritd" 2>/dev/null || { echo "culpritd did not start" >&2; exit 1; }
	sleep 0.1
done
job=sim-case5
api=http://$http/api/v1
echo
echo "the job's page: http://$http/#/jobs/$job   (open it in a browser; the console of every job: http://$http/)"
echo "culpritd is up: agents on $agent, REST API on http://$http (try: curl http://$http/metrics)"
echo
echo "streaming the simulated case5 job (12,960 ranks on 1,620 node agents) into culpritd ..."
echo "watch for the INCIDENT lines: when it opened, the suspects with host and coordinates, the verdict"
echo
setsid "$build/client/culprit" sim --scenario case5 --server "$agent" &
sim=$!
# out-of-band monitoring reports "port down" on the culprits' node, as in the real incident
sleep 3
curl -fsS -X POST "$api/events" -H 'Content-Type: application/json' \
	-d "{\"host\":\"node-1294\",\"kind\":\"port_down\",\"ts_us\":$(date +%s)000000,\"source\":\"oob\",\"detail\":\"eth3\"}" \
	>/dev/null && echo "posted an out-of-band port_down event on node-1294 (POST $api/events)"
wait "$sim" || true
sim=
sleep 2
echo
echo "the latest report's verdict and its verdict on the port-down event:"
latest=$(curl -fsS "$api/jobs/$job/reports/latest" || true)
echo "$latest" | grep -o '"verdict":{"category":"[a-z_]*"' | head -n 1 | sed 's/.*"category":/  category: /'
echo "$latest" | grep -o '"events":\[[^]]*\]' | sed 's/^/  /'
cat <<EOF

the job's page: http://$http/#/jobs/$job
query it yourself:
  curl $api/jobs                          # jobs
  curl $api/jobs/$job/reports/latest      # the report JSON
  curl $api/jobs/$job/incidents           # incidents
  curl $api/events                        # out-of-band events
  curl http://$http/metrics               # culpritd's own metrics

culpritd keeps running; Ctrl-C stops it (and its PostgreSQL).
EOF
wait "$culpritd"
