#!/usr/bin/env python3
"""console_check.py URL PHASE OUTDIR [ARG]: the web console in a real headless Chromium (cdp.py)
against the culpritd that test_console started at URL. Exits 0 when every check of the phase
holds, 1 with the failed check, 77 without Chromium.

  live XSS      the console's files are under 300 KB and name no other origin; the jobs page lists the jobs; sim-case5's page shows node-1294's ranks as
                culprits with the drain action, the port_down event contradicted, a heat map
                whose culprit rows differ from the rest (and say so on hover); the fleet page
                ranks node-64 first; the job, host, phase and event named XSS are text
                everywhere; nothing reaches the browser's console; screenshots of the three
                pages in OUTDIR (and in $CULPRIT_CONSOLE_SCREENSHOTS when set); the first render
                of sim-case5's page is printed
  restarted     after culpritd's restart: sim-case5 is listed (ended) and its page shows its
                report and a heat map read from PostgreSQL
  tokens TOKEN  REST tokens on: the pages show a token form and no data until TOKEN is given"""
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cdp import Browser, chromium_path  # noqa: E402

URL, PHASE, OUT = sys.argv[1], sys.argv[2], sys.argv[3]
ARG = sys.argv[4] if len(sys.argv) > 4 else None
CASE5 = "sim-case5"


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def js(s):
    return json.dumps(s)


def page(b, route, rendered):
    b.goto(URL + "#" + route)
    b.wait(f"document.body.dataset.rendered === {js(rendered)} && location.hash === {js('#' + route)}")


def shot(b, name):
    path = os.path.join(OUT, name)
    b.screenshot(path)
    dest = os.environ.get("CULPRIT_CONSOLE_SCREENSHOTS")
    if dest:
        os.makedirs(dest, exist_ok=True)
        shutil.copy(path, os.path.join(dest, name))
    print(f"screenshot {path}")


def job_route(name):
    return "/jobs/" + __import__("urllib.parse").parse.quote(name, safe="")


def heatmap_rows(b):
    """Colours of the heat map's pixel rows at a culprit row and at the rows of the other
    groups, in an iteration of the anomalous window (read back from the canvas)."""
    return b.eval("""(() => {
      document.getElementById('heatmap').scrollIntoView({block: 'center'});
      const c = document.getElementById('heatmap'), v = c.view, d = v.data, m = d.meta, g = c.getContext('2d');
      const w = c.width - 150, h = c.height - 18, it = m.n_iters - 1;
      const x = Math.floor(150 + (it - v.view.i0 + 0.5) * (w / (v.view.i1 - v.view.i0)));
      const y = (r) => Math.floor(18 + ((r + 0.5 - v.view.r0) / (v.view.r1 - v.view.r0)) * h);
      const px = (r) => Array.from(g.getImageData(x, y(r), 1, 1).data.slice(0, 3));
      let culprit = -1;
      for (let r = 0; r < m.rows; r++) if (d.rowCulprit(r)) { culprit = r; break; }
      const others = [];
      for (let k = 0; k < 20; k++) { const r = Math.floor((k + 0.5) * m.rows / 20); if (!d.rowCulprit(r) && Math.abs(y(r) - y(culprit)) > 3) others.push(px(r)); }
      // where to hover: the middle of a pixel row that shows a culprit row, in client coordinates
      const py = Array.from(v.pixelRows).findIndex((r) => d.rowCulprit(r)), rect = c.getBoundingClientRect();
      // (mouse events carry whole CSS pixels: the first whole one inside that pixel row)
      const hy = Math.ceil(rect.top + (18 + py * h / v.pixelRows.length) * rect.height / c.height + 0.01);
      return {culprit: culprit >= 0 ? px(culprit) : null, rank: culprit >= 0 ? d.rowRank[culprit] : null,
              others, rows: m.rows, aggregated: m.aggregated, source: m.source, metric: m.metric,
              hx: rect.left + x * rect.width / c.width, hy};
    })()""")


