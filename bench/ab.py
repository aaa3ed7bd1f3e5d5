#!/usr/bin/python3
"""Interleaved A/B: two isolation-gate binaries (or one binary under two
environments), alternating, on one corpus case, fresh process per run.

    bench/ab.py --a OLD/isolation-gate --b build-bench/isolation-gate \
        [--a-env MALLOC_ARENA_MAX=8] [--b-env ...] [--case pod-typical-RequireSetec] \
        [--conns 16] [--mode keep-alive] [--pairs 3] [--duration 5] [--with-nginx]

Needs what bench/run.sh prepares in build-bench/ (corpus, certificate,
no_resume.so; `BENCH_DURATION=1 bench/run.sh --quick` once is enough). Each
pair runs A then B (then nginx with --with-nginx); the order alternates
between pairs (A B, B A, ...) so drift in the machine's load falls on both.
Prints one line per run and a Markdown table with the medians, which is
what a performance commit message carries. Standard library only.
"""
import argparse
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def env_with(pairs):
    env = {k: v for k, v in os.environ.items() if k != "GIBSON_UNTRUSTED_EXEC"}
    for kv in pairs:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def main():
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="binary A (the old one)")
    ap.add_argument("--b", required=True, help="binary B (the new one)")
    ap.add_argument("--a-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--b-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--build", default=os.path.join(repo, "build-bench"))
    ap.add_argument("--case", default="pod-typical-RequireSetec")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--mode", default="keep-alive", choices=("keep-alive", "close-full", "close-resumed"))
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--with-nginx", action="store_true", help="run nginx after each pair too")
    ap.add_argument("--json", help="write every row here")
    args = ap.parse_args()

    cfg = bench.Cfg(repo, args.build, os.path.join(args.build, "ab"))
    cases = {c["name"]: c for c in json.load(open(os.path.join(args.build, "corpus", "cases.json")))}
    case = cases[args.case]

    variants = {"A": (os.path.abspath(args.a), env_with(args.a_env)),
                "B": (os.path.abspath(args.b), env_with(args.b_env))}
    expected = None
    if args.with_nginx:
        cfg.binary, cfg.server_env = variants["B"][0], variants["B"][1]
        expected = bench.capture_responses(cfg, [case])
        ngx = bench.Nginx(cfg)
        ngx.write_config(expected)
    rows = {"A": [], "B": [], "nginx": []}
    for i in range(args.pairs):
        order = ["A", "B"] if i % 2 == 0 else ["B", "A"]
        if args.with_nginx:
            order.append("nginx")
        for which in order:
            if which == "nginx":
                r = bench.measure(cfg, bench.Nginx(cfg), case, args.conns, args.mode, args.duration,
                                  expected_body=expected[case["name"]])
            else:
                cfg.binary, cfg.server_env = variants[which]
                r = bench.measure(cfg, bench.Ours(cfg, case["sandbox"]), case, args.conns, args.mode,
                                  args.duration)
            r["pair"] = i + 1
            rows[which].append(r)
            print(f"pair {i + 1} {which:<5} {r['rps']:9.0f} req/s  p99 {r['latency_us']['p99'] / 1000:6.2f} ms  "
                  f"cpu {r['cpu_us_per_req']:6.1f} us/review (user {r['cpu_user_us_per_req']:5.1f} sys "
                  f"{r['cpu_sys_us_per_req']:5.1f})  rss peak {r['rss_peak_kib'] / 1024:5.1f} MiB  "
                  f"errors {r['error_total']}  load {r['load1_before']:.1f}", file=sys.stderr, flush=True)

    def med(which, f):
        return statistics.median(f(r) for r in rows[which])
    print(f"\nA/B `{args.case}` c={args.conns} {args.mode}, {args.duration} s runs, {args.pairs} pairs "
          f"(A={args.a} {' '.join(args.a_env)}; B={args.b} {' '.join(args.b_env)})\n")
    print("| pair | A us/review | B us/review | A req/s | B req/s | A p99 ms | B p99 ms |"
          + (" nginx us/review | nginx req/s |" if args.with_nginx else ""))
    print("|---|---|---|---|---|---|---|" + ("---|---|" if args.with_nginx else ""))
    for i in range(args.pairs):
        a, b = rows["A"][i], rows["B"][i]
        line = (f"| {i + 1} | {a['cpu_us_per_req']:.1f} | {b['cpu_us_per_req']:.1f} | {a['rps']:,.0f} | "
                f"{b['rps']:,.0f} | {a['latency_us']['p99'] / 1000:.2f} | {b['latency_us']['p99'] / 1000:.2f} |")
        if args.with_nginx:
            n = rows["nginx"][i]
            line += f" {n['cpu_us_per_req']:.1f} | {n['rps']:,.0f} |"
        print(line)
    ca, cb = med("A", lambda r: r["cpu_us_per_req"]), med("B", lambda r: r["cpu_us_per_req"])
    ra, rb = med("A", lambda r: r["rps"]), med("B", lambda r: r["rps"])
    print(f"| median | {ca:.1f} | {cb:.1f} | {ra:,.0f} | {rb:,.0f} | "
          f"{med('A', lambda r: r['latency_us']['p99']) / 1000:.2f} | "
          f"{med('B', lambda r: r['latency_us']['p99']) / 1000:.2f} |"
          + (f" {med('nginx', lambda r: r['cpu_us_per_req']):.1f} | {med('nginx', lambda r: r['rps']):,.0f} |"
             if args.with_nginx else ""))
    for which in rows:
        if rows[which]:
            print(f"{which} medians: user {med(which, lambda r: r['cpu_user_us_per_req']):.1f} us, "
                  f"sys {med(which, lambda r: r['cpu_sys_us_per_req']):.1f} us per review")
    spread = max(r["cpu_us_per_req"] for r in rows["A"]) - min(r["cpu_us_per_req"] for r in rows["A"])
    print(f"\nB/A CPU per review {cb / ca:.3f}x, req/s {rb / ra:.3f}x (A's own spread over its runs: "
          f"{spread:.1f} us)")
    errors = sum(r["error_total"] for v in rows.values() for r in v)
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
