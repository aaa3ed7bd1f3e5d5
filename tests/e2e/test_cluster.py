"""Cluster mode over real HTTPS against the test API server of this repository
(tests/apiserver/fake_apiserver.py; docs/architecture.md, "Where cluster mode
plugs in"): `isolation-gate serve --kubeconfig ...` learns Components,
RuntimeClasses and Nodes by list+watch, decides with the sandbox availability
it observes, survives dropped watches, 410 Gone, token rotation and an API
server that is away, and is ready only once its caches have synced.

Every wait is bounded (a deadline, then a failure naming what was awaited);
nothing asserts how long something took.
"""

import os
import shutil
import sys
import tempfile
import threading
import time
import unittest

import yaml

import harness as h

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "apiserver"))
from fake_apiserver import FakeApiServer  # noqa: E402

WAIT = 15.0 * h.SLOWDOWN
RC = "kata-fc"
SETEC_LABEL = "setec.zeroroot.ai/runtime"
NODE_LABEL = "setec.zeroroot.ai/runtime.firecracker"


def runtime_class(labelled=True):
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": RC,
          "metadata": {"name": RC}, "scheduling": {"nodeSelector": {NODE_LABEL: "true"}}}
    if labelled:
        rc["metadata"]["labels"] = {SETEC_LABEL: "firecracker"}
    return rc


def node(name="node-1", ready=True, unschedulable=False, taints=None):
    n = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {NODE_LABEL: "true"}},
         "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    if unschedulable:
        n["spec"]["unschedulable"] = True
    if taints:
        n["spec"]["taints"] = taints
    return n


def component(name, trust, namespace="team-a"):
    c = h.example_component(name + ".yaml") if os.path.exists(
        os.path.join(h.EXAMPLE_COMPONENTS, name + ".yaml")) else {
        "apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
        "metadata": {"name": name}, "spec": {"kind": "tool"}}
    c["metadata"]["namespace"] = namespace
    c["spec"].setdefault("policy", {})["content_trust"] = trust
    return c


def wait_until(what, predicate, timeout=WAIT):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError("not reached within %ss: %s (last: %r)" % (timeout, what, last))


class ClusterCase(unittest.TestCase):
    """A fresh test API server (one Ready capable Node, the setec RuntimeClass,
    the example Components in team-a) and a gate in cluster mode, per test."""

    start_gate = True
    gate_wait_ready = True

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ig-cluster-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        certs = h.make_certs(os.path.join(self.tmp, "api"))
        self.api_ca = certs["ca.crt"]
        self.token_file = os.path.join(self.tmp, "token")
        with open(self.token_file, "w") as f:
            f.write("token-one\n")
        self.api = FakeApiServer(certs["tls.crt"], certs["tls.key"], token_file=self.token_file,
                                 bookmark_interval=0.5, max_history=100000, **self.api_options()).start()
        self.addCleanup(self.api.stop)
        self.api.create("runtimeclasses", runtime_class())
        self.api.create("nodes", node())
        for name, trust in (("report-parser", "untrusted"), ("docs-indexer", "trusted")):
            self.api.create("components", component(name, trust))
        self.kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(self.kubeconfig, "w") as f:
            f.write(KUBECONFIG % {"server": self.api.url, "ca": self.api_ca, "token": self.token_file})
        self.gate = None
        if self.start_gate:
            self.start(wait_ready=self.gate_wait_ready)

    def api_options(self):
        """More keyword arguments of the test API server (subclasses; self.tmp exists)."""
        return {}

    def start(self, wait_ready=True, shape=None):
        # The certificate names 127.0.0.1 too: the API server's URL is an address.
        self.gate = h.GateServer(kubeconfig=self.kubeconfig, wait_ready=wait_ready, shape=shape).start()
        self.addCleanup(self.gate.stop)
        return self.gate

    # -- helpers -------------------------------------------------------------
    def mutate(self, pod_name="report-parser-pod.yaml", namespace=None):
        pod = h.example_pod(pod_name)
        return self.gate.review("/mutate/pods", h.pod_review(pod, namespace=namespace))["response"]

    def decision(self, **kw):
        r = self.mutate(**kw)
        return r.get("auditAnnotations", {}).get("decision"), r

    def wait_decision(self, expected, what):
        return wait_until("%s: /mutate/pods decides %s" % (what, expected),
                          lambda: self.decision()[0] == expected)

    def ready(self):
        return self.gate.probe("GET", "/readyz", timeout=2).status == 200


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: test
clusters:
- name: test
  cluster:
    server: %(server)s
    certificate-authority: %(ca)s
