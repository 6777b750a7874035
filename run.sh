#!/usr/bin/env bash
# run.sh: the main job. Installs what is missing, builds (release), starts culpritd on its
# embedded PostgreSQL (data in ./var), streams a simulated 12,960-rank job with the seed's
# fault into it (culprit sim --scenario case5), and prints the live diagnosis. Ctrl-C stops
# everything it started.
set -euo pipefail
cd "$(dirname "$0")"
source ./install-deps.sh
culprit_install_deps

build=build/release
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
echo "built $build/server/culpritd and $build/client/culprit"

data=${CULPRIT_DATA_DIR:-./var}
agent=${CULPRIT_AGENT_LISTEN:-127.0.0.1:7433}
http=${CULPRIT_HTTP_LISTEN:-127.0.0.1:7434}
mkdir -p "$data"
# as root, the embedded PostgreSQL runs as "postgres" and must reach the data directory
[ "$(id -u)" -ne 0 ] || chmod 755 "$data"

"$build/server/culpritd" --data-dir "$data" --agent-listen "$agent" --http-listen "$http" &
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
echo
echo "culpritd is up: agents on $agent, REST API on http://$http (try: curl http://$http/metrics)"
echo

if "$build/client/culprit" sim --help 2>&1 | grep -q -- '--server'; then
	echo "streaming the simulated case5 job (12,960 ranks on 1,620 nodes) into culpritd ..."
	"$build/client/culprit" sim --scenario case5 --server "$agent" &
	sim=$!
fi
wait "$culpritd"