def check_heatmap(b, expect_source):
    b.wait("document.body.dataset.heatmap === 'drawn'")
    h = heatmap_rows(b)
    print(f"heat map: {h['rows']} rows, metric {h['metric']}, from {h['source']}, culprit row rank {h['rank']} "
          f"pixel {h['culprit']}, other rows {h['others'][:4]}")
    check(h["source"] == expect_source, f"the heat map comes from {expect_source}")
    check(h["culprit"] is not None and 10352 <= h["rank"] <= 10359, "a culprit row of node-1294 is in the heat map")
    red = h["culprit"]
    check(red[0] > 150 and red[1] < 120 and red[2] < 120, "the culprit row is drawn hot (red)")
    check(len(h["others"]) >= 10 and all(abs(o[0] - o[1]) < 40 and o[1] > 150 for o in h["others"]),
          "the other rows are drawn near their role group's median (grey)")
    # hover: the tooltip tells the culprit's numbers
    b.mouse("mouseMoved", h["hx"], h["hy"])
    b.wait("!document.getElementById('heatmap-tip').hidden")
    tip = b.eval("document.getElementById('heatmap-tip').textContent")
    print(f"hover: {tip}")
    check("node-1294" in tip and "culprit" in tip and "×" in tip, "hovering the culprit's cell tells its rank, host and ratio")
    # zoom: a rectangle dragged around the culprit's rows
    x0, x1, y0, y1 = h["hx"] - 200, h["hx"] - 5, h["hy"] - 20, h["hy"] + 20
    b.mouse("mousePressed", x0, y0)
    b.mouse("mouseMoved", x1, y1)
    b.mouse("mouseReleased", x1, y1)
    b.wait("!document.getElementById('heatmap-reset').hidden")
    shown = b.eval("(() => { const v = document.getElementById('heatmap').view; return [v.view.r1 - v.view.r0, v.data.meta.rows]; })()")
    print(f"zoomed: {shown[0]} of {shown[1]} rows shown")
    check(shown[0] < shown[1] / 4 and heatmap_rows(b)["culprit"] is not None, "dragging zooms into the culprit's rows")
    b.eval("document.getElementById('heatmap-reset').click()")
    b.wait("document.getElementById('heatmap-reset').hidden")
    check(b.eval("(() => { const v = document.getElementById('heatmap').view; return v.view.r1 - v.view.r0 === v.data.meta.rows; })()"),
          "Reset zoom shows every row again")
    b.mouse("mouseMoved", 1, 1)  # off the canvas: no tooltip left in the screenshot
    b.wait("document.getElementById('heatmap-tip').hidden")


def console_files():
    """The console's files (console/): under 300 KB in all, and none names another origin."""
    d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "console")
    files = sorted(os.listdir(d))
    size = sum(os.path.getsize(os.path.join(d, f)) for f in files)
    print(f"console: {len(files)} files, {size} bytes")
    check(size < 300 * 1024, "the whole console is under 300 KB")
    for f in files:
        text = open(os.path.join(d, f), encoding="utf-8").read()
        check("http://" not in text and "https://" not in text and "//cdn" not in text,
              f"console/{f} names no other origin")


