"""Audit mode, a namespace's rollout step (docs/operations.md, "Audit before enforcing"): in a namespace labelled
gibson.zeroroot.ai/isolation=audit every answer enforcement would give arrives as warnings, audit annotations and
would_deny / would_patch metrics, and nothing is denied or patched. Through the repository's test API server with the
installed chart's webhook configurations; then the namespace moves to enforced (anyone may tighten) and back
(only an enforcement admin may loosen).
"""

import re
import unittest

import harness as h
import test_cluster as tc
import test_install as ti

NS = "team-c"
AUDIT = "gibson.zeroroot.ai/isolation"


class AuditMode(ti.InstallCase):
    def setUp(self):
        super().setUp()
        self.api.add_user("dev-token", "dev", ["system:authenticated"])
        self.api.add_user("root-token", "root", ["system:masters", "system:authenticated"])
        self.dev = self._client("dev-token")
        self.root = self._client("root-token")
        self.api.create("namespaces", {"metadata": {"name": NS, "labels": {AUDIT: "audit"}}})
        for name, trust in (("report-parser", "untrusted"), ("docs-indexer", "trusted")):
            self.api.create("components", tc.component(name, trust, namespace=NS), namespace=NS)

    def start_installed(self, sandbox):
        if not sandbox:
            self.api.delete("nodes", "node-1")
        self.gate_server = self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())

    def create(self, name, component="report-parser"):
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS},
             "spec": {"containers": [{"name": "main", "image": h.component_image(component)}]}}
        if component:
            p["metadata"]["labels"] = {h.COMPONENT_LABEL: component}
            if component == "report-parser":
                p["spec"]["containers"][0]["args"] = ["--input", "/reports"]
        mark = len(self.api.webhook_calls())
        status, msg = self.api_call(self.dev.create_namespaced_pod, NS, p)
        warnings = [w for c in self.api.webhook_calls(since=mark) for w in (c.get("warnings") or [])]
        return status, msg, warnings

    def audit_counts(self, family):
        text = self.gate_server.probe("GET", "/metrics", timeout=5).body.decode()
        out = {}
        for m in re.finditer(r'^%s\{endpoint="([^"]+)",reason="([A-Za-z]+)"\} (\d+)$' % family, text, re.M):
            out[(m.group(1), m.group(2))] = int(m.group(3))
        return out

    def label(self, client, value):
        patch = [{"op": "add", "path": "/metadata/labels/gibson.zeroroot.ai~1isolation", "value": value}]
        return self.api_call(client.patch_namespace, NS, patch)

    def test_would_be_denials_are_warnings_and_metrics_then_enforcing_denies(self):
        self.start_installed(sandbox=False)
        status, msg, warnings = self.create("untrusted-0")
        self.assertEqual(status, 200, msg)
        self.assertIn("isolation-gate audit: enforcing would deny this (SandboxUnavailable)", warnings)
        stored = self.api.get("pods", "untrusted-0", namespace=NS)
        self.assertNotIn("annotations", stored["metadata"])  # nothing patched
        status, msg, warnings = self.create("unlabelled-0", component=None)
        self.assertEqual(status, 200, msg)
        self.assertIn("isolation-gate audit: enforcing would deny this (MissingComponentLabel)", warnings)
        counts = self.audit_counts("isolation_gate_audit_would_deny_total")
        self.assertGreaterEqual(counts.get(("/audit/pods", "SandboxUnavailable"), 0), 1, counts)
        self.assertGreaterEqual(counts.get(("/audit/pods", "MissingComponentLabel"), 0), 1, counts)

        # audit -> enforced tightens: anyone who may label the namespace may do it.
        status, msg = self.label(self.dev, "enforced")
        self.assertEqual(status, 200, msg)
        status, msg, _ = self.create("untrusted-1")
        self.assertEqual(status, 403, msg)
        self.assertIn('admission webhook "pods.mutate.gibson.zeroroot.ai" denied the request', msg)
        # enforced -> audit loosens: an enforcement admin's change only.
        status, msg = self.label(self.dev, "audit")
        self.assertEqual(status, 403, msg)
        self.assertIn("enforcement-admin group", msg)
        status, msg = self.label(self.root, "audit")
        self.assertEqual(status, 200, msg)
        status, msg, _ = self.create("untrusted-2")
        self.assertEqual(status, 200, msg)

    def test_would_be_patches_are_not_made(self):
        self.start_installed(sandbox=True)
        status, msg, warnings = self.create("sandboxed-0")
        self.assertEqual(status, 200, msg)
        self.assertIn("isolation-gate audit: enforcing would move this pod onto the setec sandbox", warnings)
        stored = self.api.get("pods", "sandboxed-0", namespace=NS)
        self.assertIsNone(stored["spec"].get("runtimeClassName"))
        counts = self.audit_counts("isolation_gate_audit_would_patch_total")
        self.assertGreaterEqual(counts.get(("/audit/pods", "SandboxAvailable"), 0), 1, counts)

    # -- the drift audit: running pods enforcement would deny ------------------
    def would_deny_gauge(self):
        """isolation_gate_audit_pods_would_deny as {(namespace, reason): pods}."""
        out = {}
        for m in re.finditer(r'^isolation_gate_audit_pods_would_deny\{namespace="([^"]+)",reason="([A-Za-z]+)"\} (\d+)$',
                             self.gate_server.metrics(), re.M):
            out[(m.group(1), m.group(2))] = int(m.group(3))
        return out

    def namespace_events(self):
        """The WouldDenyWhenEnforced Events regarding the Namespace: a Namespace is
        cluster-scoped, so they live in "default", as the API server requires."""
        return [e for e in self.api.list("events.events.k8s.io", namespace="default")
                if e.get("reason") == "WouldDenyWhenEnforced" and e["regarding"].get("name") == NS]

    def test_the_drift_audit_reports_the_running_pods_enforcement_would_deny(self):
        # Hosted shape, the sandbox unavailable: an untrusted Component's pod
        # would be denied, and so would a pod that names no Component.
        self.start_installed(sandbox=False)
        for name, component in (("unlabelled-0", None), ("untrusted-0", "report-parser"),
                                ("fine-0", "docs-indexer")):
            status, msg, warnings = self.create(name, component)
            self.assertEqual(status, 200, msg)
            if name == "fine-0":
                self.assertFalse([w for w in warnings if "would deny" in w], warnings)
        expected = {(NS, "MissingComponentLabel"): 1, (NS, "SandboxUnavailable"): 1}
        tc.wait_until("the would-deny gauge names the two pods", lambda: self.would_deny_gauge() == expected)
        tc.wait_until("one Event on the Namespace per would-deny pod", lambda: len(self.namespace_events()) == 2)
        # The gauge and the audit pod cache's series, as Prometheus parses them.
        import test_metrics as tm
        if tm.PROMTOOL is not None:
            text = self.gate_server.metrics()
            self.assertIn('isolation_gate_cache_objects{resource="audit_pods"}', text)
            tm.ExpositionCheck.assert_valid_exposition(self, text, "an audit namespace reported")
        events = {e["related"]["name"]: e for e in self.namespace_events()}
        self.assertEqual(sorted(events), ["unlabelled-0", "untrusted-0"])
        ns_uid = self.api.get("namespaces", NS)["metadata"]["uid"]
        for pod, reason in (("unlabelled-0", "MissingComponentLabel"), ("untrusted-0", "SandboxUnavailable")):
            e = events[pod]
            self.assertEqual(e["type"], "Warning")
            self.assertEqual(e["action"], "Audit")
            self.assertEqual(e["regarding"], {"kind": "Namespace", "apiVersion": "v1", "name": NS, "uid": ns_uid})
            self.assertEqual(e["related"]["kind"], "Pod")
            self.assertEqual(e["related"]["namespace"], NS)
            self.assertEqual(e["related"]["uid"], self.api.get("pods", pod, namespace=NS)["metadata"]["uid"])
            self.assertIn('pod "%s" would be denied if namespace "%s" were enforced (%s): ' % (pod, NS, reason),
                          e["note"])
        self.assertIn("it has no label " + h.COMPONENT_LABEL, events["unlabelled-0"]["note"])
        # As a client reads them (python3-kubernetes' events.k8s.io/v1 API).
        import kubernetes
        listed = [e for e in kubernetes.client.EventsV1Api(self.kube.api_client).list_namespaced_event("default").items
                  if e.reason == "WouldDenyWhenEnforced" and e.regarding.name == NS]
        self.assertEqual(sorted(e.related.name for e in listed), ["unlabelled-0", "untrusted-0"])
        self.assertTrue(all(e.regarding.kind == "Namespace" and e.regarding.uid == ns_uid for e in listed), listed)

        # A pod that stops running leaves the gauge.
        self.api.delete("pods", "unlabelled-0", namespace=NS)
        tc.wait_until("the deleted pod leaves the gauge",
                      lambda: self.would_deny_gauge() == {(NS, "SandboxUnavailable"): 1})

        # Enforced (audit -> enforced tightens: anyone may): no namespace in
        # audit mode, no series left; the running pod itself is not touched.
        status, msg = self.label(self.dev, "enforced")
        self.assertEqual(status, 200, msg)
        tc.wait_until("the namespace's series cleared", lambda: self.would_deny_gauge() == {})
        self.assertIsNotNone(self.api.get("pods", "untrusted-0", namespace=NS))
        self.assertNotIn("isolation_gate_audit_pods_would_deny{", self.gate_server.metrics())
        # Back in audit mode (an enforcement admin's change): reported again.
        status, msg = self.label(self.root, "audit")
        self.assertEqual(status, 200, msg)
        tc.wait_until("reported again in audit mode",
                      lambda: self.would_deny_gauge() == {(NS, "SandboxUnavailable"): 1})
        # Every request the gate made (the Namespace and pod watches, the Events) is one the chart grants.
        seen = tc.assert_granted(self, [e for e in self.api.requests()
                                        if (e.get("user_agent") or "").startswith("isolation-gate/")])
        self.assertIn(("", "namespaces", "watch", None, None), seen)
        self.assertIn(("", "pods", "list", None, None), seen)


if __name__ == "__main__":
    unittest.main()
