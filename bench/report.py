#!/usr/bin/python3
"""Writes docs/benchmarks.md from bench/bench.py's results.json and
micro_bench's JSON output. Standard library only. Run by bench/run.sh."""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess


def sh(argv):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return (r.stdout + r.stderr).strip()
    except OSError:
        return "?"


def machine():
    cpu = "?"
    flags = ""
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and cpu == "?":
            cpu = line.split(":", 1)[1].strip()
    mem_kib = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    mhz = sh(["sh", "-c", "grep -m1 'cpu MHz' /proc/cpuinfo | cut -d: -f2"]).strip()
    return {"nproc": os.cpu_count(), "cpu": cpu, "mhz": mhz, "kernel": platform.release(),
            "memory": f"{mem_kib / 1024 / 1024:.1f} GiB", "os": sh(["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME"]),
            "flags": flags}


def versions():
    return {
        "nginx": sh(["nginx", "-v"]).replace("nginx version: ", ""),
        "wrk": sh(["sh", "-c", "wrk -v 2>&1 | head -1"]).split(" Copyright")[0],
        "compiler": sh(["sh", "-c", "c++ --version | head -1"]),
        "openssl": sh(["openssl", "version"]),
        "google benchmark": sh(["sh", "-c", "dpkg-query -W -f='${Version}' libbenchmark-dev"]),
        "nlohmann-json": sh(["sh", "-c", "dpkg-query -W -f='${Version}' nlohmann-json3-dev"]),
        "boost": sh(["sh", "-c", "dpkg-query -W -f='${Version}' libboost-dev"]),
        "perf": sh(["sh", "-c", "perf version 2>/dev/null || echo none"]),
    }


def ms(us):
    return f"{us / 1000:.2f}"


def mib(kib):
    return f"{kib / 1024:.1f}"


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}x"


def ratio(a, b):
    return a / b if b else None


MODE_NAMES = {"keep-alive": "keep-alive", "close-full": "new conn, full handshake",
              "close-resumed": "new conn, resumed (wrk default)"}


def row_lines(group, label_cols):
    o, n = group["ours"], group["nginx"]
    out = []
    for srv in (o, n):
        lat = srv["latency_us"]
        out.append(label_cols + [srv["server"], f"{srv['rps']:,.0f}", ms(lat["p50"]), ms(lat["p99"]),
                                 ms(lat["p99.9"]), f"{srv['cpu_us_per_req']:.1f}", mib(srv["rss_idle_kib"]),
                                 mib(srv["rss_peak_kib"]), str(srv["error_total"])])
    lo, ln = o["latency_us"], n["latency_us"]
    out.append([""] * len(label_cols) + [
        "*ratio*", fmt_ratio(ratio(o["rps"], n["rps"])), fmt_ratio(ratio(lo["p50"], ln["p50"])),
        fmt_ratio(ratio(lo["p99"], ln["p99"])), fmt_ratio(ratio(lo["p99.9"], ln["p99.9"])),
        fmt_ratio(ratio(o["cpu_us_per_req"], n["cpu_us_per_req"])),
        fmt_ratio(ratio(o["rss_idle_kib"], n["rss_idle_kib"])),
        fmt_ratio(ratio(o["rss_peak_kib"], n["rss_peak_kib"])), ""])
    return out


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


RESULT_HEADER = ["server", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "CPU us/review", "RSS idle MiB",
                 "RSS peak MiB", "errors"]


def micro_table(micro):
    if not micro:
        return "(microbenchmarks not run)"
    by = {}
    unit_scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}
    for b in micro.get("benchmarks", []):
        if b.get("run_type") == "aggregate" or b.get("error_occurred"):
            continue
        name = b["name"]
        by[name] = b["cpu_time"] * unit_scale[b.get("time_unit", "ns")]
    stages = ["decode", "facts", "decide", "patch", "encode", "review", "serve"]
    cases = []
    for name in by:
        if name.startswith("serve/"):
            cases.append(name.split("/", 1)[1])
    rows = []
    for c in cases:
        rows.append([c] + [f"{by[s + '/' + c]:.2f}" if s + "/" + c in by else "" for s in stages])
    text = table(["case"] + [s + " us" for s in stages], rows)
    extra = []
    if "policy_decide" in by:
        extra.append(f"- `policy::decide` alone: {by['policy_decide'] * 1000:.1f} ns.")
    cat = {k.rsplit("/", 1)[1]: v for k, v in by.items() if k.startswith("serve_catalog/")}
    if cat:
        parts = ", ".join(f"{int(k):,} Components: {v:.2f} us" for k, v in sorted(cat.items(), key=lambda kv: int(kv[0])))
        extra.append(f"- `Webhook::serve` on pod-typical-RequireSetec with {parts}.")
    ctx = micro.get("context", {})
    extra.append(f"- Google Benchmark context: {ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz, "
                 f"library built as {ctx.get('library_build_type', '?')} (the Debian package; it does not "
                 f"affect the code measured, which is ours, built Release).")
    return text + "\n\n" + "\n".join(extra)


