#!/usr/bin/python3
"""Caches under watch faults, measured (not a test; issue 26 item 7):

  1. start to /readyz 200 with 10,000 Components and 1,000 Nodes, the binary
     against a baseline binary (an older build), interleaved, median of
     --repeats starts each, against one test API server;
  2. for each fault of the test API server (tests/apiserver/README.md,
     "Faults"), the time from a change made during the fault (a Node turned
     NotReady, or back) to the first /mutate/pods answer that reflects it,
     --repeats times: a watch-only failure (403), a rewind (an etcd restore), a
     dead watch connection (silent), a Node cache silent past
     --sandbox-stale-after, and continue tokens expiring under a paged quorum
     list (start to ready).

Writes the section between the "cache-faults" markers of
docs/benchmarks-cluster.md (appended if missing) and prints it.
  bench/cache_faults.py --binary build/isolation-gate [--baseline OLD_BINARY] [--repeats 5]
"""
import argparse
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "apiserver"))
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))
import bench  # noqa: E402  (http_get_status, terminate, OURS_PORT, OURS_PROBE_PORT)
import cluster  # noqa: E402  (node, generated_component, RC)
import harness as h  # noqa: E402
import test_cluster as tc  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

BEGIN, END = "<!-- cache-faults: begin (bench/cache_faults.py) -->", "<!-- cache-faults: end -->"


def api_server(tmp, certs, components, nodes, **kw):
    api = FakeApiServer(certs["tls.crt"], certs["tls.key"], tokens=("bench-token",), **kw).start()
    api.create("runtimeclasses", {"metadata": {"name": cluster.RC, "labels": {"setec.zeroroot.ai/runtime": "fc"}},
                                  "handler": cluster.RC, "scheduling": {"nodeSelector": {
                                      "setec.zeroroot.ai/runtime.firecracker": "true"},
                                      "tolerations": [{"key": "setec.zeroroot.ai/dedicated", "operator": "Exists"}]}})
    for i in range(nodes):
        api.create("nodes", cluster.node(i))
    for i in range(components):
        api.create("components", cluster.generated_component(i))
    kubeconfig = os.path.join(tmp, "kubeconfig-%d" % api.port)
    with open(kubeconfig, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n- name: b\n  cluster:\n"
                "    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n  user: {token: bench-token}\n"
                "contexts:\n- name: b\n  context: {cluster: b, user: u}\n" % (api.url, certs["ca.crt"]))
    return api, kubeconfig


def ready_ms(binary, kubeconfig, serving):
    argv = [binary, "serve", "--kubeconfig", kubeconfig, "--cert-mode", "files", "--tls-cert", serving["tls.crt"],
            "--tls-key", serving["tls.key"], "--listen", "127.0.0.1:%d" % bench.OURS_PORT,
            "--metrics-listen", "127.0.0.1:%d" % bench.OURS_PROBE_PORT, "--drain-delay", "0s"]
    env = {k: v for k, v in os.environ.items() if k != "GIBSON_UNTRUSTED_EXEC"}
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        while time.monotonic() - t0 < 120:
            if bench.http_get_status(bench.OURS_PROBE_PORT, "/readyz") == 200:
                return (time.monotonic() - t0) * 1000
            if proc.poll() is not None:
                raise RuntimeError("%s exited %s" % (binary, proc.returncode))
            time.sleep(0.002)
        raise RuntimeError("not ready within 120 s")
    finally:
        bench.terminate(proc)


class Gate:
    """A gate in cluster mode against `api`, and the time a change takes to reach its decisions."""

    def __init__(self, binary, api, kubeconfig_path, *extra):
        os.environ["IG_BINARY"] = binary
        h.BINARY = binary
        self.api = api
        self.g = h.GateServer(kubeconfig=kubeconfig_path, extra_args=list(extra)).start()

    def decision(self):
        # A dry run: a denial records no Event, so polling writes nothing to the API (after a rewind,
        # writes would carry the revision past the gate's before the API server answers "Too large").
        pod = h.example_pod("report-parser-pod.yaml")
        r = self.g.review("/mutate/pods", h.pod_review(pod, dry_run=True))["response"]
        return r.get("auditAnnotations", {}).get("decision")

    def until(self, expected, timeout=300.0):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if self.decision() == expected:
                return time.monotonic() - t0
            time.sleep(0.02)
        raise RuntimeError("not %s within %ss" % (expected, timeout))

    def timed(self, change, expected):
        t0 = time.monotonic()
        change()
        self.until(expected)
        return time.monotonic() - t0

    def stop(self):
        self.g.stop()


