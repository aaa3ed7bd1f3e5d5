"""Metrics a real Prometheus can read (docs/operations.md, "Alert runbooks"):

- the live /metrics of local mode and of cluster mode (caches synced, leader
  elected, reviews served) is read by the real parser, `promtool check
  metrics`: any parse error fails, and so does any lint warning that is not in
  DOCUMENTED_LINT below (none today);
- every family the binary's source writes (read from src/ as
  tests/packaging/test_alerts.py does) appears in one mode or the other;
- Debian's `prometheus` server scrapes the binary (up == 1, the main families
  stored), loads the chart's PrometheusRule groups and fires exactly one alert
  on the real series: IsolationGateSandboxUnavailable, the sandbox gauge at 0
  in the hosted shape. The rules' `for:` durations are set to 0s in this test
  (they are minutes long in the chart); their expressions are the chart's.

Needs promtool and prometheus (Debian package `prometheus`,
scripts/install-deps.sh) and helm (scripts/install-k8s-tools.sh) for the
rules; a missing tool skips the tests that need it. Every wait is bounded;
nothing asserts how long something took.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse
import urllib.request

import yaml

import harness as h
import test_cluster as tc
import test_operator as to

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "packaging"))
from tools import HELM, find_tool  # noqa: E402
from test_alerts import exported_families  # noqa: E402

PROMTOOL = find_tool("IG_PROMTOOL", "promtool")
PROMETHEUS = find_tool("IG_PROMETHEUS", "prometheus")
NO_PROMETHEUS = "prometheus/promtool not installed: run scripts/install-deps.sh (Debian package prometheus)"
ELECTION = h.ELECTION
WAIT = 30.0

# promtool lint findings that are choices, not mistakes: (metric, message
# fragment) -> why. Empty: the exposition has none.
DOCUMENTED_LINT = {}


def promtool_check(text):
    """(returncode, findings): promtool's verdict on an exposition."""
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=60)
    out = (proc.stdout + proc.stderr).decode(errors="replace")
    return proc.returncode, [line for line in out.splitlines() if line.strip()]


def undocumented_findings(findings):
    bad = []
    for line in findings:
        name, _, message = line.partition(" ")
        if not any(name == n and frag in message for (n, frag) in DOCUMENTED_LINT):
            bad.append(line)
    return bad


def families_of(text):
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def all_synced(text):
    values = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
              if line.startswith("isolation_gate_cache_synced{")]
    return len(values) >= 3 and all(v == 1.0 for v in values)


def serve_some_reviews(gate):
    """Allowed and denied pod reviews, a workload, a Component, HTTP refusals."""
    for pod in ("report-parser-pod.yaml", "docs-indexer-pod.yaml"):
        gate.review("/mutate/pods", h.pod_review(h.example_pod(pod)))
        gate.review("/validate/pods", h.pod_review(h.example_pod(pod)))
    gate.review("/validate/workloads", h.workload_review(h.make_workload("Deployment")))
    gate.review("/validate/components", h.component_review(h.example_component("docs-indexer.yaml")))
    gate.request("GET", "/mutate/pods")       # 405
    gate.request("POST", "/nowhere", body=b"{}")  # 404


class ExpositionCheck(object):
    def assert_valid_exposition(self, text, what):
        rc, findings = promtool_check(text)
        errors = [f for f in findings if "error" in f.lower() and "lint" in f.lower()] if rc == 1 else []
        self.assertNotEqual(rc, 1, "%s: promtool cannot parse /metrics: %s" % (what, "\n".join(findings)))
        self.assertFalse(errors, what)
        self.assertEqual(undocumented_findings(findings), [],
                         "%s: promtool findings not in DOCUMENTED_LINT" % what)
        self.assertIn(rc, (0, 3), findings)
        if rc == 3:  # lint findings, all documented
            self.assertTrue(findings)