CATEGORIES = [
    ("kernel (TCP, syscalls, wakeups; pvm_* is the hypervisor's paravirt IRQ path)",
     lambda d, s: d.startswith("[kernel") or s.startswith("[k]")),
    ("TLS (libcrypto/libssl)", lambda d, s: "libcrypto" in d or "libssl" in d),
    ("malloc/free", lambda d, s: re.search(r"\b(_?_?libc_)?(malloc|free|calloc|realloc|cfree)\b|_int_malloc|_int_free|"
                                           r"malloc_consolidate|tcache|operator new|operator delete|sysmalloc|"
                                           r"unlink_chunk|arena_get", s) is not None),
    ("JSON parse (request body)",
     lambda d, s: re.search(r"Scanner|json_projection|lexer|parser|json_sax|sax_dom|json_nesting_depth|scan_string|"
                            r"scan_number|get_codepoint|decode_review|string_member", s) is not None),
    ("JSON values (nlohmann construct/destroy/copy/lookup)",
     lambda d, s: re.search(r"nlohmann|basic_json|json_value|_Rb_tree|std::map|ordered_map", s) is not None
     and re.search(r"serializer|dump", s) is None),
    ("JSON dump and base64 (response, patch)", lambda d, s: re.search(r"serializer|dump|base64", s) is not None),
    ("admission rules (facts, admit_pod, review, encode)", lambda d, s: re.search(r"ig::(admission|model|policy)::", s) is not None),
    ("transport (ig::server, Boost.Asio/Beast, shared_ptr)",
     lambda d, s: re.search(r"boost::|ig::server::|_Sp_counted|__shared_count", s) is not None),
    ("libc syscall wrappers, locks, clock", lambda d, s: "libc" in d and re.search(
        r"sendmsg|recvmsg|epoll|pthread|lll_|futex|clock_gettime|errno|write|read", s) is not None),
    ("memcpy/memmove/strings", lambda d, s: re.search(r"mem(cpy|move|set|cmp)|str(len|cmp)|__memcmp|basic_string|"
                                                       r"operator\+|tolower|localeconv", s) is not None),
]


def categorise(symbols):
    totals = {}
    for pct, text in symbols["all"]:
        m = re.match(r"(\S+)\s+(\[[.k]\])\s+(.*)$", text)
        dso, kind, sym = (m.group(1), m.group(2), m.group(3)) if m else ("", "", text)
        if kind == "[k]":
            dso = "[kernel" + dso
        cat = "other"
        for name, pred in CATEGORIES:
            if pred(dso, sym):
                cat = name
                break
        totals[cat] = totals.get(cat, 0) + pct
    return sorted(totals.items(), key=lambda kv: -kv[1])


def perf_section(perf):
    if not perf:
        return "(perf not available: no profile)"
    out = []
    for mode, rep in perf.items():
        if not rep:
            continue
        if "error" in rep:
            out.append(f"- {mode}: perf failed: `{rep['error']}`")
            continue
        out.append(f"**{MODE_NAMES.get(mode, mode)}** — `{rep['command']}`, self time (no children):\n")
        if rep.get("categories"):
            out.append(table(["where", "% of samples"], [[c, f"{p:.1f}"] for c, p in rep["categories"]]))
            out.append("")
        out.append(table(["% self", "DSO", "symbol"],
                         [[f"{p:.1f}", *split_sym(t)] for p, t in rep["symbols"][:20]]))
        out.append("")
    return "\n".join(out)


def short_symbol(sym):
    """Drops perf's ' - -' suffix, nlohmann's ABI namespace and template arguments."""
    sym = re.sub(r"(\s+-)+\s*$", "", sym).replace("json_abi_v3_11_2::", "").replace("std::__cxx11::", "std::")
    out, depth = [], 0
    for ch in sym:
        if ch == "<":
            if depth == 0:
                out.append("<")
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append("...>")
        elif depth == 0:
            out.append(ch)
    sym = "".join(out)
    sym = re.sub(r"\((?:[^()]|\([^()]*\))*\)", "()", sym)  # argument lists
    return sym


def split_sym(text):
    m = re.match(r"(\S+)\s+\[[.k]\]\s+(.*)$", text)
    if not m:
        return ["", text.replace("|", "\\|")]
    sym = short_symbol(m.group(2))
    if len(sym) > 120:
        sym = sym[:117] + "..."
    return [m.group(1), "`" + sym.replace("|", "\\|").replace("`", "'") + "`"]


