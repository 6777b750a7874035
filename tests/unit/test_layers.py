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
- The folders' table of docs/architecture.md ("Folders", its column "may depend on"): a
  file includes headers of its own folder and of the folders its row names ("everything
  above": the rows before it), and of the libraries its row names (libpq, libevent, jansson,
  OpenSSL, zlib, ISA-L, libcurl, GSL, protobuf-c; the C library and pthreads are anyone's).

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


# a library of the table, by the start of its name there: the headers that are its
LIBRARIES = {
    "libpq": ("libpq-fe.h", "libpq/"),
    "libevent": ("event2/",),
    "jansson": ("jansson.h",),
    "openssl": ("openssl/",),
    "zlib": ("zlib.h",),
    "isa-l": ("isa-l/", "isa-l.h"),
    "libcurl": ("curl/",),
    "gsl": ("gsl/",),
    "protobuf-c": ("protobuf-c/",),
}
# headers made by the build, and the folder they come from
GENERATED = {"culprit.pb-c.h": "schema", "perfetto_trace.pb-c.h": "schema", "build_info.h": None}


def folder_table(root):
    """{folder: (folders, libraries)} from docs/architecture.md's table "Folders"."""
    text = open(os.path.join(root, "docs", "architecture.md")).read()
    table = text[text.index("## Folders"):]
    deps, above = {}, []
    for line in table.split("\n")[1:]:
        if line.startswith("## "):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        m = re.match(r"`(\w+)/`$", cells[0]) if len(cells) == 3 else None
        if not m:
            continue
        folder, may = m.group(1), cells[2]
        folders = set(re.findall(r"\b(\w+)/", may))
        if "everything above" in may:
            folders |= set(above)
        libs = set()
        for token in re.split(r",", re.sub(r"\([^)]*\)", "", may)):
            name = token.strip().lower()
            for lib in LIBRARIES:
                if name == lib or name.startswith(lib + " "):
                    libs.add(lib)
        deps[folder] = (folders, libs)
        above.append(folder)
    return deps


def dependencies(root):
    found = []
    table = folder_table(root)
    where = {}
    for room, path in sources(root):
        if path.endswith(".h"):
            where.setdefault(os.path.basename(path), set()).add(room)
    for name, room in GENERATED.items():
        if room:
            where.setdefault(name, set()).add(room)
    for room, path in sources(root):
        if room not in table:
            found.append(f"{room}/ has no row in docs/architecture.md's table of folders")
            continue
        folders, libs = table[room]
        rel = os.path.relpath(path, root)
        for no, line in enumerate(open(path, errors="replace"), 1):
            inc = re.match(r'\s*#\s*include\s+([<"])([^>"]+)[>"]', line)
            if not inc:
                continue
            name = inc.group(2)
            if inc.group(1) == '"':
                homes = where.get(os.path.basename(name))
                if not homes or room in homes:
                    continue  # its own folder's, or the build's
                if not homes & folders:
                    found.append(f"{rel}:{no}: includes {name} of {'/, '.join(sorted(homes))}/, which "
                                 f"docs/architecture.md does not let {room}/ depend on")
                continue
            for lib, heads in LIBRARIES.items():
                if any(name == h or (h.endswith("/") and name.startswith(h)) for h in heads) and lib not in libs:
                    found.append(f"{rel}:{no}: includes <{name}> of {lib}, which docs/architecture.md does "
                                 f"not let {room}/ depend on")
    return found


def main():
    root = sys.argv[1]
    found = circles(root) + rooms(root) + dependencies(root)
    for f in found:
        print(f)
    if found:
        return 1
    print("test_layers: no include circle but the agent's, no SQL outside storage/, no hand-written "
          "protobuf tag outside schema/, one queue and one map, every folder within its row of "
          "docs/architecture.md's table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
