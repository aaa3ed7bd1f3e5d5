"""The API server's AdmissionReview contract (docs/architecture.md, "Request path"), over real HTTPS."""

import os
import socket
import ssl
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

ENDPOINTS = ("/mutate/pods", "/validate/pods", "/validate/workloads", "/validate/components")
VALIDATING = ("/validate/pods", "/validate/workloads", "/validate/components")


def review_for(path, pod):
    """A review an endpoint accepts, built around `pod` (a Pod dict)."""
    if path in ("/mutate/pods", "/validate/pods"):
        return h.pod_review(pod)
    if path == "/validate/workloads":
        return h.workload_review(h.make_workload("Deployment", component=pod["metadata"]["labels"][h.COMPONENT_LABEL]))
    return h.component_review(h.example_component("docs-indexer.yaml"))


class HostedSandboxAvailable(h.ServerTestCase):
    """setec-only shape, sandbox available: every component is RequireSetec."""

    server_kwargs = {"sandbox": "available", "shape": None}

    def test_uid_is_echoed_by_every_endpoint(self):
        for path in ENDPOINTS:
            review = review_for(path, h.example_pod("docs-indexer-pod.yaml"))
            uid = "uid-" + h.new_uid()
            review["request"]["uid"] = uid
            out = self.server.review(path, review)
            self.assertEqual(out["response"]["uid"], uid, path)

    def test_api_version_and_kind_are_echoed_for_v1_and_v1beta1(self):
        for api_version in ("admission.k8s.io/v1", "admission.k8s.io/v1beta1"):
            for path in ENDPOINTS:
                review = review_for(path, h.example_pod("report-parser-pod.yaml"))
                review["apiVersion"] = api_version
                out = self.server.review(path, review)
                self.assertEqual(out["apiVersion"], api_version, path)
                self.assertEqual(out["kind"], "AdmissionReview", path)
                self.assertIn("response", out)

    def test_mutate_pods_returns_base64_json_patch_when_something_changes(self):
        pod = h.example_pod("report-parser-pod.yaml")
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertTrue(resp["allowed"])
        self.assertEqual(resp["patchType"], "JSONPatch")
        v1pod, patched, ops = h.patched_pod(pod, resp)
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")
        self.assertEqual(v1pod.metadata.annotations[h.ISOLATION_ANNOTATION], "RequireSetec")
        # Nothing else changed.
        patched["spec"].pop("runtimeClassName")
        patched["metadata"].pop("annotations")
        self.assertEqual(patched, pod)

    def test_pod_already_on_the_sandbox_with_the_annotation_gets_no_patch(self):
        pod = h.make_pod(component="report-parser",
                         annotations={h.ISOLATION_ANNOTATION: "RequireSetec"},
                         spec_extra={"runtimeClassName": "kata-fc"})
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertTrue(resp["allowed"])
        self.assertNotIn("patch", resp)
        self.assertNotIn("patchType", resp)

    def test_validating_endpoints_never_return_a_patch(self):
        pod = h.example_pod("report-parser-pod.yaml")  # would be patched by /mutate/pods
        on_sandbox = h.make_pod(component="report-parser", spec_extra={"runtimeClassName": "kata-fc"})
        reviews = [
            ("/validate/pods", h.pod_review(pod)),
            ("/validate/pods", h.pod_review(on_sandbox)),
            ("/validate/workloads", h.workload_review(h.make_workload("Deployment"))),
            ("/validate/workloads", h.workload_review(h.make_workload("CronJob", component="docs-indexer"))),
            ("/validate/components", h.component_review(h.example_component("legacy-exporter.yaml"))),
        ]
        for path, review in reviews:
            resp = self.server.review(path, review)["response"]
            self.assertNotIn("patch", resp, path)
            self.assertNotIn("patchType", resp, path)

    def test_audit_annotations_carry_decision_trust_shape_and_sandbox(self):
        resp = self.server.review("/mutate/pods", h.pod_review(h.example_pod("docs-indexer-pod.yaml")))["response"]
        audit = resp["auditAnnotations"]
        self.assertEqual(audit["decision"], "RequireSetec")
        self.assertEqual(audit["content-trust"], "trusted")
        self.assertEqual(audit["shape"], "setec-only")
        self.assertEqual(audit["sandbox"], "available")

    def test_dry_run_gets_the_same_answer(self):
        for pod_file in ("report-parser-pod.yaml", "docs-indexer-pod.yaml"):
            pod = h.example_pod(pod_file)
            for path in ("/mutate/pods", "/validate/pods"):
                normal = self.server.review(path, h.pod_review(pod, uid="same"))["response"]
                dry = self.server.review(path, h.pod_review(pod, uid="same", dry_run=True))["response"]
                self.assertEqual(normal, dry, (pod_file, path))

    def test_timeout_query_parameter_is_accepted(self):
        pod = h.example_pod("report-parser-pod.yaml")
        for path in ENDPOINTS:
            plain = self.server.review(path, review_for(path, pod))["response"]
            timed = self.server.review(path, review_for(path, pod), query="?timeout=10s")["response"]
            plain.pop("uid")
            timed.pop("uid")
            self.assertEqual(plain, timed, path)

    def test_concurrent_reviews_each_get_their_own_answer(self):
        import threading
        errors = []

        def worker(n):
            try:
                conn = self.server.connection()
                try:
                    for i in range(15):
                        pod = h.example_pod("report-parser-pod.yaml" if (n + i) % 2 else "docs-indexer-pod.yaml")
                        uid = "c-%d-%d" % (n, i)
                        resp = self.server.review("/mutate/pods", h.pod_review(pod, uid=uid), conn=conn)["response"]
                        if resp["uid"] != uid or not resp["allowed"]:
                            errors.append(resp)
                        want = pod["metadata"]["labels"][h.COMPONENT_LABEL]
                        if resp["auditAnnotations"]["component"] != want:
                            errors.append(resp)
                finally:
                    conn.close()
            except Exception as e:  # reported below
                errors.append(repr(e))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse([t for t in threads if t.is_alive()])
        self.assertEqual(errors, [])

    def test_every_warning_is_under_120_characters(self):
        long_rc = "runtime-" + "x" * 240
        pods = [
            h.make_pod(component="report-parser", spec_extra={"runtimeClassName": long_rc}),
            h.make_pod(component="legacy-exporter", spec_extra={"runtimeClassName": "runc"}),
            h.make_pod(name="n" * 250, component="legacy-exporter",
                       spec_extra={"runtimeClassName": "y" * 200}),
        ]
        seen = 0
        for pod in pods:
            resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
            for w in resp.get("warnings", []):
                seen += 1
                self.assertLess(len(w), 120, w)
                self.assertLess(len(w.encode("utf-8")), 120, w)
        self.assertGreaterEqual(seen, 3)
        # Cut on a character boundary, never inside a UTF-8 sequence.
        for rc in ("\u00e9" * 100, "a" + "\u20ac" * 80, "ab" + "\U0001d11e" * 60):
            pod = h.make_pod(component="docs-indexer", spec_extra={"runtimeClassName": rc})
            resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
            self.assertTrue(resp.get("warnings"))
            for w in resp["warnings"]:
                self.assertLess(len(w.encode("utf-8")), 120, w)
                self.assertNotIn("\ufffd", w)
        comp = h.example_component("legacy-exporter.yaml")
        comp["metadata"]["name"] = "c" * 250
        resp = self.server.review("/validate/components", h.component_review(comp))["response"]
        self.assertTrue(resp.get("warnings"))
        for w in resp["warnings"]:
            self.assertLess(len(w), 120, w)


