#!/usr/bin/python3
"""Cluster mode: the leader's Component status writes after a sandbox flip
(issue 12, item 4; a measurement, not a test).

The test API server holds --components generated Components (half trusted,
half untrusted) and one capable Node; the gate starts with
`--kube-api-qps Q --kube-api-burst B`, becomes leader, and writes every
Component's status once (the first pass). Then the RuntimeClass loses its
setec label, so every Component's decision changes, and every status is
written again. For both passes: the writes (isolation_gate_status_writes_total),
the time until the status queue is empty, and the achieved rate against the
client limit; at the end, every Component's status in the API is checked to
carry the decision after the flip.

  bench/status_flip.py [--components 5000] [--qps 100] [--burst 100] [--workers 1]

Needs bench/run.sh's build-bench/. Prints a Markdown table; writes
build-bench/results/status_flip.json.
"""
import argparse
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
import cluster  # noqa: E402

LIMIT_S = 1800
WRITES, WRITTEN = "isolation_gate_status_writes_total", 'result="written"'


def metrics():
    return bench.probe_metrics(timeout=5).decode(errors="replace")


def metric_sum(text, name, labels=""):
    """The sum of a metric's series whose labels contain `labels` (e.g. 'result="written"')."""
    total, seen = 0.0, False
    for m in re.finditer(r"^" + re.escape(name) + r"(?:\{[^}]*" + re.escape(labels) + r"[^}]*\})? (\S+)$",
                         text, re.M):
        total += float(m.group(1))
        seen = True
    return total if seen else None


def drain(expected_writes, writes0, started):
    """Waits until `expected_writes` more writes are counted and the queue is empty; samples the rate."""
    samples = []
    while time.monotonic() - started < LIMIT_S:
        text = metrics()
        writes = (metric_sum(text, WRITES, WRITTEN) or 0) - writes0
        queue = metric_sum(text, "isolation_gate_status_queue") or 0
        samples.append((time.monotonic() - started, writes))
        if writes >= expected_writes and queue == 0:
            return time.monotonic() - started, writes, samples
        time.sleep(0.25)
    raise RuntimeError("status writes did not finish within %d s" % LIMIT_S)


def steady_rate(samples):
    """Writes per second between 10 % and 90 % of the pass (past the burst)."""
    total = samples[-1][1]
    lo = next((s for s in samples if s[1] >= 0.1 * total), samples[0])
    hi = next((s for s in samples if s[1] >= 0.9 * total), samples[-1])
    return (hi[1] - lo[1]) / (hi[0] - lo[0]) if hi[0] > lo[0] else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--components", type=int, default=5000)
    ap.add_argument("--qps", type=float, default=100)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--workers", type=int, default=1, help="--status-workers")
    ap.add_argument("--out", default=os.path.join(cluster.REPO, "build-bench", "results", "status_flip.json"))
    args = ap.parse_args()
    fx = cluster.Fixture(args)
    api, kubeconfig = fx.api(args.components, 1, corpus=False)
    started = time.monotonic()
    proc, ready_ms = fx.gate(kubeconfig, ["--kube-api-qps", str(args.qps), "--kube-api-burst", str(args.burst),
                                        "--status-workers", str(args.workers)])
    results = {"components": args.components, "qps": args.qps, "burst": args.burst, "workers": args.workers,
               "ready_ms": ready_ms}
    try:
        first_s, first_writes, first_samples = drain(args.components, 0, started)
        writes0 = metric_sum(metrics(), WRITES, WRITTEN) or 0
        flip_started = time.monotonic()
        api.patch("runtimeclasses", cluster.RC, {"metadata": {"labels": {"setec.zeroroot.ai/runtime": None}}})
        flip_s, flip_writes, flip_samples = drain(args.components, writes0, flip_started)
        # Every Component's status now says what the gate decides without the sandbox.
        wrong = 0
        for i in range(args.components):
            c = cluster.generated_component(i)
            got = api.get("components", c["metadata"]["name"], namespace=c["metadata"]["namespace"])
            want = "Deny" if c["spec"]["policy"]["content_trust"] == "untrusted" else "AllowInProcess"
            if (got.get("status") or {}).get("isolation") != want:
                wrong += 1
        extra = (metric_sum(metrics(), WRITES, WRITTEN) or 0) - writes0 - flip_writes
    finally:
        bench.terminate(proc)
        api.stop()
    results.update({
        "first_pass": {"seconds": first_s, "writes": first_writes, "rate": steady_rate(first_samples)},
        "after_flip": {"seconds": flip_s, "writes": flip_writes, "rate": steady_rate(flip_samples),
                       "wrong_statuses": wrong, "writes_after_drain": extra}})
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\n{args.components} Components, --kube-api-qps {args.qps:g} --kube-api-burst {args.burst} "
          f"--status-workers {args.workers}\n")
    print("| pass | status writes | seconds until the queue is empty | steady writes/s (10-90 %) | client limit |")
    print("|---|---|---|---|---|")
    for key, label in (("first_pass", "first pass, after start"), ("after_flip", "after the sandbox flip")):
        r = results[key]
        print(f"| {label} | {r['writes']:.0f} | {r['seconds']:.1f} | {r['rate'] or 0:.1f} | {args.qps:g}/s, burst {args.burst} |")
    print(f"\nStatuses wrong after the flip: {wrong} of {args.components}.")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
