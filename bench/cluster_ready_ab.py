#!/usr/bin/python3
"""Interleaved A/B of start-to-ready at the default client limits (5 qps / burst 10):
10,000 Components + 1,000 Nodes on the test API server, --kube-list-page-size 500
(client-go's page) against the default 5000, a fresh gate per run.

  bench/cluster_ready_ab.py [PAIRS]     # BENCH_PORT_BASE moves the ports

Uses bench/cluster.py's fixture (build-bench/: the binary and the certificate).
"""
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import cluster  # noqa: E402


def main():
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    fx = cluster.Fixture(None)
    api, kubeconfig = fx.api(10000, 1000, corpus=False)
    runs = {"500": [], "5000": []}
    try:
        for _ in range(pairs):
            for page in ("500", "5000"):
                proc, ms = fx.gate(kubeconfig, ["--kube-list-page-size", page])
                bench.terminate(proc)
                runs[page].append(ms)
    finally:
        api.stop()
    for page, label in (("500", "page 500 (client-go)"), ("5000", "page 5000 (default)")):
        print("%-22s median %.0f ms %s" % (label, statistics.median(runs[page]), ["%.0f" % x for x in runs[page]]))
    print("loadavg", open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
