#!/usr/bin/python3
"""Cluster mode measured (not a test): isolation-gate `serve --kubeconfig`
against the test API server (tests/apiserver/fake_apiserver.py) holding many
Components and Nodes.

  1. time from start to /readyz 200 with 10,000 Components and 1,000 Nodes
     (median of --repeats starts);
  2. memory per cached Component and per cached Node: the slope of RSS once
     ready against the number of objects cached, fitted (least squares) over
     fresh starts with none and with each of --memory-sizes objects (10,000,
     50,000 and 100,000 by default; the median RSS of --repeats starts at
     each size), so that one start's spread of RSS (up to 2 MiB: 200 bytes an
     object at 10,000) does not decide the figure; each size's own
     (RSS(N) - RSS(0)) / N is reported beside it;
  3. CPU per review on /mutate/pods (typical pod, RequireSetec, 16 keep-alive
     connections, wrk) in local mode and in cluster mode while the API server
     changes 100 Components and 10 Nodes a second, interleaved (local,
     cluster, local, cluster, ...), so both see the same machine. The churn
     keeps the decision stable (the target is CPU per review unchanged):
     Components get a label, Nodes alternately a label and a flip of their
     Ready condition (one Node of 1,000 NotReady for a while leaves the
     sandbox available). For this part the test API server runs in a process
     of its own (it also drives the churn, as library calls), and its CPU
     (utime + stime from /proc over each run) is reported apart from the
     gate's.

Needs what bench/run.sh builds first (build-bench/: the binary, the corpus,
the certificate, wrk). Writes docs/benchmarks-cluster.md and
build-bench/results/cluster.json.
  bench/cluster.py [--pairs 3] [--duration 10] [--components 10000] [--nodes 1000]
                   [--churn 100] [--node-churn 10] [--memory-sizes 10000,50000,100000]
"""
import argparse
import datetime
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "apiserver"))
import bench  # noqa: E402  (run_wrk, proc_cpu_ticks, proc_status_kib, http_get_status, terminate)
from fake_apiserver import FakeApiServer  # noqa: E402

import yaml  # noqa: E402

RC = "kata-fc"


def node(i):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "node-%04d" % i,
                         "labels": {"setec.zeroroot.ai/runtime.firecracker": "true",
                                    "kubernetes.io/hostname": "node-%04d" % i,
                                    "topology.kubernetes.io/zone": "zone-%d" % (i % 3)}},
            "spec": {"taints": [{"key": "setec.zeroroot.ai/dedicated", "effect": "NoSchedule"}] if i % 2 else []},
            "status": {"conditions": [{"type": "Ready", "status": "True"},
                                      {"type": "MemoryPressure", "status": "False"}],
                       "capacity": {"cpu": "8", "memory": "32Gi"}}}


def generated_component(i):
    return {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
            "metadata": {"name": "catalog-%05d" % i, "namespace": "tenant-%03d" % (i % 100),
                         "labels": {"app.kubernetes.io/name": "catalog-%05d" % i}},
            "spec": {"kind": "tool", "image": "registry.example.com/gibson/catalog-%05d:1.0.0" % i,
                     "policy": {"content_trust": "untrusted" if i % 2 else "trusted"}}}


