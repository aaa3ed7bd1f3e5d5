"""The install path end to end, against the repository's test API server
acting as the API server does for admission (it calls the webhooks of its
stored webhook configurations, verifying TLS against their caBundle):

- the chart's own objects (manifests/isolation-gate.yaml, rendered from the
  chart's defaults: the webhook template ConfigMap, the empty TLS Secret and
  the Deployment's args) run as they are;
- never a dead fail-closed webhook: no webhook configuration exists until a
  replica can answer; from then on an unlabelled pod in an enforced
  namespace is refused by the API server with the gate's message, and a pod
  of a trusted Component is admitted with the gate's decision;
- `isolation-gate selftest` (helm test) passes against a working install and
  fails, naming why, against a broken one (replica gone: webhook calls fail;
  configurations gone: nothing enforced); run as the chart's helm test runs it
  (--scratch-namespace, the chart's enforced namespace, its own token) every
  request it makes is granted by the chart's selftest Role in that namespace
  alone, and a second run reuses the Component the first one made;
- `isolation-gate cleanup` (the pre-delete hook) leaves nothing behind.

Every wait is bounded; nothing asserts how long something took.
"""

import json
import os
import unittest

import yaml

import harness as h
import test_cluster as tc

NS = "team-a"
GATE_NS = "isolation-gate-system"
SERVICE = "isolation-gate"
SCRATCH_NS = GATE_NS + "-selftest"  # the chart's selftest.namespace default
SELFTEST_SA = "isolation-gate-selftest"


def chart_objects():
    with open(os.path.join(h.SOURCE_DIR, "manifests", "isolation-gate.yaml")) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def chart_serve_args(docs):
    """The Deployment's container args after `serve`, without the listen
    addresses (the harness binds 127.0.0.1:0) and the drain delay (the harness
    stops servers at once)."""
    deployment = [d for d in docs if d["kind"] == "Deployment"][0]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "serve", args
    return [a for a in args[1:] if not a.startswith(("--listen=", "--metrics-listen=", "--drain-delay="))]


class InstallCase(tc.ClusterCase):
    """The chart's objects in a fresh test API server, team-a enforced; the
    gate is started from the chart's args by start_gate_from_chart()."""

    start_gate = False

    def setUp(self):
        super().setUp()
        docs = chart_objects()
        self.args = chart_serve_args(docs)
        for d in docs:
            if (d["kind"], d["metadata"]["name"]) in (("ConfigMap", "isolation-gate-webhooks"),
                                                      ("Secret", "isolation-gate-tls")):
                self.api.create(d["kind"].lower() + "s", d, namespace=GATE_NS)
        ns = self.api.get("namespaces", NS) or self.api.create("namespaces", {"metadata": {"name": NS}})
        ns.setdefault("metadata", {}).setdefault("labels", {})["gibson.zeroroot.ai/isolation"] = "enforced"
        self.api.update("namespaces", ns)
        self.kube = self._client()

    def _client(self, token=None):
        """python3-kubernetes' CoreV1Api, with the gate's token or `token`."""
        import kubernetes
        c = kubernetes.client.Configuration()
        c.host = self.api.url
        c.ssl_ca_cert = self.api_ca
        if token is None:
            with open(self.token_file) as f:
                token = f.read().strip()
        c.api_key = {"authorization": "Bearer " + token}
        client = kubernetes.client.ApiClient(c)
        self.addCleanup(client.close)
        return kubernetes.client.CoreV1Api(client)

    @staticmethod
    def api_call(fn, *args):
        """(200, "") when fn(*args) succeeds, else (HTTP status, the API's message)."""
        import kubernetes
        try:
            fn(*args)
            return 200, ""
        except kubernetes.client.ApiException as e:
            try:
                return e.status, json.loads(e.body).get("message", e.body)
            except ValueError:
                return e.status, e.body

    def start_gate_from_chart(self):
        g = h.GateServer(kubeconfig=self.kubeconfig, tls="self-managed", wait_ready=False,
                         extra_args=self.args, env={"POD_NAME": "isolation-gate-0"})
        g.start()
        self.addCleanup(g.stop)
        self.api.add_service_endpoint("%s/%s" % (GATE_NS, SERVICE), "127.0.0.1:%d" % g.port)
        return g

    def configurations(self):
        return [self.api.get(k, SERVICE) for k in ("mutatingwebhookconfigurations",
                                                   "validatingwebhookconfigurations")]

    def create_pod(self, name, component=None, dry_run=False):
        import kubernetes
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
               "spec": {"containers": [{"name": "main", "image": h.component_image(component)}]}}
        if component:
            pod["metadata"]["labels"] = {h.COMPONENT_LABEL: component}
        try:
            created = self.kube.create_namespaced_pod(NS, pod, dry_run="All" if dry_run else None)
            return 201, created.to_dict()
        except kubernetes.client.ApiException as e:
            try:
                return e.status, json.loads(e.body).get("message", e.body)
            except ValueError:
                return e.status, e.body

    def selftest(self):
        return h.run_binary(["selftest", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS], timeout=120)

    def chart_selftest(self):
        """selftest with the helm test Pod's arguments, as its ServiceAccount (a token of its own)."""
        token = "selftest-token"
        self.api.add_user(token, "system:serviceaccount:%s:%s" % (GATE_NS, SELFTEST_SA),
                          ["system:serviceaccounts", "system:serviceaccounts:" + GATE_NS, "system:authenticated"])
        token_file = os.path.join(self.tmp, "selftest-token")
        with open(token_file, "w") as f:
            f.write(token + "\n")
        kubeconfig = os.path.join(self.tmp, "selftest-kubeconfig")
        with open(self.kubeconfig) as f:
            text = f.read()
        with open(kubeconfig, "w") as f:
            f.write(text.replace(self.token_file, token_file))
        return h.run_binary(["selftest", "--kubeconfig", kubeconfig, "--namespace=" + GATE_NS,
                             "--scratch-namespace=" + SCRATCH_NS, "--timeout=60s"], timeout=120)



