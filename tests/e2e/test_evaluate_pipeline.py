"""`isolation-gate evaluate` in a pipeline, the real binary: -f FILE|DIR|- over mixed manifests, Components from
the input, `helm template` piped in, every output format read back by an independent parser (PyYAML, xml.etree,
python3-jsonschema against tests/schemas/sarif-2.1.0-subset.json), the worst result's exit code, and YAML merge keys
read as the API server reads them (or refused)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

EXIT_ADMITTED, EXIT_DENIED, EXIT_BAD_INPUT = 0, 1, 2
SARIF_SCHEMA = os.path.join(h.SOURCE_DIR, "tests", "schemas", "sarif-2.1.0-subset.json")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def helm():
    """The repository's helm (scripts/install-k8s-tools.sh), else one on PATH."""
    local = os.path.join(h.SOURCE_DIR, ".tools", "bin", "helm")
    return local if os.access(local, os.X_OK) else shutil.which("helm")


class Pipeline(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-pipeline-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, rel, content):
        path = os.path.join(self.tmp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(content)
        return path

    def mixed_dir(self):
        """Components, workloads and other kinds, as a repository holds them: a multi-document YAML with two
        Components and a ConfigMap, a JSON List with a Component and its CronJob, two workloads, a Service and a
        file that is not a manifest."""
        ex = h.EXAMPLE_COMPONENTS
        self.write("manifests/components.yaml",
                   read(os.path.join(ex, "report-parser.yaml")) + "---\n" +
                   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: team-a}\n---\n" +
                   read(os.path.join(ex, "docs-indexer.yaml")))
        listing = {"apiVersion": "v1", "kind": "List",
                   "items": [h.example_component("legacy-exporter.yaml"),
                             h.example_pod("legacy-exporter-cronjob.yaml")]}
        self.write("manifests/legacy/list.json", json.dumps(listing, indent=1))
        self.write("manifests/apps/deploy.yaml", read(os.path.join(h.EXAMPLE_PODS, "report-parser-deployment.yaml")))
        self.write("manifests/apps/pod.yml", read(os.path.join(h.EXAMPLE_PODS, "docs-indexer-pod.yaml")))
        self.write("manifests/service.yaml",
                   "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: team-a}\nspec: {ports: [{port: 80}]}\n")
        self.write("manifests/README.md", "not: [a manifest\n")
        return os.path.join(self.tmp, "manifests")

    def evaluate(self, *args, stdin=None, shape=None):
        return h.run_binary(["evaluate"] + list(args), env={h.SHAPE_ENV: shape}, stdin_data=stdin)

    def test_a_directory_of_mixed_manifests_gets_one_result_per_workload_and_the_worst_exit_code(self):
        d = self.mixed_dir()
        proc = self.evaluate("-f", d, "--sandbox", "unavailable", "-o", "json")
        self.assertEqual(proc.returncode, EXIT_DENIED, proc.stderr)
        out = json.loads(proc.stdout)
        got = {(r["kind"], r["name"]): r for r in out["results"]}
        self.assertEqual(set(got), {("Deployment", "report-parser"), ("Pod", "docs-indexer-0"),
                                    ("CronJob", "legacy-exporter")}, got.keys())
        self.assertEqual(got[("Deployment", "report-parser")]["decision"], "Deny")
        self.assertEqual(got[("Deployment", "report-parser")]["reason"], "SandboxUnavailable")
        self.assertEqual(got[("Pod", "docs-indexer-0")]["decision"], "AllowInProcess")
        self.assertEqual(got[("CronJob", "legacy-exporter")]["decision"], "AllowInProcess")
        for r in out["results"]:
            self.assertEqual(r["namespace"], "team-a")
            self.assertTrue(os.path.isfile(r["source"]["path"]), r["source"])
        # The CronJob is the second item of the JSON List: its file, line unknown inside JSON (the List's).
        self.assertTrue(got[("CronJob", "legacy-exporter")]["source"]["path"].endswith("list.json"))
        self.assertEqual(out["summary"], {"workloads": 3, "admitted": 2, "denied": 1, "errors": 0,
                                          "components": 3, "skipped": 2, "exitCode": 1})
        # Only admitted (the sandbox is there): 0; the text output has a block per workload and the summary.
        proc = self.evaluate("-f", d, "--sandbox", "available")
        self.assertEqual(proc.returncode, EXIT_ADMITTED, proc.stderr)
        text = proc.stdout.decode()
        self.assertEqual(text.count("decision:  RequireSetec"), 3, text)
        self.assertIn("summary:   3 workload(s): 3 admitted, 0 denied (3 Component(s); 2 other document(s) skipped)",
                      text)

    def test_files_are_repeatable_and_components_come_from_components_flag(self):
        d = self.mixed_dir()
        proc = self.evaluate("-f", os.path.join(d, "apps", "deploy.yaml"), "-f", os.path.join(d, "apps", "pod.yml"),
                             "--components", os.path.join(d, "components.yaml"), "-o", "json")
        self.assertEqual(proc.returncode, EXIT_DENIED, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual([r["decision"] for r in out["results"]], ["Deny", "AllowInProcess"])
        self.assertEqual(out["summary"]["components"], 2)
        # A workload whose Component is given nowhere is denied as unknown.
        proc = self.evaluate("-f", os.path.join(d, "apps", "deploy.yaml"), "-o", "json")
        self.assertEqual(proc.returncode, EXIT_DENIED)
        self.assertEqual(json.loads(proc.stdout)["results"][0]["reason"], "UnknownComponent")

    def test_bad_input_anywhere_exits_2_with_an_error_object_on_stdout_for_json_and_yaml(self):
        d = self.mixed_dir()
        bad = self.write("manifests/apps/broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [x\n")
        for fmt, load in (("json", json.loads), ("yaml", yaml.safe_load)):
            with self.subTest(fmt=fmt):
                proc = self.evaluate("-f", d, "-o", fmt)
                self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stdout)
                out = load(proc.stdout)
                self.assertIn(bad, out["error"]["message"])
                self.assertIn("line", out["error"]["message"])
                self.assertEqual(out["summary"]["exitCode"], 2)
        proc = self.evaluate("-f", d)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertEqual(proc.stdout, b"")
        self.assertIn(bad, proc.stderr.decode())
        proc = self.evaluate("-f", os.path.join(self.tmp, "missing.yaml"), "-o", "json")
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("cannot open", json.loads(proc.stdout)["error"]["message"])

    def test_stdin_from_helm_template_is_read_as_a_stream(self):
        tool = helm()
        if tool is None:
            self.skipTest("helm not installed (scripts/install-k8s-tools.sh)")
        chart = os.path.join(h.SOURCE_DIR, "charts", "isolation-gate")
        for ns, want_exit, want in (("isolation-gate-system", EXIT_ADMITTED, "NotEnforced"),
                                    ("team-a", EXIT_DENIED, "Deny")):
            with self.subTest(ns=ns):
                rendered = subprocess.run([tool, "template", "isolation-gate", chart, "-n", ns,
                                           "--set", "image.allowPlaceholder=true"], check=True,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60).stdout
                proc = self.evaluate("-f", "-", "-o", "json", stdin=rendered)
                self.assertEqual(proc.returncode, want_exit, proc.stdout + proc.stderr)
                out = json.loads(proc.stdout)
                kinds = sorted(r["kind"] for r in out["results"])
                self.assertEqual(kinds, ["Deployment", "Job", "Pod"], out)
                self.assertEqual({r["decision"] for r in out["results"]}, {want})
                self.assertGreater(out["summary"]["skipped"], 10)
                for r in out["results"]:
                    self.assertEqual(r["source"]["path"], "-")
                    self.assertGreater(r["source"]["line"], 1)
                if ns == "team-a":
                    self.assertEqual({r["reason"] for r in out["results"]}, {"MissingComponentLabel"})

    def test_stdin_pod_dev_stdin_and_a_directory_as_pod(self):
        pod = read(os.path.join(h.EXAMPLE_PODS, "docs-indexer-pod.yaml")).encode()
        comp = os.path.join(h.EXAMPLE_COMPONENTS, "docs-indexer.yaml")
        for args in (["--pod", "-"], ["-f", "-"], ["-f", "/dev/stdin"]):
            with self.subTest(args=args):
                proc = self.evaluate("--component", comp, *args, stdin=pod)
                self.assertEqual(proc.returncode, EXIT_ADMITTED, proc.stderr)
                self.assertIn("decision:  AllowInProcess", proc.stdout.decode())
        proc = self.evaluate("--component", comp, "--pod", self.tmp)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn(self.tmp + ": is a directory", proc.stderr.decode())
        proc = self.evaluate("--component", comp, "-f", "-", "-f", "-", stdin=pod)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("more than once", proc.stderr.decode())

    def test_junit_has_a_testcase_per_workload_and_a_failure_per_denial(self):
        proc = self.evaluate("-f", self.mixed_dir(), "-o", "junit")
        self.assertEqual(proc.returncode, EXIT_DENIED, proc.stderr)
        root = ET.fromstring(proc.stdout)
        self.assertEqual(root.tag, "testsuites")
        cases = root.findall("./testsuite/testcase")
        self.assertEqual(len(cases), 3)
        failures = [c for c in cases if c.find("failure") is not None]
        self.assertEqual(len(failures), 1)
        failure = failures[0].find("failure")
        self.assertEqual(failure.get("type"), "SandboxUnavailable")
        self.assertIn("report-parser", failures[0].get("name"))
        self.assertIn("To fix", failure.get("message"))
        self.assertEqual(root.find("testsuite").get("failures"), "1")
        self.assertEqual(root.find("testsuite").get("tests"), "3")
        # Bad input: an error element, still XML.
        bad = self.write("bad/x.yaml", "kind: [\n")
        proc = self.evaluate("-f", bad, "-o", "junit")
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        err = ET.fromstring(proc.stdout).find("./testsuite/testcase/error")
        self.assertIn(bad, err.get("message"))

    def test_sarif_is_valid_sarif_2_1_0_with_a_rule_per_reason_and_locations(self):
        with open(SARIF_SCHEMA, encoding="utf-8") as f:
            schema = json.load(f)
        d = self.mixed_dir()
        self.write("manifests/apps/unlabelled.yaml",
                   "# an unlabelled pod\napiVersion: v1\nkind: Pod\nmetadata: {name: bare, namespace: team-a}\n"
                   "spec: {containers: [{name: c, image: busybox}]}\n")
        proc = self.evaluate("-f", d, "-o", "sarif")
        self.assertEqual(proc.returncode, EXIT_DENIED, proc.stderr)
        log = json.loads(proc.stdout)
        jsonschema.validate(log, schema, format_checker=jsonschema.FormatChecker())
        run = log["runs"][0]
        rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
        self.assertEqual(sorted(rules), ["MissingComponentLabel", "SandboxUnavailable"])
        self.assertEqual(len(run["results"]), 2)
        for result in run["results"]:
            self.assertEqual(rules[result["ruleIndex"]], result["ruleId"])
            loc = result["locations"][0]["physicalLocation"]
            self.assertTrue(loc["artifactLocation"]["uri"].startswith("file://"), loc)
        bare = next(r for r in run["results"] if r["ruleId"] == "MissingComponentLabel")
        self.assertTrue(bare["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("unlabelled.yaml"))
        self.assertEqual(bare["locations"][0]["physicalLocation"]["region"]["startLine"], 2)
        # Bad input is a BadInput result, still valid.
        proc = self.evaluate("-f", self.write("bad/x.yaml", "kind: [\n"), "-o", "sarif")
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        log = json.loads(proc.stdout)
        jsonschema.validate(log, schema, format_checker=jsonschema.FormatChecker())
        self.assertEqual(log["runs"][0]["results"][0]["ruleId"], "BadInput")
        self.assertFalse(log["runs"][0]["invocations"][0]["executionSuccessful"])

    def test_yaml_output_reads_back_as_the_json_output(self):
        d = self.mixed_dir()
        as_json = json.loads(self.evaluate("-f", d, "-o", "json").stdout)
        as_yaml = yaml.safe_load(self.evaluate("-f", d, "-o", "yaml").stdout)
        self.assertEqual(as_yaml, as_json)

    def test_shape_flag_overrides_the_environment(self):
        d = self.mixed_dir()
        proc = self.evaluate("-f", os.path.join(d, "apps", "deploy.yaml"), "--components", d,
                             "--shape", "customer-isolation", "-o", "json", shape="setec-only")
        self.assertEqual(proc.returncode, EXIT_ADMITTED, proc.stdout)
        r = json.loads(proc.stdout)["results"][0]
        self.assertEqual((r["decision"], r["shape"]["value"]), ("AllowInProcess", "customer-isolation"))
        proc = self.evaluate("-f", os.path.join(d, "apps", "deploy.yaml"), "--components", d,
                             "--shape", "setec-only", "-o", "json", shape="customer-isolation")
        self.assertEqual(proc.returncode, EXIT_DENIED, proc.stdout)
        proc = self.evaluate("-f", d, "--shape", "hosted")
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        self.assertIn("--shape", proc.stderr.decode())

    def test_component_flag_naming_another_component_says_so(self):
        proc = self.evaluate("--component", os.path.join(h.EXAMPLE_COMPONENTS, "docs-indexer.yaml"),
                             "--pod", os.path.join(h.EXAMPLE_PODS, "report-parser-pod.yaml"), "--sandbox", "available")
        self.assertEqual(proc.returncode, EXIT_DENIED)
        out = proc.stdout.decode()
        self.assertIn('is Component "docs-indexer" but the pod\'s label gibson.zeroroot.ai/component names '
                      '"report-parser"', out)


MERGED_UNTRUSTED = """apiVersion: gibson.zeroroot.ai/v1alpha1
kind: Component
metadata: {name: report-parser, namespace: team-a}
spec:
  kind: tool
  image: registry.example.com/gibson/report-parser:1.4.2
  policy: {<<: {content_trust: untrusted}}
"""

MERGED_CONFLICT = """apiVersion: gibson.zeroroot.ai/v1alpha1
kind: Component
metadata: {name: report-parser, namespace: team-a}
spec:
  kind: tool
  image: registry.example.com/gibson/report-parser:1.4.2
  policy:
    content_trust: trusted
    <<: {content_trust: untrusted}
"""


class MergeKeys(unittest.TestCase):
    """`<<:` is merged as go-yaml (the API server's YAML reader) merges it, or refused: never read as trusted
    offline while the cluster reads untrusted."""

    @classmethod
    def setUpClass(cls):
        h.require_binary()

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-merge-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_a_merged_untrusted_policy_is_untrusted(self):
        self.assertEqual(yaml.safe_load(MERGED_UNTRUSTED)["spec"]["policy"], {"content_trust": "untrusted"})
        comp = self.write("c.yaml", MERGED_UNTRUSTED)
        pod = os.path.join(h.EXAMPLE_PODS, "report-parser-pod.yaml")
        for args in (["--component", comp, "--pod", pod], ["-f", comp, "-f", pod], ["--components", comp, "-f", pod]):
            with self.subTest(args=args):
                proc = h.run_binary(["evaluate", "--sandbox", "unavailable", "-o", "json"] + args,
                                    env={h.SHAPE_ENV: None})
                self.assertEqual(proc.returncode, EXIT_DENIED, proc.stdout + proc.stderr)
                out = json.loads(proc.stdout)
                r = out if "decision" in out else out["results"][0]
                self.assertEqual((r["decision"], r["contentTrust"]["effective"]), ("Deny", "untrusted"))

    def test_serve_local_reads_the_merged_policy_as_untrusted(self):
        d = os.path.join(self.tmp, "components")
        os.makedirs(d)
        self.write("components/c.yaml", MERGED_UNTRUSTED)
        gate = h.GateServer(sandbox="unavailable", components=d).start()
        self.addCleanup(gate.stop)
        out = gate.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")))
        self.assertFalse(out["response"]["allowed"], out)
        self.assertIn("untrusted", out["response"]["status"]["message"])

    def test_a_key_set_before_the_merge_key_and_by_it_is_refused_naming_file_and_line(self):
        comp = self.write("c.yaml", MERGED_CONFLICT)
        proc = h.run_binary(["evaluate", "--component", comp, "--pod",
                             os.path.join(h.EXAMPLE_PODS, "report-parser-pod.yaml")])
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT)
        err = proc.stderr.decode()
        self.assertIn(comp + ": line 9, column 5:", err)
        self.assertIn("merge key", err)
        # serve --local reads Component files with the same reader: it refuses to start.
        d = os.path.join(self.tmp, "components")
        os.makedirs(d)
        shutil.copy(comp, d)
        proc = h.run_binary(["serve", "--local", "--components", d, "--listen", "127.0.0.1:0",
                             "--metrics-listen", "127.0.0.1:0"], timeout=30)
        self.assertEqual(proc.returncode, EXIT_BAD_INPUT, proc.stderr)
        self.assertIn("merge key", proc.stderr.decode())


if __name__ == "__main__":
    unittest.main()