users:
- name: gate
  user:
    tokenFile: %(token)s
contexts:
- name: test
  context: {cluster: test, user: gate, namespace: isolation-gate-system}
"""


class Decisions(ClusterCase):
    def test_decides_with_the_observed_sandbox_and_the_cached_components(self):
        d, r = self.decision()
        self.assertEqual(d, "RequireSetec", r)
        self.assertTrue(r["allowed"])
        v1pod, _, _ = h.patched_pod(h.example_pod("report-parser-pod.yaml"), r)
        self.assertEqual(v1pod.spec.runtime_class_name, RC)
        self.assertEqual(self.gate.metric_values("isolation_gate_sandbox_available"), 1.0)
        self.assertEqual(self.gate.metric_values("isolation_gate_sandbox_capable_nodes"), 1.0)
        # The requests carry the User-Agent and the token of the token file.
        seen = self.api.requests(path=r"/api/v1/nodes")
        self.assertTrue(seen)
        self.assertTrue(all(e["user_agent"].startswith("isolation-gate/") for e in seen))
        self.assertTrue(all(e["authorization"] == "Bearer token-one" for e in seen))

    def test_the_sandbox_flips_with_the_runtime_class_and_its_nodes_and_back(self):
        flips = [
            ("the RuntimeClass deleted", lambda: self.api.delete("runtimeclasses", RC),
             lambda: self.api.create("runtimeclasses", runtime_class())),
            ("the RuntimeClass relabelled without " + SETEC_LABEL,
             lambda: self.api.put("runtimeclasses", runtime_class(labelled=False)),
             lambda: self.api.put("runtimeclasses", runtime_class())),
            ("its last Node NotReady", lambda: self.api.put("nodes", node(ready=False)),
             lambda: self.api.put("nodes", node())),
            ("its last Node cordoned", lambda: self.api.put("nodes", node(unschedulable=True)),
             lambda: self.api.put("nodes", node())),
            ("its last Node tainted", lambda: self.api.put(
                "nodes", node(taints=[{"key": "maintenance", "effect": "NoSchedule"}])),
             lambda: self.api.put("nodes", node())),
        ]
        self.wait_decision("RequireSetec", "at start")
        for what, break_it, restore in flips:
            with self.subTest(what):
                break_it()
                self.wait_decision("Deny", what)
                r = self.mutate()
                self.assertFalse(r["allowed"])
                self.assertIn("is unavailable", r["status"]["message"])
                restore()
                self.wait_decision("RequireSetec", what + ", restored")

    def test_customer_isolation_counts_a_runtime_class_without_the_setec_label(self):
        self.gate.stop()
        self.api.put("runtimeclasses", runtime_class(labelled=False))
        self.start(shape="customer-isolation")
        self.wait_decision("RequireSetec", "customer-isolation")

    def test_a_component_missing_from_the_cache_is_fetched_live(self):
        # Keep the Component cache from seeing the new one: its watch holds its events.
        self.api.wait_for_watch("components", timeout=WAIT)
        self.api.set_watch_silence("components")
        pod = h.make_pod(name="late-0", component="late-tool")
        # The pod's first request comes before its Component exists: unknown.
        first = self.gate.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertFalse(first["allowed"])
        self.assertIn("does not exist", first["status"]["message"])
        self.api.create("components", component("late-tool", "untrusted"))
        mark = self.api.request_mark()
        # The NotFound is remembered for at most a second: then a new GET finds it.
        r = wait_until("the new Component found by a live GET", lambda: (
            lambda r: r if r["allowed"] else None)(self.gate.review("/mutate/pods", h.pod_review(pod))["response"]))
        self.assertEqual(r["auditAnnotations"]["component"], "late-tool")
        self.api.wait_for_request(method="GET", path=r"/namespaces/team-a/components/late-tool$",
                                  since=mark, timeout=5)
        # One that exists nowhere is unknown; an API error during the GET is a lookup error.
        r = self.gate.review("/mutate/pods", h.pod_review(h.make_pod(name="x-0", component="nowhere")))
        self.assertIn("does not exist", r["response"]["status"]["message"])
        self.api.inject_fault(503, method="GET", path=r"/components/broken$", watch=False)
        r = self.gate.review("/mutate/pods", h.pod_review(h.make_pod(name="b-0", component="broken")))
        self.assertFalse(r["response"]["allowed"])
        self.assertIn("could not be looked up", r["response"]["status"]["message"])

    def test_concurrent_reviews_of_a_just_created_component_share_a_few_live_gets(self):
        # The Component cache's watch holds its events: the gate has not seen
        # the new Component, every review misses the cache.
        self.api.wait_for_watch("components", timeout=WAIT)
        self.api.set_watch_silence("components")
        self.api.create("components", component("burst-tool", "untrusted"))
        mark = self.api.request_mark()
        n = 100
        conns = []
        for _ in range(n):
            c = self.gate.connection(timeout=WAIT)
            c.connect()  # handshakes first: the reviews then arrive together
            conns.append(c)
        self.addCleanup(lambda: [c.close() for c in conns])
        start = threading.Barrier(n)
        answers = [None] * n

        def review(i):
            start.wait(timeout=WAIT)
            pod = h.make_pod(name="burst-%d" % i, component="burst-tool")
            path = "/mutate/pods" if i % 2 else "/validate/pods"
            if path == "/validate/pods":
                pod["spec"]["runtimeClassName"] = RC
            try:
                answers[i] = self.gate.review(path, h.pod_review(pod), conn=conns[i])["response"]
            except Exception as e:  # reported below, with the others
                answers[i] = {"exception": repr(e)}

        threads = [threading.Thread(target=review, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT)
        self.assertFalse([t for t in threads if t.is_alive()], "reviews still unanswered")
        for i, r in enumerate(answers):
            self.assertTrue(r.get("allowed"), (i, r))
            self.assertEqual(r["auditAnnotations"]["component"], "burst-tool", (i, r))
            self.assertEqual(r["auditAnnotations"]["decision"], "RequireSetec", (i, r))
        gets = self.api.requests(since=mark, method="GET", path=r"/namespaces/team-a/components/burst-tool$")
        self.assertGreaterEqual(len(gets), 1)
        self.assertLessEqual(len(gets), 5, "GETs of the Component for %d concurrent reviews" % n)
        self.assertEqual(self.gate.metric_values("isolation_gate_component_lookup_errors_total"), 0.0)
        self.assertEqual(self.gate.metric_values("isolation_gate_component_live_gets_total"), len(gets))

    def test_never_enforced_namespaces_stay_unenforced_whatever_the_api_server_sends(self):
        for ns in ("kube-system", "kube-public", "kube-node-lease", "isolation-gate-system"):
            r = self.gate.review("/mutate/pods", h.pod_review(h.make_pod(component="", namespace=ns), namespace=ns))
            self.assertTrue(r["response"]["allowed"], ns)
            self.assertEqual(r["response"]["auditAnnotations"]["decision"], "NotEnforced", ns)


def granted_rules():
    """The RBAC rules of the install as rendered from the chart
    (manifests/isolation-gate.yaml; the packaging tests keep it equal to the
    chart): (namespace or None for a ClusterRole, rule) pairs."""
    with open(os.path.join(h.SOURCE_DIR, "manifests", "isolation-gate.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    out = []
    for d in docs:
        if d.get("kind") == "ClusterRole":
            out += [(None, r) for r in d["rules"]]
        elif d.get("kind") == "Role":
            out += [(d["metadata"]["namespace"], r) for r in d["rules"]]
    return out


def api_request_permission(entry):
    """(group, resource, verb, name, namespace) of one API request, as RBAC
    sees it: a list or watch whose fieldSelector is metadata.name=X is a
    request for the name X (k8s.io/apiserver's RequestInfo)."""
    parts = [p for p in entry["path"].split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if rest and rest[0] == "namespaces" and len(rest) > 2:
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], (rest[1] if len(rest) > 1 else None)
    if len(rest) > 2:
        resource += "/" + rest[2]
    method = entry["method"]
    if method == "GET":
        verb = "watch" if entry["watch"] else ("get" if name else "list")
        selector = (entry.get("query") or {}).get("fieldSelector")
        if isinstance(selector, list):
            selector = selector[0] if selector else None
        if name is None and selector and selector.startswith("metadata.name=") and "," not in selector:
            name = selector[len("metadata.name="):]
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    return group, resource, verb, name, namespace


def assert_granted(case, requests):
    rules = granted_rules()
    seen = set()
    for entry in requests:
        if entry["path"].startswith(("/api/", "/apis/")):
            seen.add(api_request_permission(entry))
    for group, resource, verb, name, namespace in sorted(seen, key=str):
        granted = any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]
                      and (name in r.get("resourceNames", [name]))
                      and (scope is None or scope == namespace) for scope, r in rules)
        case.assertTrue(granted, "the chart does not grant %s %s/%s %s in %s" % (verb, group, resource, name,
                                                                                   namespace))
    return seen


