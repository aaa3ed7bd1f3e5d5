"""Kubeconfig exec credential plugins end to end (users[].user.exec, as EKS's
`aws eks get-token`, GKE's `gke-gcloud-auth-plugin`, AKS's `kubelogin` and
OIDC helpers use them), against the repository's test API server, with a fake
plugin (a python3 script this test writes beside the kubeconfig):

- `serve --kubeconfig` reaches readiness through the plugin, passes it
  KUBERNETES_EXEC_INFO (apiVersion, kind, spec.interactive, spec.cluster with
  provideClusterInfo), its args and env; runs it again when its token's
  expirationTimestamp passes and sends the new token; after a 401 (the token
  revoked) runs it again and goes on with the new one;
- a plugin answering with client certificates: x509 authentication, and a
  new certificate on expiry reaches the TLS connections;
- a failing plugin (exit 1), a missing one (installHint), one that hangs
  (killed at $ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT) and interactiveMode Always
  without a terminal: clear errors naming the plugin;
- the install path through the plugin: the chart's serve, `selftest` and
  `cleanup`.

Every wait is bounded (harness.SLOWDOWN); nothing asserts how long anything
took.
"""

import base64
import json
import os
import stat
import time
import unittest

import harness as h
import test_cluster as tc
import test_install as ti
from fake_apiserver import make_client_certificates  # noqa: E402 (test_cluster put it on the path)

WAIT = 30.0 * h.SLOWDOWN
GATE_NS = "isolation-gate-system"

PLUGIN = r'''#!/usr/bin/python3
# A fake credential plugin: counts its runs, records what it was given and
# answers as its files say (mode: token|cert|fail|hang; ttl: seconds).
import datetime, json, os, sys, time
d = os.path.dirname(os.path.abspath(__file__))
def read(name, default=""):
    try:
        with open(os.path.join(d, name)) as f:
            return f.read().strip()
    except OSError:
        return default
n = int(read("count", "0")) + 1
with open(os.path.join(d, "count"), "w") as f:
    f.write(str(n))
with open(os.path.join(d, "runs.log"), "a") as f:
    f.write(json.dumps({"n": n, "pid": os.getpid(), "args": sys.argv[1:], "env": os.environ.get("PLUGIN_VAR"),
                        "info": json.loads(os.environ.get("KUBERNETES_EXEC_INFO") or "null")}) + "\n")
mode = read("mode", "token")
if mode == "fail":
    sys.stderr.write("plugin: the identity provider refused the login\n")
    sys.exit(1)
if mode == "hang":
    sys.stderr.write("plugin: waiting for a browser login\n")
    sys.stderr.flush()
    time.sleep(600)
status = {}
ttl = read("ttl")
if ttl:
    exp = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=float(ttl))
    status["expirationTimestamp"] = exp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
if mode == "cert":
    pairs = [line.split() for line in read("certs").splitlines() if line.strip()]
    crt, key = pairs[min(n, len(pairs)) - 1]
    with open(crt) as f:
        status["clientCertificateData"] = f.read()
    with open(key) as f:
        status["clientKeyData"] = f.read()
else:
    status["token"] = "exec-%d" % n
info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
'''

# test_cluster's kubeconfig with the user's token file replaced by the plugin.
KUBECONFIG = tc.KUBECONFIG.replace("    tokenFile: %(token)s\n", """    exec:
      apiVersion: client.authentication.k8s.io/%(version)s
      command: %(command)s
      args: [get-token, --cluster, test]
      env:
      - {name: PLUGIN_VAR, value: from-kubeconfig}
      installHint: "install it: make fake-plugin"
      provideClusterInfo: true
%(mode)s
""")


