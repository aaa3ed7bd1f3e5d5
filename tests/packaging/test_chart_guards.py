"""The chart fails early, not late (issue 29, item 4): `helm template` refuses
every combination of values that `isolation-gate serve --check-config` refuses
for the flags the chart passes, with a message naming the value, and accepts
what the binary accepts.

How agreement is shown: each case is rendered twice, by the chart as it is
(refused or not, and with which message) and by a copy of the chart whose
templates/deployment.yaml does not include the checks of
templates/_validate.tpl (so it renders the Deployment the chart would have
installed). The real binary then runs `serve --check-config` with that
Deployment's arguments and environment: exit 2 exactly when the chart
refused. A few checks are the chart's own: what the binary only finds out
when it runs (ports, the placeholder image) and extraArgs repeating a flag the
chart sets (the binary takes the last one, so it would override the value past
the chart's checks). Those are listed apart, and the binary's --check-config
is shown to accept them, so none is a rule of the binary's by accident.

Run:  IG_BINARY=build/isolation-gate /usr/bin/python3 -m unittest -v tests/packaging/test_chart_guards.py
(ctest's `packaging` entry sets IG_BINARY; without it the agreement half is skipped.)
"""

import os
import re
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tools import HELM, LOCAL_IMAGE, NO_HELM, ROOT, run  # noqa: E402

try:
    import yaml
except ImportError:  # pragma: no cover - python3-yaml is in install-deps.sh
    yaml = None

CHART = os.path.join(ROOT, "charts", "isolation-gate")
RELEASE = "isolation-gate"
NAMESPACE = "isolation-gate-system"
IG_BINARY = os.environ.get("IG_BINARY") or None
NO_BINARY = "IG_BINARY not set (ctest sets it to the built isolation-gate)"
DIGEST = "sha256:" + "0123456789abcdef" * 4
FILES_MODE = ["--set", "tls.certMode=files", "--set", "tls.caBundle=Q0E="]


def S(*pairs):
    """--set arguments from "key=value" strings."""
    out = []
    for p in pairs:
        out += ["--set", p]
    return out


def images(*patterns):
    return ["--set-json", "allowedExtraImages=[%s]" % ",".join('"%s"' % p for p in patterns)]


def extra_args(*args):
    return ["--set-json", "extraArgs=%s" % ("[%s]" % ",".join('"%s"' % a for a in args))]


