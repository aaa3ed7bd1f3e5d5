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

The test API server serves no Deployments: this process registers them in
its resource table (as test_explain.py does). The binary is put on PATH as the
kubectl plugin (kubectl-isolation_gate). The test API server has neither RBAC
nor impersonation: the trust case acts as its non-admin user through a
kubeconfig of its own (IG_NONADMIN_KUBECONFIG) instead of `kubectl --as`.
test_cluster_suite_previous.py runs the suite on this install with the
previous release's chart instead (install() with its render), as the workflow
does before `helm upgrade`. Every wait is bounded.
"""

import os
import sys
import unittest

import cluster_suite as suite
import harness as h
import test_cluster as tc
import test_install as ti

from fake_apiserver import RESOURCES, Resource  # on sys.path through test_cluster

# The test API server serves no Deployments; this process registers them (the server's table is data, as
# test_explain.py does), so the suite's Deployment cases run here too.
if not any(r.plural == "deployments" for r in RESOURCES):
    RESOURCES.append(Resource("apps", "v1", "deployments", "Deployment", True, True, ()))

SUITE_TOKEN = "cluster-suite-token"
NONADMIN_TOKEN = "cluster-suite-nonadmin-token"


class _Installed(ti.InstallCase):
    """test_install's install, used as this module's fixture (setUp and doCleanups by hand); load_tests below
    loads only the suite's classes, never this one."""

    def runTest(self):
        raise AssertionError("a fixture, not a test")


_install = None
_saved_env = {}


def install(docs=None):
    """The install; `docs`: another chart's render (its webhook template ConfigMap, TLS Secret and Deployment
    args replace the working tree's)."""
    global _install
    _install = _Installed()
    _install.setUp()
    try:
        api = _install.api
        if docs is not None:
            _install.args = ti.chart_serve_args(docs)
            for d in docs:
                if (d["kind"], d["metadata"]["name"]) in (("ConfigMap", "isolation-gate-webhooks"),
                                                          ("Secret", "isolation-gate-tls")):
                    api.put(d["kind"].lower() + "s", d, namespace=ti.GATE_NS)
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
        path = kubeconfig("suite", SUITE_TOKEN)
        # A user in no admin group, with a token of its own (the test API server impersonates nobody).
        api.add_user(NONADMIN_TOKEN, suite.DEV_USER, ["system:authenticated"])
        nonadmin = kubeconfig("nonadmin", NONADMIN_TOKEN)
        # The binary as the kubectl plugin, as `cmake --install` puts it (kubectl-isolation_gate on PATH).
        bindir = os.path.join(_install.tmp, "bin")
        os.makedirs(bindir)
        os.symlink(h.BINARY, os.path.join(bindir, "kubectl-isolation_gate"))
        for key, value in (("IG_KUBECONFIG", path), ("IG_KUBE_CONTEXT", "test"),
                           ("IG_RELEASE_NAMESPACE", ti.GATE_NS), ("IG_SUITE_WAIT", str(tc.WAIT)),
                           ("IG_NONADMIN_KUBECONFIG", nonadmin), ("IG_NONADMIN_USER", suite.DEV_USER),
                           ("PATH", bindir + os.pathsep + os.environ.get("PATH", ""))):
            _saved_env[key] = os.environ.get(key)
            os.environ[key] = value
    except BaseException:
        _install.doCleanups()
        raise


def kubeconfig(name, token):
    """test_cluster's kubeconfig for the test API server, as the user of `token`."""
    token_file = os.path.join(_install.tmp, name + "-token")
    with open(token_file, "w") as f:
        f.write(token)  # no newline: python3-kubernetes sends the file's contents unstripped
    path = os.path.join(_install.tmp, name + "-kubeconfig")
    with open(path, "w") as f:
        f.write(tc.KUBECONFIG % {"server": _install.api.url, "ca": _install.api_ca, "token": token_file})
    return path


def uninstall():
    for key, value in _saved_env.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if _install is not None:
        _install.doCleanups()


def setUpModule():
    install()


def tearDownModule():
    uninstall()


# The suite's classes, as this module's (so that the fixture above runs around them).
globals().update(suite.classes_for(__name__))


def load_tests(loader, standard_tests, pattern):
    return suite.load_driver_tests(loader, sys.modules[__name__])


if __name__ == "__main__":
    unittest.main()