class Fixture:
    def __init__(self, args):
        self.args = args
        self.build = os.path.join(REPO, "build-bench")
        self.binary = os.path.join(self.build, "isolation-gate")
        self.tmp = tempfile.mkdtemp(prefix="ig-cluster-bench-")
        subprocess.run([self.binary, "certs", "--out-dir", self.tmp + "/api", "--dns", "localhost",
                        "--ip", "127.0.0.1"], check=True, capture_output=True)
        certs = os.path.join(self.build, "bench-certs")
        self.cert, self.key = os.path.join(certs, "tls.crt"), os.path.join(certs, "tls.key")
        self.env = {k: v for k, v in os.environ.items() if k != "GIBSON_UNTRUSTED_EXEC"}

    def api(self, components, nodes, corpus=True):
        api = FakeApiServer(self.tmp + "/api/tls.crt", self.tmp + "/api/tls.key",
                            tokens=("bench-token",), bookmark_interval=5.0, max_history=20000).start()
        api.create("runtimeclasses", {"metadata": {"name": RC, "labels": {"setec.zeroroot.ai/runtime": "fc"}},
                                      "handler": RC, "scheduling": {"nodeSelector": {
                                          "setec.zeroroot.ai/runtime.firecracker": "true"},
                                          "tolerations": [{"key": "setec.zeroroot.ai/dedicated",
                                                           "operator": "Exists"}]}})
        for i in range(nodes):
            api.create("nodes", node(i))
        if corpus:
            cdir = os.path.join(self.build, "corpus", "components")
            for f in sorted(os.listdir(cdir)):
                with open(os.path.join(cdir, f)) as fh:
                    for doc in yaml.safe_load_all(fh):
                        if doc and doc.get("kind") == "Component":
                            doc["metadata"].setdefault("namespace", "default")
                            api.put("components", doc)
        for i in range(components):
            api.create("components", generated_component(i))
        kubeconfig = os.path.join(self.tmp, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write("apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n- name: b\n  cluster:\n"
                    "    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n  user: {token: bench-token}\n"
                    "contexts:\n- name: b\n  context: {cluster: b, user: u}\n"
                    % (api.url, self.tmp + "/api/ca.crt"))
        return api, kubeconfig

    def gate(self, kubeconfig=None, extra=()):
        argv = [self.binary, "serve", "--tls-cert", self.cert, "--tls-key", self.key,
                "--listen", "127.0.0.1:%d" % bench.OURS_PORT,
                "--metrics-listen", "127.0.0.1:%d" % bench.OURS_PROBE_PORT]
        if kubeconfig:
            argv += ["--kubeconfig", kubeconfig, "--cert-mode", "files"] + list(extra)
        else:
            argv += ["--local", "--components", os.path.join(self.build, "corpus", "components"),
                     "--sandbox", "available"]
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)
        while time.monotonic() - t0 < 120:
            if bench.http_get_status(bench.OURS_PROBE_PORT, "/readyz") == 200:
                return proc, (time.monotonic() - t0) * 1000
            if proc.poll() is not None:
                raise RuntimeError("isolation-gate exited %s" % proc.returncode)
            time.sleep(0.002)
        bench.terminate(proc)
        raise RuntimeError("not ready within 120 s")


class ApiProcess:
    """The test API server in a process of its own, so that its CPU can be read
    from /proc apart from this script's. Forked from the Fixture: seeds as
    Fixture.api does, then runs the churn when asked."""

    def __init__(self, fx, components, nodes, corpus=True):
        ctx = multiprocessing.get_context("fork")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_api_child, args=(child, fx, components, nodes, corpus), daemon=True)
        self.proc.start()
        self.url, self.kubeconfig, self.names = self.conn.recv()
        self.pid = self.proc.pid

    def churn(self, component_rate, node_rate):
        self.conn.send(("churn", component_rate, node_rate))
        assert self.conn.recv() == "churning"

    def end_churn(self):
        self.conn.send(("end",))
        return self.conn.recv()  # (components changed, nodes changed, seconds)

    def stop(self):
        self.conn.send(("quit",))
        self.conn.recv()
        self.proc.join(10)