class Permissions(ClusterCase):
    def test_every_api_request_the_gate_makes_is_granted_by_the_chart(self):
        self.wait_decision("RequireSetec", "at start")
        for resource in ("nodes", "runtimeclasses", "components"):
            self.api.wait_for_watch(resource, timeout=WAIT)
        self.gate.review("/mutate/pods", h.pod_review(h.make_pod(name="q-0", component="not-cached")))
        seen = assert_granted(self, self.api.requests())
        self.assertTrue({("", "nodes", "list", None, None), ("", "nodes", "watch", None, None),
                         ("node.k8s.io", "runtimeclasses", "watch", None, None),
                         ("gibson.zeroroot.ai", "components", "list", None, None),
                         ("gibson.zeroroot.ai", "components", "get", "not-cached", "team-a")} <= seen, seen)


class Recovery(ClusterCase):
    def test_a_dropped_watch_is_resumed_and_sees_later_changes(self):
        started = self.api.watches_started("nodes")
        self.api.drop_watches("nodes", mid_event=False)
        self.api.wait_for_watch("nodes", started_after=started, timeout=WAIT)
        self.api.put("nodes", node(ready=False))
        self.wait_decision("Deny", "after the watch was dropped")

    def test_watch_events_split_at_every_byte_are_decoded(self):
        self.api.set_watch_chunking("byte")
        self.api.put("nodes", node(ready=False))
        self.wait_decision("Deny", "byte-at-a-time events")
        self.api.set_watch_chunking("random", seed=7)
        self.api.put("nodes", node())
        self.wait_decision("RequireSetec", "randomly split events")

    def test_a_410_gone_relists_and_the_cache_is_right_after(self):
        before = self.gate.metric_values("isolation_gate_reflector_relists_total") or 0
        # Changes the gate will miss, then compaction, then the watch drops: its
        # resourceVersion is now too old and only a relist can catch up.
        self.api.inject_fault("close", path=r"/api/v1/nodes", watch=True, count=None)
        self.api.drop_watches("nodes")
        self.api.put("nodes", node(ready=False))
        self.api.put("nodes", node(name="node-2", ready=False))
        self.api.compact()
        self.api.clear_faults()
        self.wait_decision("Deny", "after a 410 and a relist")
        wait_until("a relist after 410",
                   lambda: (self.gate.metric_values("isolation_gate_reflector_relists_total") or 0) > before)
        self.api.put("nodes", node(name="node-2"))
        self.wait_decision("RequireSetec", "a change after the relist")

    def test_a_rotated_token_file_is_followed(self):
        with open(self.token_file + ".new", "w") as f:
            f.write("token-two\n")
        os.replace(self.token_file + ".new", self.token_file)
        mark = self.api.request_mark()
        self.api.drop_watches()  # every reflector reconnects, now with the new token
        self.api.put("nodes", node(ready=False))
        self.wait_decision("Deny", "after the token rotated")
        self.api.wait_for_request(header=("Authorization", "^Bearer token-two$"), since=mark, timeout=WAIT)


