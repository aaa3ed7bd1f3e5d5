"""The Component status is written with server-side apply (docs/operations.md,
"Component status"), driving the real binary against the repository's test API
server (tests/apiserver/fake_apiserver.py, which runs server-side apply as
kube-apiserver's field manager does):

- the gate applies its status under field manager `isolation-gate` (force),
  owning only its own fields and its conditions (managedFields);
- another client (python3-kubernetes, field manager `someone-else`) applies
  its own condition type: it is kept, the gate's conditions are still there,
  and the gate writes nothing more, nor does the next leader;
- a real change is written again, keeping the other condition, and a field the
  gate no longer applies (runtimeClassName) is removed by the API server;
- on an upgraded cluster, where merge patches of an earlier version co-own
  runtimeClassName, the gate removes it with a merge patch, once.

Every wait is bounded; the "no write" checks wait for the gate to have
processed the change (its status metric) and for two more lease renewals.
"""

import json
import os
import sys
import unittest

import harness as h
import test_cluster as tc
import test_operator as to

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "apiserver"))

from kubernetes import client as kclient  # noqa: E402

NS = to.NS
GROUP, VERSION = "gibson.zeroroot.ai", "v1alpha1"
OURS = ("Admitted", "TrustDeclared", "Drifted", "BoundOutsideMicroVM")
wait_until = tc.wait_until


