"""`isolation-gate evaluate` and `isolation-gate certs` (offline CLI), the real binary."""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

COMP = {name: os.path.join(h.EXAMPLE_COMPONENTS, name + ".yaml")
        for name in ("report-parser", "docs-indexer", "legacy-exporter")}
POD = {name: os.path.join(h.EXAMPLE_PODS, name + ".yaml")
       for name in ("report-parser-pod", "report-parser-deployment", "docs-indexer-pod",
                    "legacy-exporter-cronjob")}

EXIT_ADMITTED, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2

# (component, pod) -> {(sandbox, shape-env): decision}; shape None = unset.
CASES = {
    ("report-parser", "report-parser-pod"): {
        ("unavailable", None): "Deny", ("available", None): "RequireSetec",
        ("unavailable", "customer-isolation"): "AllowInProcess",
        ("available", "customer-isolation"): "RequireSetec"},
    ("report-parser", "report-parser-deployment"): {
        ("unavailable", None): "Deny", ("available", None): "RequireSetec",
        ("unavailable", "customer-isolation"): "AllowInProcess",
        ("available", "customer-isolation"): "RequireSetec"},
    ("docs-indexer", "docs-indexer-pod"): {
        ("unavailable", None): "AllowInProcess", ("available", None): "RequireSetec",
        ("unavailable", "customer-isolation"): "AllowInProcess",
        ("available", "customer-isolation"): "RequireSetec"},
    ("legacy-exporter", "legacy-exporter-cronjob"): {
        ("unavailable", None): "AllowInProcess", ("available", None): "RequireSetec",
        ("unavailable", "customer-isolation"): "AllowInProcess",
        ("available", "customer-isolation"): "RequireSetec"},
}


def evaluate(component, pod, sandbox=None, output=None, shape=None, extra=(), timeout=60):
    args = ["evaluate", "--component", component, "--pod", pod]
    if sandbox:
        args += ["--sandbox", sandbox]
    if output:
        args += ["--output", output]
    args += list(extra)
    return h.run_binary(args, env={h.SHAPE_ENV: shape}, timeout=timeout)


