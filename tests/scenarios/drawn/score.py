#!/usr/bin/env python3
"""score.py: judges `culprit diagnose` reports against the drawn suite's truth.

A case is RIGHT when all of these hold:
- category: the report's verdict.category is the expected one. Two faults at once: the
  expected pair must both be in the report (verdict plus findings[].category).
  Culprits that are exactly a whole pipeline stage (a node or a GPU that is the stage) may
  also be answered stage_imbalance of that stage.
- culprits (the suspects with role "culprit", in suspects[] and findings[].suspects[]):
  rank-level faults: the named culprit ranks are exactly the true ones (culprits_total
  counts the ones beyond the 32 listed); node-level faults (a slow node, a slow NIC, two
  faults, a host's loader): every true host is named, no culprit is on another host, and
  every named culprit rank is a faulty one (all the node's ranks for a node's fault, the
  one slow GPU for the compute half of two faults).
  stage_imbalance: verdict.stage is the true stage and no rank is named culprit.
  load_imbalance (messy.py: a hot expert, sequence lengths): the expert's ranks exactly, or no
  culprit when no rank is the same from step to step.
  none and standing costs: no culprit at all.
- messy.py's further checks: a slow node that is a whole stage (`ambiguous` truth) is either
  reading, and the verdict's finding names the other (`ambiguous`); a hidden straggler is an
  advisory on its rank with no culprit; an out-of-band event beside a fault it has nothing to
  do with is not judged `consistent`; a CPU job's actions say nothing of GPUs, and a job
  without host names has no action on an invented host.
- standing imbalance: no incident (category none, no culprit) AND an advisory
  (a non-empty advisories[]): nothing regressed, yet the report must say what it costs.
A healthy case answered anything but none, or with a culprit, is a false alarm.

`python3 score.py DIR` scores a kept directory (<case>.truth.json and <case>.report.json).
"""
import json
import os
import sys


def culprits(report):
    """(ranks, hosts, total) named as culprits anywhere in the report."""
    ranks, hosts = set(), set()
    lists = [report.get("suspects") or []]
    for f in report.get("findings") or []:
        lists.append(f.get("suspects") or [])
    for sl in lists:
        for s in sl:
            if s.get("role") == "culprit":
                ranks.add(s.get("rank"))
                hosts.add(s.get("host"))
    total = max(len(ranks), report.get("culprits_total") or 0)
    return ranks, hosts, total


def categories(report):
    cats = [(report.get("verdict") or {}).get("category")]
    for f in report.get("findings") or []:
        cats.append(f.get("category"))
    return cats


def healthy(truth):
    """A case where any culprit or any category but none is a false alarm (a page for nothing)."""
    return truth["kind"].startswith("healthy") or truth["kind"] in ("noisy_healthy", "hidden")


def whole_stage(truth):
    """The stage whose ranks are exactly the culprits of a compute fault (a node or a GPU
    that is a whole pipeline stage), else None: there stage_imbalance of it is right too."""
    if truth["category"] != "compute_degradation" or truth.get("also") or not truth["ranks"]:
        return None
    n = truth["tp"] * truth["dp"]  # ranks per stage: rank = tp + TP * (dp + DP * pp)
    s = truth["ranks"][0] // n
    return s if sorted(truth["ranks"]) == list(range(s * n, (s + 1) * n)) else None


def judge(truth, report):
    """(right, reason) for one case; report None when diagnose failed."""
    if report is None:
        return False, "diagnose failed"
    ok, why = judge_verdict(truth, report)
    if ok:
        ok, why = judge_messy(truth, report)
    return ok, why


def actions_text(report):
    out = []
    for f in report.get("findings") or []:
        for a in f.get("actions") or []:
            out.append("%s %s %s" % (a.get("target", ""), a.get("text", ""), a.get("command", "")))
    return "\n".join(out)


