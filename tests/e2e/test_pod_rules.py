"""Pod rules (docs/architecture.md, "Admission rules") on /mutate/pods and /validate/pods, over real HTTPS.

Each class runs its own server process (setUpClass) for one sandbox state and
one deployment shape. Every returned patch is applied with python3-jsonpatch
and the result loaded as a kubernetes V1Pod.
"""

import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402


def legacy_exporter_pod():
    """A Pod made from the shipped legacy-exporter CronJob's template (trust omitted)."""
    cj = h.example_pod("legacy-exporter-cronjob.yaml")
    tmpl = copy.deepcopy(cj["spec"]["jobTemplate"]["spec"]["template"])
    tmpl["metadata"]["name"] = "legacy-exporter-0"
    tmpl["metadata"]["namespace"] = "team-a"
    return dict({"apiVersion": "v1", "kind": "Pod"}, **tmpl)


EXAMPLES = {
    "report-parser": lambda: h.example_pod("report-parser-pod.yaml"),   # untrusted
    "docs-indexer": lambda: h.example_pod("docs-indexer-pod.yaml"),     # trusted
    "legacy-exporter": legacy_exporter_pod,                             # omitted -> trusted
}


class DecisionMatrix(object):
    """Mixin: the shipped examples get `expected[component]` from this server."""

    expected = {}
    shape_name = "setec-only"
    sandbox_state = "unavailable"
    runtime_class = "kata-fc"

    def check_admitted(self, pod, resp, decision):
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], decision)
        v1pod, patched, ops = h.patched_pod(pod, resp)
        self.assertEqual(v1pod.metadata.annotations[h.ISOLATION_ANNOTATION], decision)
        if decision == "RequireSetec":
            self.assertEqual(v1pod.spec.runtime_class_name, self.runtime_class)
        else:
            self.assertEqual(v1pod.spec.runtime_class_name, pod["spec"].get("runtimeClassName"))
            self.assertFalse([op for op in ops if "runtimeClassName" in op["path"]], ops)
        # Existing annotations survive.
        for k, v in ((pod.get("metadata") or {}).get("annotations") or {}).items():
            if k != h.ISOLATION_ANNOTATION:
                self.assertEqual(v1pod.metadata.annotations[k], v)
        return v1pod

    def test_shipped_examples_get_the_expected_decision_on_mutate(self):
        for component, decision in sorted(self.expected.items()):
            with self.subTest(component=component):
                pod = EXAMPLES[component]()
                resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
                audit = resp["auditAnnotations"]
                self.assertEqual(audit["decision"], decision)
                self.assertEqual(audit["shape"], self.shape_name)
                self.assertEqual(audit["sandbox"], self.sandbox_state)
                self.assertEqual(audit["component"], component)
                if decision == "Deny":
                    self.assertIs(resp["allowed"], False)
                    self.assertEqual(resp["status"]["code"], 403)
                    self.assertNotIn("patch", resp)
                else:
                    self.check_admitted(pod, resp, decision)

    def test_shipped_examples_after_mutation_pass_validate_pods(self):
        for component, decision in sorted(self.expected.items()):
            with self.subTest(component=component):
                pod = EXAMPLES[component]()
                mresp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
                final = pod
                if mresp.get("patch"):
                    final, _ = h.apply_response_patch(pod, mresp)
                vresp = self.server.review("/validate/pods", h.pod_review(final))["response"]
                self.assertEqual(vresp["allowed"], decision != "Deny", vresp)
                self.assertEqual(vresp["auditAnnotations"]["decision"], decision)
                self.assertNotIn("patch", vresp)

    def test_legacy_component_without_content_trust_warns_treated_as_trusted(self):
        if "legacy-exporter" not in self.expected:
            self.skipTest("not in this matrix")
        resp = self.server.review("/mutate/pods", h.pod_review(legacy_exporter_pod()))["response"]
        self.assertEqual(resp["auditAnnotations"]["content-trust"], "trusted")
        self.assertTrue(any("treated as trusted" in w for w in resp.get("warnings", [])), resp)


class HostedWithSandbox(DecisionMatrix, h.ServerTestCase):
    server_kwargs = {"sandbox": "available", "shape": None}
    sandbox_state = "available"
    expected = {"report-parser": "RequireSetec", "docs-indexer": "RequireSetec",
                "legacy-exporter": "RequireSetec"}


