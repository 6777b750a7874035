#!/usr/bin/env bash
# test_man_pages.sh SOURCE_DIR BUILD_DIR: the committed man pages are what docs/man/gen.sh
# writes from this build's programs (their --help and the settings table), culpritd(8) and
# culprit(1) have the sections of a man page, and no page is wider than 80 columns at
# MANWIDTH=80.
set -euo pipefail
src=$1
build=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$src/docs/man/gen.sh" "$build" "$dir"
status=0
for f in culpritd.8 culpritd.conf.5 culprit.1; do
	diff -u "$src/docs/man/$f" "$dir/$f" || { echo "FAIL: docs/man/$f is not what docs/man/gen.sh writes" >&2; status=1; }
	MANWIDTH=80 MAN_KEEP_FORMATTING= LC_ALL=C.UTF-8 man -l "$dir/$f" >"$dir/$f.txt" 2>"$dir/$f.err" ||
		{ echo "FAIL: man -l $f: $(cat "$dir/$f.err")" >&2; status=1; }
	[ -s "$dir/$f.txt" ] || { echo "FAIL: man -l $f printed nothing" >&2; status=1; }
	wide=$(awk 'length > 80' "$dir/$f.txt")
	[ -z "$wide" ] || { printf 'FAIL: %s: lines wider than 80 columns:\n%s\n' "$f" "$wide" >&2; status=1; }
done
for f in culpritd.8 culprit.1; do
	for section in NAME SYNOPSIS DESCRIPTION OPTIONS "EXIT STATUS" FILES EXAMPLES; do
		grep -qx "$section" "$dir/$f.txt" || { echo "FAIL: $f has no section $section" >&2; status=1; }
	done
done
# every setting of the table is an option of culpritd(8)
for name in $("$build/server/culpritd" --config-doc | sed -n 's/^| `\([a-z_0-9]*\)` .*/\1/p'); do
	grep -q -- "--${name//_/-}" "$dir/culpritd.8.txt" || { echo "FAIL: culpritd.8 lacks --${name//_/-}" >&2; status=1; }
done
exit $status