def judge_messy(truth, report):
    """The checks of messy.py's kinds beyond the verdict and the culprits."""
    if truth.get("ambiguous"):
        f = (report.get("findings") or [{}])[0]
        amb = f.get("ambiguous") or {}
        if amb.get("stage") != truth["stage"] or amb.get("host") not in truth["hosts"]:
            return False, "the node that is a whole stage is not said to be ambiguous: %s" % amb
    if truth.get("advisory_ranks"):
        adv = {a.get("rank") for a in report.get("advisories") or []}
        if not set(truth["advisory_ranks"]) <= adv:
            return False, "no advisory on rank %s (advisories on %s)" % (truth["advisory_ranks"], sorted(
                a for a in adv if a is not None))
    if truth.get("event_host"):
        for e in report.get("events") or []:
            if e.get("host") == truth["event_host"] and e.get("verdict") == "consistent":
                return False, "the unrelated %s event on %s judged consistent" % (e.get("kind"), e.get("host"))
    if truth.get("device") == "cpu":
        text = actions_text(report)
        if "gpu" in text.lower():
            return False, "a CPU job's action speaks of GPUs"
        if not truth.get("hosts_known"):
            for h in truth["hosts"]:
                if h in text:
                    return False, "an action on %s, a host never reported" % h
    return True, ""


def judge_verdict(truth, report):
    """(right, reason) of the verdict and its culprits"""
    want = truth["category"]
    said = (report.get("verdict") or {}).get("category")
    cats = categories(report)
    ranks, hosts, total = culprits(report)
    whole = whole_stage(truth)
    if truth.get("ambiguous") and said == "stage_imbalance":
        ok = report["verdict"].get("stage") == truth["stage"] and not ranks
        return ok, "" if ok else "stage %s, not the node's stage %s" % (report["verdict"].get("stage"), truth["stage"])
    if whole is not None and said == "stage_imbalance":
        ok = report["verdict"].get("stage") == whole and not ranks
        return ok, "" if ok else "stage %s, not the culprits' stage %s" % (report["verdict"].get("stage"), whole)
    if truth.get("also"):
        if said not in (want, truth["also"]) or truth["also"] not in cats or want not in cats:
            return False, "categories %s, want %s and %s" % (cats, want, truth["also"])
    elif said != want:
        return False, "category %s, want %s" % (said, want)
    if want == "none":
        if ranks:
            return False, "culprits named on a case with none: %s" % sorted(ranks)[:8]
        if truth.get("advisory") and not report.get("advisories"):
            return False, "no advisory for a standing cost"
        return True, ""
    if want == "load_imbalance" and not truth["ranks"]:
        if ranks:
            return False, "culprit ranks named on an imbalance of the data: %s" % sorted(ranks)[:8]
        return True, ""
    if want == "stage_imbalance":
        if report["verdict"].get("stage") != truth["stage"]:
            return False, "stage %s, want %s" % (report["verdict"].get("stage"), truth["stage"])
        if ranks:
            return False, "culprit ranks named on a stage imbalance: %s" % sorted(ranks)[:8]
        return True, ""
    if truth["match"] == "hosts":
        th = set(truth["hosts"])
        if hosts != th:
            return False, "culprit hosts %s, want %s" % (sorted(hosts)[:6], sorted(th))
        if not ranks <= set(truth["ranks"]):
            return False, "healthy ranks %s named culprits on a culprit host" % sorted(ranks - set(truth["ranks"]))[:8]
        return True, ""
    tr = set(truth["ranks"])
    if not ranks <= tr or total != len(tr) or (total <= 32 and ranks != tr):
        return False, "culprit ranks %s (%d), want %s" % (sorted(ranks)[:8], total, sorted(tr)[:8])
    return True, ""