def verdict(ok):
    return "PASS" if ok else "**MISS**"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--total-seconds", type=int, default=0)
    ap.add_argument("--args", default="")
    a = ap.parse_args()
    res = json.load(open(os.path.join(a.results, "results.json")))
    micro_path = os.path.join(a.results, "micro.json")
    micro = json.load(open(micro_path)) if os.path.exists(micro_path) else None
    m, v = machine(), versions()
    commit = sh(["git", "-C", a.repo, "rev-parse", "--short", "HEAD"])
    dirty = sh(["git", "-C", a.repo, "status", "--porcelain", "--untracked-files=no", "--", "src", "CMakeLists.txt"])
    untracked_src = sh(["git", "-C", a.repo, "status", "--porcelain", "--", "src"])
    changed = sorted({ln[3:].strip() for ln in (dirty + "\n" + untracked_src).splitlines() if ln.strip()})
    tree = commit + (f" plus uncommitted changes in {', '.join(f'`{c}`' for c in changed)}" if changed else "")

    rows = res["rows"]
    find = lambda case, conns, mode: next((g for g in rows if g["case"] == case and g["conns"] == conns
                                           and g["mode"] == mode), None)
    T = "pod-typical-RequireSetec"
    ka16, ka64 = find(T, 16, "keep-alive"), find(T, 64, "keep-alive")
    full16, res16 = find(T, 16, "close-full"), find(T, 16, "close-resumed")
    large = find("pod-large-RequireSetec", 16, "keep-alive")

    # ------------------------------------------------------------ targets
    targets = []

    def t(name, measured, limit, ok):
        targets.append([name, measured, limit, "n/a" if ok is None else verdict(ok)])

    # Every target is a ratio to nginx measured in the same run (or an absolute limit where stated).
    for g, n in ((ka16, 16), (ka64, 64)):
        if g:
            r = ratio(g["ours"]["rps"], g["nginx"]["rps"])
            t(f"req/s, {n} keep-alive connections, vs nginx",
              f"{g['ours']['rps']:,.0f} vs {g['nginx']['rps']:,.0f} = {r:.2f}x", ">= 0.8x", r >= 0.8)
            r = ratio(g["ours"]["latency_us"]["p99"], g["nginx"]["latency_us"]["p99"])
            t(f"p99, {n} keep-alive connections, vs nginx",
              f"{ms(g['ours']['latency_us']['p99'])} ms vs {ms(g['nginx']['latency_us']['p99'])} ms = {r:.2f}x",
              "<= 1.5x", r <= 1.5)
    if ka16:
        c, nc = ka16["ours"]["cpu_us_per_req"], ka16["nginx"]["cpu_us_per_req"]
        r = ratio(c, nc)
        t("server CPU per review, typical pod (16 keep-alive), vs nginx", f"{c:.1f} us vs {nc:.1f} us = {r:.2f}x",
          "<= 1.5x", r <= 1.5)
    if large:
        c, nc = large["ours"]["cpu_us_per_req"], large["nginx"]["cpu_us_per_req"]
        r = ratio(c, nc)
        t("server CPU per review, large 200 KB pod (16 keep-alive), vs nginx",
          f"{c:.1f} us vs {nc:.1f} us = {r:.2f}x", "<= 2.5x", r <= 2.5)
    sized = body_size_rows(res, find)
    flat = flatness(sized)
    if flat:
        t("cost per KB of body flat from 1 KB to 1 MB (marginal CPU per KB, 200 KB -> 1 MB vs 8 -> 64 KB)",
          f"{flat['last']:.2f} vs {flat['ref']:.2f} us/KB = {flat['r']:.2f}x", "<= 1.5x", flat["r"] <= 1.5)
    idle = [g["ours"]["rss_idle_kib"] for g in rows]
    if idle:
        t("RSS idle (largest over all fresh starts)", f"{mib(max(idle))} MiB", "<= 12 MiB", max(idle) <= 12 * 1024)
    if ka64:
        p = ka64["ours"]["rss_peak_kib"]
        t("RSS peak at 64 connections", f"{mib(p)} MiB (nginx {mib(ka64['nginx']['rss_peak_kib'])} MiB)", "<= 24 MiB", p <= 24 * 1024)
    if res.get("ready"):
        r = res["ready"]["median_ms"]
        t("ready: start to first successful /readyz (median of 5)", f"{r:.1f} ms", "<= 50 ms", r <= 50)
    cat = res.get("catalog")
    cat_summary = None
    if cat:
        runs = cat["runs"]
        small = [r for r in runs if r["catalog"] == "10"]
        big = [r for r in runs if r["catalog"] == "100000"]
        med = lambda rs, f: statistics.median(f(r) for r in rs)
        p50s, p50b = med(small, lambda r: r["latency_us"]["p50"]), med(big, lambda r: r["latency_us"]["p50"])
        p99s, p99b = med(small, lambda r: r["latency_us"]["p99"]), med(big, lambda r: r["latency_us"]["p99"])
        rpss, rpsb = med(small, lambda r: r["rps"]), med(big, lambda r: r["rps"])
        rss_s, rss_b = med(small, lambda r: r["rss_idle_kib"]), med(big, lambda r: r["rss_idle_kib"])
        per = (rss_b - rss_s) * 1024 / (100000 - 10)
        cat_summary = dict(p50s=p50s, p50b=p50b, p99s=p99s, p99b=p99b, rpss=rpss, rpsb=rpsb, rss_s=rss_s,
                           rss_b=rss_b, per=per)
        t("100,000 Components: decision latency (p50, 16 keep-alive) vs 10 Components",
          f"{ms(p50b)} ms vs {ms(p50s)} ms = {p50b / p50s:.2f}x", "<= 1.10x", p50b / p50s <= 1.10)
        t("100,000 Components: memory per Component", f"{per:.0f} bytes", "<= 1024 bytes", per <= 1024)

    # ------------------------------------------------------------ document
    L = []
    w = L.append
    try:  # the date of the run (results.json), not of this rendering
        date = datetime.datetime.fromisoformat(res["started"]).strftime("%Y-%m-%d %H:%M UTC")
    except (KeyError, ValueError):
        date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    w("# Benchmarks\n")
    w(f"Generated by `bench/run.sh{(' ' + a.args) if a.args else ''}` on {date}, tree {tree}. "
      "Do not edit by hand: rerun the command (it rewrites this file). "
      f"The whole run took {a.total_seconds // 60} min {a.total_seconds % 60} s "
      f"(load runs {res.get('elapsed_s', 0) / 60:.1f} min, {res['duration_s']} s per wrk run).\n")
    w("The target is a webhook whose cost is close to the cost of TLS itself (\"Targets\" below). The floor is nginx from "
      "Debian answering the same POST, over the same loopback TLS, with the same certificate, TLS settings, "
      "bodies and connection counts, and a fixed 200 JSON body: isolation-gate's own response to that case.\n")

    w("## Machine\n")
    w(table(["cores", "CPU", "kernel", "memory", "OS", "load average (1 min) at start / end"],
            [[m["nproc"], f"{m['cpu']} ({m['mhz']} MHz)", m["kernel"], m["memory"], m["os"],
              f"{res['loadavg_start'][0]:.2f} / {res.get('loadavg_end', [0])[0]:.2f}"]]))
    w("\nThe load generator (wrk) runs on the same 2 cores as the server it measures, by design: "
      "every figure is the server's share of a machine it splits with its client. Each row also records the "
      "1-minute load average before and after it (in `build-bench/results/results.json`); a load well above 2 at "
      "the start means something else was running and the figures are low for both servers.\n")
    if res["loadavg_start"][0] > 2.5 or res.get("loadavg_end", [0])[0] > 4:
        w(f"**This run shared the machine**: the 1-minute load average was {res['loadavg_start'][0]:.1f} at the "
          f"start and {res.get('loadavg_end', [0])[0]:.1f} at the end, on 2 cores (wrk and one server alone keep "
          f"it near 2-3). Other work competed for the cores during some rows: absolute figures are lower "
          f"and noisier than on an idle machine, for both servers; the ratios and the CPU per review are the "
          f"figures to read, and a rerun may move verdicts that sit near a limit.\n")
    w("## Versions\n")
    w(table(["component", "version"], [[k, f"`{val}`"] for k, val in v.items()] +
            [["isolation-gate build", "`-DCMAKE_BUILD_TYPE=Release` (`-O3 -DNDEBUG`), GCC"]]))

    w("\n## Commands\n")
    w("One command runs everything from a clean checkout and rewrites this file:\n")
    w("```sh\nbench/run.sh            # BENCH_DURATION=10 (seconds per wrk run) by default\n```\n")
    w("What it runs, in order:\n")
    w("```sh\nscripts/install-deps.sh --bench      # wrk, nginx-light, libbenchmark-dev... (idempotent)\n"
      "cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DIG_BUILD_BENCH=ON -DIG_BUILD_TESTS=OFF \\\n"
      "      -DCMAKE_CXX_FLAGS=\n"
      "ninja -C build-bench isolation-gate micro_bench\n"
      "cc -shared -fPIC -O2 -o build-bench/no_resume.so bench/wrk/no_resume.c -ldl\n"
      "python3 bench/corpus/gen.py --out build-bench/corpus\n"
      "python3 bench/corpus/gen.py --catalog build-bench/catalog-100k --count 99990   # + the corpus' 10\n"
      "build-bench/isolation-gate certs --out-dir build-bench/bench-certs --ip 127.0.0.1 --dns localhost\n"
      "build-bench/micro_bench --benchmark_min_time=0.2 --benchmark_out=build-bench/results/micro.json\n"
      "python3 bench/bench.py ...           # the load runs below\n"
      "python3 bench/report.py ...          # this file\n```\n")
    w("The servers (each row starts a fresh process of each):\n")
    w("```sh\n" + res["ours_command"].replace(" --", " \\\n    --") + "\n"
      "# Deny and AllowInProcess rows: the same with --sandbox unavailable\n"
      + res["nginx_command"].replace(a.repo + "/", "") + "    # runs as a non-daemon; config below\n```\n")
    ex = [g for g in rows if g["case"] == T]
    w("wrk (one per row and server; `?case=` selects nginx's fixed body, isolation-gate ignores query strings "
      "as it must for the API server's `?timeout=10s`):\n")
    w("```sh\n" + "\n".join(g["ours"]["wrk_command"] for g in ex) + "\n```\n")
    w("<details><summary>nginx.conf (the per-case response map shortened)</summary>\n")
    conf = res["nginx_conf"].replace(a.repo + "/", "")
    conf = re.sub(r"(map \$arg_case \$ig_response \{\n    default[^\n]*\n)(?:    [^\n]*\n)+(  \})",
                  r"\1    pod-typical-RequireSetec '<isolation-gate's response to that case>';\n    ...\n\2",
                  conf)
    w("```nginx\n" + conf + "```\n</details>\n")

    w("## Method\n")
    hs = res.get("handshakes", {})
    tls = res.get("tls", {})
    tls_line = "; ".join(f"{k}: {d['protocol']}, {d['cipher']}, key exchange {d['group']}, {d['signature']} "
                         f"certificate" for k, d in tls.items())
    w(f"- **TLS.** Both servers load the same fixed certificate (ECDSA P-256, made once by `isolation-gate certs` "
      f"into `build-bench/bench-certs/`) and use the same settings: TLS 1.2 minimum, TLS 1.3 negotiated when "
      f"offered, the same TLS 1.2 ECDHE+AEAD ciphers, ECDHE groups X25519:P-256:P-384, server-side session "
      f"cache and tickets. Negotiated with OpenSSL's client (wrk uses the same library): {tls_line}.")
    w("- **Bodies.** nginx must read the whole body into memory as isolation-gate does: `return 200` alone "
      "answers as soon as the headers are in and discards the body afterwards (`ngx_http_discard_request_body`; "
      "with a 200 KB body nginx logged a request length of 167 bytes at the time of its answer). The config "
      "therefore reads the body with the mirror module (`mirror_request_body on`, 3 MiB single in-memory buffer, "
      "`client_max_body_size 3m`) before the content phase, and answers from `error_page ... =200 @respond`. "
      "Its access log in the handshake check below shows the full request length for every request"
      + (f" (smallest logged: {min(d['min_request_length'] for d in hs.values())} bytes for an "
         f"{next(c['bytes'] for c in res['cases'] if c['name'] == T)}-byte body)." if hs else ".")
      + " For comparison, the plain `return 200` (discarding) variant is measured once too.")
    w("- **Responses.** Before the load, isolation-gate's response to every case is fetched with curl and "
      "checked against the expected decision (`allowed`, a patch or not, the `decision` audit annotation); that "
      "exact body is nginx's fixed answer for the case. Before each run, one request to the fresh server is "
      "checked again (isolation-gate: the decision; nginx: byte-identical body). wrk counts non-2xx answers "
      "and socket errors; the tables show their sum, which must be 0.")
    if hs:
        f, r_ = hs.get("close-full", {}), hs.get("close-resumed", {})
        w(f"- **New connection per request.** The wrk script sends `Connection: close`; both servers close "
          f"after the response and wrk reconnects. Checked against nginx's access log "
          f"(`$connection_requests`, `$ssl_session_reused`) in a 2 s run at 16 connections: wrk as shipped "
          f"made {r_.get('connections')} connections for {r_.get('requests_logged')} requests (at most "
          f"{r_.get('max_requests_per_connection')} per connection) and **resumed** {r_.get('resumed')} of the "
          f"handshakes (full: {r_.get('full')}, one per connection slot): wrk reuses its `SSL` object through "
          f"`SSL_clear`, which keeps the session, so every reconnect offers it (TLS 1.3 PSK with ECDHE: no "
          f"certificate, no signature). The API server's webhook client (Go, no session cache) never resumes, "
          f"so the target row uses `bench/wrk/no_resume.so` (LD_PRELOAD: drops the session after `SSL_clear`): "
          f"{f.get('connections')} connections, {f.get('full')} full handshakes, {f.get('resumed')} resumed. "
          f"Both modes are in the table. In these modes wrk's latency runs from the request's first byte to the "
          f"response, so it excludes the TCP and TLS handshake; requests/s and CPU include it.")
    w("- **CPU per review** = (utime + stime of the server's processes from `/proc/PID/stat`, delta over the "
      "wrk run, in clock ticks of 10 ms, converted to microseconds) / requests wrk completed. For nginx the sum "
      "over the master and both workers. It counts every thread of the process (I/O threads, the certificate "
      "watcher), never wall time.")
    w("- **RSS.** Idle: `VmRSS` of the fresh process, ready and before any request. Peak: the largest `VmRSS` "
      "sampled every 100 ms during the run (and never below it: `VmHWM` is recorded too). For nginx, the sum "
      "over master and workers (shared pages counted in each, which favours isolation-gate slightly).")
    w("- **Threads.** isolation-gate runs 2 I/O threads (the default, one per core); nginx 2 worker processes. "
      f"wrk uses 1 thread for 1 connection and 2 threads otherwise. Keep-alive rows have no per-connection "
      f"request limit on either server.")
    w("- **Ready time**: from just before `fork/exec` of `isolation-gate serve --local` (10 Components) to the "
      "first 200 from `GET /readyz` on the probe port, polled every 2 ms over plain HTTP; 5 starts, median.")
    w("- **100,000 Components**: 99,990 generated Components (1,000 files of 100 YAML documents, 1,000 "
      "namespaces) plus the 10, loaded by `--components`. Runs alternate 10 / 100,000 / 10 / 100,000 "
      "(fresh server each) on the typical pod at 16 keep-alive connections; the medians are compared. Memory "
      "per Component = (idle RSS with 100,000 - idle RSS with 10) / 99,990.\n")

    w("## Targets\n")
    w("For the typical pod (8 KB) on `/mutate/pods` with RequireSetec, on this 2-core machine with wrk on the same cores; "
      "every ratio is to nginx measured in the same run.\n")
    w(table(["target", "measured", "limit", "verdict"], targets))

    w("\n## Results\n")
    w("Figures are per row; *ratio* is isolation-gate / nginx (for req/s higher is better, for the rest lower). "
      "Latencies from wrk (`--latency`; p99.9 from the script's `done()`), in milliseconds.\n")
    w(f"### Typical pod, RequireSetec, `/mutate/pods`: connections\n")
    lines = []
    for g in rows:
        if g["case"] == T:
            lines += row_lines(g, [str(g["conns"]), MODE_NAMES.get(g["mode"], g["mode"])])
    w(table(["conns", "mode"] + RESULT_HEADER, lines))
    w("\n### Every case, 16 keep-alive connections\n")
    w("Sizes are the AdmissionReview body. RequireSetec rows run against `--sandbox available`, Deny and "
      "AllowInProcess rows against `--sandbox unavailable` (untrusted and trusted Component). Component rows "
      "are `/validate/components` reviews of an untrusted, a trusted and an invalid (denied) Component.\n")
    lines = []
    sizes = {c["name"]: c for c in res["cases"]}
    for g in rows:
        if g["conns"] == 16 and g["mode"] == "keep-alive":
            c = sizes[g["case"]]
            lines += row_lines(g, [g["case"], c["endpoint"], f"{c['bytes']:,}"])
    w(table(["case", "endpoint", "bytes"] + RESULT_HEADER, lines))
    w(body_size_section(res, find))
    nd = res.get("nginx_discard")
    if nd:
        n = nd["nginx"]
        base = ka16["nginx"] if ka16 else None
        w(f"\nnginx with a plain `return 200` (answers before reading the body, then discards it), typical pod, "
          f"16 keep-alive connections: {n['rps']:,.0f} req/s, p99 {ms(n['latency_us']['p99'])} ms, "
          f"{n['cpu_us_per_req']:.1f} us CPU per request"
          + (f" (the body-reading config above: {base['rps']:,.0f} req/s, {base['cpu_us_per_req']:.1f} us)" if base else "")
          + f"; isolation-gate / this = {nd['ours_rps'] / n['rps']:.2f}x req/s.")

    w("\n### Ready time\n")
    if res.get("ready"):
        r = res["ready"]
        w(f"Start to first successful `/readyz`, local mode, 10 Components: median **{r['median_ms']:.1f} ms** "
          f"(runs: {', '.join(f'{x:.1f}' for x in r['runs_ms'])} ms). The server's own `startup_ms` log field "
          f"(process start to listening, excluding exec and dynamic loading): "
          f"{', '.join('?' if x is None else f'{x:.1f}' for x in r['logged_startup_ms'])} ms.")
    if cat and cat_summary:
        s = cat_summary
        w("\n### 100,000 Components\n")
        lines = []
        for r in cat["runs"]:
            lines.append([f"{int(r['catalog']):,}", f"{r['ready_ms'] / 1000:.2f}", f"{r['rps']:,.0f}",
                          ms(r["latency_us"]["p50"]), ms(r["latency_us"]["p99"]), ms(r["latency_us"]["p99.9"]),
                          f"{r['cpu_us_per_req']:.1f}", mib(r["rss_idle_kib"]), mib(r["rss_peak_kib"]),
                          str(r["error_total"])])
        w(table(["Components", "ready s", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "CPU us/review",
                 "RSS idle MiB", "RSS peak MiB", "errors"], lines))
        w(f"\nMedians, 100,000 vs 10: p50 {ms(s['p50b'])} vs {ms(s['p50s'])} ms ({s['p50b'] / s['p50s']:.2f}x), "
          f"p99 {ms(s['p99b'])} vs {ms(s['p99s'])} ms ({s['p99b'] / s['p99s']:.2f}x), req/s {s['rpsb']:,.0f} vs "
          f"{s['rpss']:,.0f}; idle RSS {mib(s['rss_b'])} vs {mib(s['rss_s'])} MiB = **{s['per']:.0f} bytes per "
          f"Component** ({cat['files']} files).")

    w("\n## Microbenchmarks\n")
    w("Google Benchmark (`build-bench/micro_bench`, source `bench/micro/micro_bench.cpp`), CPU time per call in "
      "microseconds, one thread, no HTTP or TLS. decode = `admission::decode_review`; facts = "
      "`model::locate_pod` + `read_pod_facts`; decide = `admission::admit_pod` without a patch (catalog "
      "lookup, `policy::decide`, messages, audit); patch = `admit_pod(Stage::Mutate)` and the dump of the "
      "patch; encode = `admission::encode_response`; review = `Webhook::review` on a decoded request; serve = "
      "`Webhook::serve`, the whole handler (routing, decode, review, encode, metrics, one body copy).\n")
    w(micro_table(micro))

    w(counts_section(a.results))
    w("\n## Where the time goes\n")
    perf = res.get("perf")
    if perf:
        for mode, rep in perf.items():
            if rep and "symbols" in rep:
                rep["categories"] = categorise({"all": rep["symbols"]})
    w(floor_section(res, find))
    w(rss_mapping_section(res, find))
    w("\n### Profiles\n")
    w("`perf record -g` of the isolation-gate process under wrk (typical pod, 16 connections), samples by "
      "symbol (self time), and the same grouped by where they fall. Percentages are of the server's samples "
      "only; the groups add up the symbols of at least 0.05% each, the tables show the top 20.\n")
    w(perf_section(perf))
    w(closing_note(rows, micro, perf, ka16, large, targets, res.get("floor") or []))
    # The extrapolation is written by hand (it is arithmetic on these figures
    # and on stated assumptions): copied in as it stands.
    scale = os.path.join(a.repo, "docs", "benchmarks-scale.md")
    if os.path.exists(scale):
        w("\n" + open(scale).read().rstrip("\n"))
    w("")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write("\n".join(L) + "\n")


