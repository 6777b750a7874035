#!/usr/bin/env bash
# tests/lint.sh: cppcheck and clang-tidy (.clang-tidy) over culprit's sources (not the tests);
# any finding fails. Suppressions: tests/cppcheck.supp and tests/clang-tidy.baseline, each
# entry with its reason. Uses build/lint (configured only; the generated headers built).
set -euo pipefail
cd "$(dirname "$0")/.."
source ./install-deps.sh
culprit_install_deps lint

build=build/lint
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=OFF >/dev/null
cmake --build "$build" --target culprit_schema culprit_perfetto culprit_build_info -j"$(nproc)" >/dev/null
dirs=(common diagnose storage server agent client schema)
files=$(ls common/*.c diagnose/*.c storage/*.c server/*.c agent/*.c client/*.c schema/*.c)
rc=0

start=$SECONDS
incs=()
for d in "${dirs[@]}"; do incs+=(-I "$d"); done
cppcheck -q -j"$(nproc)" --std=c11 --enable=warning,portability,performance --inline-suppr \
	-D_GNU_SOURCE "${incs[@]}" --suppressions-list=tests/cppcheck.supp --error-exitcode=1 $files || rc=1
echo "lint.sh: cppcheck $((SECONDS - start)) s"

start=$SECONDS
out=$build/clang-tidy.txt
# shellcheck disable=SC2086
printf '%s\n' $files | xargs -P"$(nproc)" -n4 clang-tidy -p "$build" --quiet >"$out" 2>/dev/null || true
# findings not in the baseline ("path check" per line)
{ grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error): .*\[[A-Za-z0-9.,-]+\]$' "$out" || true; } | sed "s|^$(pwd)/||" |
	sed -E 's/^([^:]+):.*\[([A-Za-z0-9.-]+)[],].*$/\1 \2/' | sort -u >"$build/clang-tidy.found"
awk '!/^#/ && NF { print $1, $2 }' tests/clang-tidy.baseline | sort -u >"$build/clang-tidy.known"
if comm -23 "$build/clang-tidy.found" "$build/clang-tidy.known" | grep -q .; then
	echo "lint.sh: clang-tidy findings (full text in $out):" >&2
	comm -23 "$build/clang-tidy.found" "$build/clang-tidy.known" >&2
	rc=1
fi
echo "lint.sh: clang-tidy $((SECONDS - start)) s, $(wc -l <"$build/clang-tidy.found") finding kinds, all in the baseline: $([ $rc = 0 ] && echo yes || echo no)"
exit $rc
