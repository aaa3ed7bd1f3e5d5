"""Packaging tests: the Component CRD, the Helm chart and the rendered manifests.

Run:  /usr/bin/python3 -m unittest discover -v -s tests/packaging
Needs: python3-yaml; python3-jsonschema for the CRD schema checks; helm and
kubectl (scripts/install-k8s-tools.sh puts them in .tools/bin, or set IG_HELM /
IG_KUBECTL). A missing tool skips the tests that need it, with a message.

No cluster is used: kubectl's dry-run modes (`apply|create --dry-run=client`)
still ask the API server for discovery, so the offline parse check uses
`kubectl label --local -f manifests/ -o name`, which decodes every object with
kubectl's own decoder and needs no server.
"""

import base64
import copy
import filecmp
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
    import jsonschema
except ImportError:
    jsonschema = None

if yaml is not None:
    import crd_schema

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "charts", "isolation-gate")
CRD_FILE = "components.gibson.zeroroot.ai.yaml"
CRD_TOP = os.path.join(ROOT, "crds", CRD_FILE)
# The chart's copy, rendered by templates/crds/components.yaml (.Files.Get).
CRD_CHART_DIR = os.path.join(CHART, "files", "crds")
CRD_CHART = os.path.join(CRD_CHART_DIR, CRD_FILE)
MANIFESTS = os.path.join(ROOT, "manifests")
RELEASE = "isolation-gate"
NAMESPACE = "isolation-gate-system"

ENFORCED_EXCLUDED = ["kube-system", "kube-public", "kube-node-lease"]


KUBECTL = find_tool("IG_KUBECTL", "kubectl")
NO_KUBECTL = "kubectl not installed: run scripts/install-k8s-tools.sh (or set IG_KUBECTL)"




