"""The e2e suite for any cluster (cluster_suite.py) in the test command, against
the repository's test API server set up as a cluster is after `helm install`
of the chart into kind, so the suite is proven before it meets kind
(.github/workflows/e2e-kind.yml):

- the install is test_install.py's (InstallCase, unchanged): the chart's
  objects the test API server stores (the webhook template ConfigMap, the
  empty TLS Secret), the Deployment played by a process of the binary with the
  chart's container args, reached as the chart's Service; the suite starts
  once the leader has applied both webhook configurations (what `helm install
  --wait` and the first seconds after it give);
- as in kind: no setec RuntimeClass (kata-fc) and one Ready node without the
  runtime's label, so the sandbox is unavailable; no Components and no
  enforced namespace but those the suite makes;
- the suite talks to it only through a kubeconfig written here, as a user of
  its own in system:masters (kind's admin at 1.27): IG_KUBECONFIG.

Tests the test API server cannot serve skip there, saying why (apps/v1,
RBAC with impersonation): test_workloads.py and test_attacks.py cover those
rules against it by other means. Every wait is bounded.
"""

import os
import unittest

import cluster_suite as suite
import test_cluster as tc
import test_install as ti

KUBECONFIG = """apiVersion: v1
kind: Config
current-context: suite
clusters:
- name: test-apiserver
  cluster:
    server: %(server)s
    certificate-authority: %(ca)s
users:
- name: suite-admin
  user:
    token: %(token)s
contexts:
- name: suite
  context: {cluster: test-apiserver, user: suite-admin}
"""

SUITE_TOKEN = "cluster-suite-token"


class _Installed(ti.InstallCase):
    """test_install's install, used as this module's fixture (setUp and doCleanups by hand); load_tests below
    loads only the suite's classes, never this one."""

    def runTest(self):
        raise AssertionError("a fixture, not a test")


_install = None
_saved_env = {}


def setUpModule():
    global _install
    _install = _Installed()
    _install.setUp()
    try:
        api = _install.api
        # As kind: no sandbox RuntimeClass, one Ready node that cannot run it, no Components, nothing enforced.
        api.delete("runtimeclasses", tc.RC)
        api.delete("nodes", "node-1")
        node = tc.node("ig-e2e-control-plane")
        node["metadata"]["labels"] = {"kubernetes.io/hostname": "ig-e2e-control-plane"}
        api.create("nodes", node)
        for c in api.list("components"):
            api.delete("components", c["metadata"]["name"], namespace=c["metadata"]["namespace"])
        api.delete("namespaces", ti.NS)
        _install.start_gate_from_chart()
        tc.wait_until("both webhook configurations applied by the leader",
                      lambda: None not in _install.configurations())
        api.add_user(SUITE_TOKEN, "cluster-suite-admin", ["system:masters", "system:authenticated"])
        path = os.path.join(_install.tmp, "suite-kubeconfig")
        with open(path, "w") as f:
            f.write(KUBECONFIG % {"server": api.url, "ca": _install.api_ca, "token": SUITE_TOKEN})
        for key, value in (("IG_KUBECONFIG", path), ("IG_KUBE_CONTEXT", "suite"),
                           ("IG_RELEASE_NAMESPACE", ti.GATE_NS), ("IG_SUITE_WAIT", str(tc.WAIT))):
            _saved_env[key] = os.environ.get(key)
            os.environ[key] = value
    except BaseException:
        _install.doCleanups()
        raise


def tearDownModule():
    for key, value in _saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if _install is not None:
        _install.doCleanups()


# The suite's classes, as this module's (so that the fixture above runs around them).
class Install(suite.Install):
    pass


class Pods(suite.Pods):
    pass


class Attacks(suite.Attacks):
    pass


class Workloads(suite.Workloads):
    pass


class Components(suite.Components):
    pass


class Trust(suite.Trust):
    pass


SUITE_CLASSES = (Install, Pods, Attacks, Workloads, Components, Trust)


def load_tests(loader, standard_tests, pattern):
    names = {n for n in dir(suite) if isinstance(getattr(suite, n), type)
             and issubclass(getattr(suite, n), suite.InstalledCase) and getattr(suite, n) is not suite.InstalledCase}
    missing = names - {c.__name__ for c in SUITE_CLASSES}
    if missing:
        raise AssertionError("cluster_suite classes not run here: %s" % sorted(missing))
    tests = unittest.TestSuite()
    for cls in SUITE_CLASSES:
        tests.addTests(loader.loadTestsFromTestCase(cls))
    return tests


if __name__ == "__main__":
    unittest.main()