class PluginMixin(object):
    """A fake plugin beside the kubeconfig, and the kubeconfig using it."""

    def setup_plugin(self, version="v1", interactive="Never", command="./exec-plugin.py"):
        self.plugin_dir = self.tmp
        path = os.path.join(self.plugin_dir, "exec-plugin.py")
        with open(path, "w") as f:
            f.write(PLUGIN)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        mode = "      interactiveMode: %s" % interactive if interactive else ""
        with open(self.kubeconfig, "w") as f:
            f.write(KUBECONFIG % {"server": self.api.url, "ca": self.api_ca, "version": version,
                                  "command": command, "mode": mode})
        # The API server accepts the plugin's tokens (the token file's too).
        self.api.set_tokens(["exec-%d" % i for i in range(1, 400)])

    def plugin_file(self, name, text):
        with open(os.path.join(self.plugin_dir, name), "w") as f:
            f.write(text)

    def runs(self):
        try:
            with open(os.path.join(self.plugin_dir, "runs.log")) as f:
                return [json.loads(line) for line in f if line.strip()]
        except OSError:
            return []

    def requests_with(self, token, status=None):
        return [r for r in self.api.requests()
                if r.get("authorization") == "Bearer " + token and (status is None or r.get("status") == status)]

    def cleanup_cmd(self, env=None):
        return h.run_binary(["cleanup", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS,
                             "--webhook-config-name", "isolation-gate", "--settle", "0s"], env=env, timeout=120,
                            stdin_data=b"")  # standard input is never a terminal here


class ExecPluginServe(PluginMixin, tc.ClusterCase):
    start_gate = False

    def setUp(self):
        super().setUp()
        self.setup_plugin()

    def test_serve_runs_the_plugin_again_on_expiry_and_sends_the_new_token(self):
        self.plugin_file("ttl", str(2.0 * h.SLOWDOWN))
        self.start()  # ready: its caches synced through the plugin's token
        # Lease renewals and relists go on: each expiry runs the plugin again.
        tc.wait_until("requests answered with the plugin's third token",
                      lambda: self.requests_with("exec-3", status=200), timeout=WAIT)
        self.assertTrue(self.requests_with("exec-1", status=200))
        self.assertTrue(self.requests_with("exec-2", status=200))
        self.assertTrue(self.ready())
        runs = self.runs()
        self.assertGreaterEqual(len(runs), 3)
        first = runs[0]
        self.assertEqual(first["args"], ["get-token", "--cluster", "test"])
        self.assertEqual(first["env"], "from-kubeconfig")
        info = first["info"]
        self.assertEqual(info["apiVersion"], "client.authentication.k8s.io/v1")
        self.assertEqual(info["kind"], "ExecCredential")
        self.assertIs(info["spec"]["interactive"], False)  # serve's standard input is not a terminal
        self.assertEqual(info["spec"]["cluster"]["server"], self.api.url)
        with open(self.api_ca, "rb") as f:
            self.assertEqual(base64.b64decode(info["spec"]["cluster"]["certificate-authority-data"]), f.read())
        # One run per expiry for the whole process (both of its API clients share it), never one per request.
        self.assertLess(len(runs), len([r for r in self.api.requests() if (r.get("authorization") or "")
                                        .startswith("Bearer exec-")]))

    def test_serve_after_a_revoked_token_runs_the_plugin_again(self):
        self.start()
        n = len(self.runs())
        self.assertGreaterEqual(n, 1)
        current = "exec-%d" % n
        self.assertTrue(self.requests_with(current, status=200))
        self.api.revoke_token(current)
        # The next request gets 401; the plugin runs again and the request is sent again with its new token.
        fresh = "exec-%d" % (n + 1)
        tc.wait_until("a 401 for the revoked token", lambda: self.requests_with(current, status=401), timeout=WAIT)
        tc.wait_until("requests answered with the new token", lambda: self.requests_with(fresh, status=200),
                      timeout=WAIT)
        self.assertTrue(self.ready())