class Readiness(ClusterCase):
    start_gate = False

    def test_not_ready_until_every_cache_synced(self):
        self.api.inject_fault(500, method="GET", path=r"^/api/v1/nodes$", watch=False, count=None)
        self.start(wait_ready=False)
        self.api.wait_for_request(method="GET", path=r"^/api/v1/nodes$", status=500, timeout=WAIT)
        self.assertFalse(self.ready())
        self.assertTrue(self.gate.alive())
        self.assertEqual(self.gate.metrics().count('isolation_gate_cache_synced{resource="nodes"} 0'), 1)
        self.api.clear_faults()
        wait_until("ready once the Node cache synced", self.ready, timeout=60)
        self.assertEqual(self.decision()[0], "RequireSetec")

    def test_an_api_server_unreachable_at_start_is_waited_for(self):
        self.api.go_away()
        self.start(wait_ready=False)
        self.assertFalse(self.ready())
        self.assertTrue(self.gate.alive())
        self.api.come_back()
        wait_until("ready once the API server appeared", self.ready, timeout=60)
        self.assertEqual(self.decision()[0], "RequireSetec")

    def test_the_api_server_gone_after_sync_decisions_continue_from_the_caches(self):
        self.start()
        self.wait_decision("RequireSetec", "at start")
        self.api.go_away()
        d, r = self.decision()
        self.assertEqual(d, "RequireSetec", r)
        trusted = self.gate.review("/mutate/pods", h.pod_review(h.example_pod("docs-indexer-pod.yaml")))
        self.assertTrue(trusted["response"]["allowed"])
        # A cache miss cannot be looked up: denied as a lookup error, not as unknown.
        r = self.gate.review("/mutate/pods", h.pod_review(h.make_pod(name="m-0", component="missing")))
        self.assertFalse(r["response"]["allowed"])
        self.assertIn("could not be looked up", r["response"]["status"]["message"])
        self.assertTrue(self.gate.alive())