def body_size_rows(res, find):
    """The body-size series rows (16 keep-alive), smallest first, each with its case."""
    sizes = {c["name"]: c for c in res["cases"]}
    out = []
    for name in res.get("body_size", []):
        g = find(name, 16, "keep-alive")
        if g and name in sizes:
            out.append((sizes[name], g))
    return sorted(out, key=lambda cg: cg[0]["bytes"])


def flatness(sized):
    """Marginal CPU per KB between consecutive sizes (isolation-gate). Flat: the last step's (200 KB -> 1 MB)
    is within 1.5x of the 8 -> 64 KB one. None when the series is incomplete (e.g. --quick)."""
    kb = [(c["bytes"] / 1024, g["ours"]["cpu_us_per_req"]) for c, g in sized]
    if len(kb) < 5:
        return None
    steps = [(k1 - k0, (c1 - c0) / (k1 - k0)) for (k0, c0), (k1, c1) in zip(kb, kb[1:])]
    ref, last = steps[1][1], steps[-1][1]
    return {"steps": steps, "ref": ref, "last": last, "r": ratio(last, ref)}


def body_size_section(res, find):
    sized = body_size_rows(res, find)
    out = ["\n### Body size, RequireSetec, `/mutate/pods`, 16 keep-alive connections\n",
           "The same pod shape grown to 1, 8, 64, 200 KB and 1 MB of AdmissionReview body (`bench/corpus/gen.py`), "
           "both servers fresh per row. *CPU us/KB* is the server CPU per review divided by the body size. "
           "*Marginal us/KB* is the rise in CPU per review from the previous size divided by the KB added. "
           "The rule for \"flat\": the marginal cost from 200 KB to 1 MB is within 1.5x of the one from 8 to 64 KB.\n"]
    if not sized:
        return "\n".join(out + ["(not measured in this run)"])
    lines, prev = [], None
    for c, g in sized:
        kb = c["bytes"] / 1024
        o, n = g["ours"], g["nginx"]
        marg = lambda who: "" if prev is None else f"{(g[who]['cpu_us_per_req'] - prev[1][who]['cpu_us_per_req']) / (kb - prev[0]):.2f}"
        lines.append([c["name"], f"{c['bytes']:,}", f"{o['cpu_us_per_req']:.1f}", f"{n['cpu_us_per_req']:.1f}",
                      fmt_ratio(ratio(o["cpu_us_per_req"], n["cpu_us_per_req"])),
                      f"{o['cpu_us_per_req'] / kb:.2f}", f"{n['cpu_us_per_req'] / kb:.2f}", marg("ours"), marg("nginx"),
                      f"{o['rps']:,.0f}", f"{n['rps']:,.0f}", fmt_ratio(ratio(o["rps"], n["rps"]))])
        prev = (kb, g)
    out.append(table(["case", "bytes", "CPU us/review", "nginx CPU us", "ratio", "CPU us/KB", "nginx us/KB",
                      "marginal us/KB", "nginx marginal", "req/s", "nginx req/s", "ratio"], lines))
    f = flatness(sized)
    if f:
        out.append(f"\nMarginal CPU per KB (isolation-gate): 200 KB -> 1 MB {f['last']:.2f} us/KB, 8 -> 64 KB "
                   f"{f['ref']:.2f} us/KB, ratio {f['r']:.2f}x: {'flat' if f['r'] <= 1.5 else 'not flat'} by the rule above.")
    return "\n".join(out)


