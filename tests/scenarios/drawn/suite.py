#!/usr/bin/env python3
"""suite.py: draws N cases (gen.py), runs `culprit diagnose` on each, scores them (score.py).

Called by run.sh; prints the figures, then one line
`drawn: cases=N right=R right_pct=P false_alarms=F failed=X` for scripts.
"""
import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402
import messy  # noqa: E402
import score  # noqa: E402

SUITES = {"classic": gen, "messy": messy}


def one(args):
    seed, index, culprit, work, keep, max_world, kinds, suite = args
    truth = SUITES[suite].make_case(seed, index, work, max_world, kinds)
    data = os.path.join(work, truth["case"] + ".jsonl")
    p = subprocess.run([culprit, "diagnose", "--format", "jsonl", data], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    report, err = None, ""
    if p.returncode == 0:
        try:
            report = json.loads(p.stdout)
        except ValueError as e:
            err = "report is not JSON: %s" % e
    else:
        err = "exit %d: %s" % (p.returncode, p.stderr.decode(errors="replace")[-500:])
    if report is not None:
        with open(os.path.join(work, truth["case"] + ".report.json"), "wb") as f:
            f.write(p.stdout)
    if not keep or truth["world"] > 256 or score.judge(truth, report)[0]:
        os.unlink(data)  # --keep keeps the input of the small wrong cases only
    return truth, report, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", type=int, default=200)
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--culprit", required=True)
    ap.add_argument("--keep", default="")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--max-ttd", type=int, default=0,
                    help="fail when a step fault of 1.3x or more is detected later than this many "
                         "slowed iterations, or not at all (0: no bar)")
    ap.add_argument("--min-right", type=float, default=0.0,
                    help="exit 1 under this %% right, or on any false alarm when set")
    ap.add_argument("--max-world", type=int, default=4096)
    ap.add_argument("--kinds", default="", help="comma-separated kinds to draw from (default all)")
    ap.add_argument("--suite", default="classic", choices=sorted(SUITES),
                    help="classic (gen.py) or messy (messy.py: several faults, noise, imbalance)")
    ap.add_argument("--only", default="", help="comma-separated case numbers of the seed (instead of 0..cases-1)")
    a = ap.parse_args()
    kinds = [k for k in a.kinds.split(",") if k]
    work = a.keep or tempfile.mkdtemp(prefix="culprit-drawn-")
    os.makedirs(work, exist_ok=True)
    try:
        which = [int(i) for i in a.only.split(",")] if a.only else range(a.cases)
        tasks = [(a.seed, i, a.culprit, work, bool(a.keep), a.max_world, kinds, a.suite) for i in which]
        with multiprocessing.Pool(a.jobs) as pool:
            out = pool.map(one, tasks, chunksize=1)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    failed = [(t, e) for t, r, e in out if r is None]
    for t, e in failed:
        print("diagnose failed on %s (%s): %s" % (t["case"], t["kind"], e))
    pct = score.summarize([(t, r) for t, r, _ in out])
    healthy = [(t, r) for t, r, _ in out if score.healthy(t)]
    fa = sum(1 for t, r in healthy if r is None or r["verdict"]["category"] != "none" or score.culprits(r)[0])
    right = sum(1 for t, r, _ in out if score.judge(t, r)[0])
    print("drawn: cases=%d right=%d right_pct=%.1f false_alarms=%d failed=%d seed=%d"
          % (len(out), right, pct, fa, len(failed), a.seed))
    if a.keep:
        print("kept in %s (<case>.truth.json, .report.json, and .jsonl of the wrong cases up to 256 ranks; `score.py %s` re-scores)" % (work, work))
    if failed:
        return 2
    # with a bar to meet, a false alarm fails whatever the score (nobody may be paged for nothing)
    if a.max_ttd:
        slowest = score.detect_delay([(t, r) for t, r, _ in out], open(os.devnull, "w"))
        if slowest is None or slowest > a.max_ttd:
            print("time to detect over %d slowed iterations (slowest: %s)" % (a.max_ttd, slowest or "not detected"))
            return 1
    return 1 if pct < a.min_right or (a.min_right > 0 and fa) else 0


if __name__ == "__main__":
    sys.exit(main())