class Install(InstallCase):
    def test_no_webhook_until_a_replica_answers_then_enforced_selftest_and_cleanup(self):
        # Until the gate's caches sync it cannot answer: nothing is applied.
        fault = self.api.inject_fault(500, method="GET", path=r"/nodes$", count=None)
        g = self.start_gate_from_chart()
        tc.wait_until("the leader waiting for readiness",
                      lambda: any("waiting until this replica can answer" in l.get("msg", "")
                                  for l in g.log_lines()))
        self.assertEqual(self.configurations(), [None, None])
        status, _ = self.create_pod("before", dry_run=True)
        self.assertEqual(status, 201)  # nothing enforces yet: and nothing refuses everything either

        self.api.clear_faults(fault)
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())
        self.assertEqual(g.probe("GET", "/readyz").status, 200)
        for c in self.configurations():
            labels = c["metadata"]["labels"]
            self.assertEqual(labels["app.kubernetes.io/managed-by"], "isolation-gate")  # not Helm's
            self.assertNotIn("app.kubernetes.io/instance", labels)  # GitOps tools would claim and prune it
            self.assertEqual(labels["app.kubernetes.io/name"], "isolation-gate")

        # The API server, verifying the gate against the published caBundle, gets the gate's answers.
        status, body = self.create_pod("unlabelled")
        self.assertEqual(status, 403, body)
        self.assertIn('admission webhook "pods.mutate.gibson.zeroroot.ai" denied the request', body)
        self.assertIn(h.COMPONENT_LABEL, body)
        status, pod = self.create_pod("docs-0", component="docs-indexer")
        self.assertEqual(status, 201, pod)
        self.assertEqual(pod["metadata"]["annotations"]["gibson.zeroroot.ai/isolation"], "RequireSetec")
        self.assertEqual(pod["spec"]["runtime_class_name"], tc.RC)
        status, body = self.create_pod("parser-x", component="report-parser")
        self.assertEqual(status, 201, body)  # untrusted, the sandbox is there: placed in it

        p = self.selftest()
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, out + p.stderr.decode())
        self.assertIn("ok: a pod without a component label is denied", out)
        self.assertIn("ok: the pod of a trusted Component is admitted: RequireSetec", out)
        self.assertIn("selftest passed", out)
        # Its scratch namespace is gone, and it made no pod.
        self.assertEqual([n for n in self.api.list("namespaces") if "-selftest-" in n["metadata"]["name"]], [])
        self.assertEqual([x for x in self.api.list("pods") if x["metadata"]["name"].startswith("selftest")], [])

        # As the chart's helm test runs it: in the chart's enforced scratch
        # namespace (a release object), with the selftest ServiceAccount's
        # token. Twice: the second run finds the Component the first made.
        (scratch,) = [d for d in chart_objects() if d["kind"] == "Namespace" and d["metadata"]["name"] == SCRATCH_NS]
        self.assertEqual(scratch["metadata"]["labels"]["gibson.zeroroot.ai/isolation"], "enforced")
        self.api.create("namespaces", scratch)
        mark = self.api.request_mark()
        for first in (True, False):
            p = self.chart_selftest()
            out = p.stdout.decode()
            self.assertEqual(p.returncode, 0, out + p.stderr.decode())
            self.assertIn("using namespace " + SCRATCH_NS, out)
            self.assertIn("%s Component %s/selftest (trusted)" % ("created" if first else "found", SCRATCH_NS), out)
            self.assertIn("ok: a pod without a component label is denied", out)
            self.assertIn("ok: the pod of a trusted Component is admitted: RequireSetec", out)
            self.assertIn("selftest passed", out)
        # Least privilege: every request it made is granted by the selftest
        # Role in the scratch namespace, and by nothing cluster-wide.
        made = [e for e in self.api.requests(since=mark, header=("Authorization", "^Bearer selftest-token$"))
                if e["path"].startswith(("/api/", "/apis/"))]
        self.assertTrue(made)
        roles = [d for d in chart_objects() if d["kind"] in ("Role", "ClusterRole")
                 and d["metadata"]["name"] == SELFTEST_SA]
        self.assertEqual([(r["kind"], r["metadata"]["namespace"]) for r in roles], [("Role", SCRATCH_NS)])
        (binding,) = [d for d in chart_objects() if d["kind"] == "RoleBinding" and d["metadata"]["name"] == SELFTEST_SA]
        self.assertEqual(binding["metadata"]["namespace"], SCRATCH_NS)
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": SELFTEST_SA, "namespace": GATE_NS}])
        for entry in made:
            group, resource, verb, name, namespace = tc.api_request_permission(entry)
            self.assertEqual(namespace, SCRATCH_NS, entry["path"])
            self.assertTrue(any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
                                for r in roles[0]["rules"]), "%s %s/%s" % (verb, group, resource))
        # The namespace stays (the release's), and no pod was persisted.
        self.assertIsNotNone(self.api.get("namespaces", SCRATCH_NS))
        self.assertEqual([x for x in self.api.list("pods") if x["metadata"]["name"].startswith("selftest")], [])
        # A Component `selftest` that is not the one it makes (here: untrusted) is not reused: exit 3
        # (the check could not be made), naming it.
        comp = self.api.get("components", "selftest", namespace=SCRATCH_NS)
        comp["spec"]["policy"]["content_trust"] = "untrusted"
        self.api.update("components", comp, namespace=SCRATCH_NS)
        p = self.chart_selftest()
        self.assertEqual(p.returncode, 3, p.stdout.decode() + p.stderr.decode())
        self.assertIn("the Component %s/selftest is not the one selftest makes" % SCRATCH_NS, p.stderr.decode())
        self.assertIn("selftest FAILED", p.stdout.decode())
        self.api.delete("components", "selftest", namespace=SCRATCH_NS)

        # The only replica goes: the webhooks fail closed and selftest says the check could not be made.
        g.stop()
        status, body = self.create_pod("while-down")
        self.assertEqual(status, 500, body)
        self.assertIn('failed calling webhook', body)
        p = self.selftest()
        self.assertEqual(p.returncode, 3, p.stdout.decode() + p.stderr.decode())
        self.assertIn("selftest FAILED", p.stdout.decode())

        # The pre-delete hook: nothing left; selftest now reports that nothing enforces.
        p = h.run_binary(["cleanup", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS,
                          "--webhook-config-name", SERVICE, "--webhook-template-configmap", "isolation-gate-webhooks",
                          "--settle", "0s"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.configurations(), [None, None])
        p = self.selftest()
        self.assertEqual(p.returncode, 1, p.stdout.decode() + p.stderr.decode())
        self.assertIn("the webhook is not enforcing", p.stdout.decode())


if __name__ == "__main__":
    unittest.main()