def counts_section(results_dir):
    path = os.path.join(results_dir, "counts.json")
    out = ["\n## What each server does per request\n"]
    if not os.path.exists(path):
        return "\n".join(out + ["(not measured in this run: `--no-counts`, or bench/counts.py failed)"])
    c = json.load(open(path))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + "/"
    out.append(f"`{c.get('command', 'bench/counts.py').replace(repo, '')}`: each server fresh per case, {c['conns']} keep-alive "
               f"connections, a 1 s warm-up, then {c['duration_s']} s of wrk; every figure is the difference over "
               "that run divided by the requests wrk completed. Syscalls by name: `perf stat -e "
               "'syscalls:sys_enter_*'` attached to the server's processes. Heap calls and bytes (malloc, calloc, "
               "realloc, new), memcpy/memmove bytes, SSL_write and SSL_read calls and the TLS records written: "
               "the LD_PRELOAD shim `bench/count/count.c`, read from its counter files before and after. The shim "
               "adds its own cost, so these runs' req/s are not the ones above.\n")
    lines = []
    for r in c["rows"]:
        top = ", ".join(f"{k} {v:.2f}" for k, v in list(r["syscalls"].items())[:6])
        lines.append([r["case"], r["server"], f"{r['syscalls_total']:.2f}", top, f"{r['malloc']:.1f}",
                      f"{r['malloc_bytes']:,.0f}", f"{r['realloc']:.1f}", f"{r['copy_bytes']:,.0f}",
                      f"{r['ssl_write']:.2f}", f"{r['tls_records']:.2f}", f"{r['ssl_read']:.2f}", str(r["errors"])])
    out.append(table(["case", "server", "syscalls", "by name (top 6)", "malloc calls", "heap bytes", "realloc",
                      "memcpy/memmove bytes", "SSL_write calls", "TLS records", "SSL_read calls", "errors"], lines))
    return "\n".join(out)