class HostedWithoutSandbox(DecisionMatrix, h.ServerTestCase):
    server_kwargs = {"sandbox": "unavailable", "shape": "setec-only"}
    expected = {"report-parser": "Deny", "docs-indexer": "AllowInProcess",
                "legacy-exporter": "AllowInProcess"}

    def test_untrusted_component_is_denied_naming_shape_and_sandbox(self):
        resp = self.server.review("/mutate/pods", h.pod_review(EXAMPLES["report-parser"]()))["response"]
        msg = resp["status"]["message"]
        self.assertIn('pod "report-parser-0" in namespace "team-a"', msg)
        self.assertIn("setec-only", msg)
        self.assertIn("unavailable", msg)
        self.assertIn("To fix", msg)

    def test_host_access_is_denied_in_process_too(self):
        # Outside a microVM a pod may not reach the host either (issue 25: it once
        # could, and a trusted Component's pod could take over its node).
        pod = h.make_pod(component="docs-indexer", spec_extra={"hostNetwork": True})
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertIs(resp["allowed"], False, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], "AllowInProcess")
        self.assertEqual(resp["auditAnnotations"]["reason"], "HostAccessOutsideMicroVM")
        self.assertIn("asks for hostNetwork", resp["status"]["message"])


class SelfHostedWithoutSandbox(DecisionMatrix, h.ServerTestCase):
    server_kwargs = {"sandbox": "unavailable", "shape": "customer-isolation"}
    shape_name = "customer-isolation"
    expected = {"report-parser": "AllowInProcess", "docs-indexer": "AllowInProcess",
                "legacy-exporter": "AllowInProcess"}

    def test_untrusted_component_is_admitted_leaving_isolation_to_the_operator(self):
        resp = self.server.review("/mutate/pods", h.pod_review(EXAMPLES["report-parser"]()))["response"]
        self.assertTrue(resp["allowed"])
        self.assertEqual(resp["auditAnnotations"]["content-trust"], "untrusted")


class SelfHostedWithSandbox(DecisionMatrix, h.ServerTestCase):
    server_kwargs = {"sandbox": "available", "shape": "customer-isolation"}
    shape_name = "customer-isolation"
    sandbox_state = "available"
    expected = {"report-parser": "RequireSetec", "docs-indexer": "RequireSetec",
                "legacy-exporter": "RequireSetec"}


class UnrecognisedShapeFallsBackToHosted(DecisionMatrix, h.ServerTestCase):
    server_kwargs = {"sandbox": "unavailable", "shape": "Customer-Isolation"}
    expected = {"report-parser": "Deny", "docs-indexer": "AllowInProcess",
                "legacy-exporter": "AllowInProcess"}

    def test_denial_says_the_shape_value_was_not_recognised(self):
        resp = self.server.review("/mutate/pods", h.pod_review(EXAMPLES["report-parser"]()))["response"]
        self.assertIn('GIBSON_UNTRUSTED_EXEC="Customer-Isolation" is not recognised', resp["status"]["message"])

    def test_startup_log_says_it_fell_back_to_setec_only(self):
        lines = [l for l in self.server.log_lines() if "deployment shape" in l.get("msg", "")]
        self.assertEqual(len(lines), 1, self.server.stderr_text())
        self.assertEqual(lines[0]["level"], "warn")
        self.assertIn("fell back to setec-only", lines[0]["msg"])


