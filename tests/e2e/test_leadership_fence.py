"""The leadership fence (docs/operations.md, "Loops"; issue 27, 5c): once a
leader has lost its Lease, no write of its loops reaches the API server later
than the retry period + 1 s after it stopped leading. Driven with the real
binary against the repository's test API server
(tests/apiserver/fake_apiserver.py), whose request log stamps each request's
arrival:

- the leader keeps writing up to the loss: a Component's trust flips every
  0.2 s (a status write each time) and a drifted pod's eviction is refused
  with 429 Retry-After 1 s (an eviction retried every second);
- then the API server refuses its Lease renewals (500): the elector gives up
  at the renew deadline after its last successful renewal, at the latest;
- no status PATCH and no eviction POST arrives later than that moment + the
  retry period + 1 s (the reconciles' CancelTokens: none is started after it,
  one in flight is abandoned).

Every wait is bounded; the only timing assertion is that product bound,
measured on the API server's clock (its request log).
"""

import threading
import unittest

import harness as h
import test_cluster as tc
import test_operator as to

NS = to.NS
RENEW_DEADLINE = h.RENEW_DEADLINE  # to.ELECTION's
RETRY_PERIOD = h.RETRY_PERIOD
wait_until = tc.wait_until

STATUS_PATH = r"/components/[^/]+/status$"
EVICTION_PATH = r"/pods/[^/]+/eviction$"


class LeadershipFence(to.OperatorCase):
    extra = ["--evict-drifted", "--evict-rate", "600", "--drift-eviction-settle", "0s"]

    def writes(self):
        return (self.api.requests(method="PATCH", path=STATUS_PATH)
                + self.api.requests(method="POST", path=EVICTION_PATH))

    def test_no_status_write_or_eviction_arrives_later_than_the_retry_period_plus_1s(self):
        a = self.gate_with("gate-a")
        self.wait_leader(a, "alone")
        wait_until("statuses written", lambda: self.status("report-parser") is not None)

        # Evictions all along: report-parser is untrusted and the sandbox is
        # there, so a pod outside it is less safe; each eviction is refused
        # (as a PodDisruptionBudget would) and retried after Retry-After.
        self.api.inject_fault(429, method="POST", path=EVICTION_PATH, count=None, retry_after=1)
        self.api.create("pods", to.running_pod("parser-0", "report-parser"))
        wait_until("the eviction retried", lambda: len(self.api.requests(method="POST", path=EVICTION_PATH)) >= 2)

        # Status writes all along: docs-indexer's trust flips.
        stop = threading.Event()
        errors = []

        def flip():
            trust = "untrusted"
            while not stop.is_set():
                try:
                    c = self.api.get("components", "docs-indexer", namespace=NS)
                    c["spec"]["policy"]["content_trust"] = trust
                    self.api.update("components", c, namespace=NS)
                except Exception as e:  # a conflict with the gate's status write: the next flip
                    errors.append(e)
                trust = "trusted" if trust == "untrusted" else "untrusted"
                stop.wait(0.2)

        flipper = threading.Thread(target=flip, daemon=True)
        flipper.start()
        self.addCleanup(flipper.join, 10)
        self.addCleanup(stop.set)
        before = self.api.request_mark()
        wait_until("status writes of the flips",
                   lambda: len(self.api.requests(since=before, method="PATCH", path=STATUS_PATH)) >= 2)

        # The Lease is lost: every renewal refused.
        fault_mark = self.api.request_mark()
        self.api.inject_fault(500, method="PUT", path=r"/leases/", count=None)
        wait_until("the leader gives up (renew deadline)", lambda: self.leader_metric(a) == 0.0)
        # Bounded: the writers' pressure goes on while it tries the Lease eight
        # more times (about 4 s at the retry period, well past the fence).
        seen = self.api.request_mark()
        wait_until("eight more attempts at the Lease",
                   lambda: len(self.api.requests(since=seen, method="PUT", path=r"/leases/")) >= 8)
        stop.set()
        flipper.join(10)
        self.assertEqual(self.leader_metric(a), 0.0)

        renewed = [e["time"] for e in self.api.requests(method="PUT", path=r"/leases/", status=200)]
        self.assertTrue(renewed, "the leader never renewed its Lease")
        # The elector stops leading at the renew deadline after its last
        # successful renewal, at the latest (kube/leader_election.h).
        stopped_by = max(renewed) + RENEW_DEADLINE
        fence = stopped_by + RETRY_PERIOD + 1.0
        late = [(e["method"], e["path"], round(e["time"] - stopped_by, 3))
                for e in self.writes() if e["time"] > fence]
        self.assertEqual(late, [], "writes later than the retry period + 1 s after it stopped leading")
        # Not vacuous: both loops were writing after the Lease began to be refused.
        during = self.api.requests(since=fault_mark)
        self.assertTrue([e for e in during if e["method"] == "POST" and e["path"].endswith("/eviction")],
                        "no eviction was tried while the Lease was being lost")
        self.assertTrue([e for e in during if e["method"] == "PATCH" and e["path"].endswith("/status")],
                        "no status was written while the Lease was being lost")


if __name__ == "__main__":
    unittest.main()
