"""Pods are bound to their Component (docs/security.md, "Pods are bound to their Component"), over real HTTPS.

A Component that declares spec.image binds every container, init container and
ephemeral container of a pod naming it to that image, except the images of
--allowed-extra-images. /validate/pods judges pod UPDATE and the
pods/ephemeralcontainers subresource by the same rules, so an image swap, a
changed component label or a privileged container added later is refused.
Workload templates and `isolation-gate evaluate` apply the same check.

The security page cites these tests by name.
"""

import copy
import json
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402
import test_cluster as tc  # noqa: E402
import test_install as ti  # noqa: E402

EXTRAS = "istio/proxyv2:1.20.0,mirror.example:5000/mesh/*"
FOREIGN = "evil.example/miner:1"
DOCS_IMAGE = h.component_image("docs-indexer")      # trusted
PARSER_IMAGE = h.component_image("report-parser")   # untrusted

UNBOUND_COMPONENT = {
    "apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
    "metadata": {"name": "unbound-tool", "namespace": "team-a"},
    "spec": {"kind": "tool", "policy": {"content_trust": "trusted"}},
}


def components_dir():
    """The example Components plus one without spec.image."""
    d = tempfile.mkdtemp(prefix="ig-binding-")
    for name in os.listdir(h.EXAMPLE_COMPONENTS):
        shutil.copy(os.path.join(h.EXAMPLE_COMPONENTS, name), d)
    with open(os.path.join(d, "unbound-tool.json"), "w") as f:
        json.dump(UNBOUND_COMPONENT, f)
    return d


def with_image(pod, image, index=0):
    pod = copy.deepcopy(pod)
    pod["spec"]["containers"][index]["image"] = image
    return pod


class BindingChecks(object):
    server_args = ()
    sandbox = "unavailable"

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = components_dir()
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        cls.server = h.GateServer(sandbox=cls.sandbox, components=cls.dir,
                                  extra_args=["--allowed-extra-images", EXTRAS])
        cls.server.start()
        cls.addClassCleanup(cls.server.stop)

    def answer(self, path, review):
        return self.server.review(path, review)["response"]

    def assert_denied(self, resp, reason, *needles):
        self.assertIs(resp["allowed"], False, resp)
        self.assertEqual(resp["status"]["code"], 403, resp)
        self.assertEqual(resp["status"]["reason"], "Forbidden")
        self.assertEqual(resp["auditAnnotations"]["reason"], reason, resp)
        self.assertNotIn("patch", resp)
        for n in needles:
            self.assertIn(n, resp["status"]["message"])
        return resp["status"]["message"]

    def update(self, old_pod, new_pod, sub_resource=None):
        return self.answer("/validate/pods", h.pod_review(new_pod, operation="UPDATE", old_object=old_pod,
                                                          sub_resource=sub_resource))