def summarize(results, out=sys.stdout):
    """results: list of (truth, report or None). Prints the figures; returns % right."""
    n = len(results)
    judged = [(t, r, *judge(t, r)) for t, r in results]
    right = sum(1 for j in judged if j[2])
    p = print
    p("drawn suite: %d cases, %d right (%.1f%%)" % (n, right, 100.0 * right / max(1, n)), file=out)
    healthy_cases = [j for j in judged if healthy(j[0])]
    fa = [j for j in healthy_cases if j[1] is None or (j[1].get("verdict") or {}).get("category") != "none"
          or culprits(j[1])[0]]
    p("false alarms on healthy cases: %d of %d" % (len(fa), len(healthy_cases)), file=out)
    p("\nper drawn kind (right = category and culprits; culprit precision/recall pooled over its cases)",
      file=out)
    p("%-18s %-8s %5s %7s %9s %9s" % ("kind", "pattern", "n", "right", "c.prec", "c.recall"), file=out)
    kinds = sorted({j[0]["kind"] for j in judged})
    for k in kinds:
        js = [j for j in judged if j[0]["kind"] == k]
        tp = named = true = 0
        for t, r, _, _ in js:
            if r is None:
                true += len(t["ranks"])
                continue
            ranks = culprits(r)[0]
            if t.get("match") == "hosts":
                tr = {q for q in ranks if q is not None and _host_of(r, q) in set(t["hosts"])}
                hit = {_host_of(r, q) for q in tr}
                tp += len(hit)
                true += len(t["hosts"])
                named += len({_host_of(r, q) for q in ranks})
            else:
                tp += len(ranks & set(t["ranks"]))
                true += len(t["ranks"])
                named += len(ranks)
        prec = "%.1f%%" % (100.0 * tp / named) if named else "-"
        rec = "%.1f%%" % (100.0 * tp / true) if true else "-"
        p("%-18s %-8s %5d %6.1f%% %9s %9s" % (k, js[0][0]["patterns"], len(js),
                                              100.0 * sum(1 for j in js if j[2]) / len(js), prec, rec),
          file=out)
    p("\nper expected category (precision: of the cases the verdict says C, how many are right C;"
      " recall: of the cases that are C, how many are answered right)", file=out)
    p("%-26s %5s %6s %9s %9s" % ("category", "n", "said", "precision", "recall"), file=out)
    cats = ["compute_degradation", "communication_degradation", "host_delay", "stage_imbalance",
            "load_imbalance", "kernel_stall", "hang", "none"]
    for c in cats:
        exp = [j for j in judged if j[0]["category"] == c]
        said = [j for j in judged if j[1] is not None and (j[1].get("verdict") or {}).get("category") == c]
        good = sum(1 for j in said if j[2] and j[0]["category"] == c)
        rec = sum(1 for j in exp if j[2])
        p("%-26s %5d %6d %9s %9s" % (c, len(exp), len(said),
                                      "%.1f%%" % (100.0 * good / len(said)) if said else "-",
                                      "%.1f%%" % (100.0 * rec / len(exp)) if exp else "-"), file=out)
    detect_delay(results, out)
    lost_error(judged, out)
    wrong = [j for j in judged if not j[2]]
    p("\nwrong cases (%d):" % len(wrong), file=out)
    for t, r, _, why in wrong:
        said = "diagnose failed" if r is None else "%s: %s" % (
            (r.get("verdict") or {}).get("category"), (r.get("verdict") or {}).get("summary", "")[:150])
        want = t["category"] + ("+" + t["also"] if t.get("also") else "")
        who = ("stage %s" % t["stage"]) if "stage" in t else ",".join(t["hosts"]) if t["match"] == "hosts" \
            else ",".join(map(str, t["ranks"][:8]))
        p("  %s %-16s world %d tp%d pp%d dp%d ep%d f=%s: want %s %s; %s\n      said %s" % (
            t["case"], t["kind"], t["world"], t["tp"], t["pp"], t["dp"], t["ep"], t.get("factor", "-"),
            want, who, why, said), file=out)
    return 100.0 * right / max(1, n)


STEP_KINDS = ("compute_rank", "compute_node", "compute_small_dp", "comm_nic", "host_phase", "loader_stall",
              "bimodal_jump", "stage_regression", "two_faults")


