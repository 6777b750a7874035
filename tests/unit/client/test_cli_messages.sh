#!/bin/sh
# test_cli_messages.sh: what `culprit` says when it cannot do what it was asked: a file it
# cannot open names the reason, `culprit sim` names the option it misses.
#
#   tests/unit/client/test_cli_messages.sh CULPRIT
set -u
culprit=$1
fail=0
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# expect RC NEEDLE COMMAND...: the command exits RC and its standard error holds NEEDLE
expect() {
	want_rc=$1
	needle=$2
	shift 2
	"$@" >/dev/null 2>"$dir/err"
	rc=$?
	if [ "$rc" -ne "$want_rc" ] || ! grep -qF -- "$needle" "$dir/err"; then
		echo "FAIL: $* exited $rc (want $want_rc), said:" >&2
		cat "$dir/err" >&2
		echo "  (want: $needle)" >&2
		fail=1
	fi
}

for fmt in auto jsonl kineto chrome csv; do
	expect 2 "$dir/none: could not open: No such file or directory" "$culprit" diagnose --format "$fmt" "$dir/none"
done
cat >"$dir/timeline-1.json" <<'JSON'
{"traceEvents":[{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"PP rank 0, TP rank 0, compute"}},
{"name":"fwd","ph":"X","pid":0,"tid":1,"ts":0,"dur":10,"args":{"step":1}}]}
JSON
expect 2 "$dir/none.yaml: could not open: No such file or directory" \
	"$culprit" diagnose --format chrome --meta "$dir/none.yaml" "$dir/timeline-1.json"
expect 2 "culprit sim: --scenario NAME is missing" "$culprit" sim --out "$dir/x.jsonl"
expect 2 "culprit sim: --out FILE or --server HOST:PORT is missing" "$culprit" sim --scenario case5
expect 2 "culprit sim: --scenario NAME is missing" "$culprit" sim --server 127.0.0.1:9
expect 2 'culprit sim: unexpected argument "extra"' "$culprit" sim --scenario case5 --out "$dir/x.jsonl" extra
[ ! -e "$dir/x.jsonl" ] || { echo "FAIL: a refused sim wrote its file" >&2; fail=1; }
[ "$fail" -eq 0 ] && echo "test_cli_messages: passed"
exit "$fail"
