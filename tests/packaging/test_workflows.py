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

import yaml

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


class E2eKindSteps(unittest.TestCase):
    """What e2e-kind.yml runs, in order (no validator needed)."""

    def test_e2e_kind_runs_the_cluster_suite_before_and_after_the_upgrade(self):
        with open(os.path.join(ROOT, ".github", "workflows", "e2e-kind.yml")) as f:
            steps = yaml.safe_load(f)["jobs"]["kind"]["steps"]
        runs = [s.get("run", "") for s in steps]

        def where(*needles):
            found = [i for i, r in enumerate(runs) if all(n in r for n in needles)]
            self.assertTrue(found, "no step runs %s" % (needles,))
            return found

        # tests/e2e/cluster_suite.py (the suite test_cluster_suite_local.py runs here) with Ubuntu's packages,
        # kind's kubeconfig and the release's namespace.
        self.assertTrue(os.path.exists(os.path.join(ROOT, "tests", "e2e", "cluster_suite.py")))
        suites = where("/usr/bin/python3 -m unittest", "cluster_suite")
        self.assertEqual(len(suites), 2, suites)
        for i in suites:
            self.assertEqual(steps[i].get("working-directory"), "tests/e2e")
            self.assertEqual(steps[i].get("env", {}).get("IG_RELEASE_NAMESPACE"), "${{ env.NS }}")
        (apt,) = where("apt-get install", "python3-kubernetes", "python3-yaml", "python3-jsonpatch")
        (kubeconfig,) = where("kind get kubeconfig", "KUBECONFIG=", "GITHUB_ENV")
        (plugin,) = where("kubectl-isolation_gate", "GITHUB_PATH", "kubectl isolation-gate version")
        (previous,) = where("helm install", "tests/e2e/fixtures/chart-previous/isolation-gate", "--wait")
        (upgrade,) = where("helm upgrade", "charts/isolation-gate", "--wait")
        (helm_test,) = where("helm test")
        (uninstall,) = where("helm uninstall")
        order = [apt, kubeconfig, plugin, previous, suites[0], upgrade, suites[1], helm_test, uninstall]
        self.assertEqual(order, sorted(order), "packages, kubeconfig, the plugin, install previous, suite, upgrade, "
                         "suite, helm test, uninstall: steps %s" % order)
        # After uninstall: no webhook configuration with the chart's labels (or name), the CRD kept
        # (docs/operations.md, "Uninstalling").
        for needle in ("validatingwebhookconfigurations,mutatingwebhookconfigurations",
                       "-l app.kubernetes.io/name=isolation-gate", "crd components.gibson.zeroroot.ai",
                       "resource-policy", "keep"):
            self.assertIn(needle, runs[uninstall])


if __name__ == "__main__":
    unittest.main()