def detect_delay(results, out):
    """Time to detect of step faults that raise the step 1.3x or more: the slowed iterations
    L1 saw up to the one at which the window opened (window.detected_iter - onset + 1).
    Returns the slowest such count (None when one was not detected; 0 when there were none)."""
    seen, late = [], []
    for t, r in results:
        if t["kind"] not in STEP_KINDS or t.get("onset") is None or t.get("step_rise", 0) < 1.3:
            continue
        w = (r or {}).get("window") or {}
        if w.get("detected_iter") is None:
            late.append((t["case"], None))
            continue
        n = w["detected_iter"] - t["onset"] + 1
        seen.append(n)
        if n > 3:
            late.append((t["case"], n))
    if not seen and not late:
        return 0
    seen.sort()
    print("\ntime to detect, step faults >= 1.3x: %d cases, median %s, max %s slowed iterations; "
          "over 3 or not detected: %d %s" % (len(seen) + sum(1 for _, n in late if n is None),
                                           seen[len(seen) // 2] if seen else "-", seen[-1] if seen else "-",
                                           len(late), " ".join("%s:%s" % x for x in late[:10])), file=out)
    return None if any(n is None for _, n in late) else seen[-1]


def lost_error(judged, out):
    """How the report's time lost per iteration compares with the true one (messy.py's
    lost_ms, the step simulated again without the fault), over the cases judged right."""
    rs = []
    for t, r, ok, _ in judged:
        if ok and t.get("lost_ms") and t["lost_ms"] > 0 and r and r.get("lost_ms_per_iter") is not None:
            rs.append(r["lost_ms_per_iter"] / t["lost_ms"])
    if not rs:
        return None
    rs.sort()
    within = sum(1 for x in rs if 0.8 <= x <= 1.2)
    print("\ntime lost per iteration against the truth (report / true, right cases with a loss): %d cases, "
          "median %.2f, quartiles %.2f-%.2f, within 20%%: %d (%.0f%%)" % (
              len(rs), rs[len(rs) // 2], rs[len(rs) // 4], rs[3 * len(rs) // 4], within, 100.0 * within / len(rs)),
          file=out)
    return within / len(rs)


def _host_of(report, rank):
    for sl in [report.get("suspects") or []] + [f.get("suspects") or [] for f in report.get("findings") or []]:
        for s in sl:
            if s.get("rank") == rank:
                return s.get("host")
    return None


def load_dir(d):
    results = []
    for name in sorted(os.listdir(d)):
        if not name.endswith(".truth.json"):
            continue
        case = name[: -len(".truth.json")]
        with open(os.path.join(d, name)) as f:
            truth = json.load(f)
        try:
            with open(os.path.join(d, case + ".report.json")) as f:
                report = json.load(f)
        except (OSError, ValueError):
            report = None
        results.append((truth, report))
    return results


def perfect_report(truth):
    """The report a right engine would write for this truth (for the scorer's self-check)."""
    sus = [{"rank": r, "host": h, "role": "culprit"} for r, h in zip(truth["ranks"], truth["rank_hosts"])]
    rep = {"verdict": {"category": truth["category"], "summary": "perfect"}, "suspects": sus,
           "culprits_total": len(sus)}
    if "stage" in truth and truth["category"] == "stage_imbalance":
        rep["verdict"]["stage"] = truth["stage"]
    if truth.get("also"):
        rep["findings"] = [{"category": truth["category"]}, {"category": truth["also"]}]
    if truth.get("advisory"):
        rep["advisories"] = [{"summary": "standing cost"}] + [{"summary": "slow", "rank": r}
                                                              for r in truth.get("advisory_ranks", [])]
    if truth.get("ambiguous"):
        rep["findings"] = [{"category": truth["category"],
                            "ambiguous": {"stage": truth["stage"], "host": truth["hosts"][0]}}]
    return rep


def self_check(truths):
    """judge() accepts the perfect report of every case and rejects spoiled ones; the
    number of failures (0 when the scorer is sound)."""
    bad = 0
    for t in truths:
        rep = perfect_report(t)
        ok, why = judge(t, rep)
        if not ok:
            print("self-check: %s perfect report judged wrong: %s" % (t["case"], why))
            bad += 1
        spoiled = json.loads(json.dumps(rep))
        spoiled["verdict"]["category"] = "hang" if t["category"] != "hang" else "none"
        if judge(t, spoiled)[0]:
            print("self-check: %s wrong category judged right" % t["case"])
            bad += 1
        spoiled = json.loads(json.dumps(rep))
        healthy = next(r for r in range(t["world"]) if r not in t["ranks"] and r not in t.get("advisory_ranks", []))
        spoiled["suspects"].append({"rank": healthy, "host": "not-a-culprit-host", "role": "culprit"})
        if judge(t, spoiled)[0]:
            print("self-check: %s a healthy rank named culprit judged right" % t["case"])
            bad += 1
        if t["ranks"] and t["match"] == "ranks":
            spoiled = json.loads(json.dumps(rep))
            spoiled["suspects"].pop()
            spoiled["culprits_total"] -= 1
            if judge(t, spoiled)[0]:
                print("self-check: %s a missed culprit judged right" % t["case"])
                bad += 1
    return bad


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--self-check":
        n = self_check([t for t, _ in load_dir(sys.argv[2])])
        print("self-check: %d failures" % n)
        sys.exit(1 if n else 0)
    if len(sys.argv) != 2:
        sys.exit("usage: score.py [--self-check] DIR")
    summarize(load_dir(sys.argv[1]))