# (name, values, the message the chart fails with). The binary refuses each.
REFUSED_BY_BOTH = [
    ("retry period 0", S("leaderElection.retryPeriod=0s"),
     "leaderElection.retryPeriod (0s) must be more than 0"),
    ("retry period under a millisecond", S("leaderElection.retryPeriod=500us"),
     "leaderElection.retryPeriod (500us) must be more than 0"),
    ("lease = renew deadline", S("leaderElection.leaseDuration=10s"),
     "leaderElection.leaseDuration (10s) must be longer than leaderElection.renewDeadline (10s)"),
    ("lease < renew deadline", S("leaderElection.leaseDuration=9999ms"),
     "leaderElection.leaseDuration (9999ms) must be longer than leaderElection.renewDeadline (10s)"),
    ("renew deadline = 1.2 x retry", S("leaderElection.renewDeadline=2400ms"),
     "leaderElection.renewDeadline (2400ms) must be more than 1.2 x leaderElection.retryPeriod (2s)"),
    ("renew deadline < 1.2 x retry, mixed units",
     S("leaderElection.leaseDuration=1h", "leaderElection.renewDeadline=1m", "leaderElection.retryPeriod=50.5s"),
     "leaderElection.renewDeadline (1m) must be more than 1.2 x leaderElection.retryPeriod (50.5s)"),
    ("certificate outlives the CA", S("tls.certValidity=87601h"),
     "tls.certValidity (87601h) must not exceed tls.caValidity (87600h)"),
    ("certificate outlives the CA, other units", S("tls.certValidity=1h0m1s", "tls.caValidity=60m"),
     "tls.certValidity (1h0m1s) must not exceed tls.caValidity (60m)"),
    ("certificate under 3s", S("tls.certValidity=2999ms"), "tls.certValidity (2999ms) must be at least 3s"),
    ("duration too long", S("tls.caValidity=9999999999999h"), "tls.caValidity (9999999999999h) is too long"),
    ("extraArgs: stale-after = watch silence", extra_args("--sandbox-stale-after=150s"),
     "--sandbox-stale-after (150s) must be longer than --kube-watch-silence (150s)"),
    ("extraArgs: watch silence over the default stale-after", extra_args("--kube-watch-silence", "5m"),
     "--sandbox-stale-after (300s) must be longer than --kube-watch-silence (5m)"),
    ("extraArgs: handshake timeout too short", extra_args("--tls-handshake-timeout=99ms"),
     "--tls-handshake-timeout (99ms) must be between 100ms and 60s"),
    ("extraArgs: handshake timeout too long", extra_args("--tls-handshake-timeout=1m1s"),
     "--tls-handshake-timeout (1m1s) must be between 100ms and 60s"),
    ("extraArgs: per-source over the total", extra_args("--max-connections=1000"),
     "--max-connections-per-source (2048) must be at most --max-connections (1000)"),
    ("extraArgs: per-source over the total, two items", extra_args("--max-connections-per-source", "5000"),
     "--max-connections-per-source (5000) must be at most --max-connections (4096)"),
    ("extraArgs: a flag the chart sets, self-managed", extra_args("--tls-cert=/x.crt", "--tls-key=/x.key"),
     "extraArgs has --tls-cert"),
    ("extraArgs: --local", extra_args("--local"), "extraArgs has --local"),
    ("extraArgs: not a duration", extra_args("--kube-watch-silence=abc"),
     "extraArgs: --kube-watch-silence (abc) is not a duration"),
    ("extraArgs: no connections", extra_args("--max-connections=0"),
     "extraArgs: --max-connections (0) must be a whole number from 1 to 1000000"),
    ("extraArgs: not a number", extra_args("--max-connections-per-source", "many"),
     "extraArgs: --max-connections-per-source (many) must be a whole number"),
    # --allowed-extra-images (src/model/image.cpp, parse_image_pattern).
    ("a registry", images("ghcr.io/org/*", "docker.io/*"),
     "allowedExtraImages[1] (docker.io/*): registry-wide patterns are refused"),
    ("a single path segment", images("istio/*"), "allowedExtraImages[0] (istio/*): registry-wide patterns are refused"),
    ("docker.io's library", images("index.docker.io/library/*"), "registry-wide patterns are refused"),
    ("a bare repository", images("ghcr.io/org/img"), "a bare repository is ambiguous"),
    ("a star inside", images("ghcr.io/*/img"), '"*" may appear only at the end'),
    ("an invalid registry", images("a.b_c/img:1"), "(a.b_c/img:1) is not a valid image reference"),
    ("a capital in the path", images("ghcr.io/Org/img:1"), "is not a valid image reference"),
    ("a short digest", images("ghcr.io/org/img@sha256:abc"), "is not a valid image reference"),
    ("a tag and :*", images("registry:5000:*"), "REPO:* names a valid repository without a tag or digest"),
    ("a tag before /*", images("ghcr.io/org/img:1/*"), "is not a registry and a repository path"),
]

# Accepted by both: the boundaries just inside each rule.
ACCEPTED_BY_BOTH = [
    ("defaults", []),
    ("renew deadline just over 1.2 x retry", S("leaderElection.renewDeadline=2401ms")),
    ("lease just over renew deadline", S("leaderElection.leaseDuration=10001ms")),
    ("mixed units", S("leaderElection.leaseDuration=1h30m", "leaderElection.renewDeadline=1m0.5s",
                      "leaderElection.retryPeriod=50s")),
    ("fractions", S("leaderElection.leaseDuration=0.5m", "leaderElection.renewDeadline=12.5s",
                    "leaderElection.retryPeriod=10.4s")),
    ("certificate = CA, 3s", S("tls.certValidity=3s", "tls.caValidity=3000ms")),
    ("certificate just under the CA", S("tls.certValidity=87599h59m59s")),
    ("cert-manager ignores the self-managed lifetimes", S("certManager.enabled=true", "tls.certValidity=87601h")),
    ("files mode ignores them too", FILES_MODE + S("tls.certValidity=1s")),
    ("extraArgs: stale-after just over watch silence", extra_args("--sandbox-stale-after=150001ms")),
    ("extraArgs: stale-after 0", extra_args("--sandbox-stale-after=0s", "--kube-watch-silence=10m")),
    ("extraArgs: watch silence 0", extra_args("--kube-watch-silence", "0s")),
    ("extraArgs: handshake bounds", extra_args("--tls-handshake-timeout=100ms")),
    ("extraArgs: handshake upper bound", extra_args("--tls-handshake-timeout=1m")),
    ("extraArgs: per-source = total", extra_args("--max-connections=2048")),
    ("extraArgs: durations as the binary writes them", extra_args("--kube-watch-silence=.5s",
                                                                  "--sandbox-stale-after=5.m")),
    ("hostNetwork, default ports", S("hostNetwork=true")),
    ("hostNetwork, port 443", S("hostNetwork=true", "listen.webhookPort=443")),
    ("digest", S("image.digest=" + DIGEST)),
    ("image patterns", images("ghcr.io/org/*", "istio/proxyv2:1.20", "docker.io/istio/*", "registry:5000/team/img:*",
                              "[::1]:5000/a/b:c", "ghcr.io/org/x@" + DIGEST, "ghcr.io/org/x:1@" + DIGEST,
                              "localhost/x/*", "library/foo/*", "Ghcr.io/org/x:1", "a__b/c-d:v1", "alpine:*")),
]

