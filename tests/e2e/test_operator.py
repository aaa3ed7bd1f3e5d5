"""The operator's loops (docs/operations.md), driving the real binary against
the repository's test API server (tests/apiserver/fake_apiserver.py):

- leader election on a Lease: two replicas elect one leader, hand over on
  SIGTERM (the Lease released) and on SIGKILL (after the lease duration); a
  leader that cannot renew stops writing;
- Component status: written once, not again when nothing changed, updated
  after a trust change and an availability flip, written again when another
  writer overwrote it; BoundOutsideMicroVM False while a pod in the microVM
  runs args its Component does not declare, True once it does; nothing written (and no
  drift reported) before the caches have synced, nor from the interim while
  a RuntimeClass scheduling edit has the Nodes listed again; a sandbox
  flapping for half a minute writes each status at most 1 + ceil(T / 10)
  times (the sweep debounce), and the state it settles in;
- Events: a denial records one Event, repeats raise its series count, a dry
  run records none; a create whose answer came after the client's timeout is
  one Event (its retry's 409 AlreadyExists is success);
- drift: reported after a Component turns untrusted with the sandbox gone;
  eviction only with --evict-drifted, honouring a PodDisruptionBudget (429),
  and only once a pod has stayed drifted for --drift-eviction-settle;
- self-managed certificates: bootstrap fills caBundle in both webhook
  configurations, rotation every few seconds with a client verifying against
  the published caBundle sees no failure, an edited-away caBundle comes back.

Short leader-election durations keep the tests quick. Every wait is bounded
(a deadline, then a failure naming what was awaited); nothing asserts how long
something took.
"""

import base64
import math
import os
import ssl
import sys
import threading
import time
import unittest

import harness as h
import test_cluster as tc

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "apiserver"))
sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "packaging"))
try:
    from crd_schema import validate_against_crd_status  # noqa: E402
except ImportError:  # the packaging checker is optional for these tests
    validate_against_crd_status = None

NS = "team-a"
GATE_NS = "isolation-gate-system"
LEASE = "isolation-gate-leader"
WEBHOOKS = "isolation-gate"
SECRET = "isolation-gate-tls"
ELECTION = h.ELECTION
WAIT = 20.0 * h.SLOWDOWN

wait_until = tc.wait_until


def condition(status, kind):
    for c in (status or {}).get("conditions", []):
        if c.get("type") == kind:
            return c
    return None


def running_pod(name, component, runtime_class=None, namespace=NS, labels=None):
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace,
                        "labels": dict({h.COMPONENT_LABEL: component}, **(labels or {}))},
           "spec": {"containers": [{"name": "main", "image": "registry.example/x:1"}]},
           "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    if runtime_class:
        pod["spec"]["runtimeClassName"] = runtime_class
    return pod


def webhook_configurations():
    def hooks(names):
        return [{"name": n, "clientConfig": {"service": {"name": "isolation-gate", "namespace": GATE_NS,
                                                          "path": "/" + n.split(".")[0]}},
                 "admissionReviewVersions": ["v1"], "sideEffects": "None"} for n in names]
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": WEBHOOKS}, "webhooks": hooks(["mutate.pods.gibson.zeroroot.ai"])}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": WEBHOOKS},
                  "webhooks": hooks(["validate.pods.gibson.zeroroot.ai", "validate.workloads.gibson.zeroroot.ai",
                                     "validate.components.gibson.zeroroot.ai"])}
    return mutating, validating


class OperatorCase(tc.ClusterCase):
    start_gate = False
    extra = []

    def gate_with(self, name="gate-a", extra=(), tls="files", wait_ready=True):
        g = h.GateServer(kubeconfig=self.kubeconfig, wait_ready=wait_ready, tls=tls,
                         extra_args=ELECTION + list(self.extra) + list(extra), env={"POD_NAME": name})
        g.start()
        self.addCleanup(g.stop)
        return g

    def lease(self):
        return self.api.get("leases", LEASE, namespace=GATE_NS)

    def holder(self):
        lease = self.lease()
        return (lease or {}).get("spec", {}).get("holderIdentity") or ""

    def leader_metric(self, g):
        try:
            return g.metric_values("isolation_gate_leader")
        except (OSError, AssertionError):
            return None

    def wait_leader(self, g, what):
        wait_until(what + ": isolation_gate_leader 1", lambda: self.leader_metric(g) == 1.0)

    def status(self, name):
        c = self.api.get("components", name, namespace=NS)
        return (c or {}).get("status")

    def events(self, reason=None, namespace=NS):
        out = []
        for e in self.api.list("events.events.k8s.io", namespace=namespace):
            if reason is None or e.get("reason") == reason:
                out.append(e)
        return out

    def no_status_write_across_two_renewals(self):
        mark = self.api.request_mark()
        wait_until("two Lease renewals", lambda: len(self.api.requests(since=mark, method="PUT", path=r"/leases/")) >= 2)
        return not self.status_patches(since=mark)

    def status_patches(self, name=None, since=0):
        path = r"/components/%s/status$" % (name or "[^/]+")
        # The API server stores an object before it logs the write's answer: wait for the answers.
        wait_until("the status writes answered", lambda: all(
            e["status"] is not None for e in self.api.requests(since=since, method="PATCH", path=path)))
        return [e for e in self.api.requests(since=since, method="PATCH", path=path) if e["status"] == 200]


