"""An upgrade from the previous release's chart to the working tree's, against
the repository's test API server (issue 29, item 8; docs/operations.md,
"Upgrading").

The previous release is the chart recorded in tests/e2e/fixtures/chart-previous
(its README says which commit; IG_PREVIOUS_CHART names another chart dir).
Helm is real: `helm install` of the previous chart into the test API server,
then `helm upgrade` to the working tree's chart (the release namespace created
first; `--disable-openapi-validation`, as the test API server serves no
OpenAPI document; no `--wait`, as nothing there runs a Deployment). Helm
stores its release Secrets there (sent as protobuf) and applies every object
of the chart, CustomResourceDefinition included, with server-side apply; `helm
history` shows revision 1 superseded by revision 2. The Deployment is played
by processes of the binary with its container args (as test_install does; the
args come from `helm template` of the same chart and values): one replica with
the previous chart's args, then a rolling update (a replica with the new args
starts and is ready, the Service's endpoint moves to it, the old one gets
SIGTERM).

While all this happens, a thread sends pod dry-run creates through the test
API server into an enforced namespace, which calls the gate's webhooks as the
API server does. It asserts:

- every answer is a decision of the gate (the unlabelled pod denied by
  pods.mutate.gibson.zeroroot.ai, the trusted Component's pod admitted with
  its annotation), before, during and after the upgrade: never "failed
  calling webhook" or a connection error;
- both webhook configurations are the same objects (uid) updated in place to
  the new template: new resourceVersion, new template-fingerprint annotation,
  the new chart's webhooks, the same caBundle; the TLS Secret's data (written
  by the leader; both charts render the Secret without data) is kept by
  helm's apply; the Deployment is the same object with the new chart's
  container;
- the CRD (a template of both charts, docs/operations.md "Upgrading") is the
  same object (uid) after `helm upgrade`, its schema the new chart's (a field
  only the new CRD has), still `helm.sh/resource-policy: keep`; the new
  schema a superset of the old one;
- each Component's status is there right after the upgrade, with the same
  conditions (a condition whose status did not change keeps its
  lastTransitionTime), also once the new leader has run, and validates against
  the new CRD.

Every wait is bounded (scaled by harness.SLOWDOWN); nothing asserts how long
something took.
"""

import functools
import os
import subprocess
import sys
import threading
import time
import unittest

import yaml

import harness as h
import test_cluster as tc
import test_install as ti

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "packaging"))
import crd_schema  # noqa: E402
import tools  # noqa: E402

RELEASE = "isolation-gate"
GATE_NS = ti.GATE_NS
SERVICE = ti.SERVICE
NS = ti.NS
PREVIOUS_CHART = os.environ.get("IG_PREVIOUS_CHART") or os.path.join(
    h.HERE, "fixtures", "chart-previous", "isolation-gate")
NEW_CHART = os.path.join(h.SOURCE_DIR, "charts", "isolation-gate")
# What the new chart demands that the previous one did not know (its values
# schema may refuse unknown keys): only the new render gets it.
NEW_VALUES = tools.LOCAL_IMAGE
CRD_NAME = "components.gibson.zeroroot.ai"
FINGERPRINT = "isolation-gate.zeroroot.ai/template-fingerprint"
LEASE = "isolation-gate-leader"
DENIED = 'admission webhook "pods.mutate.gibson.zeroroot.ai" denied the request'


def helm_template(chart, extra=()):
    p = subprocess.run([tools.HELM, "template", RELEASE, chart, "--namespace", GATE_NS] + list(extra),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120 * h.SLOWDOWN)
    if p.returncode != 0:
        raise AssertionError("helm template %s failed: %s" % (chart, p.stderr.decode(errors="replace")))
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def one(docs, kind):
    (d,) = [d for d in docs if d["kind"] == kind]
    return d


def storage_schema(crd):
    return crd_schema.crd_schema(crd)