class BindingTest(BindingChecks, unittest.TestCase):
    """No sandbox, hosted shape: trusted Components run in-process, which is what the attack wants."""

    def test_trusted_components_label_on_a_foreign_image_is_denied(self):
        pod = h.make_pod(name="miner", component="docs-indexer", containers=[{"name": "main", "image": FOREIGN}])
        for path in ("/mutate/pods", "/validate/pods"):
            with self.subTest(path=path):
                msg = self.assert_denied(self.answer(path, h.pod_review(pod)), "ImageNotBound",
                                         'Component "docs-indexer", which is bound to image "%s"' % DOCS_IMAGE,
                                         'container "main" runs "%s"' % FOREIGN, "To fix")
                self.assertTrue(msg.startswith('pod "miner" in namespace "team-a" denied: '), msg)
        # The Component's own image is admitted, in-process (the gate's decision).
        ok = h.make_pod(name="docs", component="docs-indexer")
        resp = self.answer("/mutate/pods", h.pod_review(ok))
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], "AllowInProcess")
        # The same image under Docker's defaults would be the same image; another tag is not.
        resp = self.answer("/mutate/pods", h.pod_review(with_image(ok, DOCS_IMAGE.rsplit(":", 1)[0] + ":9.9.9")))
        self.assert_denied(resp, "ImageNotBound")

    def test_foreign_init_and_ephemeral_containers_are_denied(self):
        for field, name, prefix in (("initContainers", "setup", "init:"),
                                    ("ephemeralContainers", "debugger", "ephemeral:")):
            with self.subTest(field=field):
                pod = h.make_pod(name="p-" + name, component="docs-indexer",
                                 spec_extra={field: [{"name": name, "image": "busybox"}]})
                resp = self.answer("/mutate/pods", h.pod_review(pod))
                if field == "ephemeralContainers" and self.sandbox == "unavailable":
                    # Outside a microVM a non-admin's debug container is refused first
                    # (test_attacks.py has the whole rule).
                    self.assert_denied(resp, "EphemeralContainerRefused", 'ephemeral container "debugger"')
                    continue
                self.assert_denied(resp, "ImageNotBound",
                                   'container "%s%s" runs "busybox" (docker.io/library/busybox:latest)'
                                   % (prefix, name))

    def test_image_swapped_by_update_is_denied(self):
        old = h.make_pod(name="docs-1", component="docs-indexer")
        resp = self.update(old, with_image(old, FOREIGN))
        self.assert_denied(resp, "ImageNotBound", 'container "main" runs "%s"' % FOREIGN)
        # An update that changes nothing the rules read (a finalizer, another label) is admitted.
        same = copy.deepcopy(old)
        same["metadata"]["finalizers"] = ["example.com/hold"]
        same["metadata"]["labels"]["app"] = "docs"
        resp = self.update(old, same)
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], "Unchanged")
        # Swapping back to the bound image is judged and admitted.
        resp = self.update(with_image(old, FOREIGN), old)
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], "AllowInProcess")

    def test_component_label_changed_by_update_is_denied(self):
        old = h.make_pod(name="parser-1", component="report-parser")
        new = copy.deepcopy(old)
        new["metadata"]["labels"][h.COMPONENT_LABEL] = "docs-indexer"
        new["spec"]["containers"][0]["image"] = DOCS_IMAGE
        self.assert_denied(self.update(old, new), "ComponentLabelChanged",
                           'from "report-parser" to "docs-indexer"', "To fix")
        gone = copy.deepcopy(old)
        del gone["metadata"]["labels"][h.COMPONENT_LABEL]
        self.assert_denied(self.update(old, gone), "ComponentLabelChanged", 'from "report-parser" to (none)')

    def test_update_without_old_object_is_undecidable(self):
        pod = h.make_pod(name="docs-2", component="docs-indexer")
        resp = self.answer("/validate/pods", h.pod_review(pod, operation="UPDATE"))
        self.assertIs(resp["allowed"], False)
        self.assertEqual(resp["status"]["code"], 400)
        self.assertIn("request.oldObject is missing", resp["status"]["message"])

    def test_allowed_extra_images_are_exempt(self):
        pod = h.make_pod(name="meshed", component="docs-indexer", containers=[
            {"name": "main", "image": DOCS_IMAGE},
            {"name": "istio-proxy", "image": "docker.io/istio/proxyv2:1.20.0"}],
            spec_extra={"initContainers": [{"name": "mesh-init", "image": "mirror.example:5000/mesh/init:3"}]})
        for path in ("/mutate/pods", "/validate/pods"):
            resp = self.answer(path, h.pod_review(pod))
            self.assertIs(resp["allowed"], True, resp)
        # Another tag of the sidecar, and an image merely resembling the prefix, are not exempt.
        for image in ("istio/proxyv2:1.21.0", "mirror.example:5000/mesh-evil/x:1", "mirror.example/mesh/init:3"):
            with self.subTest(image=image):
                bad = with_image(pod, image, index=1)
                self.assert_denied(self.answer("/mutate/pods", h.pod_review(bad)), "ImageNotBound",
                                   'container "istio-proxy" runs "%s"' % image, "--allowed-extra-images")

    def test_component_without_spec_image_draws_a_warning(self):
        pod = h.make_pod(name="u-0", component="unbound-tool", containers=[{"name": "main", "image": FOREIGN}])
        for path in ("/mutate/pods", "/validate/pods"):
            resp = self.answer(path, h.pod_review(pod))
            self.assertIs(resp["allowed"], True, resp)
            self.assertIn('Component "unbound-tool" declares no spec.image: its pods are not bound to an image',
                          resp.get("warnings", []))
        obj = h.make_workload("Deployment", component="unbound-tool")
        resp = self.answer("/validate/workloads", h.workload_review(obj))
        self.assertIs(resp["allowed"], True, resp)
        self.assertTrue([w for w in resp.get("warnings", []) if "not bound to an image" in w], resp)

    def test_workload_template_on_a_foreign_image_is_denied(self):
        for kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob"):
            with self.subTest(kind=kind):
                obj = h.make_workload(kind, name="wl", component="docs-indexer")
                tmpl = obj["spec"]["jobTemplate"]["spec"]["template"] if kind == "CronJob" else obj["spec"]["template"]
                self.assertIs(self.answer("/validate/workloads", h.workload_review(obj))["allowed"], True)
                tmpl["spec"]["containers"][0]["image"] = FOREIGN
                for op in ("CREATE", "UPDATE"):
                    resp = self.answer("/validate/workloads", h.workload_review(obj, operation=op))
                    self.assert_denied(resp, "ImageNotBound", '%s "wl" in namespace "team-a" denied: its pods would '
                                       'be denied: ' % kind, 'container "main" runs "%s"' % FOREIGN)

    def test_component_with_an_invalid_image_is_rejected(self):
        comp = h.example_component("docs-indexer.yaml")
        comp["spec"]["image"] = "Registry.Example/UPPER:1"
        resp = self.answer("/validate/components", h.component_review(comp))
        self.assertIs(resp["allowed"], False, resp)
        self.assertIn('spec.image: "Registry.Example/UPPER:1" is not a valid image reference',
                      resp["status"]["message"])


