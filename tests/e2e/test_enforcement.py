"""Enforcement cannot be switched off quietly (docs/security.md): the chart's
namespaces.validate webhook, installed as the chart renders it and called by
the repository's test API server as the API server calls webhooks (its
objectSelector, the requester's userInfo, TLS verified against caBundle):

- a user outside --enforcement-admins cannot remove the namespace's
  gibson.zeroroot.ai/isolation=enforced label nor change its value; the API
  server answers 403 with the gate's message, and the label stays;
- other edits of an enforced namespace are allowed; namespaces without the
  label never reach the gate (the rest of the cluster never depends on it);
- a member of an admin group may remove it: allowed, logged, counted and
  recorded as a Warning Event on the Namespace; switching it back on is
  recorded as a Normal one.

Every wait is bounded; nothing asserts how long something took.
"""

import unittest

import harness as h
import test_cluster as tc
import test_install as ti

LABEL = "gibson.zeroroot.ai/isolation"
HOOK = "namespaces.validate.gibson.zeroroot.ai"


class Enforcement(ti.InstallCase):
    def setUp(self):
        super().setUp()
        self.api.add_user("dev-token", "alice", ["system:authenticated", "developers"])
        self.api.add_user("admin-token", "root-admin", ["system:authenticated", "system:masters"])
        self.api.create("namespaces", {"metadata": {"name": "team-b"}})
        self.gate = self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())
        hooks = [w["name"] for w in self.configurations()[1]["webhooks"]]
        self.assertIn(HOOK, hooks)

    def set_labels(self, token, namespace, labels):
        core = self._client(token)
        ns = core.read_namespace(namespace)
        current = dict(ns.metadata.labels or {})
        for k, v in labels.items():
            if v is None:
                current.pop(k, None)
            else:
                current[k] = v
        ns.metadata.labels = current
        # An UPDATE, as `kubectl label --overwrite` makes.
        return self.api_call(core.replace_namespace, namespace, ns)

    def label(self, namespace="team-a"):
        return ((self.api.get("namespaces", namespace) or {}).get("metadata", {}).get("labels") or {}).get(LABEL)

    def namespace_events(self, reason):
        return [e for e in self.api.list("events.events.k8s.io", namespace="default")
                if e.get("reason") == reason and e["regarding"].get("kind") == "Namespace"]

    def reviews(self, reason):
        total = 0.0
        for line in self.gate.metrics().splitlines():
            if (line.startswith("isolation_gate_admission_reviews_total{") and
                    'endpoint="/validate/namespaces"' in line and 'reason="%s"' % reason in line):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def test_a_namespace_label_removed_by_a_non_admin_is_refused_an_admins_change_is_recorded(self):
        # Removing it, or changing its value, as an ordinary user: refused by the API server.
        status, message = self.set_labels("dev-token", "team-a", {LABEL: None})
        self.assertEqual(status, 403, message)
        self.assertIn('admission webhook "%s" denied the request' % HOOK, message)
        self.assertIn('user "alice" is not in an enforcement-admin group (it is one of: system:masters)', message)
        self.assertEqual(self.label(), "enforced")
        status, message = self.set_labels("dev-token", "team-a", {LABEL: "off"})
        self.assertEqual(status, 403, message)
        self.assertIn('from "enforced" to "off"', message)
        self.assertEqual(self.label(), "enforced")
        tc.wait_until("the refusals recorded as Events",
                      lambda: self.namespace_events("EnforcementChangeRefused"))
        e = self.namespace_events("EnforcementChangeRefused")[0]
        self.assertEqual((e["type"], e["regarding"]["name"]), ("Warning", "team-a"))
        self.assertIn('requested by "alice"', e["note"])
        self.assertEqual(self.reviews("EnforcementChangeRefused"), 2.0)

        # Other edits of an enforced namespace pass; an unlabelled namespace never reaches the gate.
        status, message = self.set_labels("dev-token", "team-a", {"team": "payments"})
        self.assertEqual((status, message), (200, ""))
        mark = len(self.api.webhook_calls(name=HOOK))
        status, message = self.set_labels("dev-token", "team-b", {"team": "search"})
        self.assertEqual((status, message), (200, ""))
        self.assertEqual([c["objectName"] for c in self.api.webhook_calls(since=mark, name=HOOK)], [])

        # An enforcement admin may: allowed, and logged, counted and recorded.
        status, message = self.set_labels("admin-token", "team-a", {LABEL: None})
        self.assertEqual((status, message), (200, ""))
        self.assertIsNone(self.label())
        tc.wait_until("the removal recorded as an Event", lambda: self.namespace_events("EnforcementRemovedByAdmin"))
        e = self.namespace_events("EnforcementRemovedByAdmin")[0]
        self.assertEqual(e["type"], "Warning")
        self.assertIn('by "root-admin" (group "system:masters")', e["note"])
        self.assertEqual(self.reviews("EnforcementRemovedByAdmin"), 1.0)
        line = [l for l in self.gate.log_lines() if l.get("msg") == "namespace enforcement switched off"]
        self.assertEqual(len(line), 1, self.gate.log_lines())
        self.assertEqual((line[0]["namespace"], line[0]["user"], line[0]["admin_group"]),
                         ("team-a", "root-admin", "system:masters"))
        # Unenforced now: pods are no longer sent to the gate there.
        status, _ = self.create_pod("unlabelled-after")
        self.assertEqual(status, 201)

        # Anyone may switch it back on: allowed and recorded.
        status, message = self.set_labels("dev-token", "team-a", {LABEL: "enforced"})
        self.assertEqual((status, message), (200, ""))
        tc.wait_until("switching on recorded", lambda: self.namespace_events("EnforcementAdded"))
        self.assertEqual(self.namespace_events("EnforcementAdded")[0]["type"], "Normal")
        status, _ = self.create_pod("unlabelled-again")
        self.assertEqual(status, 403)


if __name__ == "__main__":
    unittest.main()