# The chart's own checks: the binary finds these out only when it runs
# (binding a port, pulling an image), or takes them (a repeated flag), so its
# --check-config accepts them.
REFUSED_BY_THE_CHART_ONLY = [
    ("the two ports equal", S("listen.metricsPort=8443"),
     "listen.webhookPort and listen.metricsPort are both 8443"),
    ("hostNetwork on the kubelet's port", S("hostNetwork=true", "listen.webhookPort=10250"),
     "listen.webhookPort is 10250 with hostNetwork: the pod shares the node's ports, and 10250 is the kubelet's"),
    ("hostNetwork on kube-proxy's port", S("hostNetwork=true", "listen.metricsPort=10256"),
     "listen.metricsPort is 10256 with hostNetwork"),
    # The binary takes the last of a repeated flag: the extraArgs one would
    # silently override the value, past the chart's checks of it.
    ("extraArgs repeats a flag the chart sets", extra_args("--lease-duration=20s"),
     "extraArgs has --lease-duration: the chart sets that flag from its values"),
    ("extraArgs repeats a flag the chart sets, two items", extra_args("--retry-period", "1s"),
     "extraArgs has --retry-period"),
]


def helm_template(chart, values, local_image=True):
    return run([HELM, "template", RELEASE, chart, "--namespace", NAMESPACE] +
               (LOCAL_IMAGE if local_image else []) + list(values), check=False)


