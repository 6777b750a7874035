#!/usr/bin/env python3
"""test_layers: the floors of the source tree hold (docs/architecture.md).

- No include circle: a module is a file stem (x.c with x.h); a depends on b when a.c or a.h
  includes "b.h". The one intended pair is the agent's (agent.c, agent_loop.c through
  agent_impl.h).
- SQL only in storage/: no string literal outside it holds a statement.
- Protobuf field tags only in schema/: no hand-written `(n << 3) | wire type` elsewhere (the
  tags come from the descriptors, frame_field_tag).
- One bounded queue (common/queue.c) and one string map (common/strmap.c): no other file
  defines a struct of either name.

Usage: test_layers.py SOURCE_DIR. Prints each breach and exits 1 when there is one."""
import os
import re
import sys

ROOM = ["common", "schema", "diagnose", "storage", "server", "agent", "client"]
ALLOWED_CIRCLES = [{"agent", "agent_impl"}]


def sources(root):
    for room in ROOM:
        d = os.path.join(root, room)
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                yield room, os.path.join(d, f)


def circles(root):
    mods, edges = {}, {}
    for _, path in sources(root):
        mods.setdefault(os.path.basename(path)[:-2], []).append(path)
    for m, files in mods.items():
        edges[m] = set()
        for path in files:
            for line in open(path, errors="replace"):
                inc = re.match(r'\s*#\s*include\s+"(?:[^"]*/)?([^"/]+)\.h"', line)
                if inc and inc.group(1) in mods and inc.group(1) != m:
                    edges[m].add(inc.group(1))
    # Tarjan's strongly connected components, iteratively
    index, low, stack, on, found, n = {}, {}, [], set(), [], 0
    for root_mod in sorted(edges):
        if root_mod in index:
            continue
        work = [(root_mod, iter(sorted(edges[root_mod])))]
        index[root_mod] = low[root_mod] = n
        n += 1
        stack.append(root_mod)
        on.add(root_mod)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n
                    n += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1 and comp not in ALLOWED_CIRCLES:
                    inner = {a: sorted(b & comp) for a, b in edges.items() if a in comp}
                    found.append("include circle: " + "; ".join(f"{a} -> {' '.join(b)}" for a, b in sorted(inner.items())))
    return found


SQL = re.compile(r'"[^"\n]*\b(SELECT\s+\S.*\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX|VIEW)|'
                 r'COPY\s+\w+|ALTER\s+TABLE|BEGIN\s+ISOLATION|LOCK\s+TABLE|pg_advisory)')
TAG = re.compile(r'\(\s*\d+\s*<<\s*3\s*\)\s*\|\s*[0-5]\b|<<\s*3\s*\|\s*[0-5]\b')
OWN_STRUCT = re.compile(r'^\s*struct\s+(\w*(queue|strmap|workq)\w*)\s*\{', re.M)


def rooms(root):
    found = []
    for room, path in sources(root):
        text = open(path, errors="replace").read()
        rel = os.path.relpath(path, root)
        for no, line in enumerate(text.split("\n"), 1):
            if room != "storage" and SQL.search(line):
                found.append(f"{rel}:{no}: SQL outside storage/: {line.strip()}")
            if room != "schema" and TAG.search(line):
                found.append(f"{rel}:{no}: a protobuf tag written by hand: {line.strip()}")
        if room != "common":
            for m in OWN_STRUCT.finditer(text):
                found.append(f"{rel}: defines struct {m.group(1)} beside common/'s queue and map")
    return found


def main():
    root = sys.argv[1]
    found = circles(root) + rooms(root)
    for f in found:
        print(f)
    if found:
        return 1
    print("test_layers: no include circle but the agent's, no SQL outside storage/, no hand-written "
          "protobuf tag outside schema/, one queue and one map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