class ExecPluginClientCertificate(PluginMixin, tc.ClusterCase):
    start_gate = False

    def api_options(self):
        self.client_certs = make_client_certificates(os.path.join(self.tmp, "client-certs"), ["exec-a", "exec-b"])
        return {"client_ca": self.client_certs["ca"]}

    def setUp(self):
        super().setUp()
        self.setup_plugin()
        self.plugin_file("certs", "\n".join("%s %s" % self.client_certs[cn] for cn in ("exec-a", "exec-b")))
        self.plugin_file("mode", "cert")

    def test_client_certificates_and_their_rotation_reach_the_connections(self):
        self.plugin_file("ttl", str(2.0 * h.SLOWDOWN))
        self.start()
        tc.wait_until("requests authenticated by the second certificate",
                      lambda: [r for r in self.api.requests() if r.get("client_cn") == "exec-b"
                               and r.get("status") == 200], timeout=WAIT)
        self.assertTrue([r for r in self.api.requests() if r.get("client_cn") == "exec-a" and r.get("status") == 200])
        self.assertEqual([r for r in self.api.requests() if r.get("client_cn") and r.get("authorization")], [])
        self.assertTrue(self.ready())


class ExecPluginFailures(PluginMixin, tc.ClusterCase):
    start_gate = False

    def setUp(self):
        super().setUp()
        self.setup_plugin()

    def test_a_failing_plugin_is_named_with_its_exit_code_and_standard_error(self):
        self.plugin_file("mode", "fail")
        p = self.cleanup_cmd()
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn('credential plugin "%s/exec-plugin.py"' % self.tmp, err)
        self.assertIn("failed with exit code 1; its standard error ends: plugin: the identity provider refused "
                      "the login", err)

    def test_a_missing_plugin_shows_the_install_hint(self):
        self.setup_plugin(command="ig-e2e-no-such-plugin")
        p = self.cleanup_cmd()
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn('executable "ig-e2e-no-such-plugin" not found on $PATH; install hint: install it: make '
                      'fake-plugin', err)

    def test_a_hanging_plugin_is_killed_at_the_bound(self):
        self.plugin_file("mode", "hang")
        p = self.cleanup_cmd(env={"ISOLATION_GATE_EXEC_PLUGIN_TIMEOUT": "2s"})
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("did not finish within 2s; it was killed (its process group)", err)
        self.assertIn("its standard error ends: plugin: waiting for a browser login", err)
        # Every plugin process is gone (or a zombie awaiting its reaper).
        for run in self.runs():
            def gone(pid=run["pid"]):
                try:
                    with open("/proc/%d/stat" % pid) as f:
                        return ") Z" in f.read()
                except OSError:
                    return True
            tc.wait_until("plugin process %d gone" % run["pid"], gone, timeout=WAIT)

    def test_interactive_always_without_a_terminal_is_refused(self):
        self.setup_plugin(interactive="Always")
        p = self.cleanup_cmd()
        err = p.stderr.decode()
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn("has interactiveMode Always but standard input is not a terminal; not run", err)
        self.assertEqual(self.runs(), [])


class ExecPluginInstall(PluginMixin, ti.InstallCase):
    """The install path with a v1beta1 plugin (interactiveMode unset: IfAvailable)."""

    def setUp(self):
        super().setUp()
        self.setup_plugin(version="v1beta1", interactive=None)

    def test_serve_selftest_and_cleanup_through_the_plugin(self):
        self.start_gate_from_chart()
        tc.wait_until("both configurations applied", lambda: None not in self.configurations(), timeout=WAIT)
        served = len(self.runs())
        self.assertGreaterEqual(served, 1)
        p = self.selftest()
        out = p.stdout.decode()
        self.assertEqual(p.returncode, 0, out + p.stderr.decode())
        self.assertIn("selftest passed", out)
        p = h.run_binary(["cleanup", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS,
                          "--webhook-config-name", ti.SERVICE, "--webhook-template-configmap",
                          "isolation-gate-webhooks", "--settle", "0s"], timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.configurations(), [None, None])
        runs = self.runs()
        self.assertGreaterEqual(len(runs), served + 2)  # selftest's and cleanup's own runs
        self.assertEqual({r["info"]["apiVersion"] for r in runs}, {"client.authentication.k8s.io/v1beta1"})
        # Every plugin token the API server saw was one the plugin issued.
        used = {r["authorization"] for r in self.api.requests() if (r.get("authorization") or "")
                .startswith("Bearer exec-")}
        self.assertTrue(used)
        self.assertLessEqual(used, {"Bearer exec-%d" % r["n"] for r in runs})


if __name__ == "__main__":
    unittest.main()