class Evaluate(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-cli-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, content):
        path = os.path.join(self.tmp, name)
        mode = "wb" if isinstance(content, bytes) else "w"
        with open(path, mode) as f:
            f.write(content)
        return path

    def run_json(self, component, pod, sandbox, shape=None):
        proc = evaluate(component, pod, sandbox=sandbox, output="json", shape=shape)
        self.assertIn(proc.returncode, (0, 1), proc.stderr)
        return proc, json.loads(proc.stdout.decode())

    def test_a_component_with_a_duplicate_key_is_bad_input_not_the_last_value(self):
        # With the last value winning, this untrusted Component would be trusted and run in-process.
        yaml_text = ("apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\n"
                     "metadata: {name: report-parser, namespace: team-a}\n"
                     "spec:\n  kind: tool\n  policy:\n    content_trust: untrusted\n    content_trust: trusted\n")
        json_text = ('{"apiVersion":"gibson.zeroroot.ai/v1alpha1","kind":"Component",'
                     '"metadata":{"name":"report-parser","namespace":"team-a"},'
                     '"spec":{"kind":"tool","policy":{"content_trust":"untrusted","content_trust":"trusted"}}}')
        for name, text in (("dup.yaml", yaml_text), ("dup.json", json_text)):
            with self.subTest(name):
                proc = evaluate(self.write(name, text), os.path.join(h.EXAMPLE_PODS, "report-parser-pod.yaml"),
                                sandbox="unavailable")
                self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stdout)
                self.assertIn('duplicate key "content_trust"', proc.stderr.decode())
                self.assertEqual(proc.stdout, b"")

    def test_examples_get_the_right_decision_and_exit_code(self):
        for (comp, pod), table in sorted(CASES.items()):
            for (sandbox, shape), decision in sorted(table.items(), key=str):
                with self.subTest(component=comp, pod=pod, sandbox=sandbox, shape=shape):
                    proc = evaluate(COMP[comp], POD[pod], sandbox=sandbox, shape=shape)
                    want = EXIT_DENIED if decision == "Deny" else EXIT_ADMITTED
                    self.assertEqual(proc.returncode, want, proc.stdout + proc.stderr)
                    out = proc.stdout.decode()
                    self.assertIn("decision:  " + decision, out)
                    self.assertIn("denied" if decision == "Deny" else "admitted", out.splitlines()[0])

    def test_default_sandbox_is_unavailable(self):
        proc = evaluate(COMP["report-parser"], POD["report-parser-pod"])
        self.assertEqual(proc.returncode, EXIT_DENIED)

    def test_json_output_has_decision_reasons_and_patch(self):
        for (comp, pod), table in sorted(CASES.items()):
            for (sandbox, shape), decision in sorted(table.items(), key=str):
                with self.subTest(component=comp, pod=pod, sandbox=sandbox, shape=shape):
                    proc, out = self.run_json(COMP[comp], POD[pod], sandbox, shape)
                    self.assertEqual(out["decision"], decision)
                    self.assertEqual(out["allowed"], decision != "Deny")
                    self.assertEqual(out["component"], comp)
                    self.assertEqual(out["namespace"], "team-a")
                    self.assertTrue(out["message"])
                    self.assertIsInstance(out["warnings"], list)
                    self.assertIsInstance(out["patch"], list)
                    self.assertEqual(out["shape"]["value"], shape or "setec-only")
                    self.assertEqual(out["sandbox"]["state"], sandbox)
                    if decision == "Deny":
                        self.assertEqual(out["patch"], [])
                        self.assertIn("To fix", out["message"])
                    else:
                        self.assertTrue(out["patch"])

    def test_json_patch_for_require_setec_pod_applies_and_loads_as_v1pod(self):
        proc, out = self.run_json(COMP["report-parser"], POD["report-parser-pod"], "available")
        pod = h.load_yaml(POD["report-parser-pod"])
        import jsonpatch
        patched = jsonpatch.apply_patch(pod, out["patch"])
        v1pod = h.to_v1pod(patched)
        self.assertEqual(v1pod.spec.runtime_class_name, "kata-fc")
        self.assertEqual(v1pod.metadata.annotations, {h.ISOLATION_ANNOTATION: "RequireSetec"})

    def test_json_patch_for_require_setec_workloads_targets_the_template(self):
        import jsonpatch
        for comp, pod, model, path in (
                ("report-parser", "report-parser-deployment", "V1Deployment", ("spec", "template")),
                ("legacy-exporter", "legacy-exporter-cronjob", "V1CronJob",
                 ("spec", "job_template", "spec", "template"))):
            with self.subTest(pod=pod):
                proc, out = self.run_json(COMP[comp], POD[pod], "available")
                obj = h.load_yaml(POD[pod])
                patched = jsonpatch.apply_patch(obj, out["patch"])
                loaded = h.api_client()._ApiClient__deserialize(patched, model)
                tmpl = loaded
                for attr in path:
                    tmpl = getattr(tmpl, attr)
                self.assertEqual(tmpl.spec.runtime_class_name, "kata-fc")
                self.assertEqual(tmpl.metadata.annotations[h.ISOLATION_ANNOTATION], "RequireSetec")
                self.assertIsNone(patched.get("metadata", {}).get("annotations"))

    def test_custom_runtime_class_flag(self):
        proc = evaluate(COMP["docs-indexer"], POD["docs-indexer-pod"], sandbox="available", output="json",
                        extra=["--runtime-class", "my-sandbox"])
        out = json.loads(proc.stdout.decode())
        self.assertIn({"op": "add", "path": "/spec/runtimeClassName", "value": "my-sandbox"}, out["patch"])

    def test_legacy_component_warns_treated_as_trusted(self):
        proc, out = self.run_json(COMP["legacy-exporter"], POD["legacy-exporter-cronjob"], "unavailable")
        self.assertFalse(out["contentTrust"]["declared"])
        self.assertEqual(out["contentTrust"]["effective"], "trusted")
        self.assertTrue(any("treated as trusted" in w for w in out["warnings"]), out["warnings"])

    def test_pod_for_another_component_is_denied_as_unknown(self):
        proc = evaluate(COMP["docs-indexer"], POD["report-parser-pod"], sandbox="available")
        self.assertEqual(proc.returncode, EXIT_DENIED)
        self.assertIn("does not exist", proc.stdout.decode())

    def test_shape_environment_variants(self):
        variants = [(None, "setec-only", False), ("", "setec-only", False),
                    ("setec-only", "setec-only", False),
                    ("SETEC-ONLY", "setec-only", True), ("Customer-Isolation", "setec-only", True),
                    (" customer-isolation", "setec-only", True), ("customer-isolation ", "setec-only", True),
                    ("customer-isolation", "customer-isolation", False)]
        for env, shape, fell_back in variants:
            with self.subTest(env=env):
                proc, out = self.run_json(COMP["report-parser"], POD["report-parser-pod"], "unavailable", env)
                self.assertEqual(out["shape"]["value"], shape)
                self.assertEqual(out["shape"]["fellBack"], fell_back)
                self.assertEqual(out["shape"]["env"], env or "")
                self.assertEqual(out["decision"], "AllowInProcess" if shape == "customer-isolation" else "Deny")
                self.assertEqual(proc.returncode, EXIT_ADMITTED if shape == "customer-isolation" else EXIT_DENIED)
                text = evaluate(COMP["report-parser"], POD["report-parser-pod"], "unavailable", shape=env)
                self.assertEqual(("fell back" in text.stdout.decode()), fell_back, text.stdout)

    # -- bad input: exit 2, one line naming the file and the field ----------------------------------
    def assert_bad_input(self, proc, *fragments):
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stdout + proc.stderr)
        err = proc.stderr.decode().strip()
        self.assertEqual(len(err.splitlines()), 1, err)
        self.assertEqual(proc.stdout, b"")
        for f in fragments:
            self.assertIn(f, err)
        return err

    def test_malformed_yaml_exits_2_naming_the_file_and_line(self):
        for content in ("apiVersion: v1\nkind: [Pod\n", "a: b: c\n", "\t- x\n  y: [\n", "a:\n- b\n  c: d\n",
                        "a: &x 1\nb: *y\n"):
            with self.subTest(content=content):
                path = self.write("bad.yaml", content)
                err = self.assert_bad_input(evaluate(COMP["docs-indexer"], path), path)
                self.assertIn("line", err)
                err = self.assert_bad_input(evaluate(path, POD["docs-indexer-pod"]), path)

    def test_yaml_flow_style_files_are_read_as_yaml(self):
        # YAML is a superset of JSON: a .yaml file in flow style starting with "{" is valid YAML
        # (kubectl accepts it) and must not be refused as invalid JSON.
        pod = self.write("flow-pod.yaml",
                         "{apiVersion: v1, kind: Pod, metadata: {name: x, namespace: team-a, labels: "
                         "{gibson.zeroroot.ai/component: docs-indexer}}, spec: {containers: [{name: c, image: %s}]}}\n"
                         % h.component_image("docs-indexer"))
        comp = self.write("flow-comp.yaml",
                          "{apiVersion: gibson.zeroroot.ai/v1alpha1, kind: Component, metadata: {name: docs-indexer, "
                          "namespace: team-a}, spec: {kind: agent, policy: {content_trust: trusted}}}\n")
        for c, p in ((COMP["docs-indexer"], pod), (comp, POD["docs-indexer-pod"])):
            with self.subTest(component=os.path.basename(c), pod=os.path.basename(p)):
                proc = evaluate(c, p)
                self.assertEqual(proc.returncode, EXIT_ADMITTED, proc.stderr)
                self.assertIn("decision:  AllowInProcess", proc.stdout.decode())

    def test_malformed_json_exits_2_naming_the_file(self):
        path = self.write("bad.json", '{"apiVersion": "v1", "kind": ')
        self.assert_bad_input(evaluate(COMP["docs-indexer"], path), path, "JSON")

    def test_wrong_types_exit_2_naming_the_file_and_field(self):
        comp_cases = [
            ("spec:\n  policy:\n    content_trust: [trusted]\n", "spec.policy.content_trust"),
            ("spec:\n  policy: trusted\n", "spec.policy"),
            ("spec: [1]\n", "spec"),
            ("spec:\n  image: {a: 1}\n", "spec.image"),
        ]
        head = "apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\nmetadata:\n  name: c\n"
        for body, field in comp_cases:
            with self.subTest(component=field):
                path = self.write("c.yaml", head + body)
                self.assert_bad_input(evaluate(path, POD["docs-indexer-pod"]), path, field)
        pod_cases = [
            ({"hostNetwork": "maybe"}, "spec.hostNetwork"),
            ({"containers": {"a": 1}}, "spec.containers"),
            ({"runtimeClassName": ["kata-fc"]}, "spec.runtimeClassName"),
            ({"initContainers": [{"name": "i", "securityContext": {"privileged": "yes please"}}]},
             "spec.initContainers[0].securityContext.privileged"),
        ]
        for spec_extra, field in pod_cases:
            with self.subTest(pod=field):
                pod = h.make_pod(component="docs-indexer", spec_extra=spec_extra)
                path = self.write("p.json", json.dumps(pod))
                self.assert_bad_input(evaluate(COMP["docs-indexer"], path), path, field)
        pod = h.make_pod(component="docs-indexer")
        pod["metadata"]["labels"] = ["x"]
        path = self.write("p.json", json.dumps(pod))
        self.assert_bad_input(evaluate(COMP["docs-indexer"], path), path, "metadata.labels")
        dep = h.make_workload("Deployment")
        dep["spec"]["template"] = "oops"
        path = self.write("d.json", json.dumps(dep))
        self.assert_bad_input(evaluate(COMP["report-parser"], path), path, "spec.template")

    def test_a_non_component_exits_2_naming_the_file(self):
        self.assert_bad_input(evaluate(POD["docs-indexer-pod"], POD["docs-indexer-pod"]),
                              POD["docs-indexer-pod"], "not a Component")
        path = self.write("list.yaml", "- 1\n- 2\n")
        self.assert_bad_input(evaluate(path, POD["docs-indexer-pod"]), path, "not a Component")

    def test_a_non_pod_exits_2_naming_the_file_and_kind(self):
        self.assert_bad_input(evaluate(COMP["docs-indexer"], COMP["docs-indexer"]), COMP["docs-indexer"], "kind")
        path = self.write("svc.yaml", "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n")
        self.assert_bad_input(evaluate(COMP["docs-indexer"], path), path, "Service")

    def test_unknown_content_trust_exits_2_naming_file_field_value_and_valid_values(self):
        path = self.write("c.yaml", "apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\n"
                                    "metadata:\n  name: docs-indexer\nspec:\n  policy:\n    content_trust: maybe\n")
        self.assert_bad_input(evaluate(path, POD["docs-indexer-pod"]), path, "spec.policy.content_trust",
                              '"maybe"', "trusted, untrusted")

    def test_missing_file_and_bad_flags_exit_2(self):
        missing = os.path.join(self.tmp, "nope.yaml")
        self.assert_bad_input(evaluate(missing, POD["docs-indexer-pod"]), missing)
        self.assert_bad_input(evaluate(COMP["docs-indexer"], POD["docs-indexer-pod"], sandbox="maybe"), "--sandbox")
        self.assert_bad_input(evaluate(COMP["docs-indexer"], POD["docs-indexer-pod"], output="xml"), "--output")
        empty = self.write("empty.yaml", "")
        self.assert_bad_input(evaluate(COMP["docs-indexer"], empty), empty)
        two = self.write("two.yaml", "a: 1\n---\nb: 2\n")
        self.assert_bad_input(evaluate(COMP["docs-indexer"], two), two)
        proc = h.run_binary(["evaluate", "--component", COMP["docs-indexer"]])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        proc = h.run_binary(["evaluate", "--bogus"])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)

    # -- hostile input: never a signal ---------------------------------------------------------------
    def assert_no_crash(self, proc, allowed=(EXIT_ADMITTED, EXIT_DENIED, EXIT_BAD_INPUT)):
        self.assertGreaterEqual(proc.returncode, 0,
                                "killed by signal %s" % (-proc.returncode if proc.returncode < 0 else ""))
        self.assertIn(proc.returncode, allowed, proc.stderr[-500:])

    def test_deeply_nested_yaml_and_json_do_not_crash(self):
        n = 100000
        files = {
            "deep-flow.yaml": "[" * n + "]" * n,
            "deep-map.yaml": "{a: " * n + "1" + "}" * n,
            "deep.json": "[" * n + "]" * n,
            "deep-obj.json": '{"a":' * n + "1" + "}" * n,
            "deep-unclosed.yaml": "[" * n,
            "deep-in-pod.json": json.dumps(h.make_pod(component="docs-indexer")).replace(
                '"spec": {', '"deep": ' + "[" * n + "]" * n + ', "spec": {'),
        }
        for name, content in files.items():
            with self.subTest(file=name):
                path = self.write(name, content)
                for args in ((COMP["docs-indexer"], path), (path, POD["docs-indexer-pod"])):
                    proc = evaluate(*args)
                    self.assert_no_crash(proc, (EXIT_BAD_INPUT,))
                    self.assertIn(path, proc.stderr.decode())

    def test_yaml_alias_bomb_and_cycle_do_not_crash(self):
        bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 10):
            bomb.append("a%d: &a%d [%s]" % (i, i, ", ".join(["*a%d" % (i - 1)] * 10)))
        files = {"bomb.yaml": "\n".join(bomb) + "\n", "cycle.yaml": "x: &x [1, *x]\n"}
        for name, content in files.items():
            with self.subTest(file=name):
                path = self.write(name, content)
                proc = evaluate(COMP["docs-indexer"], path, timeout=60)
                self.assert_no_crash(proc, (EXIT_BAD_INPUT,))

    def test_ten_mib_string_does_not_crash(self):
        big = "x" * (10 * 1024 * 1024)
        pod = h.make_pod(component="docs-indexer", annotations={"big": big})
        comp = h.example_component("docs-indexer.yaml")
        comp["spec"]["image"] = big
        pod_path = self.write("big-pod.json", json.dumps(pod))
        comp_path = self.write("big-comp.json", json.dumps(comp))
        name_pod = h.make_pod(name=big, component="docs-indexer")
        name_path = self.write("big-name.json", json.dumps(name_pod))
        yaml_path = self.write("big.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + big + "\n")
        for args in ((COMP["docs-indexer"], pod_path), (comp_path, POD["docs-indexer-pod"]),
                     (COMP["docs-indexer"], name_path), (COMP["docs-indexer"], yaml_path)):
            with self.subTest(args=[os.path.basename(a) for a in args]):
                proc = evaluate(*args, sandbox="available", output="json")
                self.assert_no_crash(proc)
                if proc.returncode == EXIT_ADMITTED:
                    json.loads(proc.stdout.decode())
                # Messages quote names cut to a readable length.
                self.assertLess(len(proc.stderr), 4096)

    def test_invalid_utf8_does_not_crash(self):
        path = self.write("bad-utf8.yaml", b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\xff\xfeb\n  labels:\n"
                                           b"    gibson.zeroroot.ai/component: docs-indexer\nspec:\n  containers: []\n")
        proc = evaluate(COMP["docs-indexer"], path, output="json")
        self.assert_no_crash(proc)
        if proc.returncode in (0, 1):
            json.loads(proc.stdout.decode("utf-8"))


class Certs(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-certs-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_certs_writes_a_chain_that_openssl_verifies_for_the_service_name(self):
        files = h.make_certs(self.tmp)
        for name, path in files.items():
            self.assertTrue(os.path.getsize(path) > 0, name)
        for key in ("ca.key", "tls.key"):
            self.assertEqual(stat.S_IMODE(os.stat(files[key]).st_mode), 0o600, key)
        openssl = shutil.which("openssl")
        if openssl is None:
            self.skipTest("openssl not on PATH")
        for host in ("isolation-gate.isolation-gate-system.svc",
                     "isolation-gate.isolation-gate-system.svc.cluster.local"):
            proc = subprocess.run([openssl, "verify", "-CAfile", files["ca.crt"], "-verify_hostname", host,
                                   files["tls.crt"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        proc = subprocess.run([openssl, "verify", "-CAfile", files["ca.crt"], "-verify_hostname", "evil.example.com",
                               files["tls.crt"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertNotEqual(proc.returncode, 0)
        proc = subprocess.run([openssl, "verify", "-CAfile", files["ca.crt"], "-verify_ip", "127.0.0.1",
                               files["tls.crt"]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        # The key matches the certificate.
        pub_cert = subprocess.run([openssl, "x509", "-in", files["tls.crt"], "-noout", "-pubkey"],
                                  stdout=subprocess.PIPE, timeout=30).stdout
        pub_key = subprocess.run([openssl, "pkey", "-in", files["tls.key"], "-pubout"],
                                 stdout=subprocess.PIPE, timeout=30).stdout
        self.assertTrue(pub_cert)
        self.assertEqual(pub_cert, pub_key)

    def test_certs_without_out_dir_exits_2(self):
        proc = h.run_binary(["certs"])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        proc = h.run_binary(["certs", "--out-dir", self.tmp, "--days", "0"])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)

    def test_serve_refuses_a_components_dir_with_an_invalid_component(self):
        bad = os.path.join(self.tmp, "components")
        os.makedirs(bad)
        shutil.copy(os.path.join(h.EXAMPLE_COMPONENTS, "docs-indexer.yaml"), bad)
        path = os.path.join(bad, "bad.yaml")
        with open(path, "w") as f:
            f.write("apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\nmetadata:\n  name: b\n"
                    "spec:\n  policy:\n    content_trust: sometimes\n")
        proc = h.run_binary(["serve", "--local", "--components", bad, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0"], timeout=30)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stderr)
        err = proc.stderr.decode()
        self.assertIn(path, err)
        self.assertIn("spec.policy.content_trust", err)
        self.assertNotIn('"msg":"serving"', err)

    def test_serve_refuses_bad_flags_with_exit_2(self):
        for args in (["serve"], ["serve", "--local"],
                     ["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--sandbox", "maybe"],
                     ["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--listen", "nope"],
                     ["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--tls-cert", "/x"],
                     ["serve", "--local", "--components", os.path.join(self.tmp, "none")]):
            with self.subTest(args=args):
                proc = h.run_binary(args, timeout=30)
                self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stderr)


class Help(unittest.TestCase):
    """Every command's --help is generated from its flag declarations (CLI11): exit 0, every flag."""

    @classmethod
    def setUpClass(cls):
        h.require_binary()

    FLAGS = {
        "evaluate": ["--component", "--pod", "--output", "--sandbox", "--runtime-class", "--namespace"],
        "serve": ["--local", "--components", "--sandbox", "--runtime-class", "--namespace", "--listen",
                  "--metrics-listen", "--tls-cert", "--tls-key", "--ca-out", "--service-name", "--threads"],
        "certs": ["--out-dir", "--service-name", "--namespace", "--dns", "--ip", "--days"],
    }

    def test_every_command_help_lists_its_flags_and_exits_0(self):
        for command, flags in self.FLAGS.items():
            with self.subTest(command=command):
                proc = h.run_binary([command, "--help"])
                self.assertEqual(proc.returncode, 0, proc.stderr)
                out = proc.stdout.decode()
                for flag in flags:
                    self.assertIn(flag, out)

    def test_top_level_usage_version_and_unknown_command(self):
        self.assertEqual(h.run_binary(["help"]).returncode, 0)
        proc = h.run_binary(["version"])
        self.assertEqual(proc.returncode, 0)
        self.assertTrue(proc.stdout.decode().startswith("isolation-gate "))
        proc = h.run_binary([])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("evaluate", proc.stderr.decode())
        proc = h.run_binary(["bogus"])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("bogus", proc.stderr.decode())

    def test_bad_flags_exit_2_with_one_line_naming_the_flag(self):
        for args, flag in ((["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--sandbox", "1"], "--sandbox"),
                           (["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--listen", "nope"], "--listen"),
                           (["serve", "--local", "--components", h.EXAMPLE_COMPONENTS, "--threads", "x"], "--threads"),
                           (["serve", "--local", "--tls-key", "/x", "--components", h.EXAMPLE_COMPONENTS], "--tls-cert"),
                           (["serve", "--local"], "--components"),
                           (["certs", "--days", "0", "--out-dir", "/nonexistent"], "--days"),
                           (["evaluate", "--pod", POD["docs-indexer-pod"]], "--component")):
            with self.subTest(args=args):
                proc = h.run_binary(args, timeout=30)
                self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stderr)
                err = proc.stderr.decode().strip()
                self.assertEqual(len(err.splitlines()), 1, err)
                self.assertIn(flag, err)


class TransportMetrics(h.ServerTestCase):
    """Both listeners' transport counters are exported, each series labelled with its listener."""

    def test_transport_counters_of_both_listeners(self):
        self.server.review("/validate/pods", h.pod_review(h.make_pod()))
        text = self.server.metrics()
        for name in ("isolation_gate_connections_accepted_total", "isolation_gate_connections_active",
                     "isolation_gate_http_requests_total", "isolation_gate_http_handler_exceptions_total",
                     "isolation_gate_http_received_bytes_total", "isolation_gate_http_sent_bytes_total"):
            for listener in ("webhook", "probes"):
                self.assertIn('%s{listener="%s"} ' % (name, listener), text)
            self.assertEqual(text.count("# TYPE %s " % name), 1, name)
        self.assertIn('isolation_gate_http_responses_total{listener="webhook",code="2xx"} ', text)
        self.assertGreaterEqual(self.server.metric_values("isolation_gate_http_requests_total"), 2)


if __name__ == "__main__":
    unittest.main()
