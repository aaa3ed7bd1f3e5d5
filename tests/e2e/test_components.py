"""Component validation on /validate/components (docs/architecture.md, "Admission rules"), over real HTTPS."""

import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

FIELD = "spec.policy.content_trust"


def component(name="c1", trust="__omit__", kind="tool"):
    obj = {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
           "metadata": {"name": name, "namespace": "team-a"},
           "spec": {"kind": kind, "image": "registry.example.com/c:1"}}
    if trust != "__omit__":
        obj["spec"]["policy"] = {"content_trust": trust}
    return obj


class Components(h.ServerTestCase):
    server_kwargs = {"sandbox": "unavailable"}

    def validate(self, obj, **kw):
        # An UPDATE always carries the object it replaces (here: the same one).
        if kw.get("operation") == "UPDATE":
            kw.setdefault("old_object", obj)
        return self.server.review("/validate/components", h.component_review(obj, **kw))["response"]

    def test_invalid_content_trust_is_rejected_naming_field_value_and_valid_values(self):
        for value in ("maybe", "Trusted", "UNTRUSTED", " trusted", "semi-trusted"):
            for op in ("CREATE", "UPDATE"):
                with self.subTest(value=value, operation=op):
                    resp = self.validate(component(trust=value), operation=op)
                    self.assertIs(resp["allowed"], False, resp)
                    msg = resp["status"]["message"]
                    self.assertIn(FIELD, msg)
                    self.assertIn('"%s"' % value, msg)
                    self.assertIn("trusted", msg)
                    self.assertIn("untrusted", msg)
                    self.assertIn("expected one of: trusted, untrusted", msg)
                    self.assertIn('Component "c1"', msg)
                    self.assertNotIn("patch", resp)

    def test_content_trust_of_the_wrong_type_is_rejected_naming_the_field(self):
        for value, phrase in ((["trusted"], "a list"), ({"v": "trusted"}, "a map"), (True, "a boolean"),
                              (1, "a number")):
            with self.subTest(value=value):
                resp = self.validate(component(trust=value))
                self.assertIs(resp["allowed"], False, resp)
                msg = resp["status"]["message"]
                self.assertIn(FIELD, msg)
                self.assertIn("expected a string", msg)
                self.assertIn(phrase, msg)

    def test_policy_of_the_wrong_type_is_rejected_naming_the_field(self):
        obj = component()
        obj["spec"]["policy"] = ["content_trust", "trusted"]
        resp = self.validate(obj)
        self.assertIs(resp["allowed"], False)
        self.assertIn("spec.policy", resp["status"]["message"])

    def test_omitted_content_trust_is_accepted_with_the_treated_as_trusted_warning(self):
        omitted_policy = component()
        null_trust = component(trust=None)
        empty_policy = component()
        empty_policy["spec"]["policy"] = {}
        for obj in (omitted_policy, null_trust, empty_policy, h.example_component("legacy-exporter.yaml")):
            with self.subTest(obj=obj["spec"]):
                resp = self.validate(obj)
                self.assertIs(resp["allowed"], True, resp)
                warnings = resp.get("warnings", [])
                self.assertEqual(len(warnings), 1, warnings)
                self.assertIn("treated as trusted", warnings[0])
                self.assertIn("declare it", warnings[0])
                self.assertIn(FIELD, warnings[0])
                self.assertLess(len(warnings[0]), 120)
                self.assertEqual(resp["auditAnnotations"]["trust-declared"], "false")
                self.assertEqual(resp["auditAnnotations"]["content-trust"], "trusted")

    def test_valid_content_trust_is_accepted_without_warnings(self):
        for value in ("trusted", "untrusted"):
            for op in ("CREATE", "UPDATE"):
                with self.subTest(value=value, operation=op):
                    resp = self.validate(component(trust=value), operation=op)
                    self.assertIs(resp["allowed"], True, resp)
                    self.assertNotIn("warnings", resp)
                    self.assertNotIn("patch", resp)
                    self.assertEqual(resp["auditAnnotations"]["content-trust"], value)
                    self.assertEqual(resp["auditAnnotations"]["trust-declared"], "true")

    def test_shipped_example_components_are_accepted(self):
        for name in ("docs-indexer.yaml", "report-parser.yaml", "legacy-exporter.yaml"):
            with self.subTest(name=name):
                self.assertIs(self.validate(h.example_component(name))["allowed"], True)

    def test_invalid_component_kind_is_rejected_naming_valid_kinds(self):
        resp = self.validate(component(trust="trusted", kind="daemon"))
        self.assertIs(resp["allowed"], False)
        self.assertIn("spec.kind", resp["status"]["message"])
        self.assertIn("tool, agent, plugin, connector", resp["status"]["message"])

    def test_delete_is_allowed(self):
        review = h.component_review(component(trust="bogus"), operation="DELETE")
        review["request"]["oldObject"] = review["request"]["object"]
        review["request"]["object"] = None
        resp = self.server.review("/validate/components", review)["response"]
        self.assertIs(resp["allowed"], True, resp)

    def test_other_kinds_are_not_validated_as_components(self):
        resp = self.server.review("/validate/components", h.pod_review(h.make_pod()))["response"]
        self.assertIs(resp["allowed"], False)
        self.assertIn("Component", resp["status"]["message"])

    def test_component_validation_is_the_same_for_dry_run(self):
        obj = component(trust="nope")
        a = self.validate(obj, uid="x")
        b = self.validate(copy.deepcopy(obj), uid="x", dry_run=True)
        self.assertEqual(a, b)


if __name__ == "__main__":
    unittest.main()