class LeaderElection(OperatorCase):
    def test_two_replicas_elect_one_leader_and_hand_over_on_sigterm_and_sigkill(self):
        a = self.gate_with("gate-a")
        b = self.gate_with("gate-b")
        wait_until("one holder", lambda: self.holder() != "")
        first = self.holder()
        leader, other = (a, b) if first.startswith("gate-a_") else (b, a)
        self.assertRegex(first, r"^gate-[ab]_[0-9a-f]{8}$")
        self.wait_leader(leader, "the holder")
        self.assertEqual(self.leader_metric(other), 0.0)
        transitions = self.lease()["spec"].get("leaseTransitions", 0)
        # Both replicas serve, whoever leads.
        for g in (a, b):
            self.gate = g
            self.assertEqual(self.decision()[0], "RequireSetec")

        # SIGTERM: the leader releases the Lease; the other takes over.
        self.assertEqual(leader.stop(), 0)
        wait_until("the other replica holds the Lease after SIGTERM",
                   lambda: self.holder().startswith(other.env["POD_NAME"] + "_"))
        self.wait_leader(other, "after SIGTERM")
        self.assertGreater(self.lease()["spec"]["leaseTransitions"], transitions)

        # SIGKILL: nobody releases it; a new replica takes over once the lease
        # duration passed without renewal.
        c = self.gate_with("gate-c")
        self.assertEqual(self.leader_metric(c), 0.0)
        killed = self.holder()
        other.kill()
        wait_until("gate-c holds the Lease after SIGKILL", lambda: self.holder().startswith("gate-c_"))
        self.wait_leader(c, "after SIGKILL")
        self.assertNotEqual(self.holder(), killed)

    def test_a_leader_that_cannot_renew_stops_its_loops_and_writes_nothing(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("statuses written", lambda: self.status("report-parser") is not None)
        rule = self.api.inject_fault(500, method="PUT", path=r"/leases/", count=None)
        wait_until("the leader gives up (renew deadline)", lambda: self.leader_metric(a) == 0.0)
        mark = self.api.request_mark()
        # A trust change the leader would otherwise write.
        c = self.api.get("components", "docs-indexer", namespace=NS)
        c["spec"]["policy"]["content_trust"] = "untrusted"
        self.api.update("components", c, namespace=NS)
        # Bounded: let it try to renew a few more times, then look.
        seen = self.api.request_mark()
        wait_until("two more renew attempts",
                   lambda: len(self.api.requests(since=seen, method="PUT", path=r"/leases/")) >= 2)
        self.assertEqual(self.status_patches(since=mark), [], "a replica that is not leading wrote status")
        self.assertEqual(self.leader_metric(a), 0.0)
        self.api.clear_faults(rule)
        self.wait_leader(a, "renewing again")
        wait_until("the change written once it leads again",
                   lambda: (self.status("docs-indexer") or {}).get("contentTrust") == "untrusted")


class ComponentStatus(OperatorCase):
    def test_a_sandbox_flapping_for_half_a_minute_causes_a_bounded_number_of_status_writes(self):
        # docs/operations.md, "Component status": a sandbox that flips every few
        # seconds for T seconds causes at most 1 + ceil(T / 10) status writes per
        # Component, and the state it settles in is written. Without the debounce
        # every flip would be a write of each Component (about 15 here).
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("both statuses", lambda: self.status("report-parser") and self.status("docs-indexer"))
        wait_until("no status write across two Lease renewals", self.no_status_write_across_two_renewals)
        mark = self.api.request_mark()
        start = time.monotonic()
        flips = 0
        while time.monotonic() - start < 30:  # a flip every 2 s: Node NotReady, Ready again
            flips += 1
            available = flips % 2 == 0
            self.api.put("nodes", tc.node(ready=available))
            wait_until("flip %d seen" % flips,
                       lambda: a.metric_values("isolation_gate_sandbox_available") == (1.0 if available else 0.0))
            time.sleep(2)
        if flips % 2 == 1:
            self.api.put("nodes", tc.node())
        wait_until("the settled state written", lambda: self.status("report-parser")["isolation"] == "RequireSetec"
                   and self.status("docs-indexer")["isolation"] == "RequireSetec")
        wait_until("no status write across two Lease renewals", self.no_status_write_across_two_renewals)
        bound = 1 + math.ceil((time.monotonic() - start) / 10)
        for name in ("report-parser", "docs-indexer"):
            writes = len(self.status_patches(name, since=mark))
            self.assertGreaterEqual(writes, 1, name)
            self.assertLessEqual(writes, bound, "%s: %d status writes for %d flips" % (name, writes, flips))

    def test_status_is_written_once_then_only_when_it_changes(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("both statuses", lambda: self.status("report-parser") and self.status("docs-indexer"))
        s = self.status("report-parser")
        self.assertEqual(s["isolation"], "RequireSetec")
        self.assertEqual(s["runtimeClassName"], tc.RC)
        self.assertEqual(s["contentTrust"], "untrusted")
        self.assertTrue(s["trustDeclared"])
        self.assertEqual(s["driftedPods"], 0)
        self.assertEqual(condition(s, "Admitted")["status"], "True")
        self.assertEqual(condition(s, "Admitted")["reason"], "SandboxAvailable")
        self.assertEqual(condition(s, "Drifted")["status"], "False")
        self.assertEqual(s["observedGeneration"], self.api.get("components", "report-parser", NS)["metadata"]["generation"])
        if validate_against_crd_status:
            self.assertEqual(validate_against_crd_status(s), [])
        self.assertEqual(len(self.status_patches("report-parser")), 1)

        # Nothing changed: a label edit is processed and writes nothing.
        unchanged = a.metric_values("isolation_gate_status_writes_total")
        c = self.api.get("components", "report-parser", namespace=NS)
        c["metadata"].setdefault("labels", {})["touched"] = "yes"
        self.api.update("components", c, namespace=NS)
        wait_until("the label edit processed",
                   lambda: a.metric_values("isolation_gate_status_writes_total") > unchanged)
        self.assertEqual(len(self.status_patches("report-parser")), 1, "a status was rewritten unchanged")

        # A trust change: written.
        c = self.api.get("components", "docs-indexer", namespace=NS)
        c["spec"]["policy"].pop("content_trust")
        self.api.update("components", c, namespace=NS)
        wait_until("trust omitted", lambda: condition(self.status("docs-indexer"), "TrustDeclared")["reason"] == "Omitted")
        s = self.status("docs-indexer")
        self.assertFalse(s["trustDeclared"])
        self.assertIn("declare", condition(s, "TrustDeclared")["message"])
        self.assertEqual(s["observedGeneration"], self.api.get("components", "docs-indexer", NS)["metadata"]["generation"])

        # An availability flip: the untrusted Component is denied now.
        self.api.delete("nodes", "node-1")
        # Each Component's status is its own write: wait for both.
        wait_until("Deny after the flip", lambda: self.status("report-parser")["isolation"] == "Deny")
        wait_until("in-process after the flip", lambda: self.status("docs-indexer")["isolation"] == "AllowInProcess")
        s = self.status("report-parser")
        self.assertNotIn("runtimeClassName", s)
        self.assertEqual(condition(s, "Admitted")["status"], "False")
        self.assertEqual(condition(s, "Admitted")["reason"], "SandboxUnavailable")
        self.assertEqual(self.status("docs-indexer")["isolation"], "AllowInProcess")
        self.assertEqual(condition(self.status("docs-indexer"), "Admitted")["reason"], "TrustedInProcess")
        if validate_against_crd_status:
            for name in ("report-parser", "docs-indexer"):
                self.assertEqual(validate_against_crd_status(self.status(name)), [], name)

    def test_a_leader_writes_nothing_until_the_caches_have_synced(self):
        # The Node list is held (until the test releases it): the Lease, the
        # Components and the pod list do not wait for it, and until it is in
        # the sandbox reads its initial "unavailable". A pod of report-parser
        # runs on the sandbox, where it belongs once the sandbox is known.
        self.api.create("pods", running_pod("parser-1", "report-parser", runtime_class=tc.RC))
        rule = self.api.add_delay(120.0, method="GET", path=r"/nodes$", watch=False, count=1)
        self.addCleanup(self.api.clear_delays, rule)
        a = self.gate_with("gate-a", wait_ready=False)
        self.wait_leader(a, "leading before the Nodes are listed")
        wait_until("the pods listed", lambda: self.api.requests(method="GET", path=r"/pods$", watch=False))
        # Bounded by the leader's own pace: let it renew twice more, with
        # everything but the Nodes in hand, then look.
        seen = self.api.request_mark()
        wait_until("two more renewals",
                   lambda: len(self.api.requests(since=seen, method="PUT", path=r"/leases/")) >= 2)
        self.assertEqual(self.status_patches(), [], "a status written before the Nodes were listed")
        self.assertNotEqual(a.probe("GET", "/readyz").status, 200, "ready before the Nodes were listed")
        self.api.clear_delays(rule)
        wait_until("both statuses", lambda: self.status("report-parser") and self.status("docs-indexer"))
        # Written once each, from the synced caches: not a Deny (and a drifted
        # pod) from the initial "unavailable", then the right status.
        s = self.status("report-parser")
        self.assertEqual(s["isolation"], "RequireSetec")
        self.assertEqual(s["driftedPods"], 0)
        self.assertEqual(self.status("docs-indexer")["isolation"], "RequireSetec")
        self.assertEqual(len(self.status_patches("report-parser")), 1)
        self.assertEqual(len(self.status_patches("docs-indexer")), 1)
        self.assertEqual(self.events("PodDrifted"), [], "a drift reported from caches that had not synced")

    def test_a_status_another_writer_overwrites_is_written_again(self):
        # The desired status is compared with the cached object's, never with
        # what this replica last sent: another writer's status is corrected.
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("both statuses", lambda: (self.status("report-parser") or {}).get("isolation") == "RequireSetec"
                   and self.status("docs-indexer") is not None)
        mark = self.api.request_mark()
        self.api.patch("components", "report-parser",
                       {"status": {"isolation": "AllowInProcess", "runtimeClassName": None}},
                       namespace=NS, subresource="status")
        wait_until("the overwritten status corrected",
                   lambda: (self.status("report-parser") or {}).get("isolation") == "RequireSetec"
                   and self.status("report-parser").get("runtimeClassName") == tc.RC)
        self.assertGreaterEqual(len(self.status_patches("report-parser", since=mark)), 1)
        self.assertEqual(self.status_patches("docs-indexer", since=mark), [], "an unchanged status rewritten")

    def test_a_scheduling_change_of_the_runtimeclass_does_not_rewrite_every_status(self):
        # A nodeSelector edit relists the Nodes under it; meanwhile the
        # sandbox reads "unavailable" (admission fails closed), but that
        # interim is not a state to write into every Component's status.
        # (The Node has the new selector's label before the gate starts: a
        # Node event after the edit would be fitted under the new scheduling
        # and, the only Node, end the interim before the relist does.)
        self.api.create("pods", running_pod("parser-1", "report-parser", runtime_class=tc.RC))
        n = self.api.get("nodes", "node-1")
        n["metadata"]["labels"]["pool"] = "setec"
        self.api.update("nodes", n)
        a = self.gate = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("both statuses", lambda: self.status("report-parser") and self.status("docs-indexer"))
        # Settled first: a write whose echo the watch brought late, or a new
        # term's check, may repeat a status once (status_writer.h); what this
        # test is about starts below.
        wait_until("no status write across two Lease renewals", self.no_status_write_across_two_renewals)
        mark = self.api.request_mark()
        rule = self.api.add_delay(120.0, method="GET", path=r"/nodes$", watch=False, count=1)
        self.addCleanup(self.api.clear_delays, rule)
        rc = self.api.get("runtimeclasses", tc.RC)
        rc["scheduling"]["nodeSelector"]["pool"] = "setec"
        self.api.update("runtimeclasses", rc)
        wait_until("the Nodes listed again (held)",
                   lambda: self.api.requests(since=mark, method="GET", path=r"/nodes$", watch=False))
        wait_until("the interim: sandbox unavailable", lambda: a.metric_values("isolation_gate_sandbox_available") == 0.0)
        self.wait_decision("Deny", "the interim, for the untrusted Component's pods")
        seen = self.api.request_mark()
        wait_until("two more renewals",
                   lambda: len(self.api.requests(since=seen, method="PUT", path=r"/leases/")) >= 2)
        self.assertEqual(self.status_patches(since=mark), [], "a status written from the interim")
        checked = a.metric_values("isolation_gate_status_writes_total")
        self.api.clear_delays(rule)
        wait_until("the sandbox available again", lambda: a.metric_values("isolation_gate_sandbox_available") == 1.0)
        wait_until("both Components checked again",
                   lambda: a.metric_values("isolation_gate_status_writes_total") >= checked + 2)
        self.assertEqual(self.status_patches(since=mark), [], "a status rewritten by a scheduling change")
        self.assertEqual(self.status("report-parser")["isolation"], "RequireSetec")
        self.assertEqual(self.events("PodDrifted"), [], "a drift reported from the interim")

    def test_a_pod_that_would_be_unbound_outside_the_microvm_turns_bound_outside_microvm_false(self):
        # docs-indexer is trusted and declares no spec.args: with the sandbox
        # there it runs in the microVM, where a pod of it with undeclared args
        # is admitted; outside one it would be denied. Its status says so.
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("both statuses", lambda: self.status("report-parser") and self.status("docs-indexer"))
        bound = lambda: condition(self.status("docs-indexer"), "BoundOutsideMicroVM") or {}
        self.assertEqual(bound().get("status"), "True")
        self.assertEqual(bound().get("reason"), "PodsBound")
        component = self.api.get("components", "docs-indexer", namespace=NS)
        self.assertNotIn("args", component["spec"])
        pod = running_pod("docs-0", "docs-indexer", runtime_class=tc.RC)
        pod["spec"]["containers"][0].update(image=component["spec"]["image"], args=["--x"])
        self.api.create("pods", pod)
        wait_until("BoundOutsideMicroVM False", lambda: bound().get("status") == "False")
        c = bound()
        self.assertEqual(c["reason"], "PodsUnboundOutsideMicroVM")
        self.assertIn('1 running pod runs what the Component does not declare (pod "docs-0": '
                      'container "main" sets args ["--x"]', c["message"])
        self.assertIn("would be denied if the sandbox went away", c["message"])
        s = self.status("docs-indexer")
        self.assertEqual(s["isolation"], "RequireSetec")
        self.assertEqual(s["driftedPods"], 0)  # placed as decided: not drift
        self.assertEqual(condition(self.status("report-parser"), "BoundOutsideMicroVM")["status"], "True")
        if validate_against_crd_status:
            self.assertEqual(validate_against_crd_status(s), [])
        # The Component declares those args: bound again.
        component["spec"]["args"] = ["--x"]
        self.api.update("components", component, namespace=NS)
        wait_until("BoundOutsideMicroVM True again", lambda: bound().get("status") == "True")
        self.assertEqual(bound()["reason"], "PodsBound")


class Events(OperatorCase):
    def test_a_denial_records_one_event_repeats_count_and_dry_runs_record_none(self):
        self.gate = self.gate_with("gate-a")
        self.api.delete("nodes", "node-1")
        self.wait_decision("Deny", "the sandbox gone")
        wait_until("the first denial's Event", lambda: self.events("SandboxUnavailable"))
        events = self.events("SandboxUnavailable")
        self.assertEqual(len(events), 1, events)
        e = events[0]
        self.assertEqual(e["type"], "Warning")
        self.assertEqual(e["reportingController"], "isolation-gate")
        self.assertTrue(e["reportingInstance"].startswith("gate-a_"))
        self.assertEqual(e["regarding"]["kind"], "Component")
        self.assertEqual(e["regarding"]["name"], "report-parser")
        self.assertEqual(e["regarding"]["uid"], self.api.get("components", "report-parser", NS)["metadata"]["uid"])
        self.assertIn("To fix", e["note"])
        # Repeats: the same Event, its series counting them.
        for _ in range(4):
            self.assertEqual(self.decision()[0], "Deny")
        wait_until("the series counts the repeats",
                   lambda: (self.events("SandboxUnavailable")[0].get("series") or {}).get("count", 0) >= 2)
        self.assertEqual(len(self.events("SandboxUnavailable")), 1)
        # A dry run records nothing: the dry-run denials of another Component
        # leave no Event, while a real one right after does.
        pod = h.make_pod(name="dry-0", component="dry-tool")
        self.api.create("components", tc.component("dry-tool", "untrusted"))
        wait_until("dry-tool cached", lambda: self.gate.review(
            "/mutate/pods", h.pod_review(pod, dry_run=True))["response"].get("auditAnnotations", {}).get("component") == "dry-tool")
        for _ in range(3):
            self.assertFalse(self.gate.review("/mutate/pods", h.pod_review(pod, dry_run=True))["response"]["allowed"])
        unlabelled = h.make_pod(name="nolabel-0", component=None)
        self.assertFalse(self.gate.review("/mutate/pods", h.pod_review(unlabelled))["response"]["allowed"])
        # An Event about a Namespace (cluster-scoped) lives in "default", as
        # the API server requires and client-go does.
        wait_until("the real denial's Event (on the namespace: no Component named)",
                   lambda: self.events("MissingComponentLabel", namespace="default"))
        self.assertEqual([e for e in self.events() if e["regarding"].get("name") == "dry-tool"], [])
        ns_event = self.events("MissingComponentLabel", namespace="default")[0]
        self.assertEqual(ns_event["regarding"]["kind"], "Namespace")
        self.assertEqual(ns_event["regarding"]["name"], NS)


class EventCreateTimeout(OperatorCase):
    def test_an_event_create_answered_after_the_client_gave_up_is_written_once(self):
        # The first Event create is stored at once, its answer held past the
        # client's request timeout (2 s; longer for a sanitized binary, whose
        # retry's own answer must come inside it): the retry (same name) meets
        # it, 409.
        path = r"^/apis/events\.k8s\.io/v1/namespaces/%s/events$" % NS
        rule = self.api.add_delay(60, method="POST", path=path, count=1, answer=True)
        self.addCleanup(self.api.clear_delays)
        self.gate = self.gate_with("gate-a", extra=["--kube-request-timeout", "%ds" % (2 * h.SLOWDOWN)])
        self.api.delete("nodes", "node-1")
        self.wait_decision("Deny", "the sandbox gone")
        wait_until("the retried create answered 409 AlreadyExists",
                   lambda: self.api.requests(method="POST", path=path, status=409))
        self.api.clear_delays(rule)
        events = self.events("SandboxUnavailable")
        self.assertEqual(len(events), 1, events)
        posts = self.api.requests(method="POST", path=path)
        self.assertEqual(len(posts), 2, [(e["status"], e["seq"]) for e in posts])
        # The recorder publishes its counts after the write: awaited, bounded.
        wait_until("the Event counted created", lambda: self.events_total("created") == 1.0)
        self.assertEqual(self.events_total("failed"), 0.0)
        # The Event is ours: repeats go into its series, no second Event.
        for _ in range(3):
            self.assertEqual(self.decision()[0], "Deny")
        wait_until("the series counts the repeats",
                   lambda: (self.events("SandboxUnavailable")[0].get("series") or {}).get("count", 0) >= 2)
        self.assertEqual(len(self.events("SandboxUnavailable")), 1)
        self.assertEqual(len(self.api.requests(method="POST", path=path)), 2)
        self.assertEqual(self.events_total("created"), 1.0)

    def events_total(self, result):
        for line in self.gate.metrics().splitlines():
            if line.startswith('isolation_gate_events_total{result="%s"}' % result):
                return float(line.rsplit(" ", 1)[1])
        return None


class Drift(OperatorCase):
    def drifted_metric(self, g, component):
        for line in g.metrics().splitlines():
            if line.startswith("isolation_gate_drifted_pods{") and 'component="%s"' % component in line:
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    def test_drift_is_reported_after_a_component_turns_untrusted_with_the_sandbox_gone(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        # docs-indexer is trusted; with the sandbox gone it runs in process, rightly.
        self.api.delete("nodes", "node-1")
        self.api.create("pods", running_pod("docs-0", "docs-indexer"))
        # (The pod's watch event may come before the Node's: for a moment it
        # drifted from RequireSetec; the status settles once both are in.)
        wait_until("status after the flip: in process, no drift",
                   lambda: (self.status("docs-indexer") or {}).get("isolation") == "AllowInProcess"
                   and self.status("docs-indexer")["driftedPods"] == 0)
        # It turns untrusted: its running pod would be denied now.
        c = self.api.get("components", "docs-indexer", namespace=NS)
        c["spec"]["policy"]["content_trust"] = "untrusted"
        self.api.update("components", c, namespace=NS)
        wait_until("drift in the status", lambda: (self.status("docs-indexer") or {}).get("driftedPods") == 1)
        s = self.status("docs-indexer")
        self.assertEqual(s["isolation"], "Deny")
        self.assertEqual(condition(s, "Drifted")["status"], "True")
        self.assertEqual(condition(s, "Drifted")["reason"], "PodsDrifted")
        self.assertEqual(self.drifted_metric(a, "docs-indexer"), 1.0)
        wait_until("a PodDrifted Event", lambda: self.events("PodDrifted"))
        # Without --evict-drifted nothing is evicted.
        self.assertEqual(self.api.requests(method="POST", path=r"/eviction$"), [])
        self.assertIsNotNone(self.api.get("pods", "docs-0", namespace=NS))
        # The pod goes: no drift.
        self.api.delete("pods", "docs-0", namespace=NS)
        wait_until("drift cleared", lambda: self.status("docs-indexer")["driftedPods"] == 0)
        self.assertEqual(condition(self.status("docs-indexer"), "Drifted")["status"], "False")


class Eviction(OperatorCase):
    extra = ["--evict-drifted", "--evict-rate", "600", "--drift-eviction-settle", "0s"]

    def test_less_safe_pods_are_evicted_through_the_eviction_api_honouring_a_pdb(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        # report-parser is untrusted and the sandbox is there: a pod outside it is less safe.
        self.api.create("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "parsers", "namespace": NS},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {h.COMPONENT_LABEL: "report-parser"}}},
            "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}},
            namespace=NS)
        self.api.create("pods", running_pod("parser-0", "report-parser"))
        # A pod on the sandbox and one placed elsewhere-but-safe are never evicted.
        self.api.create("pods", running_pod("parser-1", "report-parser", runtime_class=tc.RC))
        wait_until("the PDB refuses the eviction (429)",
                   lambda: self.api.requests(method="POST", path=r"/pods/parser-0/eviction$", status=429))
        self.assertIsNotNone(self.api.get("pods", "parser-0", namespace=NS))
        wait_until("counted as blocked", lambda: self._evictions(a, "blocked") >= 1)
        # The budget allows one disruption now: the retry evicts it.
        pdb = self.api.get("poddisruptionbudgets", "parsers", namespace=NS)
        pdb["status"]["disruptionsAllowed"] = 1
        self.api.update_status("poddisruptionbudgets", pdb, namespace=NS)
        wait_until("evicted", lambda: self.api.get("pods", "parser-0", namespace=NS) is None, timeout=40)
        # The counter is bumped after the API's answer, so it may trail the pod's removal.
        wait_until("the eviction counted", lambda: self._evictions(a, "evicted") >= 1)
        self.assertEqual(self._evictions(a, "evicted"), 1.0)
        self.assertIsNotNone(self.api.get("pods", "parser-1", namespace=NS))
        self.assertEqual(self.api.requests(method="POST", path=r"/pods/parser-1/eviction$"), [])
        wait_until("an Evicted Event", lambda: [e for e in self.api.list("events.events.k8s.io", namespace=NS)
                                               if e.get("reason") == "Evicted"])

    def _evictions(self, g, result):
        for line in g.metrics().splitlines():
            if line.startswith('isolation_gate_evictions_total{result="%s"}' % result):
                return float(line.rsplit(" ", 1)[1])
        return 0.0


class EvictionSettle(OperatorCase):
    extra = ["--evict-drifted", "--evict-rate", "600", "--drift-eviction-settle", "6s"]

    def test_a_drifted_pod_is_evicted_only_once_it_stayed_drifted_for_the_settle_time(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        mark = self.api.request_mark()
        # report-parser is untrusted and the sandbox is there: a pod outside it is less safe.
        self.api.create("pods", running_pod("parser-0", "report-parser"))
        wait_until("the pass that first saw it drifted",
                   lambda: Drift.drifted_metric(self, a, "report-parser") == 1.0)
        self.assertEqual(self.api.requests(since=mark, method="POST", path=r"/pods/parser-0/eviction$"), [],
                         "evicted at the pass that first saw it drifted")
        self.assertIsNotNone(self.api.get("pods", "parser-0", namespace=NS))
        # Still drifted once the settle time is over: evicted.
        wait_until("evicted after the settle time", lambda: self.api.get("pods", "parser-0", namespace=NS) is None,
                   timeout=40 * h.SLOWDOWN)
        wait_until("the eviction counted", lambda: Eviction._evictions(self, a, "evicted") >= 1)
        self.assertEqual(len(self.api.requests(since=mark, method="POST", path=r"/pods/parser-0/eviction$")), 1)
        drifted = [e for e in self.events("PodDrifted") if e["regarding"]["name"] == "report-parser"]
        self.assertTrue(drifted)
        self.assertIn("--drift-eviction-settle 6s", drifted[0]["note"])


class SelfManagedCertificates(OperatorCase):
    def setUp(self):
        super().setUp()
        mutating, validating = webhook_configurations()
        self.api.create("mutatingwebhookconfigurations", mutating)
        self.api.create("validatingwebhookconfigurations", validating)
        # As the chart pre-creates it (its RBAC grants no create on Secrets).
        self.api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                    "metadata": {"name": SECRET, "namespace": GATE_NS}}, namespace=GATE_NS)

    def bundles(self):
        out = []
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            for w in self.api.get(kind, WEBHOOKS)["webhooks"]:
                out.append(w["clientConfig"].get("caBundle", ""))
        return out

    def secret_ca(self):
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        return base64.b64decode(s["data"]["ca.crt"]).decode() if s else ""

    def write_trust(self, g):
        with open(g.ca_file, "w") as f:
            f.write(base64.b64decode(self.bundles()[0]).decode())

    def test_bootstrap_rotation_under_load_and_repair(self):
        # Short lifetimes so that rotations happen during the test; longer under a
        # sanitizer, where a 6 s leaf can expire before its renewal is served (an 18 s
        # one did once, beside three other ASan e2e files and two compiles on 2 cores).
        leaf = 6 if h.SLOWDOWN == 1 else 9 * h.SLOWDOWN
        g = self.gate_with("gate-a", tls="self-managed", wait_ready=False,
                           extra=["--cert-validity", "%ds" % leaf, "--ca-validity", "%ds" % (3 * leaf)])
        wait_until("caBundle in every webhook of both configurations",
                   lambda: all(b != "" for b in self.bundles()) and len(set(self.bundles())) == 1)
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        self.assertEqual(s["type"], "Opaque")  # filled in place
        for key in ("tls.crt", "tls.key", "ca.crt"):
            self.assertIn(key, s["data"])
        self.assertEqual(base64.b64decode(self.bundles()[0]).decode(), self.secret_ca())
        g._wait_ready()
        self.write_trust(g)
        self.gate = g
        self.assertEqual(self.decision()[0], "RequireSetec")

        # A client that trusts only the published caBundle (re-read before each
        # request, as the API server does) sends requests continuously through
        # several leaf rotations and one CA rotation.
        failures, done = [], [0]
        stop = threading.Event()

        def client():
            while not stop.is_set():
                bundle = base64.b64decode(self.bundles()[0]).decode()
                ctx = ssl.create_default_context(cadata=bundle)
                try:
                    conn = h.VerifiedHTTPSConnection(g.host, g.port, ctx, timeout=5)
                    conn.request("POST", "/mutate/pods", body=__import__("json").dumps(
                        h.pod_review(h.example_pod("report-parser-pod.yaml"))).encode(),
                        headers={"Content-Type": "application/json"})
                    r = conn.getresponse()
                    r.read()
                    conn.close()
                    if r.status != 200:
                        failures.append("HTTP %d" % r.status)
                    done[0] += 1
                except (OSError, ssl.SSLError) as e:
                    failures.append(repr(e))
        t = threading.Thread(target=client)
        t.start()
        try:
            start_rotations = g.metric_values("isolation_gate_certificate_rotations_total")
            wait_until("three rotations under load",
                       lambda: g.metric_values("isolation_gate_certificate_rotations_total") >= start_rotations + 3,
                       timeout=60 * h.SLOWDOWN)
        finally:
            stop.set()
            t.join(timeout=30)
        self.assertEqual(failures, [])
        self.assertGreater(done[0], 10)

        # caBundle edited away: restored.
        repairs = g.metric_values("isolation_gate_ca_bundle_repairs_total")
        self.api.patch("validatingwebhookconfigurations", WEBHOOKS, [
            {"op": "replace", "path": "/webhooks/1/clientConfig/caBundle", "value": ""}], patch_type="json")
        # (Both configurations carry the same bundle once each write is in.)
        wait_until("caBundle restored, the same in every webhook",
                   lambda: all(b != "" for b in self.bundles()) and len(set(self.bundles())) == 1)
        # The repair is counted once the PATCH's answer is back, which may
        # be a moment after the API server holds the restored bundle.
        wait_until("the repair counted",
                   lambda: g.metric_values("isolation_gate_ca_bundle_repairs_total") > repairs)
        # Each leader loop's engine metrics are on the live /metrics, the certificates' too
        # (its runnable wraps the controller for the leader's term).
        text = g.metrics()
        for name in ("certificates", "component-status"):
            self.assertRegex(text, r'controller_runtime_reconcile_time_seconds_count\{controller="%s"\} [1-9]' % name)
            self.assertIn('controller_runtime_reconcile_total{controller="%s",result="requeue_after"}' % name, text)
            self.assertIn('workqueue_depth{name="%s"}' % name, text)
        # Every request of a self-managed leader (Lease, Secret, webhook
        # configurations, status, Events) is granted by the chart's default RBAC.
        seen = tc.assert_granted(self, self.api.requests())
        for needed in (("coordination.k8s.io", "leases", "update", LEASE, GATE_NS),
                       ("", "secrets", "watch", SECRET, GATE_NS),
                       ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "patch", WEBHOOKS, None),
                       ("gibson.zeroroot.ai", "components/status", "patch", "report-parser", NS)):
            self.assertIn(needed, seen, "%r not among the requests made: %r" % (
                needed, sorted(p for p in seen if p[1] in ("configmaps", "secrets") or p[0].startswith("admission"))))


TEMPLATE = "isolation-gate-webhooks"


class WebhookTemplate(OperatorCase):
    """--webhook-template-configmap (the chart's self-managed default): the
    leader creates the webhook configurations only once a replica can answer,
    fills a pre-created empty Secret by update, follows template changes;
    `isolation-gate cleanup` removes them (the Helm pre-delete hook)."""

    def setUp(self):
        super().setUp()
        mutating, validating = webhook_configurations()
        self.api.create("configmaps", {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": TEMPLATE, "namespace": GATE_NS},
            "data": {"mutating.yaml": tc.yaml.safe_dump(mutating), "validating.yaml": tc.yaml.safe_dump(validating)}},
            namespace=GATE_NS)
        # As the chart pre-creates it: Opaque, no data.
        self.api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                    "metadata": {"name": SECRET, "namespace": GATE_NS}}, namespace=GATE_NS)

    def configurations(self):
        return [self.api.get(k, WEBHOOKS) for k in ("mutatingwebhookconfigurations",
                                                    "validatingwebhookconfigurations")]

    def secret_ca_b64(self):
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        return (s.get("data") or {}).get("ca.crt", "")

    def test_applied_only_once_ready_then_followed_then_cleaned_up(self):
        # The Component cache cannot sync: the replica is not ready, so nothing is applied.
        fault = self.api.inject_fault(500, method="GET", path=r"/components$", count=None)
        g = self.gate_with("gate-a", tls="self-managed", wait_ready=False,
                           extra=["--webhook-template-configmap", TEMPLATE])
        self.wait_leader(g, "alone")
        wait_until("the pre-created Secret filled by the leader", lambda: self.secret_ca_b64() != "")
        wait_until("the leader waiting for readiness",
                   lambda: any("waiting until this replica can answer" in l.get("msg", "") for l in g.log_lines()))
        self.assertEqual(self.configurations(), [None, None])
        self.assertNotEqual(g.probe("GET", "/readyz").status, 200)
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        self.assertEqual(s["type"], "Opaque")  # updated in place, never re-created
        self.assertEqual(sorted(s["data"]), ["ca.crt", "ca.key", "tls.crt", "tls.key"])
        self.assertEqual(self.api.requests(method="POST", path=r"/secrets$"), [])

        # Caches sync: ready, then both configurations appear with the CA.
        self.api.clear_faults(fault)
        wait_until("both configurations created", lambda: None not in self.configurations())
        self.assertEqual(g.probe("GET", "/readyz").status, 200)
        for c in self.configurations():
            self.assertEqual({w["clientConfig"]["caBundle"] for w in c["webhooks"]}, {self.secret_ca_b64()})
            self.assertIn("isolation-gate.zeroroot.ai/template-fingerprint", c["metadata"]["annotations"])
        # (Counted after the API's answer: it may trail the objects.)
        wait_until("both applies counted",
                   lambda: g.metric_values("isolation_gate_webhook_configuration_applies_total") >= 2)
        self.assertEqual(g.metric_values("isolation_gate_webhook_configuration_applies_total"), 2.0)

        # A template change (helm upgrade) reaches the live configuration.
        cm = self.api.get("configmaps", TEMPLATE, namespace=GATE_NS)
        validating = tc.yaml.safe_load(cm["data"]["validating.yaml"])
        validating["webhooks"][0]["timeoutSeconds"] = 7
        cm["data"]["validating.yaml"] = tc.yaml.safe_dump(validating)
        self.api.update("configmaps", cm, namespace=GATE_NS)
        wait_until("the template change applied",
                   lambda: (self.configurations()[1] or {}).get("webhooks", [{}])[0].get("timeoutSeconds") == 7)
        self.assertEqual({w["clientConfig"]["caBundle"] for w in self.configurations()[1]["webhooks"]},
                         {self.secret_ca_b64()})
        # Break-glass by hand, then the documented restore: drop the fingerprint annotation.
        live = self.configurations()[1]
        live["webhooks"][0]["timeoutSeconds"] = 29
        del live["metadata"]["annotations"]["isolation-gate.zeroroot.ai/template-fingerprint"]
        self.api.update("validatingwebhookconfigurations", live)
        wait_until("the template re-applied",
                   lambda: (self.configurations()[1] or {}).get("webhooks", [{}])[0].get("timeoutSeconds") == 7)

        seen = tc.assert_granted(self, self.api.requests())
        for needed in (("", "configmaps", "watch", TEMPLATE, GATE_NS),
                       ("", "secrets", "update", SECRET, GATE_NS),
                       ("admissionregistration.k8s.io", "mutatingwebhookconfigurations", "create", None, None),
                       ("admissionregistration.k8s.io", "validatingwebhookconfigurations", "update", WEBHOOKS, None)):
            self.assertIn(needed, seen, "%r not among the requests made: %r" % (
                needed, sorted(p for p in seen if p[1] in ("configmaps", "secrets") or p[0].startswith("admission"))))

        # The pre-delete hook: the template goes, then the configurations, and they stay gone.
        p = h.run_binary(["cleanup", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS,
                          "--webhook-config-name", WEBHOOKS, "--webhook-template-configmap", TEMPLATE,
                          "--settle", "1s"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"deleted MutatingWebhookConfiguration isolation-gate", p.stdout)
        self.assertIsNone(self.api.get("configmaps", TEMPLATE, namespace=GATE_NS))
        wait_until("the leader saw the template go",
                   lambda: any("waiting for the template ConfigMap" in l.get("msg", "") for l in g.log_lines()))
        self.assertEqual(self.configurations(), [None, None])
        # Run again: nothing left is success.
        p = h.run_binary(["cleanup", "--kubeconfig", self.kubeconfig, "--namespace", GATE_NS,
                          "--webhook-config-name", WEBHOOKS, "--settle", "0s"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(b"already gone", p.stdout)

    def test_a_template_that_does_not_parse_leaves_the_configurations_alone(self):
        cm = self.api.get("configmaps", TEMPLATE, namespace=GATE_NS)
        cm["data"]["mutating.yaml"] = "kind: [unclosed"
        self.api.update("configmaps", cm, namespace=GATE_NS)
        g = self.gate_with("gate-a", tls="self-managed", wait_ready=False,
                           extra=["--webhook-template-configmap", TEMPLATE])
        wait_until("the validating configuration created", lambda: self.configurations()[1] is not None)
        wait_until("the template error logged",
                   lambda: any("the template ConfigMap" in l.get("msg", "") and "mutating.yaml" in l.get("msg", "")
                               for l in g.log_lines()))
        self.assertIsNone(self.configurations()[0])


if __name__ == "__main__":
    unittest.main()