class HostedSandboxUnavailable(h.ServerTestCase):
    """setec-only shape without the sandbox: untrusted components are denied."""

    server_kwargs = {"sandbox": "unavailable", "shape": "setec-only"}

    def assert_actionable_denial(self, resp, component, namespace, trust_phrase):
        self.assertIs(resp["allowed"], False)
        status = resp["status"]
        self.assertEqual(status["code"], 403)
        self.assertEqual(status["reason"], "Forbidden")
        msg = status["message"]
        self.assertIn('"%s"' % component, msg)
        self.assertIn('namespace "%s"' % namespace, msg)
        self.assertIn(trust_phrase, msg)
        self.assertIn("setec-only", msg)
        self.assertIn("unavailable", msg)
        self.assertIn("kata-fc", msg)
        self.assertIn("To fix", msg)

    def test_denial_is_403_forbidden_with_an_actionable_message(self):
        pod = h.example_pod("report-parser-pod.yaml")
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        # Names the component, namespace, trust and that it was declared, shape, sandbox, fix.
        self.assert_actionable_denial(resp, "report-parser", "team-a", "untrusted (content_trust: untrusted)")
        self.assertNotIn("patch", resp)

    def test_denial_is_the_same_on_validate_pods_and_for_dry_run(self):
        pod = h.example_pod("report-parser-pod.yaml")
        mutate = self.server.review("/mutate/pods", h.pod_review(pod, uid="u"))["response"]
        validate = self.server.review("/validate/pods", h.pod_review(pod, uid="u"))["response"]
        dry = self.server.review("/mutate/pods", h.pod_review(pod, uid="u", dry_run=True))["response"]
        self.assertEqual(mutate, validate)
        self.assertEqual(mutate, dry)

    def test_denial_carries_audit_annotations(self):
        resp = self.server.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")))["response"]
        audit = resp["auditAnnotations"]
        self.assertEqual(audit["decision"], "Deny")
        self.assertEqual(audit["content-trust"], "untrusted")
        self.assertEqual(audit["shape"], "setec-only")
        self.assertEqual(audit["sandbox"], "unavailable")

    def test_allow_in_process_gets_only_the_annotation_patch(self):
        pod = h.example_pod("docs-indexer-pod.yaml")
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertTrue(resp["allowed"])
        v1pod, patched, ops = h.patched_pod(pod, resp)
        self.assertIsNone(v1pod.spec.runtime_class_name)
        self.assertEqual(v1pod.metadata.annotations,
                         {"team": "docs", h.ISOLATION_ANNOTATION: "AllowInProcess"})
        self.assertEqual(resp["auditAnnotations"]["decision"], "AllowInProcess")

    def test_allow_in_process_pod_already_annotated_gets_no_patch(self):
        pod = h.make_pod(component="docs-indexer", annotations={h.ISOLATION_ANNOTATION: "AllowInProcess"})
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertTrue(resp["allowed"])
        self.assertNotIn("patch", resp)

    def test_workload_denial_is_403_forbidden_with_the_same_details(self):
        resp = self.server.review("/validate/workloads",
                                  h.workload_review(h.make_workload("Deployment", name="rp")))["response"]
        self.assert_actionable_denial(resp, "report-parser", "team-a", "content_trust: untrusted")
        self.assertIn('Deployment "rp"', resp["status"]["message"])