@unittest.skipIf(PROMTOOL is None, NO_PROMETHEUS)
class LocalExposition(unittest.TestCase, ExpositionCheck):
    def test_local_metrics_parse_with_promtool(self):
        gate = h.GateServer(sandbox="unavailable").start()
        self.addCleanup(gate.stop)
        serve_some_reviews(gate)
        text = gate.metrics()
        self.assertIn("isolation_gate_connections_rejected_total", text)
        self.assert_valid_exposition(text, "local mode")
        # The same text on the webhook's TLS listener.
        r = gate.request("GET", "/metrics")
        self.assertEqual(r.status, 200)
        self.assert_valid_exposition(r.body.decode(), "local mode, TLS listener")


@unittest.skipIf(PROMTOOL is None, NO_PROMETHEUS)
class ClusterExposition(tc.ClusterCase, ExpositionCheck):
    start_gate = False

    def bundles(self):
        return [w["clientConfig"].get("caBundle", "")
                for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
                for w in self.api.get(kind, to.WEBHOOKS)["webhooks"]]

    def test_cluster_metrics_parse_with_promtool_and_every_family_is_present(self):
        # Self-managed certificates (the chart's default), so the certificate families are exported too.
        for config in to.webhook_configurations():
            self.api.create(config["kind"].lower() + "s", config)
        self.api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                    "metadata": {"name": to.SECRET, "namespace": to.GATE_NS}}, namespace=to.GATE_NS)
        gate = h.GateServer(kubeconfig=self.kubeconfig, extra_args=ELECTION, tls="self-managed",
                            wait_ready=False, env={"POD_NAME": "gate-a"}).start()
        self.addCleanup(gate.stop)
        self.gate = gate
        tc.wait_until("caBundle published", lambda: all(b != "" for b in self.bundles()))
        with open(gate.ca_file, "w") as f:
            f.write(base64.b64decode(self.bundles()[0]).decode())
        gate._wait_ready()
        tc.wait_until("leader elected", lambda: gate.metric_values("isolation_gate_leader") == 1.0)
        tc.wait_until("every cache synced", lambda: all_synced(gate.metrics()))
        serve_some_reviews(gate)
        cluster = gate.metrics()
        self.assert_valid_exposition(cluster, "cluster mode")

        local = h.GateServer(sandbox="unavailable").start()
        self.addCleanup(local.stop)
        serve_some_reviews(local)
        seen = families_of(cluster) | families_of(local.metrics())
        families, _, _ = exported_families()
        self.assertEqual(sorted(families - seen), [],
                         "families the source writes that neither mode exported")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_json(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read().decode())


