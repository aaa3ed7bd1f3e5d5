"""Every object the chart renders is valid against the Kubernetes schemas, and
the Component CRD is a template that `helm upgrade` upgrades.

Run:  /usr/bin/python3 -m unittest discover -v -s tests/packaging -p 'test_schemas.py'
Needs: helm (.tools/bin), node with the npm schema models in .tools/node_modules
(scripts/install-k8s-tools.sh installs both), python3-yaml, python3-kubernetes,
openssl (a real CA certificate for files mode). A missing tool skips the tests
that need it, with a message.

For each set of values below, `helm lint --strict` passes and every object of
`helm template` is checked by:
  (a) tests/packaging/schema_check.mjs: the model's validate() of npm
      kubernetes-models, @kubernetes-models/cert-manager and
      @kubernetes-models/prometheus-operator (types, required fields, enums,
      formats), plus unknown fields;
  (b) tests/packaging/strict_models.py: a strict walk along Debian's
      python3-kubernetes models (unknown fields, types, required fields).
      cert-manager's and the Prometheus Operator's kinds are CRDs without a
      python model: they are checked by (a) only.
Objects of our own CRD (Component) are checked against crds/ with crd_schema.py.
"""

import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tools import HELM, LOCAL_IMAGE, NO_HELM, find_tool, run  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover - python3-yaml is in install-deps.sh
    yaml = None

try:
    import strict_models
except ImportError:  # python3-kubernetes missing
    strict_models = None