def floor_section(res, find):
    """The transport floor (bench.py's Floor) against isolation-gate and nginx of the same run."""
    floors = res.get("floor") or []
    if not floors:
        return ""
    out = ["\n### The transport floor: isolation-gate's transport with a handler of zero cost\n",
           "`build-bench/transport_floor` (`bench/floor/transport_floor.cpp`) is isolation-gate's own HTTPS "
           "server (`src/server`, `src/tls`: the same listener, I/O threads, TLS context and malloc settings) "
           "whose handler answers every review with isolation-gate's captured answer to the case, after reading "
           "the body whole as the webhook does. It is measured like the two servers, fresh, in this run. Its CPU "
           "per review is what isolation-gate would cost if parsing, the rules and encoding took no time; "
           "isolation-gate minus the floor is what the handler costs end to end, system time included; and "
           "1.5x (2.5x for the 200 KB pod) nginx minus the floor is what the CPU target (\"Targets\") leaves the handler.\n"]
    lines = []
    notes = []
    for f in floors:
        g = find(f["case"], f["conns"], "keep-alive")
        if not g:
            continue
        o, n = g["ours"], g["nginx"]
        limit = 2.5 if "large" in f["case"] else 1.5
        for label, r in (("isolation-gate", o), ("transport floor", f), ("nginx", n)):
            lines.append([f["case"], str(f["conns"]), label, f"{r['rps']:,.0f}", ms(r["latency_us"]["p99"]),
                          f"{r['cpu_us_per_req']:.1f}", f"{r.get('cpu_user_us_per_req', 0):.1f}",
                          f"{r.get('cpu_sys_us_per_req', 0):.1f}", mib(r["rss_peak_kib"]), str(r["error_total"])])
        lines.append(["", "", "*floor / nginx*", fmt_ratio(ratio(f["rps"], n["rps"])),
                      fmt_ratio(ratio(f["latency_us"]["p99"], n["latency_us"]["p99"])),
                      fmt_ratio(ratio(f["cpu_us_per_req"], n["cpu_us_per_req"])), "", "", "", ""])
        handler = o["cpu_us_per_req"] - f["cpu_us_per_req"]
        budget = limit * n["cpu_us_per_req"] - f["cpu_us_per_req"]
        notes.append(f"- **{f['case']}, {f['conns']} connections**: the floor costs {f['cpu_us_per_req']:.1f} us "
                     f"a review, {ratio(f['cpu_us_per_req'], n['cpu_us_per_req']):.2f}x nginx, at "
                     f"{ratio(f['rps'], n['rps']):.2f}x its req/s. The handler costs {handler:.1f} us end to end "
                     f"(user {o.get('cpu_user_us_per_req', 0) - f.get('cpu_user_us_per_req', 0):.1f}, system "
                     f"{o.get('cpu_sys_us_per_req', 0) - f.get('cpu_sys_us_per_req', 0):.1f}); the CPU target "
                     f"({limit}x nginx, {limit * n['cpu_us_per_req']:.1f} us) leaves it "
                     f"{max(budget, 0):.1f} us, {handler / budget if budget > 0 else float('inf'):.1f}x less than "
                     f"it costs now.")
    out.append(table(["case", "conns", "server", "req/s", "p99 ms", "CPU us/review", "user us", "sys us",
                      "RSS peak MiB", "errors"], lines))
    out.append("")
    out += notes
    return "\n".join(out)


