"""The chart's alerts (PrometheusRule), their runbooks and the Grafana dashboard.

Run:  IG_SOURCE_DIR=$PWD PATH=$PWD/.tools/bin:$PATH /usr/bin/python3 -m unittest tests/packaging/test_alerts.py -v
Needs: python3-yaml, helm (scripts/install-k8s-tools.sh) and promtool (Debian
package `prometheus`, scripts/install-deps.sh). A missing tool skips the tests
that need it, with a message.

What the binary exports is read from its source, not written down here: every
C++ string literal of the form "isolation_gate_<name>" under src/ (comments
left out) is a metric family. They reach the Prometheus writer in three ways,
all of which a `family("` grep alone would miss in part: `out.family("NAME"`
directly, through a `constexpr std::string_view kX = "NAME"` passed to
`family(kX`, and through tables of rows (IG_TRANSPORT_COUNTERS, the reflector
counters) whose names are passed on. Histograms are the families written with
`Type::Histogram`; their series are NAME_bucket, NAME_sum and NAME_count.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tools import HELM, LOCAL_IMAGE, NO_HELM, find_tool, run  # noqa: E402


try:
    import yaml
except ImportError:  # pragma: no cover - python3-yaml is in install-deps.sh
    yaml = None

ROOT = os.path.abspath(os.environ.get("IG_SOURCE_DIR")
                       or os.path.join(os.path.dirname(__file__), "..", ".."))
CHART = os.path.join(ROOT, "charts", "isolation-gate")
SRC = os.path.join(ROOT, "src")
OPERATIONS = os.path.join(ROOT, "docs", "operations.md")
RULES_TEST = os.path.join(ROOT, "tests", "packaging", "rules_test.yaml")
DASHBOARD = os.path.join(CHART, "files", "dashboard.json")
RELEASE = "isolation-gate"
NAMESPACE = "isolation-gate-system"
SEVERITIES = {"critical", "warning", "info"}
# Series the alerts and the dashboard may use besides the binary's own.
FOREIGN_SERIES = {"up", "kube_deployment_status_replicas_available"}


PROMTOOL = find_tool("IG_PROMTOOL", "promtool")
NO_PROMTOOL = ("promtool not installed: run scripts/install-deps.sh (Debian package prometheus) "
               "or set IG_PROMTOOL")
NO_YAML = "python3-yaml not installed"




def helm_template(*sets, check=True):
    args = [HELM, "template", RELEASE, CHART, "--namespace", NAMESPACE] + LOCAL_IMAGE
    for s in sets:  # "json:key=value" passes a typed value (--set makes 0.8 a string)
        args += ["--set-json", s[5:]] if s.startswith("json:") else ["--set", s]
    return run(args, check=check)


def render(*sets):
    return [d for d in yaml.safe_load_all(helm_template(*sets).stdout) if d is not None]


# --------------------------------------------------------------------- the binary's metrics

_CXX_TOKENS = re.compile(
    r'//[^\n]*'                                  # line comment
    r'|/\*.*?\*/'                                # block comment
    r'|R"(?P<delim>[^(\s]{0,16})\((?P<raw>.*?)\)(?P=delim)"'  # raw string
    r'|"(?P<str>(?:\\.|[^"\\\n])*)"'             # string literal
    r"|'(?:\\.|[^'\\\n])*'",                     # character literal
    re.S)
_FAMILY_NAME = re.compile(r"isolation_gate_[a-z0-9_]+")


def _cxx_sources():
    for dirpath, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith((".h", ".hpp", ".cc", ".cpp")):
                path = os.path.join(dirpath, f)
                with open(path, encoding="utf-8") as fh:
                    yield path, fh.read()


def _code_and_literals(text):
    """The source with comments blanked (strings kept), and its string literals."""
    literals = []

    def keep(m):
        tok = m.group(0)
        if tok.startswith(("//", "/*")):
            return " "
        if m.group("str") is not None:
            literals.append(m.group("str"))
        return tok

    return _CXX_TOKENS.sub(keep, text), literals


def exported_families():
    """(families, histograms, direct): every family, the histogram ones, and the
    ones a plain `family("isolation_gate_...` call names."""
    families, histograms, direct = set(), set(), set()
    for _, text in _cxx_sources():
        code, literals = _code_and_literals(text)
        families.update(s for s in literals if _FAMILY_NAME.fullmatch(s))
        direct.update(re.findall(r'\bfamily\(\s*"(isolation_gate_[a-z0-9_]+)"', code))
        for arg in re.findall(r'\bfamily\(\s*("?[A-Za-z_][A-Za-z0-9_.]*"?)\s*,\s*'
                              r'(?:prometheus::)?Type::Histogram\b', code):
            if arg.startswith('"'):
                # The engine's families keep controller-runtime's names
                # (controller_runtime_*, workqueue_*): not the product's.
                if arg.strip('"').startswith("isolation_gate_"):
                    histograms.add(arg.strip('"'))
                continue
            m = re.search(r"\b%s\s*=\s*\"(isolation_gate_[a-z0-9_]+)\"" % re.escape(arg), code)
            if m:
                histograms.add(m.group(1))
    return families, histograms, direct


def admission_buckets():
    with open(os.path.join(SRC, "admission", "metrics.h"), encoding="utf-8") as fh:
        m = re.search(r"kBuckets\s*=\s*\{([^}]*)\}", fh.read())
    return [float(x) for x in m.group(1).split(",") if x.strip()] if m else []


def metric_names(expr):
    """isolation_gate_* names in a PromQL expression (quoted strings left out),
    with _bucket/_sum/_count of histograms mapped to the family."""
    bare = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', '""', expr)
    return set(re.findall(r"\bisolation_gate_\w+", bare))


def unknown_metrics(expr, families, histograms):
    bad = set()
    for name in metric_names(expr):
        if name in families:
            continue
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if base != name and base in histograms:
            continue
        bad.add(name)
    return bad


def foreign_series(expr):
    """Series selected in an expression that are not the binary's: NAME{...}."""
    bare = re.sub(r'"(?:\\.|[^"\\])*"', '""', expr)
    return {n for n in re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\s*\{", bare)
            if not n.startswith("isolation_gate_")}


def family_of(name, histograms):
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    return base if base in histograms else name


# --------------------------------------------------------------------- runbooks

def github_anchor(heading):
    """The id GitHub gives a Markdown heading."""
    a = heading.strip().lower()
    a = re.sub(r"[^\w\- ]", "", a)
    return a.replace(" ", "-")


def runbook_sections():
    """{anchor: AlertName} of the `### ` headings under `## Alert runbooks`."""
    with open(OPERATIONS, encoding="utf-8") as fh:
        text = fh.read()
    m = re.search(r"^## Alert runbooks\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not m:
        return None, text
    return {github_anchor(h): h.strip() for h in re.findall(r"^### (.+)$", m.group(1), re.M)}, \
        m.group(1)


def chart_home():
    with open(os.path.join(CHART, "Chart.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)["home"]


def values():
    with open(os.path.join(CHART, "values.yaml"), encoding="utf-8") as fh:
        return yaml.safe_load(fh)


# --------------------------------------------------------------------- tests

class ExportedFamiliesTest(unittest.TestCase):
    """The parser the other tests rely on finds what the binary writes."""

    def test_parser_finds_every_way_a_family_is_written(self):
        families, histograms, direct = exported_families()
        self.assertGreaterEqual(len(direct), 10, "no family(\"isolation_gate_...\") call found")
        self.assertTrue(direct <= families)
        # Families written through a constant or a table, not a literal family("...") call.
        self.assertTrue(families - direct, "only direct family(\"...\") calls found")
        self.assertTrue(histograms, "no Type::Histogram family found")
        self.assertTrue(histograms <= families)
        for name in families:
            self.assertRegex(name, r"^isolation_gate_[a-z0-9_]+$")

    def test_every_sample_name_is_a_family(self):
        families, _, _ = exported_families()
        for path, text in _cxx_sources():
            code, _ = _code_and_literals(text)
            for name in re.findall(r'\bsample\(\s*"(isolation_gate_[a-z0-9_]+)"', code):
                self.assertIn(name, families, "%s: sample of %s" % (path, name))

    def test_admission_buckets_parse(self):
        buckets = admission_buckets()
        self.assertTrue(buckets, "kBuckets not found in src/admission/metrics.h")
        self.assertEqual(buckets, sorted(buckets))


@unittest.skipIf(yaml is None, NO_YAML)
@unittest.skipIf(HELM is None, NO_HELM)
class DefaultsRenderNothingTest(unittest.TestCase):
    def test_default_render_has_no_rule_and_no_dashboard(self):
        out = helm_template().stdout
        self.assertNotIn("templates/prometheusrule.yaml", out)
        self.assertNotIn("templates/dashboard.yaml", out)
        docs = [d for d in yaml.safe_load_all(out) if d is not None]
        self.assertTrue(docs)
        self.assertFalse([d for d in docs if d["kind"] == "PrometheusRule"])
        for d in docs:
            if d["kind"] == "ConfigMap":
                self.assertNotIn(values()["grafanaDashboard"]["label"],
                                 (d["metadata"].get("labels") or {}))

    def test_defaults_are_off(self):
        v = values()
        self.assertIs(v["prometheusRule"]["enabled"], False)
        self.assertIs(v["grafanaDashboard"]["enabled"], False)


@unittest.skipIf(yaml is None, NO_YAML)
@unittest.skipIf(HELM is None, NO_HELM)
class PrometheusRuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.families, cls.histograms, _ = exported_families()

    def rule(self, *sets):
        docs = [d for d in render("prometheusRule.enabled=true", *sets)
                if d["kind"] == "PrometheusRule"]
        self.assertEqual(len(docs), 1)
        return docs[0]

    def alerts(self, *sets):
        out = {}
        for group in self.rule(*sets)["spec"]["groups"]:
            for r in group["rules"]:
                self.assertIn("alert", r, "recording rules are not expected: %r" % r)
                self.assertNotIn(r["alert"], out, "duplicate alert %s" % r["alert"])
                out[r["alert"]] = r
        return out

    def test_object(self):
        doc = self.rule("prometheusRule.labels.release=kube-prometheus-stack")
        self.assertEqual(doc["apiVersion"], "monitoring.coreos.com/v1")
        self.assertEqual(doc["metadata"]["namespace"], NAMESPACE)
        self.assertEqual(doc["metadata"]["labels"]["release"], "kube-prometheus-stack")
        self.assertEqual(doc["metadata"]["labels"]["app.kubernetes.io/instance"], RELEASE)

    def test_alerts_cover_the_brief(self):
        exprs = {name: r["expr"] for name, r in self.alerts().items()}
        used = {name: {family_of(m, self.histograms) for m in metric_names(e)}
                for name, e in exprs.items()}
        # What each alert is about, by the series it reads.
        wanted = {
            "IsolationGateNoReadyReplica": ("kube_deployment_status_replicas_available", set()),
            "IsolationGateTargetDown": ("up{", set()),
            "IsolationGateDenialsSpike": ('allowed="false"', {"isolation_gate_admission_reviews_total"}),
            "IsolationGateComponentLookupErrors": ('reason="LookupError"',
                                                   {"isolation_gate_admission_reviews_total"}),
            "IsolationGateSandboxUnavailable": ('shape="setec-only"',
                                                {"isolation_gate_sandbox_available"}),
            "IsolationGateCertificateExpiringSoon": ("time()", {
                "isolation_gate_certificate_expiry_seconds",
                "isolation_gate_tls_certificate_expiry_seconds"}),
            "IsolationGateNoLeader": ("== 0", {"isolation_gate_leader"}),
            "IsolationGateWebhookSlow": ("histogram_quantile(0.99",
                                         {"isolation_gate_admission_duration_seconds"}),
            "IsolationGatePodsDrifted": ("> 0", {"isolation_gate_drifted_pods"}),
            "IsolationGateCacheStale": ("> 300", {"isolation_gate_cache_staleness_seconds"}),
        }
        self.assertEqual(set(exprs), set(wanted))
        for name, (text, families) in wanted.items():
            self.assertIn(text, exprs[name], name)
            self.assertTrue(families <= used[name], "%s reads %s" % (name, used[name]))

    def test_every_alert_is_annotated_and_links_its_runbook(self):
        sections, _ = runbook_sections()
        self.assertIsNotNone(sections, "docs/operations.md has no '## Alert runbooks' section")
        base = values()["prometheusRule"]["runbookBaseUrl"]
        alerts = self.alerts()
        for name, r in alerts.items():
            self.assertIn(r.get("labels", {}).get("severity"), SEVERITIES, name)
            ann = r.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                self.assertTrue(str(ann.get(key, "")).strip(), "%s has no %s" % (name, key))
            url, _, anchor = ann["runbook_url"].partition("#")
            self.assertEqual(url, base, name)
            self.assertIn(anchor, sections, "%s links #%s: no such ### section" % (name, anchor))
            self.assertEqual(sections[anchor], name)
        self.assertEqual(set(sections.values()), set(alerts),
                         "one ### section per alert, and none for an alert that does not exist")

    def test_runbooks_say_how_to_diagnose_and_fix(self):
        _, body = runbook_sections()
        parts = re.split(r"^### (.+)$", body, flags=re.M)[1:]
        self.assertTrue(parts)
        for name, text in zip(parts[0::2], parts[1::2]):
            self.assertIn("kubectl", text, "%s: no kubectl diagnosis" % name)
            self.assertRegex(text, r"isolation_gate_\w+|kube_deployment|\bup\b", name)
            for word in ("Meaning", "Impact", "Diagnosis", "Fix"):
                self.assertIn("**%s**" % word, text, "%s: no **%s**" % (name, word))

    def test_runbook_base_url_is_the_charts_home(self):
        base = values()["prometheusRule"]["runbookBaseUrl"]
        self.assertTrue(base.startswith(chart_home().rstrip("/") + "/"), base)
        self.assertTrue(base.endswith("/docs/operations.md"), base)
        url = self.alerts("prometheusRule.runbookBaseUrl=https://wiki.example.com/ig")[
            "IsolationGateNoLeader"]["annotations"]["runbook_url"]
        self.assertEqual(url, "https://wiki.example.com/ig#isolationgatenoleader")

    def test_rules_read_only_exported_metrics(self):
        for name, r in self.alerts().items():
            self.assertFalse(unknown_metrics(r["expr"], self.families, self.histograms),
                             "%s reads metrics the binary does not export" % name)
            self.assertTrue(foreign_series(r["expr"]) <= FOREIGN_SERIES, name)
            for text in r.get("annotations", {}).values():
                self.assertFalse(unknown_metrics(text, self.families, self.histograms), name)

    def test_selector_defaults_to_the_service_monitor_job_and_can_be_replaced(self):
        own = 'job="%s",namespace="%s"' % (RELEASE, NAMESPACE)
        for name, r in self.alerts().items():
            if name != "IsolationGateNoReadyReplica":
                self.assertIn(own, r["expr"], name)
        sel = 'job="ig",cluster="prod"'
        for name, r in self.alerts("prometheusRule.selector=" + sel.replace(",", "\\,")).items():
            if name != "IsolationGateNoReadyReplica":
                self.assertIn(sel, r["expr"], name)
                self.assertNotIn(own, r["expr"], name)

    def test_sandbox_alert_only_in_the_hosted_shape(self):
        self.assertIn("IsolationGateSandboxUnavailable", self.alerts())
        self.assertNotIn("IsolationGateSandboxUnavailable",
                         self.alerts("untrustedExec=customer-isolation"))

    def test_latency_threshold_follows_timeout_seconds(self):
        top = admission_buckets()[-1]
        for timeout, ratio in ((1, 0.8), (1, 0.5), (5, 0.8), (30, 0.1), (2, 0.3)):
            expr = self.alerts("webhook.timeoutSeconds=%d" % timeout,
                               "json:prometheusRule.latencyTimeoutRatio=%s" % ratio)[
                "IsolationGateWebhookSlow"]["expr"]
            m = re.search(r">=\s*([0-9.]+)\s*$", expr.strip())
            self.assertIsNotNone(m, expr)
            self.assertAlmostEqual(float(m.group(1)), min(timeout * ratio, top), places=3,
                                   msg="timeoutSeconds %d x %s, top bucket %s" % (timeout, ratio, top))

    def test_knobs_reach_the_expressions(self):
        a = self.alerts("prometheusRule.certificateExpiryDays=7",
                        "prometheusRule.denialSpikeFactor=5",
                        "prometheusRule.denialBaselineWindow=6h",
                        "json:prometheusRule.denialRateThreshold=0.5",
                        "prometheusRule.leaderMissingFor=9m",
                        "prometheusRule.driftedPodsFor=1h")
        self.assertIn("< %d" % (7 * 86400), a["IsolationGateCertificateExpiringSoon"]["expr"])
        spike = a["IsolationGateDenialsSpike"]["expr"]
        self.assertIn("> 5 *", spike)
        self.assertIn("[6h]", spike)
        self.assertIn("> 0.5", spike)
        self.assertEqual(a["IsolationGateNoLeader"]["for"], "9m")
        self.assertEqual(a["IsolationGatePodsDrifted"]["for"], "1h")

    def test_schema_rejects_bad_values(self):
        for bad in ("prometheusRule.enabled=yes", "prometheusRule.bogus=1",
                    "prometheusRule.latencyTimeoutRatio=2", "prometheusRule.leaderMissingFor=soon",
                    "prometheusRule.selector={job=\"x\"}", "grafanaDashboard.labelValue=not ok",
                    "grafanaDashboard.bogus=1"):
            proc = helm_template("prometheusRule.enabled=true", "grafanaDashboard.enabled=true",
                                 bad, check=False)
            self.assertNotEqual(proc.returncode, 0, bad)
            self.assertIn("schema", proc.stderr.lower() + proc.stdout.lower(), bad)


@unittest.skipIf(yaml is None, NO_YAML)
@unittest.skipIf(HELM is None, NO_HELM)
class PromtoolTest(unittest.TestCase):
    """promtool check rules / test rules on the rendered group (default values)."""

    def groups(self, *sets):
        docs = [d for d in render("prometheusRule.enabled=true", *sets)
                if d["kind"] == "PrometheusRule"]
        self.assertEqual(len(docs), 1)
        return docs[0]["spec"]["groups"]

    @unittest.skipIf(PROMTOOL is None, NO_PROMTOOL)
    def test_promtool_checks_other_renderings(self):
        variants = (("untrustedExec=customer-isolation",),
                    ("webhook.timeoutSeconds=1", "prometheusRule.certificateExpiryDays=30",
                     "prometheusRule.denialBaselineWindow=1w", "prometheusRule.leaderMissingFor=90s"),
                    ("prometheusRule.selector=job=\"ig\"\\,cluster=\"prod\"",
                     "json:prometheusRule.denialSpikeFactor=2.5"))
        with tempfile.TemporaryDirectory() as tmp:
            for i, sets in enumerate(variants):
                path = os.path.join(tmp, "rules-%d.yaml" % i)
                with open(path, "w", encoding="utf-8") as fh:
                    yaml.safe_dump({"groups": self.groups(*sets)}, fh, sort_keys=False)
                proc = run([PROMTOOL, "check", "rules", path], check=False)
                self.assertEqual(proc.returncode, 0, "%s:\n%s%s" % (sets, proc.stdout, proc.stderr))

    def load_rules_test(self):
        with open(RULES_TEST, encoding="utf-8") as fh:
            return yaml.safe_load(fh)

    @unittest.skipIf(PROMTOOL is None, NO_PROMTOOL)
    def test_promtool_check_and_unit_tests(self):
        groups = self.groups()
        with tempfile.TemporaryDirectory() as tmp:
            full = os.path.join(tmp, "full-rules.yaml")
            with open(full, "w", encoding="utf-8") as fh:
                yaml.safe_dump({"groups": groups}, fh, sort_keys=False)
            proc = run([PROMTOOL, "check", "rules", full])
            self.assertIn("SUCCESS", proc.stdout + proc.stderr)
            # rules_test.yaml names rules.yaml next to itself; without annotations
            # (promtool would compare their rendered text, see rules_test.yaml).
            bare = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"}
                                    for r in g["rules"]]} for g in groups]
            with open(os.path.join(tmp, "rules.yaml"), "w", encoding="utf-8") as fh:
                yaml.safe_dump({"groups": bare}, fh, sort_keys=False)
            shutil.copy(RULES_TEST, os.path.join(tmp, "rules_test.yaml"))
            proc = run([PROMTOOL, "test", "rules", os.path.join(tmp, "rules_test.yaml")],
                       check=False)
            self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
            self.assertIn("SUCCESS", proc.stdout + proc.stderr)

    def test_unit_tests_fire_and_stay_quiet_for_every_alert(self):
        alerts = {r["alert"]: r for g in self.groups() for r in g["rules"]}
        spec = self.load_rules_test()
        self.assertEqual(spec["rule_files"], ["rules.yaml"])
        fired, quiet = {}, set()
        for case in spec["tests"]:
            for t in case.get("alert_rule_test", []):
                name = t["alertname"]
                self.assertIn(name, alerts, "rules_test.yaml tests an unknown alert")
                if t.get("exp_alerts"):
                    fired.setdefault(name, []).extend(t["exp_alerts"])
                else:
                    quiet.add(name)
        self.assertEqual(set(fired), set(alerts), "alerts with no firing case")
        self.assertEqual(quiet, set(alerts), "alerts with no not-firing case")
        # The annotations' $labels.X exist on the alerts as they fire.
        for name, expected in fired.items():
            text = " ".join(str(v) for v in alerts[name].get("annotations", {}).values())
            used = set(re.findall(r"\$labels\.(\w+)", text))
            for e in expected:
                labels = set(e.get("exp_labels", {}))
                self.assertEqual(e["exp_labels"].get("severity"),
                                 alerts[name]["labels"]["severity"], name)
                self.assertTrue(used <= labels, "%s: annotations use %s, alert has %s"
                                % (name, sorted(used - labels), sorted(labels)))

    def test_unit_tests_use_only_exported_metrics(self):
        families, histograms, _ = exported_families()
        for case in self.load_rules_test()["tests"]:
            for s in case.get("input_series", []):
                series = s["series"]
                name = re.match(r"\s*([A-Za-z_:][A-Za-z0-9_:]*)", series).group(1)
                if name in FOREIGN_SERIES:
                    continue
                self.assertFalse(unknown_metrics(name, families, histograms), series)


@unittest.skipIf(yaml is None, NO_YAML)
@unittest.skipIf(HELM is None, NO_HELM)
class DashboardTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.families, cls.histograms, _ = exported_families()
        with open(DASHBOARD, encoding="utf-8") as fh:
            cls.dashboard = json.load(fh)

    def configmaps(self, *sets):
        return [d for d in render("grafanaDashboard.enabled=true", *sets)
                if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard")]

    def panels(self):
        def walk(panels):
            for p in panels:
                yield p
                yield from walk(p.get("panels", []))
        return list(walk(self.dashboard["panels"]))

    def exprs(self):
        out = []
        for p in self.panels():
            if p.get("type") == "row":
                continue
            targets = p.get("targets", [])
            self.assertTrue(targets, "panel %r has no target" % p.get("title"))
            for t in targets:
                self.assertTrue(t.get("expr", "").strip(), "panel %r: target without expr"
                                % p.get("title"))
                out.append((p["title"], t["expr"]))
        return out

    def test_configmap_holds_the_dashboard(self):
        cms = self.configmaps()
        self.assertEqual(len(cms), 1)
        cm = cms[0]
        self.assertEqual(cm["metadata"]["namespace"], NAMESPACE)
        self.assertEqual(cm["metadata"]["labels"]["grafana_dashboard"], "1")
        (key, text), = cm["data"].items()
        self.assertTrue(key.endswith(".json"))
        self.assertEqual(json.loads(text), self.dashboard)

    def test_label_namespace_and_annotations_are_configurable(self):
        cm, = self.configmaps("grafanaDashboard.label=dashboards", "grafanaDashboard.labelValue=gibson",
                              "grafanaDashboard.namespace=monitoring",
                              "grafanaDashboard.annotations.grafana_folder=Gibson")
        self.assertEqual(cm["metadata"]["labels"]["dashboards"], "gibson")
        self.assertNotIn("grafana_dashboard", cm["metadata"]["labels"])
        self.assertEqual(cm["metadata"]["namespace"], "monitoring")
        self.assertEqual(cm["metadata"]["annotations"], {"grafana_folder": "Gibson"})

    def test_panels_read_only_exported_metrics(self):
        exprs = self.exprs()
        self.assertTrue(exprs)
        for title, expr in exprs:
            self.assertFalse(unknown_metrics(expr, self.families, self.histograms),
                             "panel %r: %s" % (title, expr))
            self.assertTrue(foreign_series(expr) <= FOREIGN_SERIES, "panel %r: %s" % (title, expr))
        for var in self.dashboard.get("templating", {}).get("list", []):
            q = var.get("query")
            q = q.get("query", "") if isinstance(q, dict) else str(q or "")
            self.assertFalse(unknown_metrics(q, self.families, self.histograms), var["name"])

    def test_panels_cover_the_brief(self):
        used = set()
        text = ""
        for _, expr in self.exprs():
            used |= {family_of(m, self.histograms) for m in metric_names(expr)}
            text += expr + "\n"
        for family in ("isolation_gate_admission_reviews_total",      # requests, decisions, denials
                       "isolation_gate_admission_duration_seconds",   # p50 / p99
                       "isolation_gate_leader", "isolation_gate_sandbox_available",
                       "isolation_gate_certificate_expiry_seconds", "isolation_gate_drifted_pods",
                       "isolation_gate_events_total", "isolation_gate_cache_synced"):
            self.assertIn(family, used)
        for needle in ("by (endpoint)", "by (outcome)", "by (reason)", "histogram_quantile(0.5,",
                       "histogram_quantile(0.99,", "kube_deployment_status_replicas_available",
                       "dropped_"):
            self.assertIn(needle, text)

    def test_panel_ids_and_titles_are_unique(self):
        panels = self.panels()
        ids = [p["id"] for p in panels]
        self.assertEqual(len(ids), len(set(ids)))
        titles = [p["title"] for p in panels]
        self.assertEqual(len(titles), len(set(titles)))
        self.assertTrue(self.dashboard.get("uid"))


if __name__ == "__main__":
    unittest.main()
