"""The GitHub Actions workflows (.github/workflows/release.yml, e2e-kind.yml),
which cannot run here: each must pass npm's @action-validator/cli (the
workflow schema; scripts/install-k8s-tools.sh installs it into
.tools/node_modules), and hold the steps the release and the cluster test
promise.

Run:  /usr/bin/python3 -m unittest discover -v -s tests/packaging -p test_workflows.py
"""

import os
import subprocess
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
VALIDATOR = os.path.join(ROOT, ".tools", "node_modules", ".bin", "action-validator")


@unittest.skipUnless(os.access(VALIDATOR, os.X_OK), "action-validator missing: run scripts/install-k8s-tools.sh")
class WorkflowsTest(unittest.TestCase):

    def test_workflows_validate(self):
        for name in ("release.yml", "e2e-kind.yml"):
            path = os.path.join(ROOT, ".github", "workflows", name)
            p = subprocess.run([VALIDATOR, path], capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, "%s:\n%s%s" % (name, p.stdout, p.stderr))

    def test_release_workflow_signs_and_pushes(self):
        with open(os.path.join(ROOT, ".github", "workflows", "release.yml")) as f:
            text = f.read()
        self.assertIn("id-token: write", text)
        self.assertIn("scripts/release.sh", text)
        self.assertIn("--push", text)
        self.assertIn("cosign sign", text)
        self.assertIn("cosign attest", text)

    def test_e2e_kind_matrix(self):
        with open(os.path.join(ROOT, ".github", "workflows", "e2e-kind.yml")) as f:
            text = f.read()
        self.assertIn("kindest/node:v1.27.", text)
        for step in ("helm test", "helm upgrade", "helm uninstall", "webhookconfigurations"):
            self.assertIn(step, text)


if __name__ == "__main__":
    unittest.main()