class ClusterFlags(unittest.TestCase):
    def test_self_managed_certificates_refuse_certificate_files(self):
        p = h.run_binary(["serve", "--cert-mode", "self-managed", "--tls-cert", "a", "--tls-key", "b"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--tls-cert and --tls-key are for --cert-mode files", p.stderr.decode())

    def test_leader_election_durations_are_checked(self):
        for args, says in ((["--lease-duration", "5s", "--renew-deadline", "10s"], "--lease-duration >"),
                           (["--retry-period", "1d"], "unknown unit"),
                           (["--cert-validity", "1s"], "--cert-validity must be at least 3s")):
            p = h.run_binary(["serve"] + args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(says, p.stderr.decode(), args)

    def test_files_mode_needs_the_certificate_files(self):
        p = h.run_binary(["serve", "--cert-mode", "files"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--tls-cert", p.stderr.decode())

    def test_every_flag_the_chart_passes_is_accepted(self):
        p = h.run_binary(["serve", "--help"])
        self.assertEqual(p.returncode, 0)
        out = p.stdout.decode()
        for flag in ("--kubeconfig", "--context", "--namespace", "--service-name", "--webhook-config-name",
                     "--tls-secret", "--cert-mode", "--lease-name", "--runtime-class", "--evict-drifted",
                     "--kube-api-qps", "--kube-api-burst", "--kube-list-page-size", "--listen", "--metrics-listen", "--lease-duration",
                     "--renew-deadline", "--retry-period", "--evict-rate", "--cert-validity", "--ca-validity"):
            self.assertIn(flag, out)

    def test_an_unsupported_kubeconfig_is_refused_naming_the_field(self):
        tmp = tempfile.mkdtemp(prefix="ig-kc-")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "kubeconfig")
        certs = h.make_certs(os.path.join(tmp, "certs"))
        with open(path, "w") as f:
            f.write(KUBECONFIG.replace("    tokenFile: %(token)s", "    auth-provider: {name: gcp}")
                    % {"server": "https://127.0.0.1:1", "ca": certs["ca.crt"]})
        p = h.run_binary(["serve", "--kubeconfig", path, "--cert-mode", "files", "--tls-cert", certs["tls.crt"],
                          "--tls-key", certs["tls.key"]])
        self.assertEqual(p.returncode, 2)
        self.assertIn("field auth-provider is not supported", p.stderr.decode())


if __name__ == "__main__":
    unittest.main()