if yaml is not None:
    import crd_schema

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("IG_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
CHART = os.path.join(ROOT, "charts", "isolation-gate")
CRD_FILE = "components.gibson.zeroroot.ai.yaml"
CRD_TOP = os.path.join(ROOT, "crds", CRD_FILE)
SCHEMA_CHECK = os.path.join(HERE, "schema_check.mjs")
NODE_MODULES = os.environ.get("IG_NODE_MODULES") or os.path.join(ROOT, ".tools", "node_modules")
RELEASE = "isolation-gate"
NAMESPACE = "isolation-gate-system"
OUR_GROUP = "gibson.zeroroot.ai"
NO_PYTHON_MODEL_GROUPS = ("cert-manager.io", "monitoring.coreos.com")
# Fields Debian's python3-kubernetes (generated from an older API) does not
# know but every Kubernetes the chart supports (Chart.yaml kubeVersion >= 1.27)
# has; the npm kubernetes-models check (a) still checks them. Each with when it
# came: an API server older than that would drop it.
NEWER_THAN_PYTHON_MODELS = {
    ("PodDisruptionBudget", "spec.unhealthyPodEvictionPolicy: unknown field (not in V1PodDisruptionBudgetSpec)"):
        "Kubernetes 1.26 alpha, 1.27 beta and on by default, 1.31 GA",
}


NODE = shutil.which("node")
OPENSSL = shutil.which("openssl")
HAVE_MODELS = os.path.isfile(os.path.join(NODE_MODULES, "kubernetes-models", "package.json"))
NO_NODE_MODELS = ("node or the npm schema models are missing: run scripts/install-k8s-tools.sh "
                  "(it installs kubernetes-models into .tools/node_modules)")
NO_PY_MODELS = "python3-kubernetes not installed (apt-get install python3-kubernetes)"




def helm_template(*extra, check=True):
    return run([HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE] + LOCAL_IMAGE + list(extra), check=check)


def render(*extra):
    return [d for d in yaml.safe_load_all(helm_template(*extra).stdout) if d is not None]


def group_of(obj):
    api_version = obj.get("apiVersion", "")
    return api_version.split("/", 1)[0] if "/" in api_version else ""


def schema_check(objects):
    """Results of schema_check.mjs for a list of objects, one per object."""
    proc = run([NODE, SCHEMA_CHECK], check=False, stdin=json.dumps(objects))
    if proc.returncode not in (0, 1):
        raise AssertionError("schema_check.mjs failed (%d): %s" % (proc.returncode, proc.stderr))
    results = json.loads(proc.stdout)
    assert len(results) == len(objects), (len(results), len(objects))
    assert (proc.returncode == 0) == all(not r["errors"] for r in results), proc.stdout
    return results


def component_errors(obj):
    """A Component against crds/ (crd_schema.py); its metadata against V1ObjectMeta."""
    schema = crd_schema.crd_schema(crd_schema.load_crd(CRD_TOP))
    body = {k: v for k, v in obj.items() if k != "metadata"}
    errors = [e.lstrip(".") for e in crd_schema.validate(body, schema, "")]
    if strict_models is not None:
        errors += strict_models.check_as(obj.get("metadata", {}), "V1ObjectMeta", "metadata")
    return errors


def names(obj):
    return "%s/%s %s" % (obj.get("apiVersion"), obj.get("kind"), obj.get("metadata", {}).get("name"))


def make_ca_pem(tmp):
    """A real self-signed CA certificate (PEM), made by openssl."""
    key, pem = os.path.join(tmp, "ca.key"), os.path.join(tmp, "ca.pem")
    run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-subj", "/CN=isolation-gate test CA", "-days", "2", "-keyout", key, "-out", pem])
    run([OPENSSL, "x509", "-in", pem, "-noout", "-subject"])
    with open(pem, "rb") as f:
        return f.read()


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class RenderedSchemasTest(unittest.TestCase):
    """helm lint --strict and helm template for each set of values; every
    rendered object is checked by each validator that has a model for it."""

    @classmethod
    def setUpClass(cls):
        cls.scenarios = [
            ("defaults", []),
            ("customer-isolation", ["--set", "untrustedExec=customer-isolation"]),
            ("cert-manager", ["--set", "certManager.enabled=true"]),
        ]
        cls.no_files_reason = None
        if OPENSSL is None:
            cls.no_files_reason = "openssl not installed: files mode (tls.caBundle) not rendered"
        else:
            with tempfile.TemporaryDirectory() as tmp:
                cls.ca_pem = make_ca_pem(tmp)
            cls.scenarios.append(("files", ["--set", "tls.certMode=files",
                                            "--set", "tls.caBundle=" + base64.b64encode(cls.ca_pem).decode()]))
        monitoring = ["--set", "replicas=1", "--set", "serviceMonitor.enabled=true",
                      "--set", "prometheusRule.enabled=true", "--set", "grafanaDashboard.enabled=true"]
        cls.scenarios.append(("single-replica-monitoring", monitoring))
        cls.rendered = {name: render(*args) for name, args in cls.scenarios}

    def test_scenarios(self):
        self.assertEqual([n for n, _ in self.scenarios][:3], ["defaults", "customer-isolation", "cert-manager"])
        if self.no_files_reason:
            self.skipTest(self.no_files_reason)
        self.assertIn("files", self.rendered)
        self.assertTrue(self.ca_pem.startswith(b"-----BEGIN CERTIFICATE-----\n"))
        bundles = {w["clientConfig"].get("caBundle") for d in self.rendered["files"]
                   if d["kind"].endswith("WebhookConfiguration") for w in d["webhooks"]}
        self.assertEqual(bundles, {base64.b64encode(self.ca_pem).decode()})
        kinds = {d["kind"] for d in self.rendered["single-replica-monitoring"]}
        self.assertIn("ServiceMonitor", kinds)
        self.assertIn("PrometheusRule", kinds)
        self.assertIn("Certificate", {d["kind"] for d in self.rendered["cert-manager"]})

    def test_lint_strict(self):
        for name, args in self.scenarios:
            with self.subTest(values=name):
                out = run([HELM, "lint", "--strict", CHART, "--namespace", NAMESPACE] + LOCAL_IMAGE + args).stdout
                self.assertIn("0 chart(s) failed", out)

    @unittest.skipIf(NODE is None or not HAVE_MODELS, NO_NODE_MODELS)
    def test_kubernetes_models(self):
        for name, _ in self.scenarios:
            with self.subTest(values=name):
                docs = [d for d in self.rendered[name] if group_of(d) != OUR_GROUP]
                self.assertGreater(len(docs), 8)
                results = schema_check(docs)
                for doc, r in zip(docs, results):
                    self.assertTrue(r["model"], "no kubernetes-models model for %s: %s" % (names(doc), r["errors"]))
                    self.assertEqual(r["errors"], [], names(doc))

    @unittest.skipIf(strict_models is None, NO_PY_MODELS)
    def test_python_models_strict(self):
        for name, _ in self.scenarios:
            with self.subTest(values=name):
                checked = 0
                for doc in self.rendered[name]:
                    if group_of(doc) == OUR_GROUP:
                        continue
                    cls = strict_models.model_class(doc["apiVersion"], doc["kind"])
                    if cls is None:
                        # cert-manager / Prometheus Operator: CRDs, no python
                        # model; test_kubernetes_models covers them.
                        self.assertIn(group_of(doc), NO_PYTHON_MODEL_GROUPS,
                                      strict_models.no_model_reason(doc["apiVersion"], doc["kind"]))
                        continue
                    errors = [e for e in strict_models.check(doc)
                              if (doc["kind"], e) not in NEWER_THAN_PYTHON_MODELS]
                    self.assertEqual(errors, [], names(doc))
                    checked += 1
                self.assertGreater(checked, 8)

    def test_components_against_crd(self):
        # Objects of our own CRD, in any rendering, against crds/.
        for name, _ in self.scenarios:
            for doc in self.rendered[name]:
                if group_of(doc) == OUR_GROUP:
                    with self.subTest(values=name, object=names(doc)):
                        self.assertEqual(doc["kind"], "Component")
                        self.assertEqual(component_errors(doc), [])

    def test_every_object_has_a_validator(self):
        """No rendered kind falls between the validators."""
        for name, _ in self.scenarios:
            for doc in self.rendered[name]:
                with self.subTest(values=name, object=names(doc)):
                    if group_of(doc) == OUR_GROUP:
                        self.assertEqual(doc["kind"], "Component")
                    elif strict_models is not None and \
                            strict_models.model_class(doc["apiVersion"], doc["kind"]) is None:
                        self.assertIn(group_of(doc), NO_PYTHON_MODEL_GROUPS)


def deployment():
    """The chart's default Deployment."""
    (dep,) = [d for d in render() if d["kind"] == "Deployment"]
    return dep


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class NegativeControlsTest(unittest.TestCase):
    """Each validator rejects an unknown field and a wrong type, at its path."""

    @classmethod
    def setUpClass(cls):
        dep = deployment()
        cls.valid = dep
        cls.unknown = copy.deepcopy(dep)
        cls.unknown["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"
        cls.wrong_type = copy.deepcopy(dep)
        cls.wrong_type["spec"]["replicas"] = "3"
        cls.wrong_nested_type = copy.deepcopy(dep)
        cls.wrong_nested_type["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] = "8443"

    def assert_error_at(self, errors, path, needle=""):
        self.assertTrue(any(e.startswith(path + ":") and needle in e for e in errors),
                        "expected an error at %s (%r), got %r" % (path, needle, errors))

    @unittest.skipIf(NODE is None or not HAVE_MODELS, NO_NODE_MODELS)
    def test_kubernetes_models_rejects(self):
        valid, unknown, wrong, nested = schema_check([self.valid, self.unknown, self.wrong_type,
                                                      self.wrong_nested_type])
        self.assertEqual(valid["errors"], [])
        self.assertEqual(len(unknown["errors"]), 1, unknown["errors"])
        self.assert_error_at(unknown["errors"], "spec.template.spec.containers[0].imagePullPolicyy", "unknown field")
        self.assertEqual(len(wrong["errors"]), 1, wrong["errors"])
        self.assert_error_at(wrong["errors"], "spec.replicas", "integer")
        self.assert_error_at(nested["errors"], "spec.template.spec.containers[0].ports[0].containerPort", "integer")

    @unittest.skipIf(NODE is None or not HAVE_MODELS, NO_NODE_MODELS)
    def test_kubernetes_models_rejects_in_crd_kinds(self):
        # cert-manager's Certificate and our CRD's schema (JSONSchemaProps) too.
        cert = [d for d in render("--set", "certManager.enabled=true")
                if d["kind"] == "Certificate" and "dnsNames" in d["spec"]][0]  # the serving one, not the CA
        cert["spec"]["dnsNamez"] = cert["spec"]["dnsNames"]
        bad_issuer = copy.deepcopy(cert)
        del bad_issuer["spec"]["dnsNamez"]
        bad_issuer["spec"]["issuerRef"] = "selfsigned"
        crd = [d for d in render() if d["kind"] == "CustomResourceDefinition"][0]
        props = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        props["spec"]["descripton"] = "typo"
        monitor = [d for d in render("--set", "serviceMonitor.enabled=true") if d["kind"] == "ServiceMonitor"][0]
        monitor["spec"]["endpoints"][0]["intervall"] = "30s"
        r_cert, r_issuer, r_crd, r_monitor = schema_check([cert, bad_issuer, crd, monitor])
        self.assert_error_at(r_cert["errors"], "spec.dnsNamez", "unknown field")
        self.assert_error_at(r_issuer["errors"], "spec.issuerRef", "object")
        self.assert_error_at(r_crd["errors"],
                             "spec.versions[0].schema.openAPIV3Schema.properties.spec.descripton", "unknown field")
        self.assertEqual(len(r_crd["errors"]), 1, r_crd["errors"])
        self.assert_error_at(r_monitor["errors"], "spec.endpoints[0].intervall", "unknown field")

    @unittest.skipIf(NODE is None or not HAVE_MODELS, NO_NODE_MODELS)
    def test_kubernetes_models_no_model(self):
        (r,) = schema_check([{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}])
        self.assertIsNone(r["model"])
        self.assert_error_at(r["errors"], "<root>", "no model")

    @unittest.skipIf(strict_models is None, NO_PY_MODELS)
    def test_python_models_rejects(self):
        self.assertEqual(strict_models.check(self.valid), [])
        errors = strict_models.check(self.unknown)
        self.assertEqual(errors, ["spec.template.spec.containers[0].imagePullPolicyy: "
                                  "unknown field (not in V1Container)"])
        errors = strict_models.check(self.wrong_type)
        self.assertEqual(len(errors), 1, errors)
        self.assert_error_at(errors, "spec.replicas", "not an integer")
        self.assert_error_at(strict_models.check(self.wrong_nested_type),
                             "spec.template.spec.containers[0].ports[0].containerPort", "not an integer")
        missing = copy.deepcopy(self.valid)
        del missing["spec"]["template"]["spec"]["containers"][0]["name"]
        self.assert_error_at(strict_models.check(missing), "spec.template.spec.containers[0].name", "required")
        label = copy.deepcopy(self.valid)
        label["metadata"]["labels"]["app.kubernetes.io/name"] = 1
        self.assert_error_at(strict_models.check(label), 'metadata.labels["app.kubernetes.io/name"]', "string")

    @unittest.skipIf(strict_models is None, NO_PY_MODELS)
    def test_python_models_say_when_there_is_none(self):
        cert = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": {"name": "c"}}
        self.assertIsNone(strict_models.model_class("cert-manager.io/v1", "Certificate"))
        self.assertIsNone(strict_models.model_class("monitoring.coreos.com/v1", "ServiceMonitor"))
        (error,) = strict_models.check(cert)
        self.assertIn("CRD of cert-manager", error)
        self.assertEqual(strict_models.model_class("apps/v1", "Deployment").__name__, "V1Deployment")
        self.assertEqual(strict_models.model_class("policy/v1", "PodDisruptionBudget").__name__,
                         "V1PodDisruptionBudget")

    def test_component_checker_rejects(self):
        comp = {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
                "metadata": {"name": "report-parser", "namespace": "team-a"},
                "spec": {"kind": "tool", "image": "registry.example.com/gibson/report-parser:1.4.2",
                         "policy": {"content_trust": "untrusted"}}}
        self.assertEqual(component_errors(comp), [])
        unknown = copy.deepcopy(comp)
        unknown["spec"]["policy"]["content_trustt"] = "trusted"
        self.assertEqual(component_errors(unknown),
                         ["spec.policy.content_trustt: unknown field (the API server would prune it)"])
        wrong = copy.deepcopy(comp)
        wrong["spec"]["image"] = 42
        self.assertTrue(any(e.startswith("spec.image:") and "type string" in e for e in component_errors(wrong)))
        if strict_models is not None:
            meta = copy.deepcopy(comp)
            meta["metadata"]["labelz"] = {}
            self.assertEqual(component_errors(meta), ["metadata.labelz: unknown field (not in V1ObjectMeta)"])

    def test_example_components(self):
        exdir = os.path.join(ROOT, "examples", "components")
        n = 0
        for name in sorted(os.listdir(exdir)):
            if name.endswith(".yaml"):
                with open(os.path.join(exdir, name)) as f:
                    for doc in yaml.safe_load_all(f):
                        if doc:
                            n += 1
                            self.assertEqual(component_errors(doc), [], name)
        self.assertGreater(n, 0)


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class CrdTemplateTest(unittest.TestCase):
    """The Component CRD is rendered by templates/crds/components.yaml (so that
    helm upgrade upgrades it), exactly as crds/ plus the chart's labels and the
    keep annotation."""

    def crds(self, *extra):
        return [d for d in render(*extra) if d["kind"] == "CustomResourceDefinition"]

    def test_renders_crds_dir(self):
        (crd,) = self.crds()
        with open(CRD_TOP) as f:
            plain = yaml.safe_load(f)
        meta = crd["metadata"]
        self.assertEqual(meta["annotations"], {"helm.sh/resource-policy": "keep"})
        for key, value in plain["metadata"]["labels"].items():
            self.assertEqual(meta["labels"][key], value)
        self.assertEqual(meta["labels"]["app.kubernetes.io/managed-by"], "Helm")
        self.assertEqual(meta["labels"]["app.kubernetes.io/instance"], RELEASE)
        self.assertRegex(meta["labels"]["helm.sh/chart"], r"^isolation-gate-")
        stripped = copy.deepcopy(crd)
        for key in ("labels", "annotations"):
            stripped["metadata"].pop(key, None)
            plain["metadata"].pop(key, None)
        self.assertEqual(stripped, plain)

    def test_template_source(self):
        with open(os.path.join(CHART, "templates", "crds", "components.yaml")) as f:
            text = f.read()
        self.assertIn('.Files.Get "files/crds/%s"' % CRD_FILE, text)
        self.assertFalse(os.path.exists(os.path.join(CHART, "crds")), "the chart's crds/ would install it twice")

    def test_install_false(self):
        self.assertEqual(self.crds("--set", "crds.install=false"), [])
        self.assertEqual(self.crds("--set", "crds.install=false", "--include-crds"), [])
        self.assertEqual(len(self.crds("--include-crds")), 1)

    def test_keep_false(self):
        (crd,) = self.crds("--set", "crds.keep=false")
        self.assertNotIn("helm.sh/resource-policy", crd["metadata"].get("annotations") or {})
        self.assertEqual(crd["metadata"]["name"], "components.gibson.zeroroot.ai")

    def test_values(self):
        with open(os.path.join(CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        keys = list(values)
        self.assertEqual(keys[keys.index("fullnameOverride") + 1], "crds")
        self.assertEqual(values["crds"], {"install": True, "keep": True})
        for args, needle in [(["--set", "crds.install=yes"], "install"),
                             (["--set", "crds.keep=1"], "keep"),
                             (["--set", "crds.upgrade=true"], "upgrade")]:
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0, "accepted %s" % args)
                self.assertIn(needle, proc.stderr)

    def test_upgrade_keeps_the_crd_a_release_object(self):
        # helm install --dry-run lists the CRD among the release's manifests
        # (what upgrade updates), not among hooks.
        proc = run([HELM, "install", RELEASE, CHART, "--namespace", NAMESPACE, "--dry-run=client"] + LOCAL_IMAGE, check=False)
        if proc.returncode != 0:
            self.skipTest("helm install --dry-run=client needs a cluster here: %s" % proc.stderr.strip())
        manifest = proc.stdout.split("MANIFEST:", 1)[1].split("NOTES:", 1)[0]
        docs = [d for d in yaml.safe_load_all(manifest) if d]
        self.assertEqual([d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"],
                         ["components.gibson.zeroroot.ai"])


if __name__ == "__main__":
    unittest.main()