def deployment_command(text):
    """The Deployment container's `serve` arguments and environment, as
    tests/packaging/test_packaging.py's rendered_command()."""
    (dep,) = [d for d in yaml.safe_load_all(text) if d and d.get("kind") == "Deployment"]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["args"][0] == "serve", c["args"]
    env = {e["name"]: e.get("value", "dummy-" + e["name"].lower()) for e in c["env"]}
    return c["args"][1:], env


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
class ChartRefuses(unittest.TestCase):
    """Each refusal, with its message; each accepted boundary renders."""

    def test_refused_with_a_message_naming_the_value(self):
        for name, values, message in REFUSED_BY_BOTH + REFUSED_BY_THE_CHART_ONLY:
            with self.subTest(name):
                proc = helm_template(CHART, values)
                self.assertNotEqual(proc.returncode, 0, name)
                self.assertIn(message, proc.stderr)
                self.assertEqual(proc.stdout, "")

    def test_accepted(self):
        for name, values in ACCEPTED_BY_BOTH:
            with self.subTest(name):
                proc = helm_template(CHART, values)
                self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_the_placeholder_image_is_refused_unless_allowed(self):
        proc = helm_template(CHART, [], local_image=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("image.repository is still the placeholder registry.example.com/gibson/isolation-gate",
                      proc.stderr)
        self.assertIn("image.allowPlaceholder=true", proc.stderr)
        # helm install fails the same way, before anything reaches a cluster.
        proc = run([HELM, "install", RELEASE, CHART, "--namespace", NAMESPACE, "--dry-run=client"], check=False)
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("image.repository is still the placeholder", proc.stderr)
        # Your own repository needs no allowance; the placeholder with a digest is still the placeholder.
        self.assertEqual(helm_template(CHART, S("image.repository=registry.corp/gibson/isolation-gate"),
                                       local_image=False).returncode, 0)
        self.assertNotEqual(helm_template(CHART, S("image.digest=" + DIGEST), local_image=False).returncode, 0)

    def test_digest_pins_every_image(self):
        proc = helm_template(CHART, S("image.repository=registry.corp/gibson/isolation-gate",
                                      "image.tag=ignored", "image.digest=" + DIGEST), local_image=False)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        images = re.findall(r'^\s+image: "?([^"\s]+)"?$', proc.stdout, re.M)
        self.assertEqual(len(images), 3, images)  # the Deployment, the cleanup Job, the helm test Pod
        self.assertEqual(set(images), {"registry.corp/gibson/isolation-gate@" + DIGEST})
        for bad in ("sha256:abc", "sha256:" + "0123456789ABCDEF" * 4, "md5:" + "0" * 32, "0" * 64):
            with self.subTest(digest=bad):
                proc = helm_template(CHART, S("image.digest=" + bad))
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn("/image/digest", proc.stderr)  # the schema's pattern

    def test_host_network(self):
        docs = [d for d in yaml.safe_load_all(helm_template(CHART, S("hostNetwork=true", "listen.webhookPort=9443",
                                                                     "listen.metricsPort=9080")).stdout) if d]
        (dep,) = [d for d in docs if d["kind"] == "Deployment"]
        pod = dep["spec"]["template"]["spec"]
        self.assertIs(pod["hostNetwork"], True)
        self.assertEqual(pod["dnsPolicy"], "ClusterFirstWithHostNet")
        (c,) = pod["containers"]
        self.assertEqual({p["name"]: p["containerPort"] for p in c["ports"]}, {"https": 9443, "metrics": 9080})
        self.assertIn("--listen=[::]:9443", c["args"])
        self.assertIn("--metrics-listen=[::]:9080", c["args"])
        # The probes use the port by name, the Service targets it by name, the NetworkPolicy by number.
        self.assertEqual(c["readinessProbe"]["httpGet"]["port"], "metrics")
        self.assertEqual(c["livenessProbe"]["httpGet"]["port"], "metrics")
        (svc,) = [d for d in docs if d["kind"] == "Service"]
        self.assertEqual({p["name"]: (p["port"], p["targetPort"]) for p in svc["spec"]["ports"]},
                         {"https": (443, "https"), "metrics": (8080, "metrics")})
        (np,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
        self.assertEqual([r["ports"] for r in np["spec"]["ingress"]],
                         [[{"port": 9443, "protocol": "TCP"}], [{"port": 9080, "protocol": "TCP"}]])
        # Off by default: neither field.
        docs = [d for d in yaml.safe_load_all(helm_template(CHART, []).stdout) if d]
        (dep,) = [d for d in docs if d["kind"] == "Deployment"]
        self.assertNotIn("hostNetwork", dep["spec"]["template"]["spec"])
        self.assertNotIn("dnsPolicy", dep["spec"]["template"]["spec"])
        proc = helm_template(CHART, S("hostNetwork=yes"))
        self.assertNotEqual(proc.returncode, 0)
        self.assertIn("/hostNetwork", proc.stderr)


class ManagedClustersDoc(unittest.TestCase):
    """docs/operations.md, "Managed clusters" (issue 29, item 7): a section per
    provider, each naming the admin values; the chart's messages point there."""

    def test_a_section_per_provider(self):
        with open(os.path.join(ROOT, "docs", "operations.md")) as f:
            text = f.read()
        self.assertIn("\n## Managed clusters\n", text)
        section = text.split("\n## Managed clusters\n", 1)[1].split("\n## ", 1)[0]
        for needle in ("webhook.enforcementAdmins", "webhook.trustAdmins", "kubectl auth whoami",
                       "tls.clientCA.enabled", "isolation-gate cleanup --kubeconfig", "exec"):
            self.assertIn(needle, section)
        parts = dict(p.split("\n", 1) for p in section.split("\n### ")[1:])
        self.assertEqual(sorted(parts), ["AKS", "EKS", "GKE", "OIDC and self-managed clusters"])
        self.assertIn("webhook.enforcementAdmins", parts["GKE"])
        self.assertIn("443 and 10250", parts["GKE"])
        self.assertIn("hostNetwork=true", parts["EKS"])
        self.assertIn("--kubernetes-groups", parts["EKS"])
        self.assertIn("object", parts["AKS"])
        self.assertIn("--oidc-groups-prefix", parts["OIDC and self-managed clusters"])
        with open(os.path.join(CHART, "templates", "_validate.tpl")) as f:
            self.assertIn('docs/operations.md, \\"Managed clusters\\"', f.read())


@unittest.skipIf(yaml is None, "python3-yaml not installed")
@unittest.skipIf(HELM is None, NO_HELM)
@unittest.skipIf(IG_BINARY is None, NO_BINARY)
class ChartAndBinaryAgree(unittest.TestCase):
    """The chart refuses exactly what `serve --check-config` refuses, run with
    the arguments the chart's Deployment would pass."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="ig-unguarded-")
        cls.unguarded = os.path.join(cls.tmp, "isolation-gate")
        shutil.copytree(CHART, cls.unguarded)
        path = os.path.join(cls.unguarded, "templates", "deployment.yaml")
        with open(path) as f:
            text = f.read()
        line = '{{- include "isolation-gate.validate" . }}\n'
        assert text.count(line) == 1, "deployment.yaml no longer includes the checks as this test expects"
        with open(path, "w") as f:
            f.write(text.replace(line, ""))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

    def check_config(self, values):
        """The unguarded chart's Deployment, run through serve --check-config."""
        proc = helm_template(self.unguarded, values)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        args, env = deployment_command(proc.stdout)
        return run([IG_BINARY, "serve", "--check-config"] + args, check=False,
                   env=dict(env, PATH=os.environ.get("PATH", "/usr/bin:/bin")))

    def test_the_binary_refuses_what_the_chart_refuses(self):
        for name, values, _ in REFUSED_BY_BOTH:
            with self.subTest(name):
                proc = self.check_config(values)  # the chart's side: ChartRefuses
                self.assertEqual(proc.returncode, 2, "%s: the binary accepted it\n%s" % (name, proc.stdout))
                self.assertNotIn("configuration ok", proc.stdout)
                self.assertTrue(proc.stderr.strip())

    def test_the_binary_accepts_what_the_chart_accepts(self):
        for name, values in ACCEPTED_BY_BOTH:
            with self.subTest(name):
                proc = self.check_config(values)  # the chart's side: ChartRefuses
                self.assertEqual(proc.returncode, 0, "%s: %s" % (name, proc.stderr))
                self.assertIn("configuration ok", proc.stdout)

    def test_the_chart_only_checks_pass_the_binarys_check_config(self):
        for name, values, _ in REFUSED_BY_THE_CHART_ONLY:
            with self.subTest(name):
                proc = self.check_config(values)
                self.assertEqual(proc.returncode, 0, proc.stderr)

    def test_the_unguarded_copy_differs_only_by_the_checks(self):
        # The copy renders the same objects as the chart where the chart accepts.
        for name, values in ACCEPTED_BY_BOTH[:3]:
            with self.subTest(name):
                self.assertEqual(helm_template(self.unguarded, values).stdout, helm_template(CHART, values).stdout)

    def unreachable_kubeconfig(self):
        ca = os.path.join(self.tmp, "ca.crt")
        if not os.path.exists(ca):
            run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", os.path.join(self.tmp, "ca.key"), "-out", ca, "-subj", "/CN=unreachable", "-days", "1"])
        kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\n"
                    "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1', certificate-authority: %s}}]\n"
                    "users: [{name: u, user: {token: t}}]\n"
                    "contexts: [{name: c, context: {cluster: c, user: u}}]\n" % ca)
        return kubeconfig

    def test_selftest_timeout_agrees(self):
        # helm test's Pod: `selftest --timeout` under 1s is refused by both.
        for timeout, refused in (("999ms", True), ("1s", False)):
            with self.subTest(timeout=timeout):
                values = S("selftest.timeout=" + timeout)
                proc = helm_template(CHART, values)
                self.assertEqual(proc.returncode != 0, refused, proc.stderr)
                if refused:
                    self.assertIn("selftest.timeout (999ms) must be at least 1s", proc.stderr)
                docs = [d for d in yaml.safe_load_all(helm_template(self.unguarded, values).stdout) if d]
                (pod,) = [d for d in docs if d["kind"] == "Pod"]
                # An unreachable API server: past the flags, the check could not be made (3); bad flags are 2.
                kubeconfig = self.unreachable_kubeconfig()
                proc = run([IG_BINARY] + pod["spec"]["containers"][0]["args"] + ["--kubeconfig", kubeconfig],
                           check=False)
                if refused:
                    self.assertEqual(proc.returncode, 2, proc.stdout + proc.stderr)
                    self.assertIn("--timeout must be at least 1s", proc.stderr)
                else:
                    self.assertEqual(proc.returncode, 3, proc.stdout + proc.stderr)


if __name__ == "__main__":
    unittest.main()