def fault_times(binary, tmp, certs, repeats):
    out = {}

    def fresh(**kw):
        api, kc = api_server(tmp, certs, 0, 0, bookmark_interval=1.0, max_history=100000, **kw)
        api.create("nodes", tc.node())
        api.create("components", tc.component("report-parser", "untrusted"))
        return api, kc

    def flip(api, i):
        return (lambda: api.put("nodes", tc.node(ready=(i % 2 == 1)))), ("Deny" if i % 2 == 0 else "RequireSetec")

    # A watch-only failure: every watch answers 403; lists work.
    api, kc = fresh()
    g = Gate(binary, api, kc)
    g.until("RequireSetec")
    api.inject_fault(403, path=r"^/api/v1/nodes$", watch=True, count=None)
    api.drop_watches("nodes")
    out["watch_only_403"] = [g.timed(*flip(api, i)) for i in range(repeats)]
    g.stop()
    api.stop()

    # A rewind: the gate is ahead of the restored revision; the change reuses a revision it has seen.
    api, kc = fresh()
    api.too_large_rv_wait = 3.0   # the real watch cache's wait
    g = Gate(binary, api, kc)
    g.until("RequireSetec")
    times = []
    for i in range(repeats):
        restored = api.resource_version()
        for j in range(5):
            api.create("components", tc.component("filler-%d-%d" % (i, j), "trusted"))
        time.sleep(2.5)  # two bookmarks carry the newest revision to the Node watch
        api.rewind(restored)
        times.append(g.timed(*flip(api, i)))
    out["rewind"] = times
    g.stop()
    api.stop()

    # A dead watch connection (silent; a new one works), with the default --kube-watch-silence (150s)
    # and with 10s.
    for silence in ("10s", "150s"):
        api, kc = fresh()
        g = Gate(binary, api, kc, "--kube-watch-silence", silence)
        g.until("RequireSetec")
        times = []
        for i in range(repeats if silence == "10s" else 1):
            time.sleep(1.5)  # the current watch is open
            api.set_watch_silence("nodes", future=False)
            times.append(g.timed(*flip(api, i)))
        out["silent_" + silence] = times
        g.stop()
        api.stop()

    # A Node cache silent past --sandbox-stale-after 20s: untrusted pods denied.
    api, kc = fresh()
    g = Gate(binary, api, kc, "--kube-watch-silence", "5s", "--sandbox-stale-after", "20s")
    times = []
    for i in range(repeats):
        g.until("RequireSetec")
        times.append(g.timed(lambda: api.set_watch_silence("nodes"), "Deny"))
        api.set_watch_silence("nodes", enabled=False)
    out["stale_20s"] = times
    g.stop()
    api.stop()
    return out


def continue_expiry(binary, tmp, certs, serving, repeats):
    api, kc = api_server(tmp, certs, 10000, 1000, bookmark_interval=5.0, max_history=20000)
    api.set_continue_ttl(0)
    times = []
    for _ in range(repeats):
        api.inject_fault(500, path=r"^/apis/gibson.zeroroot.ai/v1alpha1/components$", watch=False, count=1)
        times.append(ready_ms(binary, kc, serving))
    api.stop()
    return times