def chart_rule_groups():
    """The PrometheusRule's groups as the chart renders them, `for:` set to 0s."""
    proc = subprocess.run([HELM, "template", "isolation-gate", os.path.join(h.SOURCE_DIR, "charts", "isolation-gate"),
                           "--namespace", h.GATE_NAMESPACE, "--set", "prometheusRule.enabled=true",
                           "--set", "image.allowPlaceholder=true"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError("helm template failed: %s" % proc.stderr)
    rules = [d for d in yaml.safe_load_all(proc.stdout) if d and d.get("kind") == "PrometheusRule"]
    assert len(rules) == 1, rules
    groups = rules[0]["spec"]["groups"]
    for g in groups:
        for r in g["rules"]:
            if "for" in r:
                r["for"] = "0s"
    return groups


@unittest.skipIf(PROMETHEUS is None or PROMTOOL is None, NO_PROMETHEUS)
@unittest.skipIf(HELM is None, "helm not installed: run scripts/install-k8s-tools.sh")
class RealPrometheus(unittest.TestCase):
    """A real Prometheus scrapes a local-mode gate (hosted shape, sandbox
    unavailable) every second and evaluates the chart's alerts every second."""

    FIRING = "IsolationGateSandboxUnavailable"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-prom-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.gate = h.GateServer(sandbox="unavailable").start()
        self.addCleanup(self.gate.stop)
        serve_some_reviews(self.gate)
        groups = chart_rule_groups()
        self.alerts = {r["alert"] for g in groups for r in g["rules"] if "alert" in r}
        rules_file = os.path.join(self.tmp, "rules.yml")
        with open(rules_file, "w") as f:
            yaml.safe_dump({"groups": groups}, f)
        check = subprocess.run([PROMTOOL, "check", "rules", rules_file], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout.decode(errors="replace"))
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [rules_file],
            # The chart's ServiceMonitor's series: job is the Service's name, namespace the release's.
            "scrape_configs": [{"job_name": "isolation-gate", "static_configs": [{
                "targets": ["127.0.0.1:%d" % self.gate.metrics_port],
                "labels": {"namespace": h.GATE_NAMESPACE}}]}],
        }
        config_file = os.path.join(self.tmp, "prometheus.yml")
        with open(config_file, "w") as f:
            yaml.safe_dump(config, f)
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        self.log_path = os.path.join(self.tmp, "prometheus.log")
        log = open(self.log_path, "wb")
        self.addCleanup(log.close)
        self.prom = subprocess.Popen(
            [PROMETHEUS, "--config.file=" + config_file, "--storage.tsdb.path=" + os.path.join(self.tmp, "data"),
             "--web.listen-address=127.0.0.1:%d" % self.port, "--log.level=warn"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.addCleanup(self.stop_prometheus)
        self.wait("Prometheus ready", self.ready)

    def stop_prometheus(self):
        if self.prom.poll() is None:
            self.prom.send_signal(signal.SIGTERM)
            try:
                self.prom.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.prom.kill()
                self.prom.wait(timeout=10)

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def wait(self, what, predicate, timeout=WAIT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if self.prom.poll() is not None:
                self.fail("prometheus exited (%s) while waiting for %s:\n%s"
                          % (self.prom.returncode, what, self.log_text()))
            try:
                last = predicate()
            except OSError as e:
                last = e
            if last and not isinstance(last, Exception):
                return last
            time.sleep(0.2)
        self.fail("not reached within %ss: %s (last: %r)\n%s" % (timeout, what, last, self.log_text()))

    def ready(self):
        with urllib.request.urlopen(self.base + "/-/ready", timeout=2) as r:
            return r.status == 200

    def query(self, expr):
        body = http_json(self.base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        self.assertEqual(body["status"], "success", body)
        return body["data"]["result"]

    def alert_states(self):
        out = {}
        for g in http_json(self.base + "/api/v1/rules")["data"]["groups"]:
            for r in g["rules"]:
                if r["type"] == "alerting":
                    out[r["name"]] = (r["state"], r["health"], r.get("lastError", ""))
        return out

    def test_scrapes_the_gate_and_fires_only_the_sandbox_alert(self):
        up = self.wait("up == 1", lambda: self.query('up{job="isolation-gate"} == 1'))
        self.assertEqual(up[0]["value"][1], "1")
        for family in ("isolation_gate_info", "isolation_gate_sandbox_available",
                       "isolation_gate_admission_reviews_total",
                       "isolation_gate_admission_duration_seconds_bucket",
                       "isolation_gate_http_requests_total", "isolation_gate_connections_rejected_total",
                       "isolation_gate_tls_certificate_expiry_seconds"):
            self.assertTrue(self.query('%s{job="isolation-gate"}' % family), family)
        self.assertTrue(self.query('isolation_gate_info{shape="setec-only",mode="local"}'))
        self.assertEqual(self.query("isolation_gate_sandbox_available")[0]["value"][1], "0")

        self.wait(self.FIRING + " firing", lambda: self.alert_states().get(self.FIRING, ("",))[0] == "firing")
        states = self.alert_states()
        self.assertEqual(set(states), self.alerts)
        for name, (state, health, error) in states.items():
            self.assertEqual(health, "ok", "%s: %s" % (name, error))
            if name != self.FIRING:
                self.assertEqual(state, "inactive", name)
        firing = [a for a in http_json(self.base + "/api/v1/alerts")["data"]["alerts"] if a["state"] == "firing"]
        self.assertEqual([a["labels"]["alertname"] for a in firing], [self.FIRING])
        self.assertEqual(firing[0]["labels"]["job"], "isolation-gate")
        self.assertEqual(firing[0]["labels"]["namespace"], h.GATE_NAMESPACE)


if __name__ == "__main__":
    unittest.main()
