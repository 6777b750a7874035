#!/usr/bin/env bash
# test_readme_run.sh SOURCE_DIR BUILD_DIR: the sample of ./run.sh's output in README.md is
# what run.sh prints. run.sh runs as a user runs it, on BUILD_DIR's binaries
# (CULPRIT_BUILD_DIR: no install, no build), its culpritd and embedded PostgreSQL in a
# directory of its own on free ports, until it says culpritd keeps running; then it is
# stopped as Ctrl-C stops it. The fenced block after "<!-- run.sh output -->" in README.md
# must match that output line for line, where a line "..." stands for any lines (and its line
# "built ..." for the build run.sh did not do); the numbers of kernel lines and the L3 tags'
# words are not compared (they depend on when the first report ran). Masked: the
# ports and the data directory (README shows the defaults) and the open-file limit warning
# (it depends on the machine).
set -euo pipefail
src=$1
build=$2
dir=$(mktemp -d)
chmod 755 "$dir" # as root, the embedded PostgreSQL runs as "postgres"
runner=
cleanup() {
	[ -z "$runner" ] || { kill -TERM "$runner" 2>/dev/null && wait "$runner" 2>/dev/null; } || true
	rm -rf "$dir"
}
trap cleanup EXIT
fail() {
	echo "FAIL: $*" >&2
	echo "--- run.sh printed:" >&2
	cat "$dir/out" >&2 || true
	echo "--- the end of culpritd's log:" >&2
	tail -n 30 "$dir/var/culpritd.log" >&2 || true
	exit 1
}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
aport=$(port)
hport=$(port)

CULPRIT_BUILD_DIR=$(cd "$build" && pwd) CULPRIT_DATA_DIR=$dir/var CULPRIT_AGENT_LISTEN=127.0.0.1:$aport \
	CULPRIT_HTTP_LISTEN=127.0.0.1:$hport setsid "$src/run.sh" >"$dir/out" 2>&1 &
runner=$!
for _ in $(seq 2400); do
	grep -q '^culpritd keeps running' "$dir/out" && break
	kill -0 "$runner" 2>/dev/null || fail "run.sh ended before culpritd was up and the job streamed"
	sleep 0.25
done
grep -q '^culpritd keeps running' "$dir/out" || fail "run.sh did not finish the job in 10 minutes"
kill -TERM "$runner"
wait "$runner" 2>/dev/null || true
runner=

sed -e "s|127\.0\.0\.1:$aport|127.0.0.1:7433|g" -e "s|127\.0\.0\.1:$hport|127.0.0.1:7434|g" -e "s|$dir/var|./var|g" \
	"$dir/out" | grep -v 'open-file limit is' >"$dir/live"
# (README's first line says what run.sh built; here it built nothing)
awk '/^<!-- run.sh output -->$/ { on = 1; next } on && /^```/ { if (++fence == 2) exit; next } on && fence == 1' \
	"$src/README.md" | sed '/^built build\//d' >"$dir/readme"
[ -s "$dir/readme" ] || fail "README.md has no fenced block after <!-- run.sh output -->"

# the README's lines in order, "..." skipping any lines of the live output
python3 - "$dir/readme" "$dir/live" <<'EOF' || fail "README.md's sample is not what run.sh prints"
import re
import sys


def norm(line):
    # the kernel statistics of the first report depend on how many of the window's kernel
    # records had arrived when it ran: its kernel lines and L3 tag are compared without them
    if re.match(r"\s+kernel ", line):
        line = re.sub(r"\d+\.\d+", "#", line)
    return re.sub(r"\[L3: [^\]]*\]", "[L3: #]", line)


want = [norm(x) for x in open(sys.argv[1]).read().splitlines()]
got = [norm(x) for x in open(sys.argv[2]).read().splitlines()]
i = 0
skipping = False
for n, line in enumerate(want, 1):
    if line.strip() == "...":
        skipping = True
        continue
    while skipping and i < len(got) and got[i] != line:
        i += 1
    if i >= len(got) or got[i] != line:
        print(f"README.md sample line {n}:\n  {line}\nrun.sh printed there:\n  {got[i] if i < len(got) else '(nothing)'}",
              file=sys.stderr)
        sys.exit(1)
    i += 1
    skipping = False
if i != len(got) and not skipping:
    print(f"run.sh printed more after the sample's last line:\n  {got[i]}", file=sys.stderr)
    sys.exit(1)
EOF
echo "README.md's sample matches run.sh's output ($(wc -l <"$dir/live") lines)"
