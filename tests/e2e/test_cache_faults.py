"""Caches that cannot silently go stale (docs/operations.md, "Stale caches"):
the real binary in cluster mode against the test API server's watch faults
(tests/apiserver/README.md, "Faults"), each with a change made during the
fault that must reach decisions within the bound docs/operations.md gives
(FAULT_BOUND below: the reflector's backoff cap, 30 s, plus a list; in
practice a few seconds):

- a watch-only failure (list works, watch answers 403): relist after the
  backoff, again and again, so changes still arrive;
- a resourceVersion rewind (etcd restored from a backup): 504 "Too large
  resource version" to the gate's watch, a quorum list, the restored state and
  the change made after the restore;
- a watch that stays open but goes silent (a dead connection): closed after
  --kube-watch-silence and reopened, the change delivered by the new watch;
- a Node cache silent past --sandbox-stale-after: the sandbox is unknown and
  untrusted pods are denied (fail closed), until the cache is fresh again;
- continue tokens that expire while a list pages through: one unpaginated list,
  and the gate becomes ready.

Every wait is bounded; nothing asserts how long something took.
"""

import unittest

import harness as h
import test_cluster as tc

FAULT_BOUND = 35.0
SILENCE = "2s"


class CacheFaultCase(tc.ClusterCase):
    start_gate = False

    def start_gate_with(self, *extra, wait_ready=True):
        self.gate = h.GateServer(kubeconfig=self.kubeconfig, wait_ready=wait_ready,
                                 extra_args=["--kube-watch-silence", SILENCE] + list(extra)).start()
        self.addCleanup(self.gate.stop)
        return self.gate

    def wait_decision(self, expected, what, timeout=FAULT_BOUND):
        return tc.wait_until("%s: /mutate/pods decides %s" % (what, expected),
                             lambda: self.decision()[0] == expected, timeout=timeout)

    def series(self, name, **labels):
        """The value of one series of the gate's /metrics (None when absent)."""
        for line in self.gate.metrics().splitlines():
            if not line.startswith(name + "{"):
                continue
            head, _, value = line.rpartition(" ")
            if all('%s="%s"' % kv in head for kv in labels.items()):
                return float(value)
        return None

    def relists(self, resource, cause):
        return self.series("isolation_gate_reflector_relists_total", resource=resource, cause=cause) or 0


class WatchFaults(CacheFaultCase):
    def test_a_watch_only_failure_relists_and_changes_still_arrive(self):
        self.start_gate_with()
        self.wait_decision("RequireSetec", "at start")
        self.api.inject_fault(403, path=r"^/api/v1/nodes$", watch=True, count=None)
        self.api.drop_watches("nodes")
        self.api.put("nodes", tc.node(ready=False))
        self.wait_decision("Deny", "a change while the Node watch is forbidden")
        self.assertGreater(self.relists("nodes", "watch_failed"), 0)
        self.api.put("nodes", tc.node())
        self.wait_decision("RequireSetec", "another change while the Node watch is forbidden")
        self.api.clear_faults()

    def test_a_rewind_is_answered_with_a_quorum_list(self):
        self.api.too_large_rv_wait = 0.5
        self.start_gate_with()
        self.wait_decision("RequireSetec", "at start")
        restored = self.api.resource_version()
        # The gate moves ahead of the backup: writes, and bookmarks carrying the newest revision.
        bookmarks = self.series("isolation_gate_reflector_bookmarks_total", resource="nodes") or 0
        for i in range(5):
            self.api.create("components", tc.component("filler-%d" % i, "trusted"))
        tc.wait_until("two Node bookmarks after the writes",
                      lambda: (self.series("isolation_gate_reflector_bookmarks_total", resource="nodes") or 0)
                      >= bookmarks + 2)
        self.api.rewind(restored)
        # The change made after the restore reuses a revision the gate has already seen.
        self.api.put("nodes", tc.node(ready=False))
        self.wait_decision("Deny", "a change after an etcd restore")
        self.assertGreater(self.relists("nodes", "too_large"), 0)
        self.api.put("nodes", tc.node())
        self.wait_decision("RequireSetec", "the next change")

    def test_a_silent_watch_is_closed_and_reopened(self):
        self.start_gate_with()
        self.wait_decision("RequireSetec", "at start")
        # The open Node watch goes silent (a dead connection); a new one would work.
        self.api.wait_for_watch("nodes", timeout=tc.WAIT)
        self.api.set_watch_silence("nodes", future=False)
        self.api.put("nodes", tc.node(ready=False))
        self.wait_decision("Deny", "a change held by a silent watch")
        self.assertGreater(self.series("isolation_gate_reflector_silent_watches_total", resource="nodes"), 0)


class StaleSandbox(CacheFaultCase):
    def test_a_node_cache_stale_past_the_bound_denies_untrusted_pods(self):
        self.start_gate_with("--sandbox-stale-after", "5s")
        self.wait_decision("RequireSetec", "at start")
        self.api.set_watch_silence("nodes")
        self.wait_decision("Deny", "a Node cache silent past --sandbox-stale-after")
        d, r = self.decision()
        self.assertEqual(d, "Deny", r)
        self.assertIn("unknown", r["status"]["message"])
        self.assertGreaterEqual(self.series("isolation_gate_cache_staleness_seconds", resource="nodes"), 5.0)
        self.assertEqual(self.gate.metric_values("isolation_gate_sandbox_available"), 0.0)
        # A trusted Component is not denied: the sandbox reads as unavailable.
        trusted, rt = self.decision(pod_name="docs-indexer-pod.yaml")
        self.assertEqual(trusted, "AllowInProcess", rt)
        self.api.set_watch_silence("nodes", enabled=False)
        self.wait_decision("RequireSetec", "the Node cache fresh again")


class ListFaults(CacheFaultCase):
    def test_expired_continue_tokens_lead_to_one_unpaginated_list(self):
        for i in range(2, 5):
            self.api.create("nodes", tc.node(name="node-%d" % i))
        self.api.set_continue_ttl(0)
        # The first list ("0", the watch cache: whole) fails; the quorum list pages, one Node a page,
        # and every continue token has expired when it comes back.
        self.api.inject_fault(500, path=r"^/api/v1/nodes$", watch=False, count=1)
        self.start_gate_with("--kube-list-page-size", "1", wait_ready=False)
        self.gate._wait_ready(timeout=FAULT_BOUND)
        self.assertGreaterEqual(self.relists("nodes", "continue_expired"), 1)
        self.assertEqual(self.series("isolation_gate_cache_objects", resource="nodes"), 4.0)
        self.wait_decision("RequireSetec", "after the unpaginated list")
        lists = self.api.requests(path=r"^/api/v1/nodes$", watch=False)
        self.assertTrue(any("continue" in e["query"] for e in lists), lists)
        self.assertTrue(any("limit" not in e["query"] and e["status"] == 200 for e in lists), lists)


if __name__ == "__main__":
    unittest.main()
