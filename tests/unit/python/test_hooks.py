"""hooks/k8s-cordon and hooks/slurm-drain as culpritd runs them (JSON on standard input). The
Slurm hook runs against a real Slurm in tests/integration/actions; no Kubernetes cluster runs
here, so k8s-cordon's commands are checked against a stand-in kubectl that records its
arguments and answers the annotation it was given."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

HOOKS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "hooks")
KUBECTL = """#!/bin/sh
echo "$@" >> "$LOG"
case "$1" in get) cat "$ANN" 2>/dev/null ;; annotate) case "$5" in *-) rm -f "$ANN" ;; *=*) echo "${5#*=}" > "$ANN" ;; esac ;; esac
"""


def action(op, dry_run=False, kind="drain_node"):
    return json.dumps({"op": op, "dry_run": dry_run, "incident": "j/7/compute_degradation",
                       "category": "compute_degradation", "action": {"n": 0, "kind": kind, "target": "gpu-3"}})


class Hooks(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.env = dict(os.environ, LOG=os.path.join(self.dir, "log"), ANN=os.path.join(self.dir, "ann"),
                        KUBECTL=os.path.join(self.dir, "kubectl"), SCONTROL="/bin/false")
        with open(self.env["KUBECTL"], "w") as f:
            f.write(KUBECTL)
        os.chmod(self.env["KUBECTL"], 0o755)

    def run_hook(self, hook, text):
        p = subprocess.run([os.path.join(HOOKS, hook)], input=text, text=True, capture_output=True, env=self.env)
        return p.returncode, p.stdout

    def calls(self):
        try:
            return open(self.env["LOG"]).read().splitlines()
        except FileNotFoundError:
            return []

    def test_cordon_and_resume(self):
        self.assertEqual(self.run_hook("k8s-cordon", action("apply"))[0], 0)
        self.assertEqual(self.calls(), ["cordon gpu-3", "annotate --overwrite node gpu-3 culprit.dev/incident=j/7/compute_degradation"])
        self.assertEqual(self.run_hook("k8s-cordon", action("resume"))[0], 0)
        self.assertIn("uncordon gpu-3", self.calls())
        self.assertEqual(self.calls()[-1], "annotate node gpu-3 culprit.dev/incident-")

    def test_resume_leaves_another_cordon(self):
        with open(self.env["ANN"], "w") as f:
            f.write("someone-else\n")
        code, out = self.run_hook("k8s-cordon", action("resume"))
        self.assertEqual(code, 0)
        self.assertIn("left as it is", out)
        self.assertNotIn("uncordon gpu-3", self.calls())

    def test_dry_run_runs_nothing(self):
        for hook in ("k8s-cordon", "slurm-drain"):
            code, out = self.run_hook(hook, action("apply", dry_run=True))
            self.assertEqual(code, 0, out)
            self.assertIn("would run:", out)
        self.assertEqual(self.calls(), [])

    def test_failures(self):
        self.assertEqual(self.run_hook("slurm-drain", action("apply"))[0], 1)  # scontrol failed: retried
        self.assertEqual(self.run_hook("k8s-cordon", action("apply", kind="inspect_host"))[0], 3)
        self.assertEqual(self.run_hook("slurm-drain", "not json")[0], 2)


if __name__ == "__main__":
    sys.exit(unittest.main())
