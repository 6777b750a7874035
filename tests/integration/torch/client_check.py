"""The Python client (culprit_agent.client) against the culpritd of test_python_client, while
`culprit sim --scenario compute_straggler` streams into it (rank 517 on node-64 slow from
iteration 10; its agents stay connected a while after the last iteration).
    client_check.py URL WRITE_TOKEN JOB"""
import sys

from culprit_agent.client import Client, ClientError

url, token, job = sys.argv[1:4]
c = Client(url, token=token)

# the job's verdict: the first compute_degradation report, naming rank 517
rep = c.wait_verdict(job, timeout_s=240, poll_s=0.5, after=0, category="compute_degradation")
culprits = [s["rank"] for s in rep["suspects"] if s["role"] == "culprit"]
assert 517 in culprits, culprits
print(f"verdict: report {rep['id']}: {rep['verdict']['category']}, culprits {culprits}")

assert job in [j["job"] for j in c.jobs()]
assert c.job(job)["topology"]["world"] == 1024
inc = c.incidents(job)
assert inc["current"] or inc["incidents"], inc
reports = list(c.all_reports(job, page=2))
assert len(reports) >= 1 and reports == sorted(reports, key=lambda r: -r["id"])
assert c.report(rep["id"])["id"] == rep["id"]
assert c.latest_report(job)["verdict"]["category"]
assert c.latest_report("no-such-job") is None

# a capture of rank 517 while its agent is connected
cap = c.capture(job, ranks=[517], iterations=1)
assert [a["agent"] for a in cap["agents"]] == ["node-64"] and cap["unserved"] == [], cap
print(f"capture {cap['capture']}: {cap['trace']}")

# errors carry culpritd's status and detail
try:
    c.report(999999999)
    raise AssertionError("report 999999999 exists")
except ClientError as e:
    assert e.status == 404, e
try:
    Client(url, token="wrong").capture(job, ranks=[517])
    raise AssertionError("a wrong token was let in")
except ClientError as e:
    assert e.status == 401 and e.error == "unauthorized", e
try:
    c.approve(inc["current"]["key"] if inc["current"] else "x/1/y", 0)
    raise AssertionError("the write token approved an action")
except ClientError as e:
    assert e.status == 403, e
print("client: jobs, job, incidents, reports (paged), report, latest, wait_verdict, capture, errors: ok")