def rss_mapping_section(res, find):
    """Idle RSS by mapping: isolation-gate and the transport floor, from their fresh starts above."""
    g = find("pod-typical-RequireSetec", 16, "keep-alive")
    floor = next((f for f in res.get("floor") or [] if f["conns"] == 16 and "typical" in f["case"]), None)
    maps = {"isolation-gate": g and g["ours"].get("rss_idle_by_mapping_kib"),
            "transport floor": floor and floor.get("rss_idle_by_mapping_kib")}
    if not maps["isolation-gate"]:
        return ""
    names = sorted(maps["isolation-gate"], key=lambda k: -maps["isolation-gate"][k])
    lines = []
    for n in names:
        kib = maps["isolation-gate"][n]
        if kib < 64:
            continue
        fl = maps["transport floor"].get(n) if maps["transport floor"] else None
        lines.append([f"`{os.path.basename(n) if n.startswith('/') else n}`", f"{kib:,}",
                      "" if fl is None else f"{fl:,}"])
    total = lambda m: sum(m.values()) if m else 0
    lines.append(["total (mappings under 64 KiB included)", f"{total(maps['isolation-gate']):,}",
                  f"{total(maps['transport floor']):,}" if maps["transport floor"] else ""])
    return ("\n### Idle memory by mapping\n\nResident KiB of each mapping of the fresh, idle process "
            "(`/proc/PID/smaps`, `Rss`), summed per file, for isolation-gate (the typical pod's 16-connection "
            "row) and the transport floor (which links only `src/server`, `src/tls` and `src/base`). A "
            "library's resident pages are the ones the dynamic loader and the start touched (the kernel maps "
            "a fault's neighbours too), shared with every process that maps the file.\n\n"
            + table(["mapping", "isolation-gate KiB", "transport floor KiB"], lines))


