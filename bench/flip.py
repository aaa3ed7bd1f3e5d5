#!/usr/bin/python3
"""Cluster mode: time from a sandbox change in the API to the first changed
decision (issue 12, item 4; a measurement, not a test).

isolation-gate `serve --kubeconfig` runs against the test API server
(tests/apiserver/fake_apiserver.py, in this process) holding the corpus'
Components, the setec RuntimeClass and --nodes capable Nodes. A client keeps
one keep-alive HTTPS connection to the gate and sends the typical untrusted
pod's AdmissionReview back to back: RequireSetec while the sandbox is
available, Deny (hosted shape) while it is not. Each flip is one write to the
API server; the latency is from just before that write to the first response
with the other decision. --flips flips of each kind, alternating direction:

  runtimeclass: the RuntimeClass loses / regains its setec.zeroroot.ai/runtime label
  node:         the only capable Node's Ready condition goes False / True

  bench/flip.py [--flips 100] [--out build-bench/results/flip.json]

Needs bench/run.sh's build-bench/ (binary, corpus, certificate). Prints
p50/p90/p99/max per kind and writes the raw latencies as JSON.
"""
import argparse
import http.client
import json
import os
import ssl
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import cluster  # noqa: E402  (Fixture: the API server, the kubeconfig, the gate)

CASE = "pod-typical-RequireSetec"
WAIT_LIMIT_S = 10.0  # a flip not seen within this is recorded as a failure


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))]


class Reviewer:
    """Back-to-back reviews on one keep-alive connection; the decision of each."""

    def __init__(self, ca, body):
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.check_hostname = False
        self.body = body
        self.conn = None
        self.sent = 0

    def decision(self):
        for _ in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection("127.0.0.1", bench.OURS_PORT, context=self.ctx, timeout=5)
            try:
                self.conn.request("POST", "/mutate/pods?timeout=10s", body=self.body,
                                  headers={"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                data = resp.read()
                self.sent += 1
                r = json.loads(data)["response"]
                return r.get("auditAnnotations", {}).get("decision") or ("Allow" if r["allowed"] else "Deny")
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
        raise RuntimeError("the gate did not answer")

    def wait_for(self, wanted, started):
        while time.monotonic() - started < WAIT_LIMIT_S:
            if self.decision() == wanted:
                return (time.monotonic() - started) * 1000.0
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flips", type=int, default=100)
    ap.add_argument("--nodes", type=int, default=1, help="Nodes in the cluster (node-0000 is the one flipped)")
    ap.add_argument("--out", default=os.path.join(cluster.REPO, "build-bench", "results", "flip.json"))
    args = ap.parse_args()
    fx = cluster.Fixture(args)
    # Only node-0000 can run the sandbox, so its readiness decides it.
    api, kubeconfig = fx.api(0, args.nodes)
    for i in range(1, args.nodes):
        api.patch("nodes", "node-%04d" % i, {"metadata": {"labels": {"setec.zeroroot.ai/runtime.firecracker": None}}})
    proc, ready_ms = fx.gate(kubeconfig)
    case = {c["name"]: c for c in json.load(open(os.path.join(fx.build, "corpus", "cases.json")))}[CASE]
    reviewer = Reviewer(os.path.join(fx.build, "bench-certs", "ca.crt"), open(case["file"], "rb").read())
    results = {"ready_ms": ready_ms, "nodes": args.nodes, "flips": args.flips}
    try:
        if reviewer.decision() != "RequireSetec":
            raise RuntimeError("the sandbox is not available at the start")
        rc = api.get("runtimeclasses", cluster.RC)

        def runtimeclass(available):
            labels = {"setec.zeroroot.ai/runtime": "fc" if available else None}
            api.patch("runtimeclasses", rc["metadata"]["name"], {"metadata": {"labels": labels}})

        def node(available):
            n = api.get("nodes", "node-0000")
            n["status"]["conditions"] = [{"type": "Ready", "status": "True" if available else "False"},
                                         {"type": "MemoryPressure", "status": "False"}]
            api.update_status("nodes", n)

        for kind, flip in (("runtimeclass", runtimeclass), ("node", node)):
            latencies, failures, sent0 = [], 0, reviewer.sent
            for i in range(args.flips):
                available = i % 2 == 1  # first flip: unavailable
                started = time.monotonic()
                flip(available)
                ms = reviewer.wait_for("RequireSetec" if available else "Deny", started)
                if ms is None:
                    failures += 1
                else:
                    latencies.append(ms)
            if args.flips % 2 == 1:  # leave the sandbox available for the next kind
                flip(True)
                reviewer.wait_for("RequireSetec", time.monotonic())
            results[kind] = {"latencies_ms": latencies, "failures": failures,
                             "reviews": reviewer.sent - sent0}
            print(f"flip: {kind:<12} n={len(latencies)} failures={failures} "
                  f"p50 {pct(latencies, 50):.1f} ms  p90 {pct(latencies, 90):.1f} ms  "
                  f"p99 {pct(latencies, 99):.1f} ms  max {max(latencies):.1f} ms  "
                  f"mean {statistics.mean(latencies):.1f} ms  ({reviewer.sent - sent0} reviews)",
                  file=sys.stderr, flush=True)
    finally:
        bench.terminate(proc)
        api.stop()
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print("\n| change | flips | p50 ms | p90 ms | p99 ms | max ms | not seen within 10 s |")
    print("|---|---|---|---|---|---|---|")
    for kind in ("runtimeclass", "node"):
        lat = results[kind]["latencies_ms"]
        print(f"| {kind} | {len(lat)} | {pct(lat, 50):.1f} | {pct(lat, 90):.1f} | {pct(lat, 99):.1f} | "
              f"{max(lat):.1f} | {results[kind]['failures']} |")
    return 1 if any(results[k]["failures"] for k in ("runtimeclass", "node")) else 0


if __name__ == "__main__":
    sys.exit(main())
