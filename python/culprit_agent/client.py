"""Client: culpritd's REST API from Python (docs/api.md), with the standard library only.

    from culprit_agent.client import Client
    c = Client("http://culprit:7434", token=read_token)
    for j in c.jobs(): print(j["job"], j["incident"])
    rep = c.wait_verdict("llm-70b", timeout_s=600)       # the job's next report
    print(rep["verdict"]["category"], [s["rank"] for s in rep["suspects"] if s["role"] == "culprit"])
    c.capture("llm-70b", ranks=[10352], iterations=3)

Every call raises ClientError (with the HTTP status and culpritd's error and detail) on an
answer that is not 2xx, and OSError when culpritd cannot be reached. token defaults to
$CULPRIT_API_TOKEN; an https:// url is verified against the system's CAs, or ca (a PEM file).
"""
import json
import os
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request


class ClientError(Exception):
    """A non-2xx answer: status, error and detail as culpritd sent them."""

    def __init__(self, status, error, detail):
        super().__init__(f"{status} {error}: {detail}")
        self.status, self.error, self.detail = status, error, detail


def _seg(s):
    """One path segment: everything percent-encoded but unreserved characters (a "/" too)."""
    return urllib.parse.quote(str(s), safe="")


class Client:
    def __init__(self, url=None, token=None, timeout_s=10.0, ca=None):
        self.url = (url or os.environ.get("CULPRIT_API", "http://127.0.0.1:7434")).rstrip("/")
        self.token = token if token is not None else os.environ.get("CULPRIT_API_TOKEN")
        self.timeout_s = timeout_s
        self._ctx = ssl.create_default_context(cafile=ca) if self.url.startswith("https://") else None

    def _call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=self._ctx) as r:
                return json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            try:
                err = json.loads(e.read())
            except ValueError:
                err = {}
            raise ClientError(e.code, err.get("error", e.reason), err.get("detail", "")) from None

    # --- reading ---------------------------------------------------------------------------
    def jobs(self):
        """The jobs this culpritd holds (GET /api/v1/jobs): a list of dicts."""
        return self._call("GET", "/api/v1/jobs")["jobs"]

    def job(self, job):
        return self._call("GET", f"/api/v1/jobs/{_seg(job)}")

    def incidents(self, job, limit=100):
        """The job's stored incidents, newest first (and the open one in memory as "current")."""
        return self._call("GET", f"/api/v1/jobs/{_seg(job)}/incidents?limit={int(limit)}")

    def reports(self, job, limit=20, before=None):
        """One page of the job's stored reports, newest first: {"reports": [...], "next_before"}."""
        q = f"?limit={int(limit)}" + (f"&before={int(before)}" if before is not None else "")
        return self._call("GET", f"/api/v1/jobs/{_seg(job)}/reports{q}")

    def all_reports(self, job, page=100):
        """Every stored report of the job, newest first (follows next_before)."""
        before = None
        while True:
            p = self.reports(job, limit=page, before=before)
            yield from p["reports"]
            before = p.get("next_before")
            if before is None:
                return

    def latest_report(self, job):
        """The job's latest report (the report JSON, docs/report.md), or None before the first."""
        try:
            return self._call("GET", f"/api/v1/jobs/{_seg(job)}/reports/latest")
        except ClientError as e:
            if e.status == 404:
                return None
            raise

    def report(self, report_id):
        return self._call("GET", f"/api/v1/reports/{int(report_id)}")

    def wait_verdict(self, job, timeout_s=600.0, poll_s=1.0, after=None, category=None):
        """Waits for a report of the job newer than after (a report id; default: the newest
        stored when the call starts) and, with category, of that category. Returns the stored
        report (its JSON with "id"); raises TimeoutError after timeout_s."""
        if after is None:
            newest = self.reports(job, limit=1)["reports"]
            after = newest[0]["id"] if newest else 0
        deadline = time.monotonic() + timeout_s
        while True:
            for r in self.reports(job, limit=100)["reports"]:
                if r["id"] > after and (category is None or r["category"] == category):
                    return dict(r["report"], id=r["id"])
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no {category or 'new'} report of job {job!r} within {timeout_s:g} s")
            time.sleep(poll_s)

    def actions(self, incident_key):
        """What culpritd did or waits to do about an open incident's actions."""
        return self._call("GET", f"/api/v1/incidents/{_seg(incident_key)}/actions")

    # --- writing ---------------------------------------------------------------------------
    def capture(self, job, ranks, iterations=3, max_events=None):
        """Asks the agents serving ranks (a list, or "a-b,c") for raw kernel events of the next
        iterations (POST /api/v1/jobs/{job}/capture): the 202 answer, with the trace's URL."""
        body = {"ranks": ranks, "iterations": int(iterations)}
        if max_events is not None:
            body["max_events"] = int(max_events)
        return self._call("POST", f"/api/v1/jobs/{_seg(job)}/capture", body)

    def diagnose(self, job):
        """Runs a diagnosis of the job now (its result is the next report)."""
        return self._call("POST", f"/api/v1/jobs/{_seg(job)}/diagnose", {})

    def approve(self, incident_key, n):
        """Approves action n of the incident (needs an operator's token)."""
        return self._call("POST", f"/api/v1/incidents/{_seg(incident_key)}/actions/{int(n)}/approve", {})