def cpu_split_sentence(g):
    """User and system time of both servers, and the machine's wakeups of idle CPUs, per review."""
    o, n = g["ours"], g["nginx"]
    if "cpu_user_us_per_req" not in o or "cpu_user_us_per_req" not in n:
        return ""
    text = (f" Split by the kernel's accounting: user {o['cpu_user_us_per_req']:.1f} us against nginx's "
            f"{n['cpu_user_us_per_req']:.1f}, system {o['cpu_sys_us_per_req']:.1f} us against "
            f"{n['cpu_sys_us_per_req']:.1f}")
    if o.get("resched_ipis_per_req") is not None and n.get("resched_ipis_per_req") is not None:
        text += (f"; rescheduling IPIs on the machine {o['resched_ipis_per_req']:.2f} a review against "
                 f"{n['resched_ipis_per_req']:.2f} (a slower server leaves wrk's CPU idle more often, and waking "
                 f"it is charged to the server's send: `docs/decisions/0011-transport-floor.md`)")
    return text + "."


def closing_note(rows, micro, perf, ka16, large, targets, floors):
    """Where the time goes, from this run's figures only (no claims that could go stale)."""
    out = ["\n### Closing note\n"]
    unit = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
    by = {}
    if micro:
        for b in micro.get("benchmarks", []):
            by[b["name"]] = b["cpu_time"] * unit.get(b.get("time_unit", "ns"), 1e-3)
    for case, g in (("pod-typical-RequireSetec", ka16), ("pod-large-RequireSetec", large)):
        if not g or f"serve/{case}" not in by:
            continue
        cpu, ncpu = g["ours"]["cpu_us_per_req"], g["nginx"]["cpu_us_per_req"]
        serve, dec = by[f"serve/{case}"], by.get(f"decode/{case}", 0)
        rest = cpu - ncpu - serve
        floor = next((f for f in floors if f["case"] == case and f["conns"] == 16), None)
        out.append(
            f"- **{case}** (16 keep-alive connections): {cpu:.0f} us of server CPU per review against nginx's "
            f"{ncpu:.0f} us for the same TLS, HTTP and body reading, a gap of {cpu - ncpu:.0f} us. The handler "
            f"alone (`Webhook::serve`, microbenchmark) accounts for {serve:.0f} us of it: decode "
            f"{dec:.1f} us, facts {by.get(f'facts/{case}', 0):.1f} us, decision {by.get(f'decide/{case}', 0):.1f} us "
            f"(`policy::decide` itself {by.get('policy_decide', 0) * 1000:.0f} ns), patch "
            f"{by.get(f'patch/{case}', 0):.1f} us, encode {by.get(f'encode/{case}', 0):.1f} us. "
            + (f"The transport floor (the same server with a handler of zero cost, above) costs "
               f"{floor['cpu_us_per_req']:.0f} us, so the handler costs {cpu - floor['cpu_us_per_req']:.0f} us "
               f"end to end: its own {serve:.0f} us and the system time a slower server is charged "
               f"(`docs/decisions/0011-transport-floor.md`)." if floor else
               f"The other {rest:.0f} us are the transport's cost above nginx's: Beast/Asio, allocation, thread "
               f"hand-offs and syscalls (the profile below)." if rest > 0 else
               "The transport costs no more than nginx's.")
            + cpu_split_sentence(g))
    if perf and perf.get("keep-alive") and perf["keep-alive"].get("categories"):
        cats = perf["keep-alive"]["categories"]
        out.append("- Profile, keep-alive, share of the server's CPU samples: " +
                   "; ".join(f"{c} {p:.0f}%" for c, p in cats[:7]) + ".")
    if perf and perf.get("close-full") and perf["close-full"].get("categories"):
        cats = perf["close-full"]["categories"]
        out.append("- Profile, a new connection per request: " +
                   "; ".join(f"{c} {p:.0f}%" for c, p in cats[:5]) + ".")
    missed = [r[0] for r in targets if r[3] == verdict(False)]
    if missed:
        out.append("- Targets missed in this run: " + "; ".join(missed) + ". Where the time goes: the transport floor, "
                   "the per-request counts (\"What each server does per request\") and the profiles above.")
    out.append("- Latency and req/s are those of a server sharing 2 cores with its load generator; the CPU per "
               "review and the microbenchmarks are the figures that do not depend on that. This file records "
               "measurements only: optimisation work and what it tried is in the history of `src/` "
               "(`git log -- src`).")
    return "\n".join(out)


if __name__ == "__main__":
    main()
