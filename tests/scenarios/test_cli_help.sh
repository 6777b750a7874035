#!/usr/bin/env bash
# test_cli_help.sh CULPRIT SRCDIR: every subcommand's --help names every long option its
# getopt table accepts (the tables read from the sources, so a new flag needs its help line),
# and `culprit --version` says the version, the commit and the build type.
set -euo pipefail
culprit=$1
src=$2
fail=0
# options of the n-th "struct option" table of a file, one a line
opts() { awk -v want="$2" '/static const struct option/ { t++ } t == want && /[{]"/ {
	while (match($0, /[{]"[a-z-]+", *(no|required|optional)_argument/)) {
		s = substr($0, RSTART + 2, RLENGTH); sub(/".*/, "", s); print s; $0 = substr($0, RSTART + RLENGTH) } }
	t == want && /NULL, 0, NULL, 0/ { exit }' "$1"; }
check() { # command, file, table
	local help
	help=$("$culprit" $1 --help)
	for o in $(opts "$2" "$3"); do
		[ "$o" = help ] && continue
		grep -q -- "--$o\b" <<<"$help" || { echo "FAIL: culprit $1 --help does not list --$o" >&2; fail=1; }
	done
}
check diagnose "$src/client/culprit.c" 1
check sim "$src/client/culprit.c" 2
check sim "$src/client/sim_stream.c" 1
check replay "$src/client/replay.c" 1
check trace "$src/client/trace_cmd.c" 1
check capture "$src/client/trace_cmd.c" 2
[ "$(opts "$src/client/sim_stream.c" 1 | wc -l)" -gt 10 ] || { echo "FAIL: the option tables were not read" >&2; fail=1; }
v=$("$culprit" --version) || { echo "FAIL: culprit --version exited $?" >&2; fail=1; }
grep -Eq '^culprit [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{7,}(-dirty)?|unknown), [A-Za-z]+ build\)$' <<<"$v" ||
	{ echo "FAIL: culprit --version said \"$v\"" >&2; fail=1; }
exit $fail