class RequireSetecRules(h.ServerTestCase):
    """Hosted shape with the sandbox: every component pod must run on kata-fc."""

    server_kwargs = {"sandbox": "available", "shape": None}

    def mutate(self, pod, namespace=None):
        return self.server.review("/mutate/pods", h.pod_review(pod, namespace=namespace))["response"]

    def validate(self, pod, namespace=None):
        return self.server.review("/validate/pods", h.pod_review(pod, namespace=namespace))["response"]

    def assert_denied(self, resp, *fragments):
        self.assertIs(resp["allowed"], False, resp)
        self.assertEqual(resp["status"]["code"], 403)
        self.assertEqual(resp["status"]["reason"], "Forbidden")
        self.assertNotIn("patch", resp)
        for f in fragments:
            self.assertIn(f, resp["status"]["message"])

    # -- component label --------------------------------------------------
    def test_pod_without_component_label_is_denied(self):
        for labels in (None, {"app": "x"}, {h.COMPONENT_LABEL: ""}):
            with self.subTest(labels=labels):
                pod = h.make_pod(component=None, labels=labels)
                if labels and h.COMPONENT_LABEL in labels:
                    pod["metadata"]["labels"] = labels
                for resp in (self.mutate(pod), self.validate(pod)):
                    self.assert_denied(resp, h.COMPONENT_LABEL, 'namespace "team-a"', "To fix")
                    self.assertEqual(resp["auditAnnotations"]["decision"], "Deny")
                    self.assertEqual(resp["auditAnnotations"]["reason"], "MissingComponentLabel")

    def test_pod_naming_an_unknown_component_is_denied(self):
        pod = h.make_pod(component="no-such-component")
        self.assert_denied(self.mutate(pod), '"no-such-component"', "does not exist", 'namespace "team-a"')
        self.assert_denied(self.validate(pod), '"no-such-component"', "does not exist")

    def test_component_from_another_namespace_is_unknown(self):
        pod = h.make_pod(component="report-parser", namespace="team-b")
        self.assert_denied(self.mutate(pod), '"report-parser"', "does not exist", 'namespace "team-b"')

    # -- runtimeClassName ---------------------------------------------------
    def test_other_runtime_class_is_replaced_with_a_warning(self):
        pod = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "runc"})
        resp = self.mutate(pod)
        self.assertTrue(resp["allowed"])
        v1pod, patched, ops = h.patched_pod(pod, resp)
        rc_ops = [op for op in ops if op["path"] == "/spec/runtimeClassName"]
        self.assertEqual(rc_ops, [{"op": "replace", "path": "/spec/runtimeClassName", "value": "kata-fc"}])
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")
        self.assertEqual(v1pod.metadata.annotations[h.ISOLATION_ANNOTATION], "RequireSetec")
        warnings = resp.get("warnings", [])
        self.assertTrue(any('"runc"' in w and '"kata-fc"' in w for w in warnings), warnings)

    def test_missing_runtime_class_is_added_without_a_warning(self):
        pod = h.make_pod(component="docs-indexer")
        resp = self.mutate(pod)
        v1pod, _, ops = h.patched_pod(pod, resp)
        self.assertIn({"op": "add", "path": "/spec/runtimeClassName", "value": "kata-fc"}, ops)
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")
        self.assertNotIn("warnings", resp)

    def test_null_runtime_class_is_set(self):
        pod = h.make_pod(component="docs-indexer", spec_extra={"runtimeClassName": None})
        v1pod, _, _ = h.patched_pod(pod, self.mutate(pod))
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")

    def test_validate_pods_denies_require_setec_pod_not_on_the_sandbox(self):
        for rc in ("runc", "kata-qemu", None):
            with self.subTest(runtimeClassName=rc):
                extra = {"runtimeClassName": rc} if rc else None
                pod = h.make_pod(component="report-parser", spec_extra=extra,
                                 annotations={h.ISOLATION_ANNOTATION: "RequireSetec"})
                resp = self.validate(pod)
                self.assert_denied(resp, '"kata-fc"', '"report-parser"', "To fix")
                self.assertIn('"%s"' % rc if rc else "not set", resp["status"]["message"])
                self.assertEqual(resp["auditAnnotations"]["reason"], "RuntimeClassChanged")

    def test_validate_pods_admits_require_setec_pod_on_the_sandbox(self):
        pod = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "kata-fc"},
                         annotations={h.ISOLATION_ANNOTATION: "RequireSetec"})
        resp = self.validate(pod)
        self.assertIs(resp["allowed"], True, resp)
        self.assertNotIn("patch", resp)

    # -- what a microVM cannot provide ----------------------------------------
    def test_host_namespaces_are_denied_naming_the_reason(self):
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            with self.subTest(field=field):
                pod = h.make_pod(component="report-parser", spec_extra={field: True})
                for resp in (self.mutate(pod), self.validate(pod)):
                    self.assert_denied(resp, "cannot provide " + field, '"kata-fc"', "To fix")
                    self.assertEqual(resp["auditAnnotations"]["reason"], "IncompatibleWithMicroVM")
                    self.assertEqual(resp["auditAnnotations"]["decision"], "RequireSetec")
                pod["spec"][field] = False
                self.assertTrue(self.mutate(pod)["allowed"])

    def privileged(self, name):
        return {"name": name, "image": "registry.example.com/x:1",
                "securityContext": {"privileged": True}}

    def test_privileged_container_is_denied_naming_it(self):
        pod = h.make_pod(component="docs-indexer",
                         containers=[{"name": "ok", "image": "i"}, self.privileged("root-shell")])
        for resp in (self.mutate(pod), self.validate(pod)):
            self.assert_denied(resp, 'privileged container "root-shell"')

    def test_privileged_init_container_is_denied_naming_it(self):
        pod = h.make_pod(component="docs-indexer", spec_extra={"initContainers": [self.privileged("setup")]})
        for resp in (self.mutate(pod), self.validate(pod)):
            self.assert_denied(resp, 'privileged container "init:setup"')

    def test_privileged_ephemeral_container_is_denied_naming_it(self):
        pod = h.make_pod(component="docs-indexer",
                         spec_extra={"ephemeralContainers": [self.privileged("debugger")]})
        for resp in (self.mutate(pod), self.validate(pod)):
            self.assert_denied(resp, 'privileged container "ephemeral:debugger"')

    def test_unprivileged_security_context_is_admitted(self):
        c = {"name": "c", "image": h.component_image("docs-indexer"),
             "securityContext": {"privileged": False, "runAsNonRoot": True}}
        pod = h.make_pod(component="docs-indexer", containers=[c])
        v1pod, _, _ = h.patched_pod(pod, self.mutate(pod))
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")

    def test_every_conflict_is_named_at_once(self):
        pod = h.make_pod(component="report-parser", containers=[self.privileged("a")],
                         spec_extra={"hostNetwork": True, "hostPID": True, "hostIPC": True})
        self.assert_denied(self.mutate(pod), "hostNetwork", "hostPID", "hostIPC", 'privileged container "a"')

    # -- never-enforced namespaces ---------------------------------------------
    def test_never_enforced_namespaces_are_allowed_without_a_decision(self):
        for ns in ("kube-system", "kube-public", "kube-node-lease", "isolation-gate-system"):
            with self.subTest(namespace=ns):
                for pod in (h.make_pod(component=None, namespace=ns),
                            h.make_pod(component="report-parser", namespace=ns,
                                       spec_extra={"hostNetwork": True})):
                    for resp in (self.mutate(pod), self.validate(pod)):
                        self.assertIs(resp["allowed"], True, resp)
                        self.assertNotIn("patch", resp)
                        self.assertEqual(resp["auditAnnotations"]["decision"], "NotEnforced")

    def test_an_object_claiming_another_namespace_than_the_request_is_undecidable(self):
        # The object claims kube-system (never enforced) but the request (the
        # API server's truth, which refuses such a create itself) says team-a.
        pod = h.make_pod(component=None, namespace="kube-system")
        for resp in (self.mutate(pod, namespace="team-a"), self.validate(pod, namespace="team-a")):
            self.assertIs(resp["allowed"], False, resp)
            self.assertEqual(resp["status"]["code"], 400)
            self.assertIn('request.object.metadata.namespace "kube-system" is not request.namespace',
                          resp["status"]["message"])
        # No request.namespace at all: undecidable too, whatever the object says.
        review = h.pod_review(h.make_pod(component=None, namespace="kube-system"))
        del review["request"]["namespace"]
        resp = self.server.review("/mutate/pods", review)["response"]
        self.assertIs(resp["allowed"], False, resp)
        self.assertIn("request.namespace is missing", resp["status"]["message"])

    # -- RFC 6902 correctness of the patch ------------------------------------------
    def check_patch(self, pod, expect_annotations):
        resp = self.mutate(pod)
        self.assertTrue(resp["allowed"], resp)
        v1pod, patched, ops = h.patched_pod(pod, resp)
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")
        self.assertEqual(v1pod.metadata.annotations, expect_annotations)
        self.assertEqual(patched["metadata"]["annotations"], expect_annotations)
        # Labels, name and containers untouched.
        self.assertEqual(patched["metadata"]["labels"], pod["metadata"]["labels"])
        self.assertEqual(patched["spec"]["containers"], pod["spec"]["containers"])
        return ops

    def test_patch_adds_annotations_map_when_absent(self):
        pod = h.make_pod(component="docs-indexer")
        self.assertNotIn("annotations", pod["metadata"])
        self.check_patch(pod, {h.ISOLATION_ANNOTATION: "RequireSetec"})

    def test_patch_replaces_null_annotations(self):
        pod = h.make_pod(component="docs-indexer", annotations=None)
        pod["metadata"]["annotations"] = None
        self.check_patch(pod, {h.ISOLATION_ANNOTATION: "RequireSetec"})

    def test_patch_adds_to_empty_annotations(self):
        pod = h.make_pod(component="docs-indexer", annotations={})
        self.check_patch(pod, {h.ISOLATION_ANNOTATION: "RequireSetec"})

    def test_patch_keeps_existing_annotations_with_tilde_and_slash_keys(self):
        existing = {"a~b/c": "1", "example.com/x~1y": "2", "~0": "3", "/": "4", "team": "docs"}
        pod = h.make_pod(component="docs-indexer", annotations=dict(existing))
        ops = self.check_patch(pod, dict(existing, **{h.ISOLATION_ANNOTATION: "RequireSetec"}))
        self.assertIn({"op": "add", "path": "/metadata/annotations/gibson.zeroroot.ai~1isolation",
                       "value": "RequireSetec"}, ops)

    def test_patch_overwrites_a_wrong_decision_annotation(self):
        pod = h.make_pod(component="report-parser",
                         annotations={h.ISOLATION_ANNOTATION: "AllowInProcess", "k/~": "v"},
                         spec_extra={"runtimeClassName": "kata-fc"})
        ops = self.check_patch(pod, {h.ISOLATION_ANNOTATION: "RequireSetec", "k/~": "v"})
        self.assertFalse([op for op in ops if "runtimeClassName" in op["path"]], ops)

    def test_patch_for_generate_name_pod(self):
        pod = h.make_pod(component="docs-indexer")
        del pod["metadata"]["name"]
        pod["metadata"]["generateName"] = "docs-indexer-"
        resp = self.server.review("/mutate/pods", h.pod_review(pod, name=""))["response"]
        v1pod, _, _ = h.patched_pod(pod, resp)
        self.assertEqual(v1pod.metadata.generate_name, "docs-indexer-")
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")

    def test_full_example_pod_round_trips_as_v1pod(self):
        pod = h.example_pod("report-parser-pod.yaml")
        v1pod, patched, _ = h.patched_pod(pod, self.mutate(pod))
        self.assertEqual(v1pod.spec.containers[0].args, ["--input", "/reports"])
        self.assertEqual(v1pod.spec.containers[0].resources.limits, {"cpu": "1", "memory": "512Mi"})
        self.assertEqual(h.api_client().sanitize_for_serialization(v1pod), patched)