def live():
    xss = ARG
    console_files()
    with Browser() as b:
        page(b, "/jobs", "jobs")
        names = b.eval("Array.from(document.querySelectorAll('#jobs tbody tr')).map((r) => r.dataset.job)")
        print(f"jobs page: {names}")
        for j in (CASE5, "fleet-a", "fleet-b", xss):
            check(j in names, f"the jobs page lists {j!r}")
        shot(b, "console-jobs.png")

        t0 = time.monotonic()
        page(b, job_route(CASE5), "job")
        culprits = b.eval("document.getElementById('culprits').textContent")
        print(f"culprits: {culprits}")
        check("node-1294" in culprits and all(str(r) in culprits for r in range(10352, 10360)),
              "sim-case5's page names node-1294's ranks 10352-10359 as culprits")
        drain = b.eval("Array.from(document.querySelectorAll('#findings li.action')).map((l) => [l.dataset.kind, l.textContent])")
        check(any(k == "drain_node" and "drain node-1294" in t for k, t in drain), "its finding's action drains node-1294")
        ev = b.eval("Array.from(document.querySelectorAll('#events tbody tr')).map((r) => r.textContent + '|' + r.dataset.verdict)")
        print(f"events: {ev}")
        check(any("node-1294" in e and "port_down" in e and e.endswith("|contradicted") for e in ev),
              "the port_down event on node-1294 is shown contradicted")
        check(b.eval("!!document.querySelector('#findings li.avoid')"), "the wrong fix ruled out is shown (Not this)")
        check_heatmap(b, "memory")
        print(f"job page rendered in {time.monotonic() - t0:.2f} s (navigation to report and heat map drawn)")
        check(b.eval("document.querySelectorAll('#node-grid .tile.culprit').length") >= 1, "the node grid marks the culprit host")
        check(b.eval("document.querySelectorAll('#incidents .bar').length") >= 1, "the incidents are on the timeline")
        shot(b, "console-job.png")

        page(b, "/fleet", "fleet")
        hosts = b.eval("Array.from(document.querySelectorAll('#fleet-hosts tbody tr')).map((r) => r.dataset.host)")
        print(f"fleet: {hosts}")
        check(hosts[:1] == ["node-64"], "the fleet page ranks node-64 (culprit of fleet-a and fleet-b) first")
        check("node-1294" in hosts, "node-1294 (culprit of sim-case5) is on the fleet page")
        shot(b, "console-fleet.png")

        # client-chosen names are text: nothing is injected, no script runs
        page(b, "/jobs", "jobs")
        check(b.eval(f"Array.from(document.querySelectorAll('#jobs a')).some((a) => a.textContent === {js(xss)})"),
              "the job named like markup is listed as text")
        page(b, job_route(xss), "job")
        b.wait("document.body.dataset.heatmap === 'drawn'")
        check(b.eval("document.getElementById('job-name').textContent") == xss, "its page's title is the name as text")
        check(b.eval(f"Array.from(document.querySelectorAll('#heat-metric option')).some((o) => o.textContent === {js(xss)})"),
              "the phase named like markup is a metric, as text")
        check(b.eval(f"Array.from(document.querySelectorAll('#node-grid .tile')).some((t) => t.dataset.host === {js(xss)})"),
              "the host named like markup is a tile of the node grid")
        check(b.eval(f"Array.from(document.querySelectorAll('#events td')).filter((t) => t.textContent === {js(xss)}).length") >= 1,
              "the event named like markup is listed as text")
        page(b, "/fleet?days=30", "fleet")
        b.pump(0.5)
        check(b.eval("document.images.length") == 0, "no element was injected (no <img> in the pages)")
        check(not b.dialogs, f"no script ran (dialogs: {b.dialogs})")
        check(not b.errors, f"nothing in the browser's console (errors: {b.errors})")

    with Browser() as b:  # a first visit: cold cache
        t = time.monotonic()
        page(b, job_route(CASE5), "job")
        b.wait("document.body.dataset.heatmap === 'drawn'")
        mark = b.eval("performance.getEntriesByName('culprit-job-rendered')[0].startTime")
        print(f"first render of sim-case5's page: {mark:.0f} ms after navigation ({time.monotonic() - t:.2f} s seen here)")


def restarted():
    with Browser() as b:
        page(b, "/jobs", "jobs")
        rows = b.eval("Object.fromEntries(Array.from(document.querySelectorAll('#jobs tbody tr')).map((r) => [r.dataset.job, r.textContent]))")
        check(CASE5 in rows and "ended" in rows[CASE5], "after the restart sim-case5 is listed, ended")
        page(b, job_route(CASE5), "job")
        check("node-1294" in b.eval("document.getElementById('culprits').textContent"), "its page still shows the report's culprits")
        check_heatmap(b, "database")
        check(not b.errors and not b.dialogs, f"nothing in the browser's console (errors: {b.errors})")


def tokens():
    with Browser() as b:
        for route in ("/jobs", job_route(CASE5), "/fleet"):
            b.goto(URL + "#" + route)
            b.wait("!document.getElementById('token-form').hidden")
            b.pump(0.3)
            text = b.eval("document.body.innerText")
            check(CASE5 not in text and "node-1294" not in text and b.eval("document.getElementById('main').children.length") == 0,
                  f"#{route} without a token: the token form, no data")
        b.eval(f"document.getElementById('token').value = {js(ARG)}; document.getElementById('token-form').requestSubmit()")
        b.wait("document.body.dataset.rendered === 'fleet'")
        page(b, "/jobs", "jobs")
        check(CASE5 in b.eval("document.getElementById('jobs').textContent"), "with the token the jobs are listed")
        unexpected = [e for e in b.errors if "401" not in e]
        check(not unexpected, f"nothing in the browser's console but the 401 answers (errors: {b.errors})")


if not chromium_path():
    print("no chromium: skipped", file=sys.stderr)
    sys.exit(77)
{"live": live, "restarted": restarted, "tokens": tokens}[PHASE]()