def load_all(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def load_crd(path=CRD_TOP):
    with open(path) as f:
        return yaml.safe_load(f)


def helm_template(*extra, namespace=NAMESPACE, check=True):
    return run([HELM, "template", RELEASE, CHART, "--namespace", namespace] + LOCAL_IMAGE + list(extra),
               check=check)


def render(*extra, namespace=NAMESPACE):
    return load_all(helm_template(*extra, namespace=namespace).stdout)


def by_kind(docs, kind):
    return [d for d in docs if d.get("kind") == kind]


def one(docs, kind):
    found = by_kind(docs, kind)
    assert len(found) == 1, "expected one %s, got %d" % (kind, len(found))
    return found[0]


def named(docs, kind, name):
    found = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    assert len(found) == 1, "expected one %s %s, got %d" % (kind, name, len(found))
    return found[0]


def gate_cluster_role(docs, fullname=RELEASE):
    """The webhook's own ClusterRole (the only one: the selftest has a Role in its namespace)."""
    return named(docs, "ClusterRole", fullname)


def webhook_objects(docs, fullname=RELEASE):
    """The two webhook configurations by kind: release objects in files and
    cert-manager modes, else the contents of the template ConfigMap
    <fullname>-webhooks (self-managed), which the leader applies."""
    objs = {d["kind"]: d for d in docs
            if d.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")}
    cms = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"] == fullname + "-webhooks"]
    assert not (objs and cms), "webhook configurations both as objects and in the template ConfigMap"
    if cms:
        data = cms[0]["data"]
        assert sorted(data) == ["mutating.yaml", "validating.yaml"], sorted(data)
        for key in ("mutating.yaml", "validating.yaml"):
            (obj,) = load_all(data[key])
            objs[obj["kind"]] = obj
    assert len(objs) == 2, sorted(objs)
    return objs


def webhooks_of(docs, fullname=RELEASE):
    hooks = {}
    for kind, cfg in sorted(webhook_objects(docs, fullname).items()):
        for w in cfg["webhooks"]:
            hooks[w["name"]] = (kind, w)
    return hooks


def chart_meta():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        return yaml.safe_load(f)


def chart_values():
    with open(os.path.join(CHART, "values.yaml")) as f:
        return yaml.safe_load(f)


def labels(component="admission-webhook"):
    """The labels every chart object carries (isolation-gate.labels)."""
    app_version = chart_meta()["appVersion"]
    return {"helm.sh/chart": "isolation-gate-" + chart_meta()["version"],
            "app.kubernetes.io/name": "isolation-gate", "app.kubernetes.io/instance": RELEASE,
            "app.kubernetes.io/version": str(app_version), "app.kubernetes.io/component": component,
            "app.kubernetes.io/part-of": "gibson", "app.kubernetes.io/managed-by": "Helm"}


def aux_pod_labels(component):
    """Labels of the cleanup and selftest pods: not the webhook's selector labels."""
    return dict(labels(component), **{"app.kubernetes.io/name": "isolation-gate-" + component})


class StrictLoader(yaml.SafeLoader if yaml is not None else object):
    """A YAML loader that refuses duplicate keys (the API server's strict
    decoding does; PyYAML would silently keep the last one)."""


if yaml is not None:
    def _strict_mapping(loader, node, deep=False):
        keys = set()
        for key_node, _ in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in keys:
                raise yaml.constructor.ConstructorError(None, None, "duplicate key %r" % (key,),
                                                        key_node.start_mark)
            keys.add(key)
        return loader.construct_mapping(node, deep=deep)
    StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _strict_mapping)


def container_of(docs):
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    return c


CA_B64 = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()

# The value sets the chart must render into a configuration the binary accepts
# (issue 10 item 1), and `helm lint --strict` passes for.
VARIANTS = [
    ("default", []),
    ("customer-isolation", ["--set", "untrustedExec=customer-isolation"]),
    ("cert-manager", ["--set", "certManager.enabled=true"]),
    ("files", ["--set", "tls.certMode=files", "--set", "tls.caBundle=" + CA_B64]),
    ("one replica + ServiceMonitor", ["--set", "replicas=1", "--set", "serviceMonitor.enabled=true"]),
    ("evictDrifted", ["--set", "evictDrifted=true"]),
    ("hostNetwork, pinned by digest", ["--set", "hostNetwork=true", "--set", "listen.webhookPort=9443",
                                       "--set", "image.digest=sha256:" + "ab" * 32]),
]


# --------------------------------------------------------------------------
# CRD
# --------------------------------------------------------------------------

def openapi_to_jsonschema(node):
    """Converts a CRD's OpenAPI v3 schema to JSON Schema draft-07: nullable
    becomes a null type; x-kubernetes-* and format (int64, date-time are
    checked by the API server) are dropped."""
    if isinstance(node, list):
        return [openapi_to_jsonschema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "format"):
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {k: openapi_to_jsonschema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = openapi_to_jsonschema(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [openapi_to_jsonschema(v) for v in value]
        else:
            out[key] = value
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
        if "enum" in out:
            out["enum"] = list(out["enum"]) + [None]
    return out


def component(content_trust="__omit__", **spec):
    obj = {
        "apiVersion": "gibson.zeroroot.ai/v1alpha1",
        "kind": "Component",
        "metadata": {"name": "report-parser", "namespace": "team-a"},
        "spec": {"kind": "tool", "image": "registry.example.com/gibson/report-parser:1.4.2"},
    }
    obj["spec"].update(spec)
    if content_trust != "__omit__":
        obj["spec"]["policy"] = {"content_trust": content_trust}
    return obj


@unittest.skipIf(yaml is None, "python3-yaml not installed")
class CrdTest(unittest.TestCase):
    def setUp(self):
        self.crd = load_crd()
        self.version = self.crd["spec"]["versions"][0]
        self.schema = self.version["schema"]["openAPIV3Schema"]

    def test_identity(self):
        crd = self.crd
        self.assertEqual(crd["apiVersion"], "apiextensions.k8s.io/v1")
        self.assertEqual(crd["kind"], "CustomResourceDefinition")
        self.assertEqual(crd["metadata"]["name"], "components.gibson.zeroroot.ai")
        spec = crd["spec"]
        self.assertEqual(spec["group"], "gibson.zeroroot.ai")
        self.assertEqual(spec["scope"], "Namespaced")
        names = spec["names"]
        self.assertEqual((names["kind"], names["plural"], names["singular"]),
                         ("Component", "components", "component"))
        self.assertEqual(names["shortNames"], ["comp"])
        self.assertEqual(len(spec["versions"]), 1)
        v = self.version
        self.assertEqual(v["name"], "v1alpha1")
        self.assertTrue(v["served"])
        self.assertTrue(v["storage"])
        self.assertEqual(v["subresources"], {"status": {}})

    def test_printer_columns(self):
        columns = self.version["additionalPrinterColumns"]
        # What `kubectl get components` shows, in order (priority 0).
        self.assertEqual(
            [(c["name"], c["type"], c["jsonPath"]) for c in columns if c.get("priority", 0) == 0],
            [("Kind", "string", ".spec.kind"),
             ("Trust", "string", ".status.contentTrust"),
             ("Isolation", "string", ".status.isolation"),
             ("Drifted", "string", '.status.conditions[?(@.type=="Drifted")].status'),
             ("Age", "date", ".metadata.creationTimestamp")])
        # -o wide adds the RuntimeClass and whether the pods would be bound outside a microVM.
        self.assertEqual(
            [(c["name"], c["jsonPath"]) for c in columns if c.get("priority", 0) != 0],
            [("RuntimeClass", ".status.runtimeClassName"),
             ("BoundOutsideMicroVM", '.status.conditions[?(@.type=="BoundOutsideMicroVM")].status')])
        for c in columns:
            self.assertIn(c["type"], ("string", "integer", "number", "boolean", "date"))

    def test_content_trust_field(self):
        ct = self.schema["properties"]["spec"]["properties"]["policy"]["properties"]["content_trust"]
        self.assertEqual(ct["type"], "string")
        # "" is accepted and means trusted, like omitted and null (docs/architecture.md, "The gate").
        self.assertEqual(ct["enum"], ["trusted", "untrusted", ""])
        self.assertNotIn("default", ct, "omission must stay visible: no schema default")
        desc = ct["description"]
        self.assertIn("Omitted", desc)
        self.assertIn("trusted", desc)
        self.assertIn("backward compatibility", desc)
        self.assertIn("warns", desc)

    def test_status_subresource(self):
        # The status is written through /status only (the spec's generation is
        # not bumped by it, and writers of spec cannot set it).
        self.assertEqual(self.version["subresources"], {"status": {}})
        self.assertEqual(self.schema["properties"]["status"]["type"], "object")
        self.assertNotIn("status", self.schema.get("required", []))

    def test_status_fields(self):
        def strip(node):
            # The schema without descriptions: what the API server enforces.
            if isinstance(node, dict):
                return {k: strip(v) for k, v in node.items() if k != "description"}
            if isinstance(node, list):
                return [strip(v) for v in node]
            return node

        st = strip(self.schema["properties"]["status"])
        self.assertEqual(set(st), {"type", "properties"})
        props = st["properties"]
        self.assertEqual(set(props), {"observedGeneration", "contentTrust", "trustDeclared", "isolation",
                                      "runtimeClassName", "driftedPods", "conditions"})
        self.assertEqual(props["observedGeneration"], {"type": "integer", "format": "int64", "minimum": 0})
        self.assertEqual(props["contentTrust"], {"type": "string", "enum": ["trusted", "untrusted"]})
        self.assertEqual(props["trustDeclared"], {"type": "boolean"})
        self.assertEqual(props["isolation"],
                         {"type": "string", "enum": ["RequireSetec", "AllowInProcess", "Deny"]})
        self.assertEqual(props["runtimeClassName"], {"type": "string"})
        self.assertEqual(props["driftedPods"], {"type": "integer", "format": "int32", "minimum": 0})
        # metav1.Condition exactly as Kubernetes generates it for CRDs.
        self.assertEqual(props["conditions"], {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
            "items": {
                "type": "object",
                "required": ["type", "status", "lastTransitionTime", "reason", "message"],
                "properties": {
                    "type": {
                        "type": "string", "maxLength": 316,
                        "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                                   r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"},
                    "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                    "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
                    "lastTransitionTime": {"type": "string", "format": "date-time"},
                    "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                               "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"},
                    "message": {"type": "string", "maxLength": 32768},
                },
            },
        })

    def test_schema_is_structural(self):
        """The API server's structural-schema rules that can be checked offline:
        every node has a type, list-map keys are required, no defaults at all,
        enum values are of the node's type, no additionalProperties beside
        properties."""
        problems = []

        def walk(node, path):
            if not isinstance(node, dict):
                problems.append("%s: not an object" % path)
                return
            if path != "<root>.metadata" and "type" not in node \
                    and not node.get("x-kubernetes-int-or-string") \
                    and not node.get("x-kubernetes-preserve-unknown-fields"):
                problems.append("%s: no type" % path)
            if "default" in node:
                problems.append("%s: has a default" % path)
            if "properties" in node and "additionalProperties" in node:
                problems.append("%s: properties and additionalProperties" % path)
            pytype = {"string": str, "integer": int, "boolean": bool}.get(node.get("type"))
            for v in node.get("enum", []):
                if pytype and not isinstance(v, pytype):
                    problems.append("%s: enum value %r is not a %s" % (path, v, node["type"]))
            if node.get("x-kubernetes-list-type") == "map":
                keys = node.get("x-kubernetes-list-map-keys", [])
                if not keys:
                    problems.append("%s: list-type map without keys" % path)
                for k in keys:
                    if k not in node["items"].get("required", []):
                        problems.append("%s: map key %s not required" % (path, k))
            for name, sub in node.get("properties", {}).items():
                walk(sub, "%s.%s" % (path, name))
            if "items" in node:
                walk(node["items"], path + "[]")
            for r in node.get("required", []):
                if r not in node.get("properties", {}):
                    problems.append("%s: required %s is not a property" % (path, r))

        walk(self.schema, "<root>")
        self.assertEqual(problems, [])

    @unittest.skipIf(jsonschema is None,
                     "python3-jsonschema not installed (apt-get install python3-jsonschema)")
    def test_schema_validates_components(self):
        schema = openapi_to_jsonschema(self.schema)
        validator = jsonschema.Draft7Validator(schema)
        jsonschema.Draft7Validator.check_schema(schema)

        def ok(obj):
            errors = sorted(validator.iter_errors(obj), key=str)
            self.assertEqual([e.message for e in errors], [], obj)

        def bad(obj, needle):
            errors = list(validator.iter_errors(obj))
            self.assertTrue(errors, "accepted: %r" % (obj,))
            self.assertTrue(any(needle in "/".join(map(str, e.absolute_path)) for e in errors),
                            [(list(e.absolute_path), e.message) for e in errors])

        ok(component())                      # omitted: accepted (treated as trusted)
        ok(component("trusted"))
        ok(component("untrusted"))
        ok(component(policy={}))             # policy without content_trust
        bad(component("maybe"), "content_trust")
        ok(component(""))                    # empty: treated as trusted (docs/architecture.md, "The gate")
        bad(component("Trusted"), "content_trust")
        bad(component("untrusted", kind="daemon"), "kind")
        c = component("trusted")
        del c["spec"]["image"]
        bad(c, "spec")
        c = component("trusted")
        del c["spec"]
        bad(c, "")

        status = {
            "observedGeneration": 3, "contentTrust": "untrusted", "trustDeclared": True,
            "isolation": "RequireSetec", "runtimeClassName": "kata-fc",
            "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3,
                            "lastTransitionTime": "2025-01-01T00:00:00Z",
                            "reason": "Decided", "message": "pods run in kata-fc"}],
        }
        c = component("untrusted")
        c["status"] = status
        ok(c)
        for field, value in [("isolation", "Maybe"), ("trustDeclared", "yes"),
                             ("contentTrust", "maybe"), ("observedGeneration", -1)]:
            c2 = copy.deepcopy(c)
            c2["status"][field] = value
            bad(c2, field)
        c2 = copy.deepcopy(c)
        c2["status"]["conditions"][0]["status"] = "Yes"
        bad(c2, "conditions")
        c2 = copy.deepcopy(c)
        del c2["status"]["conditions"][0]["reason"]
        bad(c2, "conditions")

    @unittest.skipIf(jsonschema is None, "python3-jsonschema not installed")
    def test_examples_validate(self):
        validator = jsonschema.Draft7Validator(openapi_to_jsonschema(self.schema))
        exdir = os.path.join(ROOT, "examples", "components")
        if not os.path.isdir(exdir):
            self.skipTest("no examples/components")
        n = 0
        for name in sorted(os.listdir(exdir)):
            if name.endswith(".yaml"):
                with open(os.path.join(exdir, name)) as f:
                    for doc in load_all(f.read()):
                        n += 1
                        errs = [e.message for e in validator.iter_errors(doc)]
                        self.assertEqual(errs, [], name)
        self.assertGreater(n, 0)

    def test_chart_copy_identical(self):
        self.assertTrue(filecmp.cmp(CRD_TOP, CRD_CHART, shallow=False),
                        "charts/isolation-gate/files/crds/%s differs from crds/%s: copy it" % (CRD_FILE, CRD_FILE))
        self.assertEqual(sorted(os.listdir(os.path.join(ROOT, "crds"))), sorted(os.listdir(CRD_CHART_DIR)))
        # Not in the chart's crds/ too: Helm would install that copy once and
        # never upgrade it, beside the template's.
        self.assertFalse(os.path.exists(os.path.join(CHART, "crds")))

    def test_manifests_crds_identical(self):
        with open(os.path.join(MANIFESTS, "crds.yaml")) as f:
            docs = load_all(f.read())
        self.assertEqual(docs, [self.crd])


# The status the operator writes for an untrusted Component denied for want of
# the sandbox, with one drifted pod (issue 9).
SAMPLE_STATUS = {
    "observedGeneration": 2, "contentTrust": "untrusted", "trustDeclared": True,
    "isolation": "Deny", "driftedPods": 1,
    "conditions": [
        {"type": "Admitted", "status": "False", "observedGeneration": 2,
         "lastTransitionTime": "2026-12-02T21:00:00Z", "reason": "SandboxUnavailable", "message": "..."},
        {"type": "TrustDeclared", "status": "True", "observedGeneration": 2,
         "lastTransitionTime": "2026-12-02T21:00:00Z", "reason": "Declared", "message": "..."},
        {"type": "Drifted", "status": "True", "observedGeneration": 2,
         "lastTransitionTime": "2026-12-02T21:00:00Z", "reason": "PodsDrifted", "message": "..."},
        {"type": "BoundOutsideMicroVM", "status": "True", "observedGeneration": 2,
         "lastTransitionTime": "2026-12-02T21:00:00Z", "reason": "NotInMicroVM", "message": "..."},
    ],
}


@unittest.skipIf(yaml is None, "python3-yaml not installed")
class CrdStatusCheckerTest(unittest.TestCase):
    """crd_schema.validate_against_crd_status: the sample status is valid, and
    each kind of mistake an operator could write is reported at its path."""

    def errors_with(self, change):
        status = copy.deepcopy(SAMPLE_STATUS)
        change(status)
        return crd_schema.validate_against_crd_status(status)

    def assert_rejected(self, change, path, needle):
        errors = self.errors_with(change)
        self.assertTrue(any(e.startswith(path + ":") and needle in e for e in errors),
                        "expected an error at %s with %r, got %r" % (path, needle, errors))

    def test_sample_status_is_valid(self):
        self.assertEqual(crd_schema.validate_against_crd_status(SAMPLE_STATUS), [])

    def test_other_valid_statuses(self):
        for status in [
                {},
                {"observedGeneration": 0, "contentTrust": "trusted", "trustDeclared": False,
                 "isolation": "AllowInProcess", "driftedPods": 0, "conditions": []},
                {"isolation": "RequireSetec", "runtimeClassName": "kata-fc",
                 "conditions": [{"type": "example.com/Ready", "status": "Unknown",
                                 "lastTransitionTime": "2026-12-02T21:00:00.123+01:00",
                                 "reason": "A", "message": ""}]}]:
            with self.subTest(status=status):
                self.assertEqual(crd_schema.validate_against_crd_status(status), [])

    def set(self, key, value):
        def change(status):
            status[key] = value
        return change

    def set_condition(self, key, value, index=0):
        def change(status):
            status["conditions"][index][key] = value
        return change

    def drop_condition_field(self, key):
        def change(status):
            del status["conditions"][1][key]
        return change

    def test_types(self):
        self.assert_rejected(self.set("observedGeneration", "2"), "status.observedGeneration", "type integer")
        self.assert_rejected(self.set("observedGeneration", 2.5), "status.observedGeneration", "type integer")
        self.assert_rejected(self.set("driftedPods", True), "status.driftedPods", "type integer")
        self.assert_rejected(self.set("trustDeclared", "true"), "status.trustDeclared", "type boolean")
        self.assert_rejected(self.set("runtimeClassName", None), "status.runtimeClassName", "type string")
        self.assert_rejected(self.set("conditions", {}), "status.conditions", "type array")

    def test_enums(self):
        self.assert_rejected(self.set("contentTrust", ""), "status.contentTrust", "not one of")
        self.assert_rejected(self.set("isolation", "deny"), "status.isolation", "not one of")
        self.assert_rejected(self.set_condition("status", "true"), "status.conditions[0].status", "not one of")

    def test_minimum_and_format_ranges(self):
        self.assert_rejected(self.set("driftedPods", -1), "status.driftedPods", "minimum")
        self.assert_rejected(self.set("driftedPods", 2 ** 31), "status.driftedPods", "int32")
        self.assert_rejected(self.set("observedGeneration", -1), "status.observedGeneration", "minimum")
        self.assert_rejected(self.set_condition("observedGeneration", -2),
                             "status.conditions[0].observedGeneration", "minimum")

    def test_required(self):
        for key in ("type", "status", "lastTransitionTime", "reason", "message"):
            with self.subTest(field=key):
                self.assert_rejected(self.drop_condition_field(key), "status.conditions[1]",
                                     "required field " + key)
        self.assertEqual(self.errors_with(self.drop_condition_field("observedGeneration")), [])

    def test_patterns_and_lengths(self):
        self.assert_rejected(self.set_condition("reason", "Sandbox Unavailable"),
                             "status.conditions[0].reason", "does not match")
        self.assert_rejected(self.set_condition("reason", "1Reason"), "status.conditions[0].reason",
                             "does not match")
        self.assert_rejected(self.set_condition("reason", "Reason_:"), "status.conditions[0].reason",
                             "does not match")
        self.assert_rejected(self.set_condition("reason", "Reason\n"), "status.conditions[0].reason",
                             "does not match")
        self.assert_rejected(self.set_condition("reason", ""), "status.conditions[0].reason", "shorter")
        self.assert_rejected(self.set_condition("reason", "R" * 1025), "status.conditions[0].reason", "longer")
        self.assertEqual(self.errors_with(self.set_condition("reason", "R" * 1024)), [])
        self.assertEqual(self.errors_with(self.set_condition("reason", "Pods,Drifted:Now_")), [])
        self.assert_rejected(self.set_condition("message", "m" * 32769), "status.conditions[0].message", "longer")
        self.assertEqual(self.errors_with(self.set_condition("message", "\u00e9" * 32768)), [])
        self.assert_rejected(self.set_condition("type", "Not A Type"), "status.conditions[0].type",
                             "does not match")

    def test_date_time(self):
        for bad in ("2026-12-02 21:00", "2026-12-02T21:00:00", "2026-13-02T21:00:00Z",
                    "2026-02-30T21:00:00Z", "yesterday", "2026-12-02T21:00:00Z\n"):
            with self.subTest(value=bad):
                self.assert_rejected(self.set_condition("lastTransitionTime", bad, 2),
                                     "status.conditions[2].lastTransitionTime", "date-time")

    def test_unknown_fields_and_duplicate_condition_types(self):
        self.assert_rejected(self.set("drifted", 1), "status.drifted", "unknown field")
        self.assert_rejected(self.set_condition("lastProbeTime", "2026-12-02T21:00:00Z"),
                             "status.conditions[0].lastProbeTime", "unknown field")

        def duplicate(status):
            status["conditions"].append(copy.deepcopy(status["conditions"][0]))
        self.assert_rejected(duplicate, "status.conditions[4]", "duplicate entry for type='Admitted'")

    def test_checker_reads_this_crd(self):
        self.assertEqual(crd_schema.status_schema(), load_crd()["spec"]["versions"][0]["schema"]
                         ["openAPIV3Schema"]["properties"]["status"])


# --------------------------------------------------------------------------
# Chart
# --------------------------------------------------------------------------

@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class ChartTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render()

    def test_helm_is_v3_compatible(self):
        v = run([HELM, "version", "--template", "{{.Version}}"]).stdout.strip()
        self.assertRegex(v, r"^v[3-9]\.")

    def test_lint(self):
        for extra in [[]] + [["--strict"] + v for _, v in VARIANTS] + [
                ["--strict", "--set", "serviceMonitor.enabled=true"],
                ["--strict", "--set", "certManager.enabled=true", "--set", "certManager.issuerRef.name=corp-ca"],
                ["--strict", "--set", "selftest.enabled=false"]]:
            with self.subTest(args=extra):
                out = run([HELM, "lint", CHART] + LOCAL_IMAGE + extra).stdout
                self.assertIn("0 chart(s) failed", out)

    def test_every_object_is_named(self):
        self.assertGreater(len(self.docs), 8)
        cluster_scoped = {"ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                          "ValidatingWebhookConfiguration", "CustomResourceDefinition", "Namespace"}
        for d in self.docs:
            self.assertIn("apiVersion", d)
            self.assertIn("kind", d)
            self.assertTrue(d["metadata"]["name"], d)
            if d["kind"] in ("Role", "RoleBinding") and d["metadata"]["name"] == "isolation-gate-selftest":
                self.assertEqual(d["metadata"]["namespace"], NAMESPACE + "-selftest")  # the scratch namespace
            elif d["kind"] not in cluster_scoped:
                self.assertEqual(d["metadata"].get("namespace"), NAMESPACE, d["kind"])

    def test_default_objects(self):
        # Self-managed mode: no webhook configuration is a release object (the
        # leader makes them from the ConfigMap isolation-gate-webhooks).
        self.assertEqual(sorted((d["kind"], d["metadata"]["name"]) for d in self.docs), sorted([
            ("ServiceAccount", "isolation-gate"), ("ClusterRole", "isolation-gate"),
            ("ClusterRoleBinding", "isolation-gate"), ("Role", "isolation-gate"),
            ("RoleBinding", "isolation-gate"), ("Deployment", "isolation-gate"),
            ("Service", "isolation-gate"), ("PodDisruptionBudget", "isolation-gate"),
            ("NetworkPolicy", "isolation-gate"), ("ConfigMap", "isolation-gate-webhooks"),
            ("Secret", "isolation-gate-tls"), ("ResourceQuota", "isolation-gate-critical-pods"),
            ("Job", "isolation-gate-cleanup"), ("Pod", "isolation-gate-selftest"),
            ("ServiceAccount", "isolation-gate-selftest"), ("Namespace", NAMESPACE + "-selftest"),
            ("Role", "isolation-gate-selftest"), ("RoleBinding", "isolation-gate-selftest"),
            ("CustomResourceDefinition", "components.gibson.zeroroot.ai")]))

    def webhooks(self, docs=None):
        return webhooks_of(docs or self.docs)

    def test_no_duplicate_keys(self):
        # Every document and every embedded webhook configuration decodes
        # strictly (a duplicate label key is an error for kubectl and the API server).
        for name, extra in VARIANTS:
            with self.subTest(variant=name):
                text = helm_template(*extra).stdout
                docs = [d for d in yaml.load_all(text, Loader=StrictLoader) if d is not None]
                for cm in by_kind(docs, "ConfigMap"):
                    for value in cm["data"].values():
                        list(yaml.load_all(value, Loader=StrictLoader))

    def test_only_webhook_pods_match_the_selector(self):
        # The cleanup Job's and the helm test's pods must not count as webhook
        # replicas (Service endpoints, PDB, anti-affinity, topology spread).
        selector = one(self.docs, "Deployment")["spec"]["selector"]["matchLabels"]
        others = [one(self.docs, "Job")["spec"]["template"]["metadata"]["labels"],
                  one(self.docs, "Pod")["metadata"]["labels"]]
        for pod_labels in others:
            self.assertFalse(all(pod_labels.get(k) == v for k, v in selector.items()), pod_labels)

    def test_webhooks(self):
        hooks = self.webhooks()
        self.assertEqual(sorted(hooks), sorted([
            "pods.mutate.gibson.zeroroot.ai", "pods.validate.gibson.zeroroot.ai",
            "component-pods.mutate.gibson.zeroroot.ai", "component-pods.validate.gibson.zeroroot.ai",
            "pods.audit.gibson.zeroroot.ai", "workloads.audit.gibson.zeroroot.ai",
            "workloads.validate.gibson.zeroroot.ai", "components.validate.gibson.zeroroot.ai",
            "namespaces.validate.gibson.zeroroot.ai"]))
        self.assertEqual(hooks["pods.mutate.gibson.zeroroot.ai"][0], "MutatingWebhookConfiguration")
        expected = {
            "pods.mutate.gibson.zeroroot.ai": ("/mutate/pods", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["pods"], "scope": "Namespaced"}]),
            # UPDATE and pods/ephemeralcontainers: an image swap or an added container
            # is judged too (docs/security.md, "Pods are bound to their Component").
            "pods.validate.gibson.zeroroot.ai": ("/validate/pods", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}]),
            "component-pods.mutate.gibson.zeroroot.ai": ("/mutate/pods", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                 "resources": ["pods"], "scope": "Namespaced"}]),
            "component-pods.validate.gibson.zeroroot.ai": ("/validate/pods", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}]),
            "pods.audit.gibson.zeroroot.ai": ("/audit/pods", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}]),
            "workloads.audit.gibson.zeroroot.ai": ("/audit/workloads", [
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
                 "scope": "Namespaced"},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["jobs", "cronjobs"], "scope": "Namespaced"}]),
            "workloads.validate.gibson.zeroroot.ai": ("/validate/workloads", [
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["deployments", "statefulsets", "daemonsets", "replicasets"],
                 "scope": "Namespaced"},
                {"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": ["jobs", "cronjobs"], "scope": "Namespaced"}]),
            "components.validate.gibson.zeroroot.ai": ("/validate/components", [
                {"apiGroups": ["gibson.zeroroot.ai"], "apiVersions": ["v1alpha1"],
                 "operations": ["CREATE", "UPDATE"], "resources": ["components"],
                 "scope": "Namespaced"}]),
            "namespaces.validate.gibson.zeroroot.ai": ("/validate/namespaces", [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                 "resources": ["namespaces", "namespaces/status", "namespaces/finalize"],
                 "scope": "Cluster"}]),
        }
        for name, (path, rules) in expected.items():
            _, w = hooks[name]
            with self.subTest(webhook=name):
                # Audit namespaces are not enforced yet: a gate outage must not block their pods.
                self.assertEqual(w["failurePolicy"], "Ignore" if ".audit." in name else "Fail")
                self.assertEqual(w["sideEffects"], "None")
                self.assertEqual(w["matchPolicy"], "Equivalent")
                self.assertEqual(w["admissionReviewVersions"], ["v1"])
                self.assertEqual(w["timeoutSeconds"], 5)
                svc = w["clientConfig"]["service"]
                self.assertEqual(svc, {"name": "isolation-gate", "namespace": NAMESPACE,
                                       "path": path, "port": 443})
                # self-managed: the binary writes caBundle; the chart must not own it.
                self.assertNotIn("caBundle", w["clientConfig"])
                self.assertEqual(w["rules"], rules)

    def test_namespace_selectors(self):
        hooks = self.webhooks()
        for name in ("pods.mutate.gibson.zeroroot.ai", "pods.validate.gibson.zeroroot.ai",
                     "workloads.validate.gibson.zeroroot.ai"):
            sel = hooks[name][1]["namespaceSelector"]
            exprs = {e["key"]: e for e in sel["matchExpressions"]}
            self.assertEqual(exprs["gibson.zeroroot.ai/isolation"],
                             {"key": "gibson.zeroroot.ai/isolation", "operator": "In",
                              "values": ["enforced"]})
            names = exprs["kubernetes.io/metadata.name"]
            self.assertEqual(names["operator"], "NotIn")
            self.assertEqual(names["values"], ENFORCED_EXCLUDED + [NAMESPACE])
        # The second scope: pods that name a Component, in every namespace that is not enforced,
        # except the never-enforced ones (docs/operations.md, "Where the gate applies").
        for name in ("component-pods.mutate.gibson.zeroroot.ai", "component-pods.validate.gibson.zeroroot.ai"):
            w = hooks[name][1]
            exprs = {e["key"]: e for e in w["namespaceSelector"]["matchExpressions"]}
            self.assertEqual(exprs["gibson.zeroroot.ai/isolation"],
                             {"key": "gibson.zeroroot.ai/isolation", "operator": "NotIn",
                              "values": ["enforced", "audit"]})
            self.assertEqual(exprs["kubernetes.io/metadata.name"]["values"], ENFORCED_EXCLUDED + [NAMESPACE])
            self.assertEqual(w["objectSelector"], {"matchExpressions": [
                {"key": "gibson.zeroroot.ai/component", "operator": "Exists"}]})
        # Audit mode: the namespaces labelled audit, never the never-enforced ones.
        for name in ("pods.audit.gibson.zeroroot.ai", "workloads.audit.gibson.zeroroot.ai"):
            exprs = {e["key"]: e for e in hooks[name][1]["namespaceSelector"]["matchExpressions"]}
            self.assertEqual(exprs["gibson.zeroroot.ai/isolation"],
                             {"key": "gibson.zeroroot.ai/isolation", "operator": "In", "values": ["audit"]})
            self.assertEqual(exprs["kubernetes.io/metadata.name"]["values"], ENFORCED_EXCLUDED + [NAMESPACE])
        # The enforcement guard sees only namespaces that carry the label
        # (objectSelector), never through a namespaceSelector.
        guard = hooks["namespaces.validate.gibson.zeroroot.ai"][1]
        self.assertNotIn("namespaceSelector", guard)
        self.assertEqual(guard["objectSelector"], {"matchExpressions": [
            {"key": "gibson.zeroroot.ai/isolation", "operator": "Exists"}]})
        # Components are validated in every namespace.
        self.assertNotIn("namespaceSelector", hooks["components.validate.gibson.zeroroot.ai"][1])
        # The release namespace follows --namespace.
        hooks = self.webhooks(render(namespace="gate"))
        sel = hooks["pods.mutate.gibson.zeroroot.ai"][1]["namespaceSelector"]
        self.assertIn("gate", sel["matchExpressions"][1]["values"])
        self.assertEqual(hooks["pods.mutate.gibson.zeroroot.ai"][1]["clientConfig"]["service"]["namespace"],
                         "gate")

    def test_deployment(self):
        dep = one(self.docs, "Deployment")
        self.assertEqual(dep["spec"]["replicas"], 3)
        pod = dep["spec"]["template"]["spec"]
        self.assertTrue(pod["automountServiceAccountToken"])
        self.assertEqual(pod["serviceAccountName"], "isolation-gate")
        self.assertEqual(pod["priorityClassName"], "system-cluster-critical")
        self.assertEqual(pod["securityContext"]["runAsUser"], 65532)
        self.assertTrue(pod["securityContext"]["runAsNonRoot"])
        self.assertEqual(pod["securityContext"]["seccompProfile"], {"type": "RuntimeDefault"})
        anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        self.assertEqual(anti[0]["podAffinityTerm"]["topologyKey"], "kubernetes.io/hostname")
        self.assertTrue(pod["topologySpreadConstraints"])
        (c,) = pod["containers"]
        self.assertEqual(c["args"], [
            "serve", "--namespace=" + NAMESPACE, "--service-name=isolation-gate",
            "--webhook-config-name=isolation-gate", "--tls-secret=isolation-gate-tls",
            "--cert-mode=self-managed", "--cert-validity=8760h", "--ca-validity=87600h",
            "--webhook-template-configmap=isolation-gate-webhooks",
            "--lease-name=isolation-gate-leader", "--lease-duration=15s", "--renew-deadline=10s",
            "--retry-period=2s", "--runtime-class=kata-fc", "--listen=[::]:8443",
            "--metrics-listen=[::]:8080", "--drain-delay=5s", "--log-level=info",
            "--enforcement-admins", "system:masters"])
        self.assertEqual(pod["terminationGracePeriodSeconds"], 30)
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["GIBSON_UNTRUSTED_EXEC"]["value"], "setec-only")
        # The Lease holder identity and the namespace, from the downward API.
        self.assertEqual(env["POD_NAME"], {"name": "POD_NAME", "valueFrom": {
            "fieldRef": {"fieldPath": "metadata.name"}}})
        self.assertEqual(env["POD_NAMESPACE"], {"name": "POD_NAMESPACE", "valueFrom": {
            "fieldRef": {"fieldPath": "metadata.namespace"}}})
        sc = c["securityContext"]
        self.assertTrue(sc["runAsNonRoot"])
        self.assertEqual(sc["runAsUser"], 65532)
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertEqual(sc["capabilities"], {"drop": ["ALL"]})
        self.assertEqual(sc["seccompProfile"], {"type": "RuntimeDefault"})
        self.assertEqual(c["readinessProbe"]["httpGet"], {"path": "/readyz", "port": "metrics"})
        self.assertEqual(c["livenessProbe"]["httpGet"], {"path": "/healthz", "port": "metrics"})
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        self.assertEqual(ports, {"https": 8443, "metrics": 8080})
        self.assertIn("requests", c["resources"])
        # The selector matches the pod template and the Service selects the same pods.
        labels = dep["spec"]["template"]["metadata"]["labels"]
        for k, v in dep["spec"]["selector"]["matchLabels"].items():
            self.assertEqual(labels[k], v)
        svc = one(self.docs, "Service")
        for k, v in svc["spec"]["selector"].items():
            self.assertEqual(labels[k], v)

    def test_service_pdb_networkpolicy(self):
        svc = one(self.docs, "Service")
        ports = {p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]}
        self.assertEqual(ports, {"https": (443, "https"), "metrics": (8080, "metrics")})
        pdb = one(self.docs, "PodDisruptionBudget")
        self.assertEqual(pdb["spec"]["minAvailable"], 1)
        # A replica that is not Ready may always be evicted: a crash-looping
        # one never blocks a node drain (issue 29).
        self.assertEqual(pdb["spec"]["unhealthyPodEvictionPolicy"], "AlwaysAllow")
        pdb = one(render("--set", "podDisruptionBudget.maxUnavailable=1"), "PodDisruptionBudget")
        self.assertEqual(pdb["spec"], {"maxUnavailable": 1, "unhealthyPodEvictionPolicy": "AlwaysAllow",
                                       "selector": pdb["spec"]["selector"]})
        self.assertEqual(by_kind(render("--set", "replicas=1"), "PodDisruptionBudget"), [])
        np = one(self.docs, "NetworkPolicy")
        webhook_rule, metrics_rule = np["spec"]["ingress"]
        self.assertEqual(webhook_rule, {"ports": [{"port": 8443, "protocol": "TCP"}]})
        self.assertEqual(metrics_rule["ports"], [{"port": 8080, "protocol": "TCP"}])
        self.assertTrue(metrics_rule["from"])
        np = one(render("--set-json", 'networkPolicy.metricsFrom=[{"podSelector":{"matchLabels":{"app":"prom"}}}]'),
                 "NetworkPolicy")
        self.assertEqual(np["spec"]["ingress"][1]["from"], [{"podSelector": {"matchLabels": {"app": "prom"}}}])
        self.assertEqual(by_kind(render("--set", "networkPolicy.enabled=false"), "NetworkPolicy"), [])

    # The RBAC rules, exactly (issue 9: the minimum). create cannot be limited
    # by resourceNames; list/watch with fieldSelector metadata.name=<name> are
    # authorized by resourceNames, which is how the binary lists and watches
    # its Secret and webhook configurations.
    CLUSTER_RULES = [
        {"apiGroups": ["gibson.zeroroot.ai"], "resources": ["components"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["gibson.zeroroot.ai"], "resources": ["components/status"], "verbs": ["patch", "update"]},
        {"apiGroups": ["node.k8s.io"], "resources": ["runtimeclasses"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]},
    ]
    EVICTION_RULE = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    # Self-managed only: create (cannot be name-scoped) and everything else by name.
    WEBHOOK_CONFIG_RULES = [
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
         "verbs": ["create"]},
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"],
         "resourceNames": ["isolation-gate"], "verbs": ["get", "list", "watch", "update", "patch", "delete"]},
    ]
    LEASE_RULES = [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "resourceNames": ["isolation-gate-leader"], "verbs": ["get", "update"]},
    ]
    # Self-managed only: the pre-created Secret (no create on secrets anywhere)
    # and the webhook template ConfigMap (deleted by the cleanup hook).
    SECRET_RULES = [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["isolation-gate-tls"],
         "verbs": ["get", "list", "watch", "update", "patch"]},
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["isolation-gate-webhooks"],
         "verbs": ["get", "list", "watch", "delete"]},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
    ]
    WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection", "*", "escalate", "bind",
                   "impersonate", "approve", "sign"}

    FILES_MODE = ["--set", "tls.certMode=files", "--set",
                  "tls.caBundle=" + base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()]

    def rbac_modes(self):
        """(mode, helm args, ClusterRole rules, Role rules) for every cert mode x evictDrifted."""
        for mode, args, self_managed in [("self-managed", [], True),
                                         ("files", self.FILES_MODE, False),
                                         ("cert-manager", ["--set", "certManager.enabled=true"], False)]:
            for evict in (False, True):
                cluster = list(self.CLUSTER_RULES)
                if evict:
                    cluster.append(self.EVICTION_RULE)
                if self_managed:
                    cluster.extend(self.WEBHOOK_CONFIG_RULES)
                role = list(self.LEASE_RULES) + (list(self.SECRET_RULES) if self_managed else [])
                yield ("%s evictDrifted=%s" % (mode, evict),
                       args + (["--set", "evictDrifted=true"] if evict else []), cluster, role)

    def test_rbac_rules_exactly(self):
        for mode, args, cluster_rules, role_rules in self.rbac_modes():
            with self.subTest(mode=mode):
                docs = render(*args)
                self.assertEqual(gate_cluster_role(docs)["rules"], cluster_rules)
                role = named(docs, "Role", RELEASE)
                self.assertEqual(role["metadata"]["namespace"], NAMESPACE)
                self.assertEqual(role["rules"], role_rules)

    def test_rbac_nothing_else_writes_cluster_wide(self):
        # Cluster-wide writes without a name: only Component status, Events,
        # (opt-in) evictions and, in self-managed mode, `create` of webhook
        # configurations (create cannot be name-scoped). Everything else the
        # ClusterRole writes is named; the only delete is by name.
        allowed_unnamed = {("gibson.zeroroot.ai", "components/status"), ("events.k8s.io", "events"),
                           ("", "pods/eviction")}
        webhook_configs = {("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
                           ("admissionregistration.k8s.io", "validatingwebhookconfigurations")}
        for mode, args, _, _ in self.rbac_modes():
            with self.subTest(mode=mode):
                docs = render(*args)
                for r in gate_cluster_role(docs)["rules"]:
                    self.assertNotIn("*", r["verbs"])
                    self.assertNotIn("*", r["resources"])
                    self.assertNotIn("*", r["apiGroups"])
                    self.assertNotIn("nonResourceURLs", r)
                    self.assertNotIn("secrets", r["resources"])
                    if "delete" in r["verbs"]:
                        self.assertEqual(r["resourceNames"], ["isolation-gate"], r)
                    if set(r["verbs"]) & self.WRITE_VERBS and "resourceNames" not in r:
                        for g in r["apiGroups"]:
                            for res in r["resources"]:
                                if (g, res) in webhook_configs:
                                    self.assertEqual(r["verbs"], ["create"], r)
                                else:
                                    self.assertIn((g, res), allowed_unnamed, r)
                # The gate's are the only cluster-scoped grants: the selftest's
                # Role is in its scratch namespace (SelftestChartTest).
                self.assertEqual(sorted(d["metadata"]["name"] for d in by_kind(docs, "ClusterRole")),
                                 ["isolation-gate"])
                self.assertEqual(sorted(d["metadata"]["name"] for d in by_kind(docs, "ClusterRoleBinding")),
                                 ["isolation-gate"])
                # No create on Secrets anywhere.
                for kind in ("ClusterRole", "Role"):
                    for d in by_kind(docs, kind):
                        for r in d["rules"]:
                            if "secrets" in r["resources"]:
                                self.assertNotIn("create", r["verbs"], r)

    def test_rbac_eviction_only_with_evict_drifted(self):
        def grants_eviction(docs):
            return any("pods/eviction" in r["resources"]
                       for kind in ("ClusterRole", "Role") for d in by_kind(docs, kind) for r in d["rules"])
        self.assertFalse(grants_eviction(self.docs))
        self.assertFalse(grants_eviction(render("--set", "evictDrifted=false")))
        self.assertTrue(grants_eviction(render("--set", "evictDrifted=true")))

    def test_rbac_follows_names(self):
        docs = render("--set", "fullnameOverride=gate", "--set", "leaderElection.leaseName=gate-lock",
                      "--set", "tls.secretName=gate-certs")
        cluster = gate_cluster_role(docs, "gate")["rules"]
        self.assertEqual(cluster[-1]["resourceNames"], ["gate"])
        self.assertEqual(webhook_objects(docs, "gate")["MutatingWebhookConfiguration"]["metadata"]["name"],
                         "gate")
        role = named(docs, "Role", "gate")["rules"]
        self.assertEqual(role[1]["resourceNames"], ["gate-lock"])
        self.assertEqual(role[2]["resourceNames"], ["gate-certs"])
        self.assertEqual(role[3]["resourceNames"], ["gate-webhooks"])
        self.assertEqual(one(docs, "Secret")["metadata"]["name"], "gate-certs")
        c = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        self.assertIn("--webhook-config-name=gate", c["args"])
        self.assertIn("--lease-name=gate-lock", c["args"])
        self.assertIn("--tls-secret=gate-certs", c["args"])
        self.assertIn("--webhook-template-configmap=gate-webhooks", c["args"])

    def test_rbac_bindings(self):
        (binding,) = [d for d in by_kind(self.docs, "ClusterRoleBinding")
                      if d["metadata"]["name"] == "isolation-gate"]
        self.assertEqual(binding["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                              "kind": "ClusterRole", "name": "isolation-gate"})
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount", "name": "isolation-gate",
                                                "namespace": NAMESPACE}])
        rb = named(self.docs, "RoleBinding", RELEASE)
        self.assertEqual(rb["metadata"]["namespace"], NAMESPACE)
        self.assertEqual(rb["roleRef"], {"apiGroup": "rbac.authorization.k8s.io",
                                         "kind": "Role", "name": "isolation-gate"})
        self.assertEqual(rb["subjects"], binding["subjects"])
        (sa,) = [d for d in by_kind(self.docs, "ServiceAccount") if d["metadata"]["name"] == "isolation-gate"]
        self.assertTrue(sa["automountServiceAccountToken"])
        docs = render("--set", "rbac.create=false")
        for kind in ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"):
            self.assertEqual(by_kind(docs, kind), [])

    def test_values_flow(self):
        docs = render("--set", "untrustedExec=customer-isolation", "--set", "replicas=5",
                      "--set", "runtimeClass=my-sandbox", "--set", "webhook.timeoutSeconds=3",
                      "--set", "evictDrifted=true", "--set", "webhook.excludedNamespaces={infra}")
        dep = one(docs, "Deployment")
        c = dep["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(dep["spec"]["replicas"], 5)
        self.assertEqual({e["name"]: e.get("value") for e in c["env"]}["GIBSON_UNTRUSTED_EXEC"],
                         "customer-isolation")
        self.assertIn("--runtime-class=my-sandbox", c["args"])
        self.assertFalse([a for a in c["args"] if a.startswith("--allowed-extra-images")])
        extra = render("--set-json", 'allowedExtraImages=["istio/proxyv2:1.20.0","gcr.io/mesh/*"]')
        args = one(extra, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertIn("--allowed-extra-images=istio/proxyv2:1.20.0,gcr.io/mesh/*", args)
        self.assertIn("--evict-drifted", c["args"])
        self.assertEqual(c["args"][c["args"].index("--evict-drifted") + 1], "--evict-rate=10")
        self.assertEqual(c["args"][c["args"].index("--evict-drifted") + 2], "--drift-eviction-settle=60s")
        for _, w in self.webhooks(docs).values():
            self.assertEqual(w["timeoutSeconds"], 3)
        sel = self.webhooks(docs)["pods.mutate.gibson.zeroroot.ai"][1]["namespaceSelector"]
        self.assertIn("infra", sel["matchExpressions"][1]["values"])

    def test_operator_values_flow(self):
        args = one(self.docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        self.assertFalse([a for a in args if a.startswith("--evict")])
        docs = render("--set", "leaderElection.leaseDuration=30s", "--set", "leaderElection.renewDeadline=20s",
                      "--set", "leaderElection.retryPeriod=4s", "--set", "evictDrifted=true",
                      "--set-json", "evictRate=2.5", "--set", "tls.certValidity=720h",
                      "--set", "tls.caValidity=43800h", "--set", "evictSettle=5m")
        args = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
        for flag in ("--lease-duration=30s", "--renew-deadline=20s", "--retry-period=4s",
                     "--evict-drifted", "--evict-rate=2.5", "--drift-eviction-settle=5m", "--cert-validity=720h", "--ca-validity=43800h"):
            self.assertEqual(args.count(flag), 1, flag)
        # Certificate lifetimes are for self-managed mode only.
        for extra in (self.FILES_MODE, ["--set", "certManager.enabled=true"]):
            args = one(render(*extra), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
            self.assertFalse([a for a in args if a.startswith(("--cert-validity", "--ca-validity"))], extra)
            self.assertIn("--lease-duration=15s", args)

    def test_values_defaults(self):
        with open(os.path.join(CHART, "values.yaml")) as f:
            values = yaml.safe_load(f)
        self.assertEqual(values["leaderElection"], {
            "leaseName": "isolation-gate-leader", "leaseDuration": "15s", "renewDeadline": "10s",
            "retryPeriod": "2s"})
        self.assertIs(values["evictDrifted"], False)
        self.assertEqual(values["allowedExtraImages"], [])
        self.assertEqual(values["evictRate"], 10)
        self.assertEqual(values["evictSettle"], "60s")
        self.assertEqual((values["tls"]["certValidity"], values["tls"]["caValidity"]), ("8760h", "87600h"))

    def test_schema_rejects_bad_values(self):
        for args, needle in [
                (["--set", "untrustedExec=bogus"], "untrustedExec"),
                (["--set", "untrustedExec=SETEC-ONLY"], "untrustedExec"),
                (["--set", "replicas=0"], "replicas"),
                (["--set", "runtimeClass=123"], "runtimeClass"),
                (["--set", "runtimeClass=Not_A_Name"], "runtimeClass"),
                (["--set", "webhook.timeoutSeconds=31"], "timeoutSeconds"),
                (["--set", "tls.certMode=cert-manager"], "certMode"),
                (["--set", "tls.certMode=files"], "caBundle"),
                (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
                (["--set", "replicaCount=3"], "replicaCount"),
                (["--set", "evictRate=0"], "evictRate"),
                (["--set", "evictRate=10001"], "evictRate"),
                (["--set", "evictRate=fast"], "evictRate"),
                (["--set", "evictSettle=60"], "evictSettle"),
                (["--set", "evictSettle=1 m"], "evictSettle"),
                (["--set", "leaderElection.leaseDuration=15"], "leaseDuration"),
                (["--set", "leaderElection.renewDeadline=10 s"], "renewDeadline"),
                (["--set", "leaderElection.retryPeriod=-2s"], "retryPeriod"),
                (["--set", "leaderElection.leaseTime=15s"], "leaseTime"),
                (["--set", "tls.certValidity=1y"], "certValidity"),
                (["--set", "tls.caValidity="], "caValidity"),
                (["--set-json", 'allowedExtraImages=["a:1,b:2"]'], "allowedExtraImages"),
                (["--set-json", 'allowedExtraImages=[""]'], "allowedExtraImages")]:
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0, "accepted %s" % args)
                self.assertIn(needle, proc.stderr)

    def test_kube_version_constraint(self):
        helm_template("--kube-version", "1.27.0")
        proc = helm_template("--kube-version", "1.26.0", check=False)
        self.assertNotEqual(proc.returncode, 0)

    def test_files_mode(self):
        ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
        docs = render("--set", "tls.certMode=files", "--set", "tls.caBundle=" + ca)
        for _, w in self.webhooks(docs).values():
            self.assertEqual(w["clientConfig"]["caBundle"], ca)
        pod = one(docs, "Deployment")["spec"]["template"]["spec"]
        c = pod["containers"][0]
        self.assertIn("--cert-mode=files", c["args"])
        self.assertIn("--tls-cert=/etc/isolation-gate/tls/tls.crt", c["args"])
        self.assertIn("--tls-key=/etc/isolation-gate/tls/tls.key", c["args"])
        vols = {v["name"]: v for v in pod["volumes"]}
        self.assertEqual(vols["tls"]["secret"]["secretName"], "isolation-gate-tls")
        # No Secret access and no webhook configuration writes when the
        # certificate is mounted.
        for r in named(docs, "Role", RELEASE)["rules"]:
            self.assertNotIn("secrets", r["resources"])
        for r in gate_cluster_role(docs)["rules"]:
            self.assertNotIn("admissionregistration.k8s.io", r["apiGroups"])
        # The configurations are release objects, with the CA; no template
        # ConfigMap, no pre-created Secret (yours), no cleanup hook.
        self.assertEqual(sorted(webhook_objects(docs)), ["MutatingWebhookConfiguration",
                                                         "ValidatingWebhookConfiguration"])
        for kind in ("ConfigMap", "Secret", "Job"):
            self.assertEqual(by_kind(docs, kind), [], kind)
        self.assertNotIn("--webhook-template-configmap=isolation-gate-webhooks", c["args"])

    def test_cert_manager_mode(self):
        # The chain itself is asserted exactly in CertManagerChainTest.
        docs = render("--set", "certManager.enabled=true")
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            cfg = one(docs, kind)
            self.assertEqual(cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
                             NAMESPACE + "/isolation-gate-ca")
            for w in cfg["webhooks"]:
                self.assertNotIn("caBundle", w["clientConfig"])
        c = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
        self.assertIn("--cert-mode=files", c["args"])
        self.assertNotIn("--webhook-template-configmap=isolation-gate-webhooks", c["args"])
        for r in named(docs, "Role", RELEASE)["rules"]:
            self.assertNotIn("secrets", r["resources"])
        for r in gate_cluster_role(docs)["rules"]:
            self.assertNotIn("admissionregistration.k8s.io", r["apiGroups"])
        for kind in ("ConfigMap", "Secret", "Job"):
            self.assertEqual(by_kind(docs, kind), [], kind)

    def test_service_monitor(self):
        self.assertEqual(by_kind(self.docs, "ServiceMonitor"), [])
        docs = render("--set", "serviceMonitor.enabled=true", "--set", "serviceMonitor.labels.release=prom")
        sm = one(docs, "ServiceMonitor")
        self.assertEqual(sm["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(sm["spec"]["endpoints"][0]["port"], "metrics")
        self.assertEqual(sm["spec"]["endpoints"][0]["path"], "/metrics")
        self.assertEqual(sm["metadata"]["labels"]["release"], "prom")

    def test_crds_rendered_with_include_crds(self):
        # The CRD is a template (templates/crds/): --include-crds adds no second copy.
        docs = render("--include-crds")
        crd = copy.deepcopy(one(docs, "CustomResourceDefinition"))
        for key in ("labels", "annotations"):
            crd["metadata"].pop(key, None)
        plain = load_crd()
        plain["metadata"].pop("labels", None)
        self.assertEqual(crd, plain)

    def test_notes_tell_how_to_enforce(self):
        with open(os.path.join(CHART, "templates", "NOTES.txt")) as f:
            notes = f.read()
        self.assertIn("kubectl label namespace", notes)
        self.assertIn("gibson.zeroroot.ai/isolation=enforced", notes)
        out = run([HELM, "install", RELEASE, CHART, "--namespace", NAMESPACE, "--dry-run=client"] + LOCAL_IMAGE,
                  check=False)
        if out.returncode == 0:
            self.assertIn("gibson.zeroroot.ai/isolation=enforced", out.stdout)


# --------------------------------------------------------------------------
# The chart runs what it renders (issue 10 item 1)
# --------------------------------------------------------------------------

IG_BINARY = os.environ.get("IG_BINARY") or None
NO_BINARY = "IG_BINARY not set (ctest sets it to the built isolation-gate)"


def rendered_command(docs):
    """The Deployment container's `serve` arguments (without `serve`) and its
    environment: value entries as they are, valueFrom ones with a dummy value."""
    c = container_of(docs)
    assert c["args"][0] == "serve", c["args"]
    env = {}
    for e in c["env"]:
        env[e["name"]] = e["value"] if "value" in e else "dummy-" + e["name"].lower()
    return c["args"][1:], env


def check_config(args, env):
    return run([IG_BINARY, "serve", "--check-config"] + args, check=False,
               env=dict(env, PATH=os.environ.get("PATH", "/usr/bin:/bin")))


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
@unittest.skipIf(IG_BINARY is None, NO_BINARY)
class BinaryAcceptsChartTest(unittest.TestCase):
    """`isolation-gate serve --check-config` accepts exactly what the chart renders."""

    @classmethod
    def setUpClass(cls):
        # Probe with --help only: a binary without --check-config must not be
        # started as a server.
        help_out = run([IG_BINARY, "serve", "--help"], check=False)
        text = help_out.stdout + help_out.stderr
        if "unknown flag" in text or "--check-config" not in text:
            raise unittest.SkipTest("IG_BINARY (%s) does not know `serve --check-config` yet "
                                    "(the lead adds it)" % IG_BINARY)

    def test_every_variant_is_accepted(self):
        for name, extra in VARIANTS:
            with self.subTest(variant=name):
                args, env = rendered_command(render(*extra))
                proc = check_config(args, env)
                self.assertEqual(proc.returncode, 0, "%s\nargs %s\nstderr %s" % (name, args, proc.stderr))
                self.assertIn("configuration ok", proc.stdout)

    def test_bogus_extra_arg_is_refused(self):
        # Negative control: the check really parses the flags.
        args, env = rendered_command(render("--set-json", 'extraArgs=["--no-such-flag-for-isolation-gate"]'))
        self.assertIn("--no-such-flag-for-isolation-gate", args)
        proc = check_config(args, env)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
        self.assertNotIn("configuration ok", proc.stdout)
        self.assertTrue(proc.stderr.strip())


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(IG_BINARY is None, NO_BINARY)
@unittest.skipIf(HELM is None, NO_HELM)
class BinaryAcceptsHookArgsTest(unittest.TestCase):
    """The cleanup Job and the helm test Pod run commands the binary accepts:
    pointed at an API server that refuses connections, each gets as far as
    calling it (exit 3, could not) instead of refusing its flags (exit 2)."""

    def test_hook_commands_parse_their_rendered_args(self):
        tmp = tempfile.mkdtemp(prefix="ig-hooks-")
        self.addCleanup(shutil.rmtree, tmp, True)
        ca = os.path.join(tmp, "ca.crt")
        run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", os.path.join(tmp, "ca.key"), "-out", ca, "-subj", "/CN=unreachable", "-days", "1"])
        kubeconfig = os.path.join(tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', certificate-authority: %s}}]\n"
                    "users: [{name: u, user: {token: t}}]\n"
                    "contexts: [{name: c, context: {cluster: c, user: u}}]\n" % ca)
        docs = render()
        job = one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]
        pod = one(docs, "Pod")["spec"]["containers"][0]
        for what, args in (("cleanup Job", job["args"]), ("helm test Pod", pod["args"])):
            with self.subTest(what):
                proc = run([IG_BINARY] + list(args) + ["--kubeconfig", kubeconfig], check=False)
                self.assertEqual(proc.returncode, 3, "%s %s\n%s%s" % (what, args, proc.stdout, proc.stderr))
        # Negative control: a flag the command does not know is exit 2.
        proc = run([IG_BINARY] + list(pod["args"]) + ["--kubeconfig", kubeconfig, "--bogus"], check=False)
        self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)


class DockerfileTest(unittest.TestCase):
    """The image build has what the CMake build needs (scripts/build-image.sh
    takes ~10 minutes, so it is not in the test command; this keeps the
    Dockerfile from drifting behind CMakeLists.txt in the meantime)."""

    # find_package() name -> the Debian -dev package that provides it
    PACKAGES = {"OpenSSL": "libssl-dev", "nlohmann_json": "nlohmann-json3-dev", "yaml-cpp": "libyaml-cpp-dev",
                "Boost": "libboost-dev", "CLI11": "libcli11-dev", "cpprestsdk": "libcpprest-dev"}

    def setUp(self):
        with open(os.path.join(ROOT, "Dockerfile")) as f:
            self.dockerfile = f.read()
        with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
            self.cmake = f.read()

    def test_every_required_package_of_the_binary_is_installed_in_the_build_stage(self):
        import re
        # The packages outside `if(IG_BUILD_TESTS)`/`if(IG_BUILD_BENCH)` blocks are the binary's.
        top = re.sub(r"(?ms)^if\(IG_BUILD_(TESTS|BENCH)\).*?^endif\(\)", "", self.cmake)
        needed = set(re.findall(r"find_package\((\w[\w-]*)", top)) - {"Threads"}
        self.assertTrue(needed, "no find_package in CMakeLists.txt?")
        for name in sorted(needed):
            with self.subTest(name):
                self.assertIn(name, self.PACKAGES, "map %s to its Debian package here" % name)
                self.assertIn(self.PACKAGES[name], self.dockerfile)

    def test_every_file_the_build_reads_outside_src_is_copied(self):
        import re
        for path in sorted(set(re.findall(r"\$\{CMAKE_SOURCE_DIR\}/(scripts/[\w./-]+)", self.cmake))):
            with self.subTest(path):
                self.assertIn("COPY %s " % path, self.dockerfile)
        self.assertIn("COPY src ./src", self.dockerfile)
        self.assertIn('-DIG_REVISION="${REVISION}"', self.dockerfile)  # no .git in the context


@unittest.skipIf(IG_BINARY is None, NO_BINARY)
class BinaryVersionTest(unittest.TestCase):
    def test_version_is_chart_app_version(self):
        out = run([IG_BINARY, "version"]).stdout
        app_version = str(chart_meta()["appVersion"])
        self.assertRegex(out, r"^isolation-gate %s \(revision [0-9a-z-]+\)" % app_version.replace(".", r"\."))


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class DefaultImageTest(unittest.TestCase):
    """scripts/build-image.sh builds the image the chart's defaults run."""

    def test_print_image_is_chart_default(self):
        env = {k: v for k, v in os.environ.items() if k != "IG_IMAGE"}
        proc = run(["bash", os.path.join(ROOT, "scripts", "build-image.sh"), "--print-image"], env=env)
        printed = proc.stdout.strip()
        expected = "%s:%s" % (chart_values()["image"]["repository"], chart_meta()["appVersion"])
        self.assertEqual(printed, expected)
        self.assertEqual(proc.stdout, printed + "\n")
        self.assertEqual(proc.stderr, "", "--print-image must not build or install anything")
        docs = render()
        self.assertEqual(container_of(docs)["image"], printed)
        # The cleanup hook and the helm test run the same image.
        self.assertEqual(one(docs, "Job")["spec"]["template"]["spec"]["containers"][0]["image"], printed)
        self.assertEqual(one(docs, "Pod")["spec"]["containers"][0]["image"], printed)

    def test_print_image_follows_ig_image(self):
        env = dict(os.environ, IG_IMAGE="registry.test/team/gate")
        out = run(["bash", os.path.join(ROOT, "scripts", "build-image.sh"), "--print-image"], env=env).stdout
        self.assertEqual(out, "registry.test/team/gate:%s\n" % chart_meta()["appVersion"])


# --------------------------------------------------------------------------
# Never a dead fail-closed webhook (issue 10 item 2)
# --------------------------------------------------------------------------

@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class WebhookLifecycleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.docs = render()
        cls.files_docs = render("--set", "tls.certMode=files", "--set", "tls.caBundle=" + CA_B64)

    def test_self_managed_renders_no_webhook_objects(self):
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            self.assertEqual(by_kind(self.docs, kind), [], kind)

    def test_template_configmap_exactly(self):
        cm = named(self.docs, "ConfigMap", "isolation-gate-webhooks")
        self.assertEqual(set(cm), {"apiVersion", "kind", "metadata", "data"})
        self.assertEqual(cm["apiVersion"], "v1")
        self.assertEqual(cm["metadata"], {"name": "isolation-gate-webhooks", "namespace": NAMESPACE,
                                          "labels": labels()})
        self.assertEqual(sorted(cm["data"]), ["mutating.yaml", "validating.yaml"])
        # Each key holds ONE whole object, exactly what files mode renders as an
        # object, minus caBundle (the leader fills it).
        expected = {}
        for d in self.files_docs:
            if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                d = copy.deepcopy(d)
                for w in d["webhooks"]:
                    self.assertEqual(w["clientConfig"].pop("caBundle"), CA_B64)
                expected[d["kind"]] = d
        for key, kind in (("mutating.yaml", "MutatingWebhookConfiguration"),
                          ("validating.yaml", "ValidatingWebhookConfiguration")):
            docs = load_all(cm["data"][key])
            self.assertEqual(len(docs), 1, key)
            self.assertEqual(docs[0], expected[kind], key)
            self.assertEqual(docs[0]["metadata"], {"name": "isolation-gate", "labels": labels()})
            for w in docs[0]["webhooks"]:
                self.assertEqual(set(w["clientConfig"]), {"service"}, w["name"])

    def test_deployment_passes_the_configmap(self):
        args = container_of(self.docs)["args"]
        self.assertEqual([a for a in args if a.startswith("--webhook-template-configmap")],
                         ["--webhook-template-configmap=isolation-gate-webhooks"])
        self.assertIn("--webhook-config-name=isolation-gate", args)
        for extra in (["--set", "tls.certMode=files", "--set", "tls.caBundle=" + CA_B64],
                      ["--set", "certManager.enabled=true"]):
            args = container_of(render(*extra))["args"]
            self.assertFalse([a for a in args if a.startswith("--webhook-template-configmap")], extra)

    def test_files_mode_renders_objects_with_ca(self):
        objs = webhook_objects(self.files_docs)
        for kind, cfg in objs.items():
            self.assertEqual(cfg["metadata"], {"name": "isolation-gate", "labels": labels()}, kind)
            for w in cfg["webhooks"]:
                self.assertEqual(w["clientConfig"]["caBundle"], CA_B64)
        self.assertEqual([d for d in by_kind(self.files_docs, "ConfigMap")], [])

    def test_cleanup_hook_exactly(self):
        values = chart_values()
        job = one(self.docs, "Job")
        self.assertEqual(job, {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {
                "name": "isolation-gate-cleanup", "namespace": NAMESPACE, "labels": labels(),
                "annotations": {"helm.sh/hook": "pre-delete",
                                "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}},
            "spec": {
                "backoffLimit": 2, "activeDeadlineSeconds": 120,
                "template": {
                    "metadata": {"labels": aux_pod_labels("cleanup")},
                    "spec": {
                        "restartPolicy": "Never", "serviceAccountName": "isolation-gate",
                        "automountServiceAccountToken": True, "enableServiceLinks": False,
                        "securityContext": values["podSecurityContext"],
                        "containers": [{
                            "name": "cleanup", "image": container_of(self.docs)["image"],
                            "imagePullPolicy": "IfNotPresent",
                            "args": ["cleanup", "--namespace=" + NAMESPACE,
                                     "--webhook-config-name=isolation-gate",
                                     "--webhook-template-configmap=isolation-gate-webhooks"],
                            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                          "limits": {"memory": "128Mi"}},
                            "securityContext": values["securityContext"]}]}}}})
        # Same security contexts as the Deployment.
        pod = one(self.docs, "Deployment")["spec"]["template"]["spec"]
        self.assertEqual(job["spec"]["template"]["spec"]["securityContext"], pod["securityContext"])
        self.assertEqual(job["spec"]["template"]["spec"]["containers"][0]["securityContext"],
                         pod["containers"][0]["securityContext"])
        # The chart's ServiceAccount may delete what the hook deletes, by name.
        role = named(self.docs, "Role", RELEASE)["rules"]
        self.assertIn({"apiGroups": [""], "resources": ["configmaps"],
                       "resourceNames": ["isolation-gate-webhooks"],
                       "verbs": ["get", "list", "watch", "delete"]}, role)
        cluster = gate_cluster_role(self.docs)["rules"]
        self.assertIn("delete", [r for r in cluster if r.get("resourceNames") == ["isolation-gate"]
                                 and "admissionregistration.k8s.io" in r["apiGroups"]][0]["verbs"])
        # Only self-managed mode has one.
        self.assertEqual(by_kind(self.files_docs, "Job"), [])
        self.assertEqual(by_kind(render("--set", "certManager.enabled=true"), "Job"), [])
        # It follows the names and the ServiceAccount.
        docs = render("--set", "fullnameOverride=gate", "--set", "serviceAccount.create=false",
                      "--set", "serviceAccount.name=byo")
        spec = one(docs, "Job")["spec"]["template"]["spec"]
        self.assertEqual(spec["serviceAccountName"], "byo")
        self.assertEqual(spec["containers"][0]["args"][2:],
                         ["--webhook-config-name=gate", "--webhook-template-configmap=gate-webhooks"])

    def test_tls_secret_precreated_without_data(self):
        secret = one(self.docs, "Secret")
        # Exactly: no data, no stringData, so `helm upgrade` never resets what the leader wrote.
        self.assertEqual(secret, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                  "metadata": {"name": "isolation-gate-tls", "namespace": NAMESPACE,
                                               "labels": labels()}})
        self.assertEqual(one(render("--set", "tls.secretName=my-certs"), "Secret")["metadata"]["name"],
                         "my-certs")
        self.assertEqual(by_kind(self.files_docs, "Secret"), [])
        self.assertEqual(by_kind(render("--set", "certManager.enabled=true"), "Secret"), [])

    def test_notes_and_readme_tell_the_install_order(self):
        out = run([HELM, "install", RELEASE, CHART, "--namespace", NAMESPACE, "--dry-run=client"] + LOCAL_IMAGE,
                  check=False)
        if out.returncode != 0:
            self.skipTest("helm install --dry-run=client needs a cluster here: " + out.stderr.strip())
        self.assertIn("helm install --wait", out.stdout)
        self.assertIn("isolation-gate-webhooks", out.stdout)
        files = run([HELM, "install", RELEASE, CHART, "--namespace", NAMESPACE, "--dry-run=client"] + LOCAL_IMAGE + [
                     "--set", "certManager.enabled=true"]).stdout
        self.assertIn("only after the pods are Ready", files)
        with open(os.path.join(CHART, "README.md")) as f:
            readme = f.read()
        for needle in ("helm install --wait", "only after the pods are Ready", "pre-delete",
                       "podman push", "skopeo copy", "--set image.repository="):
            self.assertIn(needle, readme)


# --------------------------------------------------------------------------
# Runtime settings (issue 10 item 4)
# --------------------------------------------------------------------------

@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class ChartRuntimeTest(unittest.TestCase):
    def test_values_defaults(self):
        values = chart_values()
        self.assertEqual(values["listen"], {"host": "[::]", "webhookPort": 8443, "metricsPort": 8080})
        self.assertEqual((values["drainDelaySeconds"], values["terminationGracePeriodSeconds"]), (5, 30))
        self.assertEqual(values["logLevel"], "info")
        self.assertEqual(values["resourceQuota"], {"create": True})
        self.assertEqual(values["criticalPodsQuota"], 10)
        self.assertEqual(values["certManager"]["caDuration"], "87600h")
        self.assertEqual(values["selftest"], {"enabled": True, "timeout": "60s", "namespace": ""})
        # Issue 29: the placeholder image must be replaced (or allowed), no host network by default.
        self.assertEqual(values["image"]["allowPlaceholder"], False)
        self.assertEqual(values["hostNetwork"], False)

    def test_critical_pods_quota_exactly(self):
        quota = one(render(), "ResourceQuota")
        self.assertEqual(quota, {
            "apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "isolation-gate-critical-pods", "namespace": NAMESPACE, "labels": labels()},
            "spec": {"hard": {"pods": "10"},
                     "scopeSelector": {"matchExpressions": [
                         {"scopeName": "PriorityClass", "operator": "In",
                          "values": ["system-cluster-critical"]}]}}})
        quota = one(render("--set", "priorityClassName=system-node-critical", "--set", "criticalPodsQuota=6"),
                    "ResourceQuota")
        self.assertEqual(quota["spec"], {"hard": {"pods": "6"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}]}})
        for args, namespace in [([], "kube-system"),
                                (["--set", "resourceQuota.create=false"], NAMESPACE),
                                (["--set", "priorityClassName=gibson-high"], NAMESPACE),
                                (["--set", "priorityClassName="], NAMESPACE)]:
            with self.subTest(args=args, namespace=namespace):
                self.assertEqual(by_kind(render(*args, namespace=namespace), "ResourceQuota"), [])
        # The quota must leave room for the rolling update's surge.
        proc = helm_template("--set", "criticalPodsQuota=3", check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("criticalPodsQuota (3) must be at least replicas + 1 (4)", proc.stderr)
        self.assertEqual(one(render("--set", "criticalPodsQuota=4"), "ResourceQuota")["spec"]["hard"],
                         {"pods": "4"})

    def test_listen_addresses_and_ports(self):
        for host, listen in [("[::]", "[::]"), ("0.0.0.0", "0.0.0.0"), ("10.1.2.3", "10.1.2.3"),
                             ("[fd00::1]", "[fd00::1]")]:
            with self.subTest(host=host):
                docs = render("--set", "listen.host=" + host, "--set", "listen.webhookPort=9443",
                              "--set", "listen.metricsPort=9090")
                c = container_of(docs)
                self.assertIn("--listen=%s:9443" % listen, c["args"])
                self.assertIn("--metrics-listen=%s:9090" % listen, c["args"])
                self.assertEqual(c["ports"], [{"name": "https", "containerPort": 9443, "protocol": "TCP"},
                                              {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}])
                # Probes and the Service go by port name, so they follow.
                self.assertEqual(c["readinessProbe"]["httpGet"]["port"], "metrics")
                self.assertEqual(c["livenessProbe"]["httpGet"]["port"], "metrics")
                svc = {p["name"]: p["targetPort"] for p in one(docs, "Service")["spec"]["ports"]}
                self.assertEqual(svc, {"https": "https", "metrics": "metrics"})
                ingress = one(docs, "NetworkPolicy")["spec"]["ingress"]
                self.assertEqual([r["ports"] for r in ingress], [[{"port": 9443, "protocol": "TCP"}],
                                                                 [{"port": 9090, "protocol": "TCP"}]])
        for bad in ("localhost", "::", "[::", "256.1.1.1", "0.0.0.0:8443", "[::]:8443", "gate.example.com"):
            with self.subTest(bad=bad):
                proc = helm_template("--set", "listen.host=" + bad, check=False)
                self.assertNotEqual(proc.returncode, 0, bad)
                self.assertIn("host", proc.stderr)

    def test_drain_delay_and_grace_period(self):
        docs = render("--set", "drainDelaySeconds=20", "--set", "terminationGracePeriodSeconds=35")
        self.assertIn("--drain-delay=20s", container_of(docs)["args"])
        self.assertEqual(one(docs, "Deployment")["spec"]["template"]["spec"]["terminationGracePeriodSeconds"], 35)
        self.assertIn("--drain-delay=0s", container_of(render("--set", "drainDelaySeconds=0"))["args"])
        for drain, grace in [(20, 30), (5, 19), (60, 74)]:
            with self.subTest(drain=drain, grace=grace):
                proc = helm_template("--set", "drainDelaySeconds=%d" % drain,
                                     "--set", "terminationGracePeriodSeconds=%d" % grace, check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn("terminationGracePeriodSeconds (%d) must be at least drainDelaySeconds (%d) + 15"
                              % (grace, drain), proc.stderr)
        render("--set", "drainDelaySeconds=60", "--set", "terminationGracePeriodSeconds=75")

    def test_log_level(self):
        for level in ("debug", "info", "warn", "error"):
            with self.subTest(level=level):
                args = container_of(render("--set", "logLevel=" + level))["args"]
                self.assertEqual([a for a in args if a.startswith("--log-level")], ["--log-level=" + level])

    def test_schema_rejects_bad_runtime_values(self):
        for args, needle in [
                (["--set", "logLevel=verbose"], "logLevel"),
                (["--set", "logLevel=INFO"], "logLevel"),
                (["--set", "drainDelaySeconds=61"], "drainDelaySeconds"),
                (["--set", "drainDelaySeconds=-1"], "drainDelaySeconds"),
                (["--set", "drainDelaySeconds=5s"], "drainDelaySeconds"),
                (["--set", "terminationGracePeriodSeconds=thirty"], "terminationGracePeriodSeconds"),
                (["--set", "listen.webhookPort=0"], "webhookPort"),
                (["--set", "listen.metricsPort=65536"], "metricsPort"),
                (["--set", "listen.address=[::]"], "address"),
                (["--set", "criticalPodsQuota=0"], "criticalPodsQuota"),
                (["--set", "resourceQuota.enabled=true"], "enabled"),
                (["--set", "certManager.caDuration=10y"], "caDuration"),
                (["--set", "selftest.enabled=maybe"], "enabled"),
                (["--set", "selftest.timeout=1 minute"], "timeout"),
                (["--set", "selftest.image=foo"], "image")]:
            with self.subTest(args=args):
                proc = helm_template(*args, check=False)
                self.assertNotEqual(proc.returncode, 0, "accepted %s" % args)
                self.assertIn(needle, proc.stderr)


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class CertManagerChainTest(unittest.TestCase):
    """certManager.enabled: self-signed Issuer -> CA Certificate -> CA Issuer ->
    serving Certificate; caBundle is injected from the CA Certificate."""

    def test_chain_exactly(self):
        docs = render("--set", "certManager.enabled=true")
        meta = lambda name: {"name": name, "namespace": NAMESPACE, "labels": labels()}  # noqa: E731
        self.assertEqual(sorted((d["kind"], d["metadata"]["name"]) for d in docs
                                if d["apiVersion"].startswith("cert-manager.io/")),
                         [("Certificate", "isolation-gate-ca"), ("Certificate", "isolation-gate-serving"),
                          ("Issuer", "isolation-gate-ca"), ("Issuer", "isolation-gate-selfsigned")])
        self.assertEqual(named(docs, "Issuer", "isolation-gate-selfsigned"), {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": meta("isolation-gate-selfsigned"), "spec": {"selfSigned": {}}})
        self.assertEqual(named(docs, "Certificate", "isolation-gate-ca"), {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta("isolation-gate-ca"),
            "spec": {"isCA": True, "commonName": "isolation-gate-ca", "secretName": "isolation-gate-ca",
                     "duration": "87600h",
                     "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Never"},
                     "issuerRef": {"name": "isolation-gate-selfsigned", "kind": "Issuer",
                                   "group": "cert-manager.io"}}})
        self.assertEqual(named(docs, "Issuer", "isolation-gate-ca"), {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": meta("isolation-gate-ca"),
            "spec": {"ca": {"secretName": "isolation-gate-ca"}}})
        serving = {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate", "metadata": meta("isolation-gate-serving"),
            "spec": {"secretName": "isolation-gate-tls", "duration": "2160h", "renewBefore": "360h",
                     "privateKey": {"algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"},
                     "usages": ["server auth", "digital signature"],
                     "dnsNames": ["isolation-gate", "isolation-gate." + NAMESPACE,
                                  "isolation-gate.%s.svc" % NAMESPACE,
                                  "isolation-gate.%s.svc.cluster.local" % NAMESPACE],
                     "issuerRef": {"name": "isolation-gate-ca", "kind": "Issuer", "group": "cert-manager.io"}}}
        self.assertEqual(named(docs, "Certificate", "isolation-gate-serving"), serving)
        for kind, cfg in webhook_objects(docs).items():
            self.assertEqual(cfg["metadata"]["annotations"],
                             {"cert-manager.io/inject-ca-from": NAMESPACE + "/isolation-gate-ca"}, kind)
        docs = render("--set", "certManager.enabled=true", "--set", "certManager.caDuration=43800h")
        self.assertEqual(named(docs, "Certificate", "isolation-gate-ca")["spec"]["duration"], "43800h")

    def test_outside_issuer(self):
        docs = render("--set", "certManager.enabled=true", "--set", "certManager.issuerRef.name=corp-ca",
                      "--set", "certManager.issuerRef.kind=ClusterIssuer")
        self.assertEqual(by_kind(docs, "Issuer"), [])
        (cert,) = by_kind(docs, "Certificate")
        self.assertEqual(cert["metadata"]["name"], "isolation-gate-serving")
        self.assertEqual(cert["spec"]["issuerRef"], {"name": "corp-ca", "kind": "ClusterIssuer"})
        # No chart CA: the injector takes the issuer's CA from the serving Secret's ca.crt.
        for kind, cfg in webhook_objects(docs).items():
            self.assertEqual(cfg["metadata"]["annotations"],
                             {"cert-manager.io/inject-ca-from": NAMESPACE + "/isolation-gate-serving"}, kind)


# --------------------------------------------------------------------------
# helm test (issue 10 item 8, chart side)
# --------------------------------------------------------------------------

@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class SelftestChartTest(unittest.TestCase):
    RESTRICTED_POD = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                      "seccompProfile": {"type": "RuntimeDefault"}}
    RESTRICTED_CONTAINER = {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532,
                            "readOnlyRootFilesystem": True, "allowPrivilegeEscalation": False,
                            "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}

    def test_objects_exactly(self):
        docs = render()
        image = container_of(docs)["image"]
        sl = labels("selftest")
        self.assertEqual(one(docs, "Pod"), {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "isolation-gate-selftest", "namespace": NAMESPACE,
                         "labels": aux_pod_labels("selftest"),
                         "annotations": {"helm.sh/hook": "test",
                                         "helm.sh/hook-delete-policy": "before-hook-creation,hook-succeeded"}},
            "spec": {"restartPolicy": "Never", "serviceAccountName": "isolation-gate-selftest",
                     "automountServiceAccountToken": True, "enableServiceLinks": False,
                     "securityContext": self.RESTRICTED_POD,
                     "containers": [{
                         "name": "selftest", "image": image, "imagePullPolicy": "IfNotPresent",
                         "args": ["selftest", "--namespace=" + NAMESPACE,
                                  "--scratch-namespace=" + NAMESPACE + "-selftest", "--timeout=60s"],
                         "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                                       "limits": {"memory": "128Mi"}},
                         "securityContext": self.RESTRICTED_CONTAINER}]}})
        self.assertEqual(named(docs, "ServiceAccount", "isolation-gate-selftest"), {
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "isolation-gate-selftest", "namespace": NAMESPACE, "labels": sl},
            "automountServiceAccountToken": True})
        # Least privilege (issue 29): the scratch namespace is the chart's,
        # enforced; the selftest's Role is there, and nothing cluster-wide.
        scratch = NAMESPACE + "-selftest"
        self.assertEqual(named(docs, "Namespace", scratch), {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": scratch, "labels": dict(sl, **{"gibson.zeroroot.ai/isolation": "enforced"})}})
        self.assertEqual(named(docs, "Role", "isolation-gate-selftest"), {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "isolation-gate-selftest", "namespace": scratch, "labels": sl},
            "rules": [
                {"apiGroups": ["gibson.zeroroot.ai"], "resources": ["components"], "verbs": ["create", "get"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]})
        self.assertEqual(named(docs, "RoleBinding", "isolation-gate-selftest"), {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "isolation-gate-selftest", "namespace": scratch, "labels": sl},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                        "name": "isolation-gate-selftest"},
            "subjects": [{"kind": "ServiceAccount", "name": "isolation-gate-selftest", "namespace": NAMESPACE}]})
        self.assertEqual([d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")
                          and "selftest" in d["metadata"]["name"]], [])
        # The RBAC objects and the namespace are normal release objects, not hooks.
        for kind in ("ServiceAccount", "Role", "RoleBinding"):
            self.assertNotIn("annotations", named(docs, kind, "isolation-gate-selftest")["metadata"], kind)
        self.assertNotIn("annotations", named(docs, "Namespace", scratch)["metadata"])

    def test_follows_namespace_and_can_be_disabled(self):
        docs = render(namespace="gate")
        pod = one(docs, "Pod")
        self.assertEqual(pod["spec"]["containers"][0]["args"][:3],
                         ["selftest", "--namespace=gate", "--scratch-namespace=gate-selftest"])
        self.assertEqual(named(docs, "Role", "isolation-gate-selftest")["metadata"]["namespace"], "gate-selftest")
        docs = render("--set", "selftest.namespace=gate-check")
        self.assertIn("--scratch-namespace=gate-check", one(docs, "Pod")["spec"]["containers"][0]["args"])
        self.assertEqual(named(docs, "Namespace", "gate-check")["metadata"]["labels"]["gibson.zeroroot.ai/isolation"],
                         "enforced")
        self.assertEqual(named(docs, "RoleBinding", "isolation-gate-selftest")["metadata"]["namespace"], "gate-check")
        # Never a namespace the gate does not enforce.
        for bad in (["--set", "selftest.namespace=" + NAMESPACE], ["--set", "selftest.namespace=kube-system"],
                    ["--set", "selftest.namespace=infra", "--set", "webhook.excludedNamespaces={infra}"]):
            with self.subTest(bad=bad):
                proc = helm_template(*bad, check=False)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn("must be a namespace of its own that the gate enforces", proc.stderr)
        docs = render("--set", "selftest.enabled=false")
        self.assertEqual(by_kind(docs, "Pod"), [])
        self.assertEqual([d for d in docs if d["metadata"]["name"] == "isolation-gate-selftest"], [])
        self.assertEqual(by_kind(docs, "Namespace"), [])
        # rbac.create=false: the account and the namespace stay, its Role is yours to make.
        docs = render("--set", "rbac.create=false")
        self.assertEqual(named(docs, "ServiceAccount", "isolation-gate-selftest")["kind"], "ServiceAccount")
        self.assertEqual(named(docs, "Namespace", NAMESPACE + "-selftest")["kind"], "Namespace")
        self.assertEqual(by_kind(docs, "ClusterRole"), [])
        self.assertEqual(by_kind(docs, "Role"), [])


# --------------------------------------------------------------------------
# Rendered manifests
# --------------------------------------------------------------------------

@unittest.skipIf(yaml is None, "python3-yaml not installed")
class ManifestsTest(unittest.TestCase):
    @unittest.skipIf(HELM is None, NO_HELM)
    def test_up_to_date(self):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, HELM=HELM)
            run(["bash", os.path.join(ROOT, "scripts", "render-manifests.sh"), "--out", tmp], env=env)
            for name in ("crds.yaml", "isolation-gate.yaml"):
                with self.subTest(file=name):
                    with open(os.path.join(tmp, name)) as a, open(os.path.join(MANIFESTS, name)) as b:
                        self.assertTrue(a.read() == b.read(),
                                        "manifests/%s is stale: run scripts/render-manifests.sh" % name)

    def test_contents(self):
        with open(os.path.join(MANIFESTS, "isolation-gate.yaml")) as f:
            docs = load_all(f.read())
        self.assertEqual(docs[0]["kind"], "Namespace")
        self.assertEqual(docs[0]["metadata"]["name"], NAMESPACE)
        for d in docs[1:]:
            # The selftest's scratch namespace holds its Role and RoleBinding.
            self.assertIn(d["metadata"].get("namespace", NAMESPACE), (NAMESPACE, NAMESPACE + "-selftest"))
        self.assertEqual(by_kind(docs, "CustomResourceDefinition"), [])

    @unittest.skipIf(KUBECTL is None, NO_KUBECTL)
    def test_kubectl_parses_offline(self):
        # An empty kubeconfig: nothing may reach a cluster.
        with tempfile.TemporaryDirectory() as tmp:
            kubeconfig = os.path.join(tmp, "config")
            open(kubeconfig, "w").close()
            env = dict(os.environ, KUBECONFIG=kubeconfig)
            out = run([KUBECTL, "label", "--local", "-f", MANIFESTS, "-o", "name",
                       "isolation-gate.test/parsed=true"], env=env).stdout.split()
        self.assertIn("customresourcedefinition.apiextensions.k8s.io/components.gibson.zeroroot.ai", out)
        self.assertIn("namespace/%s" % NAMESPACE, out)
        self.assertIn("deployment.apps/isolation-gate", out)
        # Self-managed: the webhook configurations are in the template ConfigMap
        # (the leader applies them), the TLS Secret is pre-created empty.
        self.assertIn("configmap/isolation-gate-webhooks", out)
        self.assertIn("secret/isolation-gate-tls", out)
        self.assertNotIn("mutatingwebhookconfiguration.admissionregistration.k8s.io/isolation-gate", out)
        with open(os.path.join(MANIFESTS, "isolation-gate.yaml")) as f:
            n = len(load_all(f.read()))
        self.assertEqual(len(out), n + 1)


if __name__ == "__main__":
    unittest.main()



@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
@unittest.skipIf(IG_BINARY is None, NO_BINARY)
class EnforcementAdminsValue(unittest.TestCase):
    """webhook.enforcementAdmins reaches --enforcement-admins as one value,
    the empty list included (nobody), and the binary reads it so."""

    def test_a_list_and_the_empty_list(self):
        for values, flag, shown in ((["--set", "webhook.enforcementAdmins={platform-admins,sre}"],
                                     "platform-admins,sre", "platform-admins,sre"),
                                    (["--set-json", "webhook.enforcementAdmins=[]"], "", "(none)")):
            with self.subTest(flag=flag):
                args, env = rendered_command(render(*values))
                i = args.index("--enforcement-admins")
                self.assertEqual(args[i + 1], flag)
                proc = check_config(args, env)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertIn("enforcement admins: " + shown, proc.stdout)
        bad = helm_template("--set-json", 'webhook.enforcementAdmins=["a b"]', check=False)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("enforcementAdmins", bad.stderr)
