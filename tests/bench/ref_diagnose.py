#!/usr/bin/env python3
"""ref_diagnose.py FILE: a small reference implementation of culprit's offline diagnosis in
plain Python (standard library), the yardstick of tests/bench/bench_offline.sh.

Reads the interchange JSONL (plain or gzip) with json.loads per line, as a straightforward
script would; finds the first iteration whose job median is over 1.5x the median of the
iterations before it (the window); in the window, names the ranks whose compute phases are
over 1.5x that phase's median across ranks, and prints them with their hosts. It does much
less than culprit diagnose (no topology, no late arrivers, no kernels, no events): any
speed ratio against it understates culprit's."""
import gzip
import json
import statistics
import sys
from collections import defaultdict


def open_any(path):
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.open(path, "rt") if magic == b"\x1f\x8b" else open(path, "r")


def main(path):
    iters = defaultdict(dict)            # iter -> rank -> dur
    phases = defaultdict(dict)           # (iter, name) -> rank -> dur
    compute = set()
    hosts, gpn = {}, 8
    with open_any(path) as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            t = r.get("type")
            if t == "iter":
                iters[r["iter"]][r["rank"]] = r["dur_us"]
            elif t == "phase":
                phases[(r["iter"], r["name"])][r["rank"]] = phases[(r["iter"], r["name"])].get(r["rank"], 0) + r["dur_us"]
                if r["kind"] == "compute":
                    compute.add(r["name"])
            elif t == "host":
                hosts[r["rank"]] = r["host"]
            elif t == "job":
                gpn = r.get("gpus_per_node", 8)
    order = sorted(iters)
    med = {i: statistics.median(iters[i].values()) for i in order}
    window = None
    for k, i in enumerate(order[1:], 1):
        base = statistics.median(med[j] for j in order[:k])
        if med[i] > 1.5 * base:
            window = (i, base)
            break
    if window is None:
        print("no window")
        return
    first, base = window
    slow = defaultdict(list)
    for (i, name), d in phases.items():
        if i < first or name not in compute:
            continue
        m = statistics.median(d.values())
        for rank, v in d.items():
            if m > 0 and v > 1.5 * m:
                slow[rank].append(v / m)
    print(f"window from iteration {first} (baseline {base / 1000:.0f} ms)")
    for rank in sorted(slow):
        host = hosts.get(rank, f"node-{rank // gpn}")
        print(f"rank {rank} on {host}: compute {statistics.median(slow[rank]):.2f}x the median")


if __name__ == "__main__":
    main(sys.argv[1])
