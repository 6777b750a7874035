#!/bin/sh
# test_server_layers: no include circle among the modules of server/ (docs/architecture.md,
# "Layers of server/"). A module is a file stem (x.c and x.h); it depends on y when x.c or
# x.h includes "y.h" and y is a module of server/. tsort prints the modules in an order where
# each comes after what it includes, or fails naming a circle.
set -eu
cd "$1"
for f in *.c *.h; do
	m=${f%.?}
	echo "$m $m"
	sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)\.h".*/\1/p' "$f" | while read -r d; do
		if [ "$d" != "$m" ] && { [ -f "$d.h" ] || [ -f "$d.c" ]; }; then
			echo "$d $m"
		fi
	done
done | tsort
