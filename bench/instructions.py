#!/usr/bin/python3
"""User-space instructions per request, counted by callgrind: a figure that
does not move when other work shares the machine (time does), so an A/B of
two builds can be read on a busy 2-core box. It counts only user space (the
kernel's share, about the same for both servers, is not in it).

    bench/instructions.py [--binary build-bench/isolation-gate] [--b OTHER/isolation-gate]
                          [--case pod-typical-RequireSetec] [--nginx] [--seconds 3,9]

Method: each server runs twice under `valgrind --tool=callgrind`, fresh each
time, with wrk (4 keep-alive connections) for the two durations; the figure
is (Ir of run 2 - Ir of run 1) / (requests of run 2 - requests of run 1), so
start-up, the 4 TLS handshakes and shutdown cancel out. Every process of a
server is counted (nginx's master and workers). Prints a Markdown table
with the total and the share by shared object. Needs build-bench/ as
bench/run.sh leaves it, and valgrind.
"""
import argparse
import collections
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def valgrind_argv(outdir):
    return ["valgrind", "--tool=callgrind", "--trace-children=yes", "--dump-instr=no",
            f"--callgrind-out-file={outdir}/cg.%p.out"]


class OursUnderCallgrind(bench.Ours):
    ready_timeout = 180.0

    def __init__(self, cfg, outdir):
        super().__init__(cfg, "available")
        self.outdir = outdir

    def argv(self):
        return valgrind_argv(self.outdir) + super().argv()


class NginxUnderCallgrind(bench.Nginx):
    def __init__(self, cfg, outdir):
        super().__init__(cfg)
        self.outdir = outdir

    def argv(self):
        return valgrind_argv(self.outdir) + super().argv()

    def start(self, ready_timeout=120.0):
        super().start(ready_timeout)


def by_object(outdir):
    """Ir per shared object, summed over every process's file."""
    totals = collections.Counter()
    for path in glob.glob(os.path.join(outdir, "cg.*.out")):
        r = subprocess.run(["callgrind_annotate", "--threshold=100", path], capture_output=True, text=True)
        for line in r.stdout.splitlines():
            m = re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+\S+?:\S.*\[(.+)\]\s*$", line)
            if m:
                totals[os.path.basename(m.group(2))] += int(m.group(1).replace(",", ""))
    return totals


def one_run(cfg, make_server, case, seconds):
    outdir = tempfile.mkdtemp(prefix="ig-cg-")
    os.chmod(outdir, 0o777)  # nginx's workers run as nobody and write their own files
    srv = make_server(outdir)
    srv.start()
    try:
        w = bench.run_wrk(cfg, srv.port(), case, 4, "keep-alive", seconds)
    finally:
        srv.stop()
    time.sleep(0.5)  # the files are written at exit
    return w["requests"], by_object(outdir)


def measure(cfg, make_server, case, durations):
    (n1, t1), (n2, t2) = (one_run(cfg, make_server, case, s) for s in durations)
    if n2 <= n1:
        raise RuntimeError(f"run 2 served {n2} requests, run 1 {n1}: lengthen --seconds")
    per = {obj: (t2[obj] - t1[obj]) / (n2 - n1) for obj in set(t1) | set(t2)}
    return {"requests": [n1, n2], "per_request": per, "total": sum(per.values())}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build-bench"))
    ap.add_argument("--binary", help="isolation-gate (default BUILD/isolation-gate)")
    ap.add_argument("--b", help="a second isolation-gate binary, for an A/B")
    ap.add_argument("--case", default="pod-typical-RequireSetec")
    ap.add_argument("--nginx", action="store_true", help="count nginx too")
    ap.add_argument("--seconds", default="3,9", help="the two wrk durations")
    args = ap.parse_args()
    durations = [int(s) for s in args.seconds.split(",")]
    cfg = bench.Cfg(REPO, args.build, os.path.join(args.build, "instructions"), binary=args.binary)
    cases = {c["name"]: c for c in json.load(open(os.path.join(args.build, "corpus", "cases.json")))}
    case = cases[args.case]
    rows = []
    binaries = [("isolation-gate" if not args.b else "A", cfg.binary)]
    if args.b:
        binaries.append(("B", os.path.abspath(args.b)))
    for label, binary in binaries:
        cfg.binary = binary
        rows.append((label, measure(cfg, lambda d: OursUnderCallgrind(cfg, d), case, durations)))
    if args.nginx:
        ngx_resp = bench.capture_responses(cfg, [case])
        def make_nginx(d):
            n = NginxUnderCallgrind(cfg, d)
            n.write_config(ngx_resp)
            return n
        rows.append(("nginx", measure(cfg, make_nginx, case, durations)))
    print(f"\nUser-space instructions per request, {case['name']}, 4 keep-alive connections "
          f"(bench/instructions.py --seconds {args.seconds}):\n")
    print("| server | instructions per request | of which (top 5 objects) | requests (run 1, run 2) |")
    print("|---|---|---|---|")
    for label, r in rows:
        top = sorted(r["per_request"].items(), key=lambda kv: -kv[1])[:5]
        parts = ", ".join(f"{k} {v/1000:.1f}k" for k, v in top)
        print(f"| {label} | {r['total']/1000:.1f}k | {parts} | {r['requests'][0]}, {r['requests'][1]} |")
    if args.b:
        a, b = rows[0][1]["total"], rows[1][1]["total"]
        print(f"\nB/A instructions per request: {b / a:.3f}x")


if __name__ == "__main__":
    main()