class Certificate(h.ServerTestCase):
    """The serving certificate verifies as the API server checks it (caBundle + service name)."""

    server_kwargs = {"sandbox": "available"}

    def test_certificate_verifies_for_the_service_dns_names(self):
        for name in ("isolation-gate.isolation-gate-system.svc", "isolation-gate.isolation-gate-system",
                     "isolation-gate.isolation-gate-system.svc.cluster.local", "isolation-gate"):
            with self.server.tls_socket(server_hostname=name) as s:
                self.assertIsNotNone(s.getpeercert())
                self.assertIn(s.version(), ("TLSv1.2", "TLSv1.3"))

    def test_certificate_fails_for_a_wrong_hostname(self):
        for name in ("evil.example.com", "isolation-gate.other-namespace.svc", "localhost"):
            with self.assertRaises(ssl.SSLCertVerificationError, msg=name):
                s = self.server.tls_socket(server_hostname=name)
                s.close()

    def test_certificate_fails_against_another_ca(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            other = h.make_certs(d)
            with self.assertRaises(ssl.SSLCertVerificationError):
                s = self.server.tls_socket(context=h.client_context(other["ca.crt"]))
                s.close()

    def test_self_signed_mode_writes_a_ca_that_verifies_the_service_name(self):
        server = h.GateServer(sandbox="available", tls="self")
        server.start()
        self.addCleanup(server.stop)
        for name in (h.SERVICE_HOST, "localhost"):
            with server.tls_socket(server_hostname=name) as s:
                self.assertIsNotNone(s.getpeercert())
        resp = server.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")))["response"]
        self.assertTrue(resp["allowed"])


if __name__ == "__main__":
    unittest.main()
