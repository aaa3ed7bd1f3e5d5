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


if __name__ == "__main__":
    unittest.main()