class StatusApply(to.OperatorCase):
    def someone_else(self):
        cfg = kclient.Configuration()
        cfg.host = self.api.url
        cfg.ssl_ca_cert = self.api_ca
        cfg.api_key = {"authorization": "token-one"}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        api = kclient.ApiClient(cfg)
        self.addCleanup(api.close)
        self.addCleanup(api.rest_client.pool_manager.clear)   # close its keep-alive sockets
        return api

    def apply_condition(self, api, name, status="True"):
        body = {"apiVersion": GROUP + "/" + VERSION, "kind": "Component",
                "metadata": {"name": name, "namespace": NS},
                "status": {"conditions": [{"type": "ExternalCheck", "status": status, "reason": "Scanned",
                                           "message": "checked by someone else",
                                           "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
        return api.call_api(
            "/apis/%s/%s/namespaces/%s/components/%s/status" % (GROUP, VERSION, NS, name), "PATCH",
            query_params=[("fieldManager", "someone-else")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=json.dumps(body), response_type="object", auth_settings=["BearerToken"],
            _return_http_data_only=True)

    def gate_writes(self, name, since=0):
        """The gate's status writes of Component `name` (every one answered or not)."""
        return [e for e in self.api.requests(since=since, method="PATCH", path=r"/components/%s/status$" % name)
                if e["query"].get("fieldManager") == "isolation-gate"]

    def condition_types(self, name):
        return [c["type"] for c in (self.status(name) or {}).get("conditions", [])]

    def processed(self, gate, before):
        """Waits until the gate's status loop has processed more keys than `before`, then two renewals."""
        wait_until("the status loop processed the change",
                   lambda: (gate.metric_values("isolation_gate_status_writes_total") or 0) > before)
        seen = self.api.request_mark()
        wait_until("two more renewals",
                   lambda: len(self.api.requests(since=seen, method="PUT", path=r"/leases/")) >= 2)

    @staticmethod
    def owned(component, manager):
        entries = [e for e in component["metadata"].get("managedFields", [])
                   if e["manager"] == manager and e["operation"] == "Apply"]
        return entries[0] if entries else None

    def test_another_managers_condition_is_kept_and_causes_no_write(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("the gate's conditions", lambda: self.condition_types("report-parser") == list(OURS))
        # The API server stores the object before it logs the write's answer: wait for that too.
        wait_until("the gate's write answered",
                   lambda: all(e["status"] is not None for e in self.gate_writes("report-parser")))
        first = self.gate_writes("report-parser")
        self.assertEqual(len(first), 1)
        self.assertEqual(first[0]["headers"].get("Content-Type"), "application/apply-patch+yaml")
        self.assertEqual(first[0]["query"].get("force"), "true")
        self.assertEqual(first[0]["status"], 200)

        # Someone else applies its own condition type.
        mark = self.api.request_mark()
        before = a.metric_values("isolation_gate_status_writes_total")
        out = self.apply_condition(self.someone_else(), "report-parser")
        self.assertEqual([c["type"] for c in out["status"]["conditions"]], list(OURS) + ["ExternalCheck"])
        self.processed(a, before)
        self.assertEqual(self.gate_writes("report-parser", since=mark), [], "the gate rewrote its status")
        self.assertEqual(self.condition_types("report-parser"), list(OURS) + ["ExternalCheck"])

        # managedFields: the gate owns its fields and conditions, someone else its condition.
        c = self.api.get("components", "report-parser", namespace=NS)
        mine = self.owned(c, "isolation-gate")
        self.assertEqual((mine["subresource"], mine["apiVersion"], mine["fieldsType"]),
                         ("status", GROUP + "/" + VERSION, "FieldsV1"))
        status_fields = mine["fieldsV1"]["f:status"]
        self.assertEqual(sorted(status_fields["f:conditions"]),
                         sorted('k:{"type":"%s"}' % t for t in OURS))
        for f in ("f:isolation", "f:contentTrust", "f:trustDeclared", "f:driftedPods", "f:observedGeneration",
                  "f:runtimeClassName"):
            self.assertIn(f, status_fields)
        theirs = self.owned(c, "someone-else")
        self.assertEqual(list(theirs["fieldsV1"]["f:status"]["f:conditions"]), ['k:{"type":"ExternalCheck"}'])

        # A real change (the sandbox goes): written again, someone else's condition
        # kept, runtimeClassName (no longer applied) removed by the API server.
        self.api.delete("nodes", "node-1")
        wait_until("Deny after the flip", lambda: (self.status("report-parser") or {}).get("isolation") == "Deny")
        wait_until("in-process after the flip",
                   lambda: (self.status("docs-indexer") or {}).get("isolation") == "AllowInProcess")
        s = self.status("report-parser")
        self.assertNotIn("runtimeClassName", s)
        self.assertEqual([c["type"] for c in s["conditions"]], list(OURS) + ["ExternalCheck"])
        self.assertEqual(to.condition(s, "ExternalCheck")["message"], "checked by someone else")
        self.assertNotIn("f:runtimeClassName",
                         self.owned(self.api.get("components", "report-parser", NS), "isolation-gate")
                         ["fieldsV1"]["f:status"])

        # A new term (the leader hands over on SIGTERM): the next leader checks
        # every Component and writes none of them.
        mark = self.api.request_mark()
        b = self.gate_with("gate-b")
        before = b.metric_values("isolation_gate_status_writes_total") or 0
        a.stop()
        self.wait_leader(b, "after the hand-over")
        self.processed(b, before + 1)
        self.assertEqual(self.gate_writes("report-parser", since=mark), [], "the next leader rewrote the status")
        self.assertEqual(self.gate_writes("docs-indexer", since=mark), [])

    def test_a_field_an_earlier_versions_merge_patch_co_owns_is_removed_once(self):
        # An upgraded cluster: the status was written by merge patches (an Update
        # entry of manager "isolation-gate", named from the user agent). The gate's
        # apply shares runtimeClassName with it, so leaving it out does not remove
        # it: the gate removes it with a merge patch, once.
        old = self.someone_else()
        old.user_agent = "isolation-gate/0.0.9"
        old.call_api(
            "/apis/%s/%s/namespaces/%s/components/report-parser/status" % (GROUP, VERSION, NS), "PATCH",
            header_params={"Content-Type": "application/merge-patch+json", "Accept": "application/json"},
            body={"status": {"isolation": "RequireSetec", "runtimeClassName": tc.RC, "contentTrust": "untrusted"}},
            response_type="object", auth_settings=["BearerToken"], _return_http_data_only=True)
        c = self.api.get("components", "report-parser", namespace=NS)
        self.assertEqual([(e["manager"], e["operation"]) for e in c["metadata"]["managedFields"]
                          if e.get("subresource") == "status"], [("isolation-gate", "Update")])
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("the gate's conditions", lambda: self.condition_types("report-parser") == list(OURS))
        mark = self.api.request_mark()
        self.api.delete("nodes", "node-1")
        wait_until("Deny without runtimeClassName",
                   lambda: (self.status("report-parser") or {}).get("isolation") == "Deny"
                   and "runtimeClassName" not in self.status("report-parser"))
        writes = self.gate_writes("report-parser", since=mark)
        removal = [e for e in self.api.requests(since=mark, method="PATCH", path=r"/report-parser/status$")
                   if e["headers"].get("Content-Type") == "application/merge-patch+json"]
        self.assertEqual(len(writes), 1)
        self.assertEqual(len(removal), 1)
        for e in self.api.get("components", "report-parser", NS)["metadata"]["managedFields"]:
            self.assertNotIn("f:runtimeClassName", e["fieldsV1"].get("f:status", {}), e)
        # Nothing more: the status holds what the gate applies.
        mark = self.api.request_mark()
        before = a.metric_values("isolation_gate_status_writes_total")
        self.apply_condition(self.someone_else(), "report-parser")
        self.processed(a, before)
        self.assertEqual(self.api.requests(since=mark, method="PATCH", path=r"/report-parser/status$",
                                           header=("User-Agent", "^isolation-gate/")), [])


if __name__ == "__main__":
    unittest.main()
