"""`isolation-gate explain KIND/NAME`, the kubectl plugin's command, against the repository's test API server
(tests/apiserver/fake_apiserver.py): the decision for a live pod or Deployment from the live Component, RuntimeClass
and Nodes, each input and where it came from, node by node why the sandbox can or cannot run, what to do; through
`kubectl isolation-gate` too when kubectl is installed. Every wait is bounded by the server's start and the
process timeouts; nothing is timed."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "apiserver"))
import fake_apiserver  # noqa: E402

from test_cluster import KUBECONFIG, RC, component, node, runtime_class  # noqa: E402

# The test API server serves no Deployments; this process registers them (the server's table is data).
if not any(r.plural == "deployments" for r in fake_apiserver.RESOURCES):
    fake_apiserver.RESOURCES.append(fake_apiserver.Resource("apps", "v1", "deployments", "Deployment", True, True, ()))

EXIT_ADMITTED, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2


class Explain(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-explain-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        certs = h.make_certs(os.path.join(self.tmp, "api"))
        token = os.path.join(self.tmp, "token")
        with open(token, "w") as f:
            f.write("token-one\n")
        self.api = fake_apiserver.FakeApiServer(certs["tls.crt"], certs["tls.key"], token_file=token).start()
        self.addCleanup(self.api.stop)
        self.api.create("runtimeclasses", runtime_class())
        self.api.create("nodes", node("node-1"))
        for name, trust in (("report-parser", "untrusted"), ("docs-indexer", "trusted")):
            self.api.create("components", component(name, trust))
        pod = h.example_pod("report-parser-pod.yaml")
        self.pod_name = pod["metadata"]["name"]
        self.api.create("pods", pod, namespace="team-a")
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            # The context's namespace is team-a: explain's default namespace.
            f.write((KUBECONFIG % {"server": self.api.url, "ca": certs["ca.crt"], "token": token})
                    .replace("namespace: isolation-gate-system", "namespace: team-a"))

    def explain(self, *args, shape=None):
        return h.run_binary(["explain"] + list(args) + ["--kubeconfig", self.kubeconfig],
                            env={h.SHAPE_ENV: shape}, timeout=60)

    def explain_json(self, *args, want_exit, shape=None):
        proc = self.explain(*args, "-o", "json", shape=shape)
        self.assertEqual(proc.returncode, want_exit, proc.stdout + proc.stderr)
        return json.loads(proc.stdout)

    def test_a_pod_with_the_sandbox_available_is_require_setec_with_its_inputs_and_sources(self):
        out = self.explain_json("pod/" + self.pod_name, want_exit=EXIT_ADMITTED)
        self.assertEqual(out["decision"], "RequireSetec")
        self.assertEqual(out["object"]["namespace"], "team-a")
        self.assertEqual(out["object"]["source"], "/api/v1/namespaces/team-a/pods/" + self.pod_name)
        self.assertEqual(out["component"]["name"], "report-parser")
        self.assertTrue(out["component"]["found"])
        self.assertEqual(out["component"]["contentTrust"]["effective"], "untrusted")
        self.assertEqual(out["sandbox"]["state"], "available")
        self.assertEqual(out["sandbox"]["runtimeClass"]["name"], RC)
        self.assertEqual(out["sandbox"]["nodes"], [{"name": "node-1", "canRun": True, "problems": [], "fixes": []}])
        text = self.explain("pod/" + self.pod_name).stdout.decode()
        self.assertIn("decision:  RequireSetec (admitted)", text)
        self.assertIn("node-1: can run it", text)
        self.assertIn("GET /apis/gibson.zeroroot.ai/v1alpha1/namespaces/team-a/components/report-parser", text)

    def test_which_node_failed_which_check_and_what_to_do(self):
        self.api.put("nodes", node("node-1", ready=False))
        self.api.create("nodes", node("node-2", unschedulable=True))
        self.api.create("nodes", node("node-3", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]))
        out = self.explain_json("po/" + self.pod_name, want_exit=EXIT_DENIED)
        self.assertEqual((out["decision"], out["reason"]), ("Deny", "SandboxUnavailable"))
        self.assertEqual(out["sandbox"]["state"], "unavailable")
        problems = {n["name"]: n["problems"] for n in out["sandbox"]["nodes"]}
        self.assertEqual(problems["node-1"], ["not Ready"])
        self.assertEqual(problems["node-2"], ["cordoned (spec.unschedulable)"])
        self.assertEqual(problems["node-3"], ["taint gpu=yes:NoSchedule is not tolerated by the RuntimeClass"])
        self.assertIn("kubectl uncordon node-2", out["todo"])
        self.assertIn("kubectl taint node node-3 gpu=yes:NoSchedule- (or add a toleration to the RuntimeClass)",
                      out["todo"])
        # The same pod in the customer-isolation shape is admitted in-process.
        out = self.explain_json("pod/" + self.pod_name, "--shape", "customer-isolation", want_exit=EXIT_ADMITTED)
        self.assertEqual(out["decision"], "AllowInProcess")
        self.assertEqual(out["shape"]["source"], "--shape")

    def test_a_missing_or_unlabelled_runtime_class(self):
        self.api.put("runtimeclasses", runtime_class(labelled=False))
        out = self.explain_json("pod/" + self.pod_name, want_exit=EXIT_DENIED)
        self.assertIn("has no label setec.zeroroot.ai/runtime", out["sandbox"]["reason"])
        self.assertTrue(out["todo"][0].startswith('label RuntimeClass "kata-fc" setec.zeroroot.ai/runtime'), out["todo"])
        self.api.delete("runtimeclasses", RC)
        out = self.explain_json("pod/" + self.pod_name, want_exit=EXIT_DENIED)
        self.assertFalse(out["sandbox"]["runtimeClass"]["found"])
        self.assertIn('install setec\'s RuntimeClass "kata-fc" (or pass --runtime-class)', out["todo"])

    def test_a_deployment_in_another_namespace_and_an_unknown_component(self):
        d = h.make_workload("Deployment", name="web", component="not-declared", namespace="team-b")
        self.api.create("deployments", d, namespace="team-b")
        out = self.explain_json("deployment/web", "-n", "team-b", want_exit=EXIT_DENIED)
        self.assertEqual(out["object"]["kind"], "Deployment")
        self.assertEqual(out["reason"], "UnknownComponent")
        self.assertFalse(out["component"]["found"])
        self.assertEqual(out["todo"], [out["message"]])

    def test_bad_targets_and_missing_objects_exit_2(self):
        for target, fragment in (("pod", "KIND/NAME"), ("service/x", "KIND/NAME"),
                                 ("pod/absent", "404")):
            with self.subTest(target=target):
                proc = self.explain(target)
                self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stdout)
                self.assertIn(fragment, proc.stderr.decode())

    def test_through_kubectl_as_a_plugin(self):
        kubectl = shutil.which("kubectl") or os.path.join(h.SOURCE_DIR, ".tools", "bin", "kubectl")
        if not os.access(kubectl, os.X_OK):
            self.skipTest("kubectl not installed")
        bindir = os.path.join(self.tmp, "bin")
        os.makedirs(bindir)
        os.symlink(h.BINARY, os.path.join(bindir, "kubectl-isolation_gate"))
        env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), KUBECONFIG=self.kubeconfig)
        proc = subprocess.run([kubectl, "isolation-gate", "explain", "pod/" + self.pod_name, "-o", "json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=60)
        self.assertEqual(proc.returncode, EXIT_ADMITTED, proc.stderr)
        self.assertEqual(json.loads(proc.stdout)["decision"], "RequireSetec")


if __name__ == "__main__":
    unittest.main()