class CustomRuntimeClassAndNamespace(h.ServerTestCase):
    server_kwargs = {"sandbox": "available", "runtime_class": "setec-microvm", "namespace": "gate-ns"}

    def test_custom_runtime_class_is_used_in_the_patch(self):
        pod = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "kata-fc"})
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        v1pod, _, ops = h.patched_pod(pod, resp)
        self.assertEqual(v1pod.spec.runtime_class_name, "setec-microvm")
        self.assertIn({"op": "replace", "path": "/spec/runtimeClassName", "value": "setec-microvm"}, ops)

    def test_validate_pods_checks_the_custom_runtime_class(self):
        on = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "setec-microvm"})
        off = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "kata-fc"})
        self.assertTrue(self.server.review("/validate/pods", h.pod_review(on))["response"]["allowed"])
        resp = self.server.review("/validate/pods", h.pod_review(off))["response"]
        self.assertFalse(resp["allowed"])
        self.assertIn('"setec-microvm"', resp["status"]["message"])

    def test_own_namespace_flag_is_never_enforced(self):
        pod = h.make_pod(component=None, namespace="gate-ns")
        self.assertTrue(self.server.review("/mutate/pods", h.pod_review(pod))["response"]["allowed"])
        pod = h.make_pod(component=None, namespace="isolation-gate-system")
        self.assertFalse(self.server.review("/mutate/pods", h.pod_review(pod))["response"]["allowed"])


class AllowInProcessPatches(h.ServerTestCase):
    """Without the sandbox, trusted pods get only the annotation: patches still RFC 6902."""

    server_kwargs = {"sandbox": "unavailable"}

    def test_annotation_patch_for_every_annotations_shape(self):
        cases = [None, "null", {}, {"a~b/c": "1", "x/y": "2"},
                 {h.ISOLATION_ANNOTATION: "RequireSetec"}]
        for ann in cases:
            with self.subTest(annotations=ann):
                pod = h.make_pod(component="docs-indexer", spec_extra={"runtimeClassName": "runc"})
                if ann == "null":
                    pod["metadata"]["annotations"] = None
                elif ann is not None:
                    pod["metadata"]["annotations"] = dict(ann)
                resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
                v1pod, patched, ops = h.patched_pod(pod, resp)
                expect = dict(ann) if isinstance(ann, dict) else {}
                expect[h.ISOLATION_ANNOTATION] = "AllowInProcess"
                self.assertEqual(v1pod.metadata.annotations, expect)
                self.assertEqual(v1pod.spec.runtime_class_name, "runc")
                self.assertEqual(len(ops), 1, ops)


if __name__ == "__main__":
    unittest.main()