def fmt(xs, unit="s"):
    if unit == "s":
        return "%.1f s (%s)" % (statistics.median(xs), ", ".join("%.1f" % x for x in xs))
    return "%.0f ms (%s)" % (statistics.median(xs), ", ".join("%.0f" % x for x in xs))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "isolation-gate"))
    ap.add_argument("--baseline", help="an older build, for the start-to-ready comparison")
    ap.add_argument("--baseline-label", help="what the baseline is, for the report (default: its path)")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ig-cache-faults-")
    h.BINARY = args.binary
    certs = h.make_certs(os.path.join(tmp, "api"))
    serving = h.make_certs(os.path.join(tmp, "serving"))
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")

    print("cache-faults: start to ready, 10,000 Components + 1,000 Nodes", file=sys.stderr)
    api, kc = api_server(tmp, certs, 10000, 1000, bookmark_interval=5.0, max_history=20000)
    ready = {"new": [], "baseline": []}
    for _ in range(args.repeats):
        ready["new"].append(ready_ms(args.binary, kc, serving))
        if args.baseline:
            ready["baseline"].append(ready_ms(args.baseline, kc, serving))
    api.stop()
    print("cache-faults: ready %s" % ready, file=sys.stderr)
    cont = continue_expiry(args.binary, tmp, certs, serving, max(3, args.repeats // 2))
    print("cache-faults: continue expiry %s" % cont, file=sys.stderr)
    faults = fault_times(args.binary, tmp, certs, args.repeats)
    print("cache-faults: %s" % faults, file=sys.stderr)

    rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    lines = [BEGIN, "", "## Caches under watch faults", "",
             "Written by `bench/cache_faults.py` (tree %s, %s, %s, %d cores, load average at the end %s; the "
             "test API server, Python, on the same cores). Each time is from the change (a Node turned "
             "NotReady, or back, through the API) to the first `/mutate/pods` answer that reflects it."
             % (rev, started, platform.machine(), os.cpu_count(),
                " ".join(open("/proc/loadavg").read().split()[:3])), "",
             "| measure | result (median, then each) |", "|---|---|",
             "| start to ready, 10,000 Components + 1,000 Nodes, this tree | %s |" % fmt(ready["new"], "ms")]
    if ready["baseline"]:
        lines.append("| the same, baseline: %s (interleaved with the above) | %s |"
                     % (args.baseline_label or "`%s`" % args.baseline, fmt(ready["baseline"], "ms")))
    lines += [
        "| start to ready, 10,000 Components, first list failing once and every continue token expired "
        "(page size 5000: one unpaginated quorum list after) | %s |" % fmt(cont, "ms"),
        "| watch-only failure (every Node watch 403): change to decision, successive changes (the backoff "
        "grows: 0.8 s doubling, capped at 30 s) | %s |" % fmt(faults["watch_only_403"]),
        "| rewind (etcd restore; the API server answers \"Too large\" after its 3 s wait) | %s |"
        % fmt(faults["rewind"]),
        "| dead watch connection (silent), `--kube-watch-silence 10s` | %s |" % fmt(faults["silent_10s"]),
        "| dead watch connection (silent), default `--kube-watch-silence 150s` | %s |" % fmt(faults["silent_150s"]),
        "| Node cache silent for good, `--sandbox-stale-after 20s`: fault to untrusted pods denied | %s |"
        % fmt(faults["stale_20s"]),
        "",
        "Bounds (docs/operations.md, \"Stale caches\"): a watch that cannot be opened or ends in an ERROR "
        "event, and a rewind, reach decisions within one backoff (at most 30 s, jittered) plus a list (plus "
        "the API server's 3 s \"Too large\" wait); a dead watch within `--kube-watch-silence` plus a reconnect; "
        "a cache stale for good denies untrusted pods `--sandbox-stale-after` after its last progress (a "
        "bookmark at most one bookmark period before the fault). The first list of each cache is now at "
        "resourceVersion \"0\", one answer from the watch cache (3 LISTs at start, where the baseline's quorum "
        "lists were 4 pages); the machine is shared, so the spread between starts is large.",
        "",
        "Command: `bench/cache_faults.py --binary %s%s --repeats %d`." % (
            os.path.relpath(args.binary, REPO), (" --baseline OLD_BINARY") if args.baseline else "",
            args.repeats),
        "", END]
    doc = os.path.join(REPO, "docs", "benchmarks-cluster.md")
    text = open(doc).read()
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN)] + "\n".join(lines) + text[text.index(END) + len(END):]
    else:
        text = text.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n"
    with open(doc, "w") as f:
        f.write(text)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
