"""Workload templates on /validate/workloads (docs/architecture.md, "Admission rules"), over real HTTPS."""

import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
TEMPLATE_PATH = {k: "spec.template" for k in KINDS}
TEMPLATE_PATH["CronJob"] = "spec.jobTemplate.spec.template"


def template_of(obj):
    if obj["kind"] == "CronJob":
        return obj["spec"]["jobTemplate"]["spec"]["template"]
    return obj["spec"]["template"]


def pod_from_template(obj, name="from-template"):
    tmpl = copy.deepcopy(template_of(obj))
    meta = tmpl.get("metadata") or {}
    meta["name"] = name
    meta["namespace"] = obj["metadata"].get("namespace", "team-a")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": tmpl["spec"]}


def reason_part(message, marker):
    """The message after the subject prefix ('... denied: ' or '... would be denied: ')."""
    idx = message.find(marker)
    if idx < 0:
        raise AssertionError("%r not in %r" % (marker, message))
    return message[idx + len(marker):]


class WorkloadChecks(object):
    def workload(self, obj, **kw):
        return self.server.review("/validate/workloads", h.workload_review(obj, **kw))["response"]

    def pod(self, pod):
        return self.server.review("/mutate/pods", h.pod_review(pod))["response"]

    def assert_denied_like_its_pods(self, obj, **kw):
        resp = self.workload(obj, **kw)
        self.assertIs(resp["allowed"], False, resp)
        self.assertEqual(resp["status"]["code"], 403)
        self.assertEqual(resp["status"]["reason"], "Forbidden")
        self.assertNotIn("patch", resp)
        self.assertNotIn("patchType", resp)
        msg = resp["status"]["message"]
        self.assertTrue(msg.startswith('%s "%s" in namespace "team-a" denied: its pods would be denied: '
                                       % (obj["kind"], obj["metadata"]["name"])), msg)
        pod_resp = self.pod(pod_from_template(obj))
        self.assertIs(pod_resp["allowed"], False)
        self.assertEqual(reason_part(msg, "its pods would be denied: "),
                         reason_part(pod_resp["status"]["message"], " denied: "))
        self.assertEqual(resp["auditAnnotations"]["decision"], pod_resp["auditAnnotations"]["decision"])
        return resp


class HostedWithoutSandbox(WorkloadChecks, h.ServerTestCase):
    server_kwargs = {"sandbox": "unavailable"}

    def test_untrusted_templates_are_denied_at_apply_time_with_the_pods_message(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                obj = h.make_workload(kind, name="rp-" + kind.lower())
                resp = self.assert_denied_like_its_pods(obj)
                self.assertIn("To fix", resp["status"]["message"])
                self.assertEqual(resp["auditAnnotations"]["decision"], "Deny")

    def test_untrusted_templates_are_denied_on_update_too(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                old = h.make_workload(kind, name="upd", component="docs-indexer")
                new = h.make_workload(kind, name="upd", component="report-parser")
                self.assert_denied_like_its_pods(new, operation="UPDATE", old_object=old)

    def test_trusted_templates_are_admitted_and_never_patched(self):
        for kind in KINDS:
            for op in ("CREATE", "UPDATE"):
                with self.subTest(kind=kind, operation=op):
                    obj = h.make_workload(kind, component="docs-indexer")
                    resp = self.workload(obj, operation=op, old_object=obj if op == "UPDATE" else None)
                    self.assertIs(resp["allowed"], True, resp)
                    self.assertNotIn("patch", resp)
                    self.assertNotIn("patchType", resp)
                    self.assertEqual(resp["auditAnnotations"]["decision"], "AllowInProcess")

    def test_delete_is_allowed(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                old = h.make_workload(kind, component="report-parser")
                review = h.workload_review(old, operation="DELETE", old_object=old)
                review["request"]["object"] = None
                resp = self.server.review("/validate/workloads", review)["response"]
                self.assertIs(resp["allowed"], True, resp)
                self.assertNotIn("patch", resp)

    def test_shipped_deployment_example_is_denied(self):
        obj = h.example_pod("report-parser-deployment.yaml")
        resp = self.assert_denied_like_its_pods(obj)
        self.assertIn('"report-parser"', resp["status"]["message"])

    def test_shipped_cronjob_example_is_admitted_with_the_trust_warning(self):
        obj = h.example_pod("legacy-exporter-cronjob.yaml")
        resp = self.workload(obj)
        self.assertIs(resp["allowed"], True, resp)
        self.assertNotIn("patch", resp)
        self.assertTrue(any("treated as trusted" in w for w in resp.get("warnings", [])), resp)

    def test_template_without_component_label_is_denied_naming_the_template_path(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                obj = h.make_workload(kind, component=None)
                resp = self.workload(obj)
                self.assertIs(resp["allowed"], False)
                self.assertEqual(resp["status"]["code"], 403)
                self.assertIn(TEMPLATE_PATH[kind] + ".metadata.labels", resp["status"]["message"])
                self.assertIn(h.COMPONENT_LABEL, resp["status"]["message"])

    def test_template_naming_an_unknown_component_is_denied(self):
        obj = h.make_workload("Deployment", component="ghost")
        resp = self.workload(obj)
        self.assertIs(resp["allowed"], False)
        self.assertIn('"ghost"', resp["status"]["message"])

    def test_workloads_in_never_enforced_namespaces_are_allowed(self):
        obj = h.make_workload("DaemonSet", component=None, namespace="kube-system")
        resp = self.workload(obj)
        self.assertIs(resp["allowed"], True, resp)

    def test_workload_without_template_is_answered_not_allowed(self):
        obj = h.make_workload("Deployment")
        del obj["spec"]["template"]
        resp = self.workload(obj)
        self.assertIs(resp["allowed"], False)
        self.assertIn("spec.template", resp["status"]["message"])


class HostedWithSandbox(WorkloadChecks, h.ServerTestCase):
    server_kwargs = {"sandbox": "available"}

    def test_templates_that_would_be_patched_are_admitted_unchanged(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                obj = h.make_workload(kind, component="report-parser")
                resp = self.workload(obj)
                self.assertIs(resp["allowed"], True, resp)
                self.assertNotIn("patch", resp)
                self.assertNotIn("patchType", resp)
                self.assertEqual(resp["auditAnnotations"]["decision"], "RequireSetec")

    def test_templates_with_host_namespaces_are_denied_like_their_pods(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                obj = h.make_workload(kind, name="hn", spec_extra={"hostNetwork": True})
                resp = self.assert_denied_like_its_pods(obj)
                self.assertIn("hostNetwork", resp["status"]["message"])

    def test_templates_with_privileged_init_containers_are_denied_on_update(self):
        for kind in KINDS:
            with self.subTest(kind=kind):
                old = h.make_workload(kind, name="pi")
                new = copy.deepcopy(old)
                template_of(new)["spec"]["initContainers"] = [
                    {"name": "setup", "image": "i", "securityContext": {"privileged": True}}]
                resp = self.assert_denied_like_its_pods(new, operation="UPDATE", old_object=old)
                self.assertIn('"init:setup"', resp["status"]["message"])

    def test_template_runtime_class_is_not_required_at_apply_time(self):
        obj = h.make_workload("Deployment", spec_extra={"runtimeClassName": "runc"})
        resp = self.workload(obj)
        self.assertIs(resp["allowed"], True, resp)
        self.assertNotIn("patch", resp)


if __name__ == "__main__":
    unittest.main()