class Upgrade(ti.InstallCase):
    def setUp(self):
        if not tools.HELM:
            self.skipTest(tools.NO_HELM)
        tc.ClusterCase.setUp(self)  # the test API server, a capable Node, the Components; no gate
        self.old_docs = helm_template(PREVIOUS_CHART)
        self.new_docs = helm_template(NEW_CHART, NEW_VALUES)
        ns = self.api.get("namespaces", NS) or self.api.create("namespaces", {"metadata": {"name": NS}})
        ns.setdefault("metadata", {}).setdefault("labels", {})["gibson.zeroroot.ai/isolation"] = "enforced"
        self.api.update("namespaces", ns)
        # helm's --create-namespace needs OpenAPI, which the test API server does not serve
        self.api.get("namespaces", GATE_NS) or self.api.create("namespaces", {"metadata": {"name": GATE_NS}})
        self.kube = self._client()

    # -- Helm --------------------------------------------------------------------
    def helm(self, *args):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HELM_CACHE_HOME=os.path.join(self.tmp, "helm-cache"),
                   HELM_CONFIG_HOME=os.path.join(self.tmp, "helm-config"),
                   HELM_DATA_HOME=os.path.join(self.tmp, "helm-data"))
        p = subprocess.run([tools.HELM] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                           timeout=180 * h.SLOWDOWN)
        if p.returncode != 0:
            raise AssertionError("helm %s failed: %s" % (" ".join(args), p.stderr.decode(errors="replace")))
        return p.stdout.decode()

    def helm_install(self, chart, extra=()):
        self.helm("install", RELEASE, chart, "--namespace", GATE_NS, "--disable-openapi-validation", *extra)

    def helm_upgrade(self, chart, extra=()):
        self.helm("upgrade", RELEASE, chart, "--namespace", GATE_NS, "--disable-openapi-validation", *extra)

    # -- the Deployment's part -------------------------------------------------
    def start_replica(self, docs, pod_name):
        g = h.GateServer(kubeconfig=self.kubeconfig, tls="self-managed", wait_ready=False,
                         extra_args=ti.chart_serve_args(docs), env={"POD_NAME": pod_name})
        g.start()
        self.addCleanup(g.stop)
        tc.wait_until(pod_name + " ready", lambda: g.probe("GET", "/readyz", timeout=2).status == 200)
        return g

    def route_to(self, g):
        self.api.add_service_endpoint("%s/%s" % (GATE_NS, ti.SERVICE), "127.0.0.1:%d" % g.port)

    def holder(self):
        lease = self.api.get("leases", LEASE, namespace=GATE_NS)
        return ((lease or {}).get("spec") or {}).get("holderIdentity") or ""

    # -- traffic ------------------------------------------------------------
    def traffic(self, stop, answers, phase):
        kube = self._client()
        pods = [("unlabelled", None), ("docs", "docs-indexer")]
        i = 0
        while not stop.is_set():
            name, component = pods[i % 2]
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "%s-%d" % (name, i), "namespace": NS},
                   "spec": {"containers": [{"name": "main", "image": h.component_image(component)}]}}
            if component:
                pod["metadata"]["labels"] = {h.COMPONENT_LABEL: component}
            fn = functools.partial(kube.create_namespaced_pod, NS, pod, dry_run="All")
            created = []
            try:
                status, body = self.api_call(lambda: created.append(fn()))
                if status == 200:
                    status, body = 201, (created[0].metadata.annotations or {}).get(h.ISOLATION_ANNOTATION)
            except Exception as e:  # a connection error is an answer too: a wrong one
                status, body = None, repr(e)
            answers.append((phase[0], component, status, body))
            i += 1

    def components(self):
        return {n: self.api.get("components", n, namespace=NS) for n in ("report-parser", "docs-indexer")}

    def test_previous_release_upgraded_to_this_chart_under_traffic(self):
        old_crd, new_crd = one(self.old_docs, "CustomResourceDefinition"), one(self.new_docs, "CustomResourceDefinition")

        # 1. The previous release: its objects, one replica with its args, ready.
        self.helm_install(PREVIOUS_CHART)
        deployment_before = self.api.get("deployments", SERVICE, namespace=GATE_NS)
        self.assertIsNotNone(deployment_before, "helm install created no Deployment")
        crd_before = self.api.get("customresourcedefinitions", CRD_NAME)
        self.assertIsNotNone(crd_before, "helm install created no CRD")
        self.assertNotIn("command", storage_schema(crd_before)["properties"]["spec"]["properties"])
        old = self.start_replica(self.old_docs, "isolation-gate-old-0")
        self.route_to(old)
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())
        tc.wait_until("the old replica leads", lambda: self.holder().startswith("isolation-gate-old-0_"))

        # 2. A trusted and an untrusted Component (tc.ClusterCase made them), their status from the operator.
        tc.wait_until("both Components have a status with conditions",
                      lambda: all((c.get("status") or {}).get("conditions") for c in self.components().values()))
        before = {n: c["status"] for n, c in self.components().items()}
        self.assertEqual(before["report-parser"]["contentTrust"], "untrusted")
        self.assertEqual(before["docs-indexer"]["contentTrust"], "trusted")
        # The upgrade comes in a later second than every transition so far: a
        # condition the new version reset would show a later lastTransitionTime.
        last = max(c["lastTransitionTime"] for s in before.values() for c in s["conditions"])
        tc.wait_until("a second later than " + last,
                      lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > last)
        configs_before = self.configurations()
        secret_before = self.api.get("secrets", "isolation-gate-tls", namespace=GATE_NS)
        self.assertTrue((secret_before.get("data") or {}).get("ca.crt"), "the leader wrote no CA")

        # 3. Admission traffic through the test API server, all along.
        answers, phase, stop = [], ["before"], threading.Event()
        t = threading.Thread(target=self.traffic, args=(stop, answers, phase), daemon=True)
        t.start()
        self.addCleanup(t.join, 30)
        self.addCleanup(stop.set)
        tc.wait_until("traffic answered before the upgrade", lambda: len(answers) >= 4)

        # 4. helm upgrade: the objects, then the Deployment rolls (a new replica
        # ready, the endpoint moved to it, the old one terminated).
        phase[0] = "during"
        self.helm_upgrade(NEW_CHART, NEW_VALUES)
        new = self.start_replica(self.new_docs, "isolation-gate-new-0")
        self.route_to(new)
        n = len(answers)
        tc.wait_until("traffic answered by the new replica", lambda: len(answers) >= n + 4)
        self.assertEqual(old.stop(), 0, "the old replica's exit code on SIGTERM")
        tc.wait_until("the new replica leads", lambda: self.holder().startswith("isolation-gate-new-0_"))

        # Right after the upgrade: the statuses are there, as they were.
        right_after = {n: c.get("status") for n, c in self.components().items()}
        tc.wait_until("the new leader checked both Components' status",
                      lambda: (new.metric_values("isolation_gate_status_writes_total") or 0) >= 2)

        new_template = one(self.new_docs, "ConfigMap")["data"]
        want_hooks = {kind: [w["name"] for w in yaml.safe_load(new_template[k])["webhooks"]]
                      for kind, k in (("MutatingWebhookConfiguration", "mutating.yaml"),
                                      ("ValidatingWebhookConfiguration", "validating.yaml"))}
        tc.wait_until("both configurations hold the new chart's webhooks",
                      lambda: all(c and [w["name"] for w in c["webhooks"]] == want_hooks[c["kind"]]
                                  for c in self.configurations()))
        phase[0] = "after"
        n = len(answers)
        tc.wait_until("traffic answered after the upgrade", lambda: len(answers) >= n + 4)
        stop.set()
        t.join(30 * h.SLOWDOWN)
        self.assertFalse(t.is_alive(), "the traffic thread did not stop")

        # 5a. Every answer was a decision of the gate, in every phase.
        for p in ("before", "during", "after"):
            self.assertTrue([a for a in answers if a[0] == p], "no traffic %s the upgrade" % p)
        for p, component, status, body in answers:
            if component is None:
                self.assertEqual(status, 403, (p, body))
                self.assertIn(DENIED, body, p)
            else:
                self.assertEqual((status, body), (201, "RequireSetec"), p)
        self.assertEqual([a for a in answers if "failed calling webhook" in str(a[3])], [])

        # 5b. The configurations: the same objects, updated in place.
        configs_after = self.configurations()
        for b, a in zip(configs_before, configs_after):
            what = b["kind"]
            self.assertEqual(a["metadata"]["uid"], b["metadata"]["uid"], what + ": replaced, not updated")
            self.assertNotEqual(a["metadata"]["resourceVersion"], b["metadata"]["resourceVersion"], what)
            self.assertTrue(b["metadata"]["annotations"].get(FINGERPRINT), what)
            self.assertNotEqual(a["metadata"]["annotations"].get(FINGERPRINT),
                                b["metadata"]["annotations"][FINGERPRINT], what + ": fingerprint unchanged")
            self.assertEqual({w["clientConfig"]["caBundle"] for w in a["webhooks"]},
                             {b["webhooks"][0]["clientConfig"]["caBundle"]}, what + ": caBundle")
            self.assertEqual(a["metadata"]["labels"]["app.kubernetes.io/managed-by"], "isolation-gate", what)
        deployment_after = self.api.get("deployments", SERVICE, namespace=GATE_NS)
        self.assertEqual(deployment_after["metadata"]["uid"], deployment_before["metadata"]["uid"])
        self.assertEqual(deployment_after["spec"]["template"]["spec"]["containers"],
                         one(self.new_docs, "Deployment")["spec"]["template"]["spec"]["containers"])
        secret_after = self.api.get("secrets", "isolation-gate-tls", namespace=GATE_NS)
        self.assertEqual(secret_after["metadata"]["uid"], secret_before["metadata"]["uid"])
        self.assertEqual(secret_after["data"], secret_before["data"], "helm upgrade reset the TLS Secret")

        # 5b'. The release: revision 1 superseded by revision 2.
        history = yaml.safe_load(self.helm("history", RELEASE, "--namespace", GATE_NS, "-o", "json"))
        self.assertEqual([(str(r["revision"]), r["status"]) for r in history], [("1", "superseded"), ("2", "deployed")])

        # 5c. The CRD: a template in both charts, so helm upgrade applied the
        # new one to the release's object, the same one; kept on uninstall;
        # the new schema a superset with the new fields, every served version
        # still served.
        crd_after = self.api.get("customresourcedefinitions", CRD_NAME)
        self.assertEqual(crd_after["metadata"]["uid"], crd_before["metadata"]["uid"], "the CRD was replaced")
        self.assertEqual(crd_after["metadata"]["annotations"].get("helm.sh/resource-policy"), "keep")
        self.assertIn("command", storage_schema(crd_after)["properties"]["spec"]["properties"],
                      "helm upgrade did not upgrade the CRD")
        self.assertEqual(storage_schema(crd_after), storage_schema(new_crd))
        for crd in (old_crd, new_crd):
            self.assertEqual(crd["metadata"]["name"], CRD_NAME)
            self.assertEqual(crd["metadata"]["annotations"].get("helm.sh/resource-policy"), "keep")
        self.assertEqual(new_crd["spec"]["group"], old_crd["spec"]["group"])
        self.assertEqual(new_crd["spec"]["names"], old_crd["spec"]["names"])
        self.assertEqual(new_crd["spec"]["scope"], old_crd["spec"]["scope"])
        served = lambda crd: {v["name"] for v in crd["spec"]["versions"] if v.get("served")}  # noqa: E731
        self.assertLessEqual(served(old_crd), served(new_crd))
        old_spec = storage_schema(old_crd)["properties"]["spec"]["properties"]
        new_spec = storage_schema(new_crd)["properties"]["spec"]["properties"]
        self.assertNotIn("command", old_spec)
        self.assertIn("command", new_spec)  # a field only the new CRD has
        self.assertLessEqual(set(old_spec), set(new_spec))

        # 5d. Component status carried over: present right after, not reset.
        for name, b in before.items():
            for when, s in (("right after the upgrade", right_after[name]),
                            ("after the new leader ran", self.components()[name].get("status"))):
                self.assertTrue(s and s.get("conditions"), "%s: no status %s" % (name, when))
                got = {c["type"]: c for c in s["conditions"]}
                for c in b["conditions"]:
                    self.assertIn(c["type"], got, "%s %s: condition %s lost" % (name, when, c["type"]))
                    if got[c["type"]]["status"] == c["status"]:
                        self.assertEqual(got[c["type"]].get("lastTransitionTime"), c.get("lastTransitionTime"),
                                         "%s %s: condition %s reset" % (name, when, c["type"]))
                self.assertEqual(s["contentTrust"], b["contentTrust"], name)
            stored_now = self.components()[name]
            self.assertEqual(crd_schema.validate(stored_now["status"], storage_schema(new_crd)["properties"]["status"],
                                                 "status"), [], name)
            self.assertEqual(crd_schema.validate(stored_now["spec"], storage_schema(new_crd)["properties"]["spec"],
                                                 "spec"), [], name)


if __name__ == "__main__":
    unittest.main()
