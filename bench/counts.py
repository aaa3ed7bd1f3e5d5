#!/usr/bin/python3
"""What each server does per request, counted the same way for both
(issue 12, item 2: "find the time first"):

  - syscalls per request, by name: `perf stat -e 'syscalls:sys_enter_*'`
    attached to the server's processes for the load run;
  - heap calls and bytes, memcpy/memmove bytes, SSL_write/SSL_read calls and
    the TLS records written: bench/count/count.c (LD_PRELOAD), read from its
    shared counter files before and after the load run.

For each case: the server starts fresh with the shim, wrk warms it for 1 s,
the counters are read, wrk runs --duration seconds at --conns keep-alive
connections with perf attached, the counters are read again; every figure
is the difference divided by the requests wrk completed.

  bench/counts.py [--build build-bench] [--cases pod-typical-RequireSetec,...]
                  [--conns 16] [--duration 5] [--out build-bench/results]

Needs bench/run.sh's build-bench/ (corpus, certificate, nginx, wrk). Writes
OUT/counts.json (bench/report.py renders it) and prints a Markdown table.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# bench/count/count.c's counter layout.
FIELDS = ("malloc", "malloc_bytes", "free", "realloc", "realloc_bytes", "copy", "copy_bytes",
          "ssl_write", "ssl_write_bytes", "tls_records", "ssl_read", "ssl_read_bytes")


def build_shim(build):
    so = os.path.join(build, "count.so")
    src = os.path.join(REPO, "bench", "count", "count.c")
    if not os.path.exists(so) or os.path.getmtime(so) < os.path.getmtime(src):
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-Wall", "-o", so, src, "-ldl", "-lpthread"], check=True)
    return so


def read_counters(directory, pids):
    total = dict.fromkeys(FIELDS, 0)
    for pid in pids:
        path = os.path.join(directory, f"count.{pid}")
        if not os.path.exists(path):
            continue
        with open(path, "rb") as f:
            data = f.read(8 * len(FIELDS))
        if len(data) < 8 * len(FIELDS):
            continue
        for k, v in zip(FIELDS, struct.unpack(f"<{len(FIELDS)}Q", data)):
            total[k] += v
    return total


def perf_start(pids):
    argv = ["perf", "stat", "-x", ",", "--no-big-num", "-e", "syscalls:sys_enter_*",
            "-p", ",".join(str(p) for p in pids)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    # perf opens hundreds of tracepoints per thread before it counts, and a
    # SIGINT that arrives before its handler is set is lost: give it a moment
    # (the load run starts after, so nothing is missed).
    time.sleep(1.0)
    return proc


def perf_stop(proc):
    err = ""
    for _ in range(3):
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=20)
            break
        except subprocess.TimeoutExpired:
            continue
    else:
        proc.kill()
        proc.communicate()
        raise RuntimeError("perf stat did not stop on SIGINT")
    counts = {}
    for line in err.splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and parts[2].startswith("syscalls:sys_enter_"):
            try:
                n = int(float(parts[0]))
            except ValueError:
                continue  # "<not counted>"
            if n:
                counts[parts[2][len("syscalls:sys_enter_"):]] = n
    if not counts:
        raise RuntimeError("perf stat counted no syscalls:\n" + err[-2000:])
    return counts


def count_one(cfg, server, case, conns, duration, shim, expected_body=None):
    directory = tempfile.mkdtemp(prefix="ig-count-")
    env = dict(cfg.server_env)
    env.update(LD_PRELOAD=shim, IG_COUNT_DIR=directory)
    if isinstance(server, bench.Nginx):
        server.env = env
    else:
        cfg.server_env, saved = env, cfg.server_env
    try:
        server.start()
    finally:
        if not isinstance(server, bench.Nginx):
            cfg.server_env = saved
    try:
        pids = server.pids()
        code, body = bench.curl(cfg, server.port(), case)
        problem = bench.check_decision(case, code, body) if expected_body is None else (
            None if code == 200 and body == expected_body else "body differs from isolation-gate's")
        if problem:
            raise RuntimeError(f"{server.name} {case['name']}: {problem}")
        bench.run_wrk(cfg, server.port(), case, conns, "keep-alive", 1)  # warm-up
        c0 = read_counters(directory, pids)
        perf = perf_start(pids)
        w = bench.run_wrk(cfg, server.port(), case, conns, "keep-alive", duration)
        syscalls = perf_stop(perf)
        c1 = read_counters(directory, pids)
    finally:
        server.stop()
        shutil.rmtree(directory, ignore_errors=True)
    n = max(w["requests"], 1)
    row = {"server": server.name, "case": case["name"], "conns": conns, "requests": w["requests"],
           "errors": sum(w["errors"].values()),
           "syscalls": {k: v / n for k, v in sorted(syscalls.items(), key=lambda kv: -kv[1])},
           "syscalls_total": sum(syscalls.values()) / n}
    for k in FIELDS:
        row[k] = (c1[k] - c0[k]) / n
    return row


def table(rows):
    out = ["| case | server | syscalls | of which (top 5) | malloc calls | heap bytes | realloc | "
           "memcpy/memmove bytes | SSL_write calls | TLS records | SSL_read calls | TLS bytes read |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(r["syscalls"].items())[:5])
        out.append(f"| {r['case']} | {r['server']} | {r['syscalls_total']:.2f} | {top} | {r['malloc']:.1f} | "
                   f"{r['malloc_bytes']:,.0f} | {r['realloc']:.1f} | {r['copy_bytes']:,.0f} | "
                   f"{r['ssl_write']:.2f} | {r['tls_records']:.2f} | {r['ssl_read']:.2f} | "
                   f"{r['ssl_read_bytes']:,.0f} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(REPO, "build-bench"))
    ap.add_argument("--binary", help="isolation-gate binary (default BUILD/isolation-gate)")
    ap.add_argument("--cases", default="pod-typical-RequireSetec,pod-large-RequireSetec")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--out", help="directory for counts.json (default BUILD/results)")
    args = ap.parse_args()

    cfg = bench.Cfg(REPO, args.build, args.out or os.path.join(args.build, "results"), args.binary)
    shim = build_shim(args.build)
    by_name = {c["name"]: c for c in json.load(open(os.path.join(args.build, "corpus", "cases.json")))}
    cases = [by_name[n] for n in args.cases.split(",")]
    responses = bench.capture_responses(cfg, cases)
    ngx = bench.Nginx(cfg)
    ngx.write_config(responses)
    rows = []
    for case in cases:
        for server in (bench.Ours(cfg, case["sandbox"]), bench.Nginx(cfg)):
            row = count_one(cfg, server, case, args.conns, args.duration, shim,
                            expected_body=responses[case["name"]] if isinstance(server, bench.Nginx) else None)
            rows.append(row)
            print(f"counts: {case['name']} {server.name}: {row['syscalls_total']:.2f} syscalls, "
                  f"{row['malloc']:.1f} mallocs, {row['copy_bytes']:,.0f} bytes copied, "
                  f"{row['tls_records']:.2f} records per request", file=sys.stderr, flush=True)
    result = {"conns": args.conns, "duration_s": args.duration, "rows": rows,
              "command": " ".join(["bench/counts.py"] + sys.argv[1:])}
    with open(os.path.join(cfg.out, "counts.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(table(rows))
    return 1 if any(r["errors"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