class BindingSandboxTest(BindingChecks, unittest.TestCase):
    """The sandbox is there: Component pods run in the microVM, which cannot be privileged."""

    sandbox = "available"

    def test_privileged_ephemeral_container_added_later_is_denied(self):
        old = h.make_pod(name="parser-2", component="report-parser", spec_extra={"runtimeClassName": "kata-fc"})
        debugged = copy.deepcopy(old)
        debugged["spec"]["ephemeralContainers"] = [
            {"name": "debugger", "image": PARSER_IMAGE, "securityContext": {"privileged": True}}]
        for sub in ("ephemeralcontainers", None):
            with self.subTest(subresource=sub):
                self.assert_denied(self.update(old, debugged, sub_resource=sub), "IncompatibleWithMicroVM",
                                   'privileged container "ephemeral:debugger"')
        # kubectl debug with a foreign image is not bound either.
        debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": "busybox"}]
        self.assert_denied(self.update(old, debugged, sub_resource="ephemeralcontainers"), "ImageNotBound",
                           'container "ephemeral:debugger" runs "busybox"')
        # The Component's own image, unprivileged: admitted.
        debugged["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": PARSER_IMAGE}]
        resp = self.update(old, debugged, sub_resource="ephemeralcontainers")
        self.assertIs(resp["allowed"], True, resp)
        self.assertEqual(resp["auditAnnotations"]["decision"], "RequireSetec")
        # The subresource is admitted on UPDATE only, and only on /validate/pods.
        resp = self.answer("/validate/pods", h.pod_review(debugged, sub_resource="ephemeralcontainers"))
        self.assertIs(resp["allowed"], False)
        resp = self.answer("/mutate/pods", h.pod_review(debugged, sub_resource="ephemeralcontainers"))
        self.assertIs(resp["allowed"], False)

    def test_image_swapped_by_update_is_denied_on_the_sandbox_too(self):
        old = h.make_pod(name="parser-3", component="report-parser", spec_extra={"runtimeClassName": "kata-fc"})
        self.assert_denied(self.update(old, with_image(old, FOREIGN)), "ImageNotBound")

    def test_privileged_update_of_a_pod_off_the_sandbox_is_denied(self):
        # Admitted in-process before the sandbox appeared; a judged change now needs the sandbox.
        old = h.make_pod(name="docs-3", component="docs-indexer")
        new = copy.deepcopy(old)
        new["spec"]["ephemeralContainers"] = [{"name": "debugger", "image": DOCS_IMAGE}]
        self.assert_denied(self.update(old, new, sub_resource="ephemeralcontainers"), "RuntimeClassChanged",
                           "cannot change on an existing pod")


class BindingCliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-binding-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, doc):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def evaluate(self, pod, *extra):
        comp = os.path.join(h.EXAMPLE_COMPONENTS, "docs-indexer.yaml")
        return h.run_binary(["evaluate", "--component", comp, "--pod", self.write("pod.json", pod),
                             "--output", "json"] + list(extra))

    def test_evaluate_applies_the_binding(self):
        pod = h.make_pod(name="miner", component="docs-indexer",
                         containers=[{"name": "main", "image": DOCS_IMAGE},
                                     {"name": "istio-proxy", "image": "istio/proxyv2:1.20.0"}])
        p = self.evaluate(pod)
        self.assertEqual(p.returncode, 1, p.stderr)
        out = json.loads(p.stdout.decode())
        self.assertEqual(out["reason"], "ImageNotBound")
        self.assertIn('container "istio-proxy" runs "istio/proxyv2:1.20.0"', out["message"])
        p = self.evaluate(pod, "--allowed-extra-images", EXTRAS)
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())
        self.assertEqual(json.loads(p.stdout.decode())["decision"], "AllowInProcess")

    def test_a_bad_extra_image_pattern_is_refused_at_start(self):
        for bad in ("nginx", "*", "istio/*/proxy"):
            with self.subTest(pattern=bad):
                p = h.run_binary(["serve", "--local", "--components", h.EXAMPLE_COMPONENTS,
                                  "--allowed-extra-images", bad], timeout=30)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn("--allowed-extra-images", p.stderr.decode())


class InstalledBindingTest(ti.InstallCase):
    """The installed chart (manifests/isolation-gate.yaml) behind the repository's test API server, which calls the
    webhooks as kube-apiserver does: the pods rule covers UPDATE and pods/ephemeralcontainers, so writes through
    the API itself are refused."""

    def test_the_api_server_refuses_an_image_swap_a_relabel_and_a_privileged_debug_container(self):
        self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())
        status, pod = self.create_pod("parser-0", component="report-parser")
        self.assertEqual(status, 201, pod)
        self.assertEqual(pod["spec"]["runtime_class_name"], tc.RC)  # untrusted, the sandbox is there
        denied_by = 'admission webhook "pods.validate.gibson.zeroroot.ai" denied the request'

        status, msg = self.api_call(self.kube.patch_namespaced_pod, "parser-0", ti.NS, [
            {"op": "replace", "path": "/spec/containers/0/image", "value": FOREIGN}])
        self.assertEqual(status, 403, msg)
        self.assertIn(denied_by, msg)
        self.assertIn('container "main" runs "%s"' % FOREIGN, msg)

        status, msg = self.api_call(self.kube.patch_namespaced_pod, "parser-0", ti.NS, [
            {"op": "replace", "path": "/metadata/labels/gibson.zeroroot.ai~1component", "value": "docs-indexer"}])
        self.assertEqual(status, 403, msg)
        self.assertIn(denied_by, msg)
        self.assertIn('from "report-parser" to "docs-indexer"', msg)

        debugger = {"name": "debugger", "image": PARSER_IMAGE, "securityContext": {"privileged": True}}
        status, msg = self.api_call(self.kube.patch_namespaced_pod_ephemeralcontainers, "parser-0", ti.NS, [
            {"op": "add", "path": "/spec/ephemeralContainers", "value": [debugger]}])
        self.assertEqual(status, 403, msg)
        self.assertIn(denied_by, msg)
        self.assertIn('privileged container "ephemeral:debugger"', msg)

        # What the rules allow goes through: an unprivileged debugger of the Component's image, a finalizer.
        del debugger["securityContext"]
        status, msg = self.api_call(self.kube.patch_namespaced_pod_ephemeralcontainers, "parser-0", ti.NS, [
            {"op": "add", "path": "/spec/ephemeralContainers", "value": [debugger]}])
        self.assertEqual(status, 200, msg)
        status, msg = self.api_call(self.kube.patch_namespaced_pod, "parser-0", ti.NS, [
            {"op": "add", "path": "/metadata/labels/app", "value": "parser"}])
        self.assertEqual(status, 200, msg)
        stored = self.api.get("pods", "parser-0", namespace=ti.NS)
        self.assertEqual(stored["spec"]["containers"][0]["image"], PARSER_IMAGE)
        self.assertEqual(stored["metadata"]["labels"][h.COMPONENT_LABEL], "report-parser")
        self.assertEqual([c["name"] for c in stored["spec"]["ephemeralContainers"]], ["debugger"])
        calls = [c for c in self.api.webhook_calls(name="pods.validate.gibson.zeroroot.ai")
                 if c["operation"] == "UPDATE"]
        self.assertIn("ephemeralcontainers", [c["subResource"] for c in calls])


if __name__ == "__main__":
    unittest.main()