def _api_child(conn, fx, components, nodes, corpus):
    api, kubeconfig = fx.api(components, nodes, corpus)
    names = [(c["metadata"]["name"], c["metadata"]["namespace"]) for c in api.list("components")
             if c["metadata"]["name"].startswith("catalog-")]
    node_names = [n["metadata"]["name"] for n in api.list("nodes")]
    conn.send((api.url, kubeconfig, len(names)))
    stop, threads, counts = None, [], {}
    while True:
        msg = conn.recv()
        if msg[0] == "churn":
            stop, counts = threading.Event(), {}
            threads = [threading.Thread(target=lambda: counts.__setitem__("c", churn(api, stop, msg[1], names))),
                       threading.Thread(target=lambda: counts.__setitem__("n", node_churn(api, stop, msg[2],
                                                                                          node_names)))]
            for t in threads:
                t.start()
            t0 = time.monotonic()
            conn.send("churning")
        elif msg[0] == "end":
            stop.set()
            for t in threads:
                t.join()
            conn.send((counts.get("c", 0), counts.get("n", 0), time.monotonic() - t0))
        else:
            api.stop()
            conn.send("stopped")
            return


def node_churn(api, stop, per_second, names):
    """Changes `per_second` Nodes a second, spread evenly, keeping the decision
    stable: even changes set a label the RuntimeClass does not select on, odd
    ones flip one Node's Ready condition (False, then True again the next
    time that Node comes round); with 1,000 Nodes the sandbox stays available."""
    i, interval, t = 0, 1.0 / per_second, time.monotonic()
    ready = {}
    while not stop.is_set():
        name = names[(i // 2) % len(names)]
        if i % 2 == 0:
            api.patch("nodes", name, {"metadata": {"labels": {"churn": str(i)}}})
        else:
            ready[name] = not ready.get(name, True)
            api.patch("nodes", name, {"status": {"conditions": [
                {"type": "Ready", "status": "True" if ready[name] else "False"},
                {"type": "MemoryPressure", "status": "False"}]}}, subresource="status")
        i += 1
        t += interval
        delay = t - time.monotonic()
        if delay > 0:
            stop.wait(delay)
    for name, r in ready.items():  # leave every Node Ready
        if not r:
            api.patch("nodes", name, {"status": {"conditions": [
                {"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]}},
                subresource="status")
    return i


def rss_kib(proc, settle=1.0):
    time.sleep(settle)  # let the last watch events land; a measurement, not a test
    return bench.proc_status_kib(proc.pid, "VmRSS")


def churn(api, stop, per_second, names):
    """Changes `per_second` Components a second (a label), spread evenly."""
    i, interval, t = 0, 1.0 / per_second, time.monotonic()
    while not stop.is_set():
        name, ns = names[i % len(names)]
        api.patch("components", name, {"metadata": {"labels": {"churn": str(i)}}}, namespace=ns)
        i += 1
        t += interval
        delay = t - time.monotonic()
        if delay > 0:
            stop.wait(delay)
    return i


def cpu_per_review(fx, cfg, case, proc, duration, api_pid=None):
    cpu0 = bench.proc_cpu_ticks(proc.pid)
    api0 = bench.proc_cpu_ticks(api_pid) if api_pid else 0
    w = bench.run_wrk(cfg, bench.OURS_PORT, case, 16, "keep-alive", duration)
    cpu1 = bench.proc_cpu_ticks(proc.pid)
    api1 = bench.proc_cpu_ticks(api_pid) if api_pid else 0
    seconds = w["duration_us"] / 1e6
    out = {"requests": w["requests"], "rps": w["requests"] / seconds,
           "errors": sum(w["errors"].values()),
           "cpu_us": (cpu1 - cpu0) * 1e6 / bench.CLK_TCK / max(w["requests"], 1)}
    if api_pid:
        out["api_cpu_s"] = (api1 - api0) / bench.CLK_TCK
        out["api_cpu_pct"] = 100.0 * out["api_cpu_s"] / seconds
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--components", type=int, default=10000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--churn", type=int, default=100, help="Component updates a second")
    ap.add_argument("--node-churn", type=int, default=10, help="Node updates a second")
    ap.add_argument("--memory-sizes", default="10000,50000,100000",
                    help="numbers of Components (and of Nodes) the memory per object is fitted over")
    args = ap.parse_args()
    fx = Fixture(args)
    results = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": "%s, %d cores, %s" % (platform.processor() or platform.machine(), os.cpu_count(),
                                                platform.release()),
               "args": vars(args)}

    # 1. Ready time and 2. memory.
    print("cluster-bench: API server with %d Components, %d Nodes" % (args.components, args.nodes), file=sys.stderr)
    api, kubeconfig = fx.api(args.components, args.nodes)
    hwm = []  # VmHWM of each start since the last median_rss

    def starts(kubeconfig, extra=()):
        """--repeats fresh starts: each one's ready time and RSS once ready."""
        ready_ms, rss = [], []
        for _ in range(args.repeats):
            proc, ms = fx.gate(kubeconfig, extra)
            ready_ms.append(ms)
            rss.append(rss_kib(proc))
            # The peak of the start: the list pages and their decoding.
            hwm.append(bench.proc_status_kib(proc.pid, "VmHWM"))
            bench.terminate(proc)
        return ready_ms, rss
    results["ready_ms"], results["rss_full_kib"] = starts(kubeconfig)
    # The client-side rate limit (5 QPS, burst 10, as client-go) paces the
    # paginated lists; the same start with a higher limit shows how much.
    results["ready_ms_qps50"], _ = starts(kubeconfig, ["--kube-api-qps", "50", "--kube-api-burst", "100"])
    # client-go's page size (500), for comparison with our default (5000).
    results["ready_ms_page500"], _ = starts(kubeconfig, ["--kube-list-page-size", "500"])
    api.stop()
    # Each RSS is the median of --repeats starts: one start's RSS varies by MiBs.
    def median_rss(components, nodes):
        api, kubeconfig = fx.api(components, nodes, corpus=False)
        del hwm[:]
        ready_ms, runs = starts(kubeconfig)
        api.stop()
        print("cluster-bench: %d Components, %d Nodes: RSS %s KiB" % (components, nodes, runs), file=sys.stderr)
        return {"n": max(components, nodes), "rss_kib": statistics.median(runs), "runs_kib": runs,
                "hwm_kib": statistics.median(hwm), "ready_ms": statistics.median(ready_ms)}
    sizes = [int(x) for x in args.memory_sizes.split(",")]
    empty = median_rss(0, 1)
    results["rss_empty_kib"], results["rss_empty_runs_kib"] = empty["rss_kib"], empty["runs_kib"]
    results["ready_ms_empty"] = empty["ready_ms"]
    # The empty start has 1 Node (the sandbox needs one): it counts as 0 Nodes.
    results["memory"] = {
        "components": [dict(empty, n=0)] + [median_rss(n, 1) for n in sizes],
        "nodes": [dict(empty, n=0)] + [median_rss(0, n) for n in sizes],
    }
    for kind in ("components", "nodes"):
        points = results["memory"][kind]
        results["bytes_per_" + kind[:-1]] = slope_bytes(points)
        for p in points[1:]:
            p["bytes_per_object"] = (p["rss_kib"] - empty["rss_kib"]) * 1024 / p["n"]

    # 3. CPU per review, local vs cluster under churn, interleaved.
    class Cfg:
        pass
    cfg = Cfg()
    cfg.wrk = "wrk"
    cfg.lua = os.path.join(REPO, "bench", "wrk", "post.lua")
    cfg.repo = REPO
    cfg.no_resume = None
    cases = json.load(open(os.path.join(fx.build, "corpus", "cases.json")))
    case = next(c for c in cases if c["name"] == "pod-typical-RequireSetec")
    api = ApiProcess(fx, args.components, args.nodes)
    pairs = []
    for _ in range(args.pairs):
        proc, _ = fx.gate(None)
        local = cpu_per_review(fx, cfg, case, proc, args.duration)
        bench.terminate(proc)
        proc, _ = fx.gate(api.kubeconfig)
        api.churn(args.churn, args.node_churn)
        cluster = cpu_per_review(fx, cfg, case, proc, args.duration, api_pid=api.pid)
        changed, nodes_changed, seconds = api.end_churn()
        cluster["components_changed"] = changed
        cluster["churn_per_s"] = changed / seconds
        cluster["nodes_changed"] = nodes_changed
        cluster["node_churn_per_s"] = nodes_changed / seconds
        cluster["sandbox_available"] = bench.http_get_status(bench.OURS_PROBE_PORT, "/readyz") == 200 and \
            b"isolation_gate_sandbox_available 1\n" in bench.probe_metrics()
        bench.terminate(proc)
        pairs.append({"local": local, "cluster": cluster})
        print("cluster-bench: local %.1f us/review, cluster %.1f us/review (%d Component, %d Node changes; "
              "API server %.0f%% of a core)" % (local["cpu_us"], cluster["cpu_us"], changed, nodes_changed,
                                                cluster["api_cpu_pct"]), file=sys.stderr)
    api.stop()
    results["pairs"] = pairs
    results["loadavg"] = " ".join(open("/proc/loadavg").read().split()[:3])
    write(results)


def slope_bytes(points):
    """Bytes per object: the least-squares slope of RSS (KiB) against N."""
    xs = [p["n"] for p in points]
    ys = [p["rss_kib"] * 1024 for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def memory_rows(r, kind, label):
    """One line of each size's figures for the text under the table."""
    return "; ".join("%s %d: %.1f MiB (%s), %.0f bytes each" % (
        label, p["n"], p["rss_kib"] / 1024, ", ".join(str(x) for x in p["runs_kib"]), p["bytes_per_object"])
        for p in r["memory"][kind][1:])


def write(r):
    out_dir = os.path.join(REPO, "build-bench", "results")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "cluster.json"), "w") as f:
        json.dump(r, f, indent=2)
    a = r["args"]
    local = [p["local"]["cpu_us"] for p in r["pairs"]]
    cluster = [p["cluster"]["cpu_us"] for p in r["pairs"]]
    ratio = statistics.median(cluster) / statistics.median(local)
    lines = [
        "# Cluster mode: benchmark results",
        "",
        "Written by `bench/cluster.py` (after `bench/run.sh` has built `build-bench/`). Machine: %s. "
        "Started %s. The test API server (`tests/apiserver/fake_apiserver.py`, Python) runs on the same "
        "2 cores as the gate and wrk." % (r["machine"], r["started"]),
        "",
        "| measure | result |",
        "|---|---|",
        "| start to ready, %d Components + %d Nodes (median of %d) | %.0f ms (%s) |"
        % (a["components"], a["nodes"], len(r["ready_ms"]), statistics.median(r["ready_ms"]),
           ", ".join("%.0f" % x for x in r["ready_ms"])),
        "| start to ready, the same with `--kube-api-qps 50 --kube-api-burst 100` | %.0f ms (%s) |"
        % (statistics.median(r["ready_ms_qps50"]), ", ".join("%.0f" % x for x in r["ready_ms_qps50"])),
        "| start to ready, the same with `--kube-list-page-size 500` (client-go's page) | %.0f ms (%s) |"
        % (statistics.median(r["ready_ms_page500"]), ", ".join("%.0f" % x for x in r["ready_ms_page500"])),
        "| start to ready, empty cluster (1 Node; median) | %.0f ms |" % r["ready_ms_empty"],
        "| RSS once ready: empty / %d Components + %d Nodes | %.1f / %.1f MiB |"
        % (a["components"], a["nodes"], r["rss_empty_kib"] / 1024, statistics.median(r["rss_full_kib"]) / 1024),
        "| memory per cached Component (slope of RSS over 0, %s Components; medians of %d starts) | %.0f bytes |"
        % (a["memory_sizes"], a["repeats"], r["bytes_per_component"]),
        "| memory per cached Node (slope of RSS over 0, %s Nodes; medians of %d starts) | %.0f bytes |"
        % (a["memory_sizes"], a["repeats"], r["bytes_per_node"]),
        "| peak RSS during the start (VmHWM, median of %d starts): %d Components / %d Nodes | %.1f / %.1f MiB |"
        % (a["repeats"], r["memory"]["components"][-1]["n"], r["memory"]["nodes"][-1]["n"],
           r["memory"]["components"][-1]["hwm_kib"] / 1024, r["memory"]["nodes"][-1]["hwm_kib"] / 1024),
        "| CPU per review, `/mutate/pods` typical pod, 16 keep-alive: local (median of %d) | %.1f us |"
        % (len(local), statistics.median(local)),
        "| CPU per review, cluster mode while %d Components/s and %d Nodes/s change (median of %d) | %.1f us (%.2fx local) |"
        % (a["churn"], a["node_churn"], len(cluster), statistics.median(cluster), ratio),
        "| the test API server's own CPU meanwhile (its process, utime + stime; median of %d) | %.1f%% of a core |"
        % (len(cluster), statistics.median(p["cluster"]["api_cpu_pct"] for p in r["pairs"])),
        "",
        "At the default client rate limit (5 requests/s, burst 10, client-go's defaults) every request "
        "goes through the limiter. With the default `--kube-list-page-size 5000`, %d Components, the Nodes "
        "and the RuntimeClass are a few LIST pages plus 3 watches, inside the burst of 10; with client-go's "
        "pages of 500 they are about 25 requests, 10 at once and then 5 a second. The test API server is "
        "Python; a real API server answers those pages faster." % a["components"],
        "",
        "Memory is the resident size (VmRSS) 1 s after /readyz, the median of %d fresh starts at each size, "
        "fitted against the number of objects (least squares over the empty start and each size): the slope is "
        "what one more cached object costs, counting the caches and whatever else stays resident because of "
        "them (allocator slack, the leader's status queue of every Component), not a heap count. One start's "
        "RSS spreads by up to 2 MiB, 200 bytes an object at 10,000, which the fit over larger sizes averages "
        "out; each size alone (RSS(N) - RSS(empty)) / N, with every start's RSS in KiB: empty %s; %s; %s. "
        "The churn keeps every decision as it was: "
        "Components get a label; Nodes alternately get a label the RuntimeClass does not select on and a flip "
        "of one Node's Ready condition (one of %d NotReady leaves the sandbox available). The test API server "
        "runs in a process of its own for the CPU runs and also drives the churn; its CPU is not in the "
        "gate's figures. Load average when the run ended: %s (the machine is shared)." % (
            a["repeats"], r["rss_empty_runs_kib"], memory_rows(r, "components", "Components"),
            memory_rows(r, "nodes", "Nodes"), a["nodes"], r.get("loadavg", "?")),
        "",
        "Interleaved pairs (local, then cluster under churn):",
        "",
        "| pair | local us/review | local req/s | cluster us/review | cluster req/s | Components/s | Nodes/s "
        "| API server CPU | sandbox available after | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, p in enumerate(r["pairs"], 1):
        lines.append("| %d | %.1f | %.0f | %.1f | %.0f | %.0f | %.0f | %.0f%% | %s | %d |" % (
            i, p["local"]["cpu_us"], p["local"]["rps"], p["cluster"]["cpu_us"], p["cluster"]["rps"],
            p["cluster"]["churn_per_s"], p["cluster"]["node_churn_per_s"], p["cluster"]["api_cpu_pct"],
            "yes" if p["cluster"]["sandbox_available"] else "NO", p["local"]["errors"] + p["cluster"]["errors"]))
    lines += ["", "Command: `bench/cluster.py --components %d --nodes %d --pairs %d --duration %d --churn %d "
              "--node-churn %d --memory-sizes %s`."
              % (a["components"], a["nodes"], a["pairs"], a["duration"], a["churn"], a["node_churn"],
                 a["memory_sizes"]), ""]
    with open(os.path.join(REPO, "docs", "benchmarks-cluster.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
