#!/usr/bin/python3
"""The load benchmark: isolation-gate against nginx, driven by wrk.

Run by bench/run.sh (which builds, generates the corpus and the certificate
first); standard library only. Writes OUT/results.json, which
bench/report.py turns into docs/benchmarks.md.

For each row (a corpus case, a connection count, keep-alive or a new
connection per request) each server is started fresh, its idle RSS is read,
one request is checked with curl (isolation-gate: the expected decision;
nginx: byte-identical to isolation-gate's response), then wrk runs for
--duration seconds while RSS is sampled every 100 ms, and the CPU time the
server's processes used (utime + stime from /proc/PID/stat) is divided by
the requests wrk completed.
"""
import argparse
import datetime
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
# BENCH_PORT_BASE moves all three (two benchmarks on one machine must not share ports).
# Keep them below the ephemeral range (32768-60999 on Linux): the readiness
# poll connects before the server listens, and a connect to a free port in
# that range can pick the same port as its source and connect to itself,
# holding the port the server is about to bind (seen under valgrind's slow start).
_BASE = int(os.environ.get("BENCH_PORT_BASE", "18443"))
if not 363 < _BASE < 32767:
    raise SystemExit(f"BENCH_PORT_BASE={_BASE}: use 364..32766 (ports below the ephemeral range)")
OURS_PORT, OURS_PROBE_PORT, NGINX_PORT = _BASE, _BASE - 363, _BASE + 1
TLS12_CIPHERS = ("ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                 "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                 "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305")


def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- /proc

def proc_cpu_split(pid):
    """(user, system) CPU ticks of a process: utime, stime (fields 14, 15 of /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]), int(fields[12])


def proc_cpu_ticks(pid):
    return sum(proc_cpu_split(pid))


def rescheduling_interrupts():
    """The machine's rescheduling IPIs so far (/proc/interrupts RES, every CPU): a wakeup of a task
    on an idle CPU. Not per process: over a run they count the server's and wrk's wakeups."""
    try:
        with open("/proc/interrupts") as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "RES:":
                    return sum(int(x) for x in fields[1:] if x.isdigit())
    except OSError:
        pass
    return None


def proc_status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def rss_by_mapping(pid):
    """Resident KiB per mapped file (anonymous mappings as "[anon]", the heap as "[heap]"), from
    /proc/PID/smaps: where an idle process's RSS is."""
    out, name = {}, None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                name = head[5] if len(head) > 5 else "[anon]"
            elif head[0] == "Rss:":
                out[name] = out.get(name, 0) + int(head[1])
    return out


def children(pid):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except OSError:
                pass
    return out


class Sampler(threading.Thread):
    """Samples the summed VmRSS of some processes every 100 ms."""

    def __init__(self, pids):
        super().__init__(daemon=True)
        self.pids, self.peak_kib, self.samples = pids, 0, 0
        self.stop_event = threading.Event()

    def run(self):
        while not self.stop_event.is_set():
            try:
                self.peak_kib = max(self.peak_kib, sum(proc_status_kib(p, "VmRSS") for p in self.pids))
                self.samples += 1
            except OSError:
                pass
            self.stop_event.wait(0.1)

    def stop(self):
        self.stop_event.set()
        self.join()


class Cfg:
    """Where a benchmark finds its inputs (bench/run.sh's build-bench/ layout)."""

    def __init__(self, repo, build, out, binary=None):
        self.repo, self.build, self.out = repo, build, out
        os.makedirs(os.path.join(out, "logs"), exist_ok=True)
        self.binary = os.path.abspath(binary or os.path.join(build, "isolation-gate"))
        self.components = os.path.join(build, "corpus", "components")
        self.catalog_dir = os.path.join(build, "catalog-100k")
        certs = os.path.join(build, "bench-certs")
        self.cert, self.key, self.ca = (os.path.join(certs, f) for f in ("tls.crt", "tls.key", "ca.crt"))
        self.lua = os.path.join(repo, "bench", "wrk", "post.lua")
        self.no_resume = os.path.join(build, "no_resume.so")
        self.wrk, self.nginx = shutil.which("wrk"), shutil.which("nginx") or "/usr/sbin/nginx"
        self.server_env = {k: v for k, v in os.environ.items()
                           if k not in ("GIBSON_UNTRUSTED_EXEC", "LD_PRELOAD")}


# ---------------------------------------------------------------- servers

def http_get_status(port, path, timeout=0.5):
    """Plain-HTTP GET on 127.0.0.1; the status code, or None."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
            data = s.recv(64)
            m = re.match(rb"HTTP/1\.[01] (\d{3})", data)
            return int(m.group(1)) if m else None
    except OSError:
        return None


def probe_metrics(timeout=2):
    """The raw /metrics response from isolation-gate's probe port (OSError when it does not answer)."""
    with socket.create_connection(("127.0.0.1", OURS_PROBE_PORT), timeout=timeout) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data


def terminate(proc):
    """SIGTERM a server process, SIGKILL it if it has not exited in 15 s."""
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def wait_tcp(port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return True
        except OSError:
            time.sleep(0.005)
    return False


class Ours:
    name = "isolation-gate"

    def __init__(self, cfg, sandbox, components=None):
        self.cfg, self.sandbox = cfg, sandbox
        self.components = components or cfg.components
        self.proc = None

    def argv(self):
        c = self.cfg
        return [c.binary, "serve", "--local", "--components", self.components,
                "--sandbox", self.sandbox, "--tls-cert", c.cert, "--tls-key", c.key,
                "--listen", f"127.0.0.1:{OURS_PORT}", "--metrics-listen", f"127.0.0.1:{OURS_PROBE_PORT}"]

    ready_timeout = 30.0

    log_name = "ours"

    def env(self):
        return self.cfg.server_env

    def start(self, ready_timeout=None, poll=0.002):
        ready_timeout = ready_timeout or self.ready_timeout
        t0 = time.monotonic()
        self.log_path = os.path.join(self.cfg.out, "logs", f"{self.log_name}-{self.sandbox}.log")
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL,
                                     stderr=open(self.log_path, "w"), env=self.env())
        while time.monotonic() - t0 < ready_timeout:
            if http_get_status(OURS_PROBE_PORT, "/readyz") == 200:
                self.ready_ms = (time.monotonic() - t0) * 1000
                return self.ready_ms
            if self.proc.poll() is not None:
                raise RuntimeError(f"isolation-gate exited {self.proc.returncode}: see {self.log_path}")
            time.sleep(poll)
        raise RuntimeError("isolation-gate not ready in time")

    def pids(self):
        return [self.proc.pid]

    def port(self):
        return OURS_PORT

    def startup_ms_logged(self):
        try:
            m = re.findall(r'"startup_ms":"([0-9.]+)"', open(self.log_path).read())
            return float(m[-1]) if m else None
        except OSError:
            return None

    def metric(self, name):
        try:
            data = probe_metrics()
            # Transport series carry listener="webhook" (or "probes").
            m = re.search(rb"^" + re.escape(name.encode()) + rb'(?:\{listener="webhook"\})? (\S+)$',
                          data, re.M)
            return float(m.group(1)) if m else None
        except OSError:
            return None

    def stop(self):
        terminate(self.proc)
        self.proc = None


class Floor(Ours):
    """isolation-gate's own transport (src/server, src/tls) with a handler of zero cost:
    bench/floor/transport_floor.cpp answers every POST with isolation-gate's captured answer
    to the case, read whole as the webhook reads it. Its CPU per review is the floor any
    handler work stands on; ours minus it is what the handler costs end to end."""
    name = "transport floor"
    log_name = "floor"

    def __init__(self, cfg, case):
        super().__init__(cfg, case["sandbox"])
        self.response_file = os.path.join(cfg.out, f"floor-{case['name']}.json")
        with open(self.response_file, "w") as f:
            f.write(cfg.responses[case["name"]])

    def argv(self):
        return [os.path.join(self.cfg.build, "transport_floor")] + super().argv()[1:]

    def env(self):
        # serve's malloc settings (src/cli/serve.cpp, tune_malloc) for 2 I/O threads.
        return dict(self.cfg.server_env, IG_FLOOR_RESPONSE=self.response_file, MALLOC_ARENA_MAX="4",
                    MALLOC_MMAP_THRESHOLD_=str(4 << 20), MALLOC_TRIM_THRESHOLD_=str(4 << 20))

    def metric(self, name):
        return None


class Nginx:
    name = "nginx"

    def __init__(self, cfg, access_log=False):
        self.cfg, self.access_log = cfg, access_log
        self.dir = os.path.join(cfg.out, "nginx")
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.proc = None

    def write_config(self, responses):
        d = self.dir
        os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(d, "www"), exist_ok=True)
        entries = []
        for case, body in sorted(responses.items()):
            if "$" in body:
                raise RuntimeError(f"response of {case} holds '$': nginx would read it as a variable")
            esc = body.replace("\\", "\\\\").replace("'", "\\'")
            entries.append(f"    {case} '{esc}';")
        access = (f"  log_format bench '$connection $connection_requests $ssl_session_reused "
                  f"$ssl_protocol $ssl_cipher $ssl_curve $request_length $status';\n"
                  f"  access_log {d}/access.log bench;\n") if self.access_log else "  access_log off;\n"
        conf = f"""# Generated by bench/bench.py: the TLS floor isolation-gate is compared with.
# Same certificate, protocols, TLS 1.2 ciphers, ECDHE groups, session cache and
# tickets as isolation-gate (src/tls/server_context.cpp); 2 worker processes
# (isolation-gate runs 2 I/O threads on this 2-core machine); keep-alive with no
# per-connection request limit (isolation-gate has none).
worker_processes 2;
daemon off;
master_process on;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 4096; }}
http {{
{access}  client_body_temp_path {d}/tmp/body;
  proxy_temp_path {d}/tmp/proxy;
  fastcgi_temp_path {d}/tmp/fastcgi;
  uwsgi_temp_path {d}/tmp/uwsgi;
  scgi_temp_path {d}/tmp/scgi;
  keepalive_timeout 60s;
  keepalive_requests 100000000;
  server_tokens off;
  # The response: isolation-gate's own response body for the case named in
  # the query string (?case=NAME; isolation-gate ignores the query string).
  map $arg_case $ig_response {{
    default '{{"error":"unknown case"}}';
{chr(10).join(entries)}
  }}
  server {{
    listen 127.0.0.1:{NGINX_PORT} ssl;
    ssl_certificate {self.cfg.cert};
    ssl_certificate_key {self.cfg.key};
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers {TLS12_CIPHERS};
    ssl_prefer_server_ciphers on;
    ssl_ecdh_curve X25519:P-256:P-384;
    ssl_session_cache shared:SSL:10m;
    ssl_session_tickets on;
    # Bodies up to 3 MiB, read whole into one memory buffer (as isolation-gate does).
    client_max_body_size 3m;
    client_body_buffer_size 3m;
    client_body_in_single_buffer on;
    default_type application/json;
    location / {{
      # `return` alone would answer before reading the body and discard it
      # (ngx_http_discard_request_body). The mirror module reads the whole body
      # into memory before the content phase; the static handler then finds
      # no file and error_page answers 200 with the fixed JSON.
      mirror /_read_body;
      mirror_request_body on;
      root {d}/www;
      open_file_cache max=16;
      open_file_cache_errors on;
      log_not_found off;
      error_page 404 405 =200 @respond;
    }}
    location = /_read_body {{ internal; return 204; }}
    location @respond {{ return 200 $ig_response; }}
    # The same answer without reading the body into memory (for comparison).
    location /discard/ {{ return 200 $ig_response; }}
  }}
}}
"""
        self.conf = os.path.join(d, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf)

    def argv(self):
        return [self.cfg.nginx, "-c", self.conf]

    def start(self, ready_timeout=10.0):
        if os.path.exists(os.path.join(self.dir, "access.log")):
            os.unlink(os.path.join(self.dir, "access.log"))
        self.proc = subprocess.Popen(self.argv(), stdout=subprocess.DEVNULL,
                                     stderr=open(os.path.join(self.dir, "stderr.log"), "a"),
                                     env=getattr(self, "env", None))
        if not wait_tcp(NGINX_PORT, ready_timeout):
            raise RuntimeError("nginx did not start: see " + self.dir + "/error.log")
        deadline = time.monotonic() + 5
        while len(children(self.proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)

    def pids(self):
        return [self.proc.pid] + children(self.proc.pid)

    def port(self):
        return NGINX_PORT

    def stop(self):
        terminate(self.proc)
        self.proc = None


# ---------------------------------------------------------------- checks

def curl(cfg, port, case, path=None):
    url = f"https://127.0.0.1:{port}{path or case['endpoint']}?case={case['name']}"
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", cfg.ca, "-H",
                        "Content-Type: application/json", "--data-binary", "@" + case["file"],
                        "-o", "-", "-w", "\n%{http_code}", url], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"curl {url}: {r.stderr.strip()}")
    body, _, code = r.stdout.rpartition("\n")
    return int(code), body


def check_decision(case, code, body):
    """Whether isolation-gate's response is the decision the case expects."""
    if code != 200:
        return f"HTTP {code}"
    resp = json.loads(body)["response"]
    exp = case["expect"]
    if resp.get("allowed") != exp["allowed"]:
        return f"allowed={resp.get('allowed')}, expected {exp['allowed']}"
    if ("patch" in resp) != exp["patch"]:
        return f"patch present={('patch' in resp)}, expected {exp['patch']}"
    if exp["decision"] and resp.get("auditAnnotations", {}).get("decision") != exp["decision"]:
        return f"decision={resp.get('auditAnnotations', {}).get('decision')}, expected {exp['decision']}"
    return None


# ---------------------------------------------------------------- runs

def run_wrk(cfg, port, case, conns, mode, duration, path=None):
    threads = 1 if conns == 1 else 2
    url = f"https://127.0.0.1:{port}{path or case['endpoint']}?case={case['name']}"
    argv = [cfg.wrk, "-t", str(threads), "-c", str(conns), "-d", f"{duration}s", "--timeout", "10s",
            "--latency", "-s", cfg.lua, url, "--", case["file"]]
    env = dict(os.environ)
    if mode in ("close-full", "close-resumed"):
        argv.append("close")
    if mode == "close-full":
        env["LD_PRELOAD"] = cfg.no_resume
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=duration + 60)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"^IG_RESULT (\{.*\})$", r.stdout, re.M)
    if r.returncode != 0 or not m:
        raise RuntimeError(f"wrk failed ({r.returncode}): {r.stdout}\n{r.stderr}")
    res = json.loads(m.group(1))
    res["wrk_cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    shown = argv[:]
    if mode == "close-full":
        shown = ["LD_PRELOAD=build-bench/no_resume.so"] + shown
    res["command"] = " ".join(shown).replace(cfg.repo + "/", "")
    return res


def measure(cfg, server, case, conns, mode, duration, expected_body=None, path=None):
    """One row for one server: a fresh process, idle RSS, a checked request, wrk."""
    server.start()
    try:
        pids = server.pids()
        rss_idle = sum(proc_status_kib(p, "VmRSS") for p in pids)
        by_mapping = rss_by_mapping(pids[0]) if isinstance(server, Ours) else None
        code, body = curl(cfg, server.port(), case, path)
        if expected_body is None:
            problem = check_decision(case, code, body)
        else:
            problem = None if (code == 200 and body == expected_body) else \
                f"HTTP {code}, body differs from isolation-gate's"
        if problem:
            raise RuntimeError(f"{server.name} {case['name']}: unexpected response: {problem}\n{body[:500]}")
        accepted0 = server.metric("isolation_gate_connections_accepted_total") if isinstance(server, Ours) else None
        load0 = os.getloadavg()[0]
        split0 = [proc_cpu_split(p) for p in pids]
        res0 = rescheduling_interrupts()
        sampler = Sampler(pids)
        sampler.start()
        w = run_wrk(cfg, server.port(), case, conns, mode, duration, path)
        split1 = [proc_cpu_split(p) for p in pids]
        res1 = rescheduling_interrupts()
        user = sum(b[0] - a[0] for a, b in zip(split0, split1))
        system = sum(b[1] - a[1] for a, b in zip(split0, split1))
        sampler.stop()
        hwm = sum(proc_status_kib(p, "VmHWM") for p in pids)
        row = {
            "server": server.name, "case": case["name"], "conns": conns, "mode": mode,
            "requests": w["requests"], "rps": w["requests"] / (w["duration_us"] / 1e6),
            "latency_us": w["latency_us"], "errors": w["errors"],
            "error_total": sum(w["errors"].values()),
            "cpu_us_per_req": (user + system) * 1e6 / CLK_TCK / max(w["requests"], 1),
            "cpu_s": (user + system) / CLK_TCK,
            # The split is the kernel's tick sampling: a share, exact over many ticks only.
            "cpu_user_us_per_req": user * 1e6 / CLK_TCK / max(w["requests"], 1),
            "cpu_sys_us_per_req": system * 1e6 / CLK_TCK / max(w["requests"], 1),
            "resched_ipis_per_req": (res1 - res0) / max(w["requests"], 1) if res0 is not None else None,
            "rss_idle_kib": rss_idle, "rss_peak_kib": max(sampler.peak_kib, 0), "vmhwm_kib": hwm,
            "rss_samples": sampler.samples, "wrk_cpu_s": w["wrk_cpu_s"], "wrk_command": w["command"],
            "ready_ms": getattr(server, "ready_ms", None),
            "load1_before": load0, "load1_after": os.getloadavg()[0], "processes": len(pids),
        }
        if by_mapping:
            row["rss_idle_by_mapping_kib"] = by_mapping
        if accepted0 is not None:
            accepted1 = server.metric("isolation_gate_connections_accepted_total")
            if accepted1 is not None:
                row["connections_accepted"] = accepted1 - accepted0
        return row
    finally:
        server.stop()


def ratio(a, b):
    return a / b if b else None


def pair(cfg, case, conns, mode, duration, responses, sandbox, results, label=None, nginx_path=None):
    ours = measure(cfg, Ours(cfg, sandbox), case, conns, mode, duration)
    ngx = measure(cfg, Nginx(cfg), case, conns, mode, duration, expected_body=responses[case["name"]],
                  path=nginx_path)
    if label:
        ours["label"] = ngx["label"] = label
    results["rows"].append({"ours": ours, "nginx": ngx, "case": case["name"], "conns": conns,
                            "mode": mode, "label": label or ""})
    log(f"{case['name']:<26} c={conns:<3} {mode:<13} ours {ours['rps']:9.0f} req/s p99 "
        f"{ours['latency_us']['p99']/1000:7.2f} ms cpu {ours['cpu_us_per_req']:7.1f} us | nginx "
        f"{ngx['rps']:9.0f} req/s p99 {ngx['latency_us']['p99']/1000:7.2f} ms cpu "
        f"{ngx['cpu_us_per_req']:6.1f} us | errors {ours['error_total']}/{ngx['error_total']}")
    save(cfg, results)


def save(cfg, results):
    tmp = os.path.join(cfg.out, "results.json.tmp")
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, os.path.join(cfg.out, "results.json"))


# ---------------------------------------------------------------- phases

def capture_responses(cfg, cases):
    """isolation-gate's response to every case, checked against the expected decision."""
    responses = {}
    for sandbox in ("available", "unavailable"):
        srv = Ours(cfg, sandbox)
        srv.start()
        try:
            for case in cases:
                if case["sandbox"] != sandbox:
                    continue
                code, body = curl(cfg, OURS_PORT, case)
                problem = check_decision(case, code, body)
                if problem:
                    raise RuntimeError(f"{case['name']}: {problem}\n{body[:500]}")
                responses[case["name"]] = body
        finally:
            srv.stop()
    return responses


def tls_facts(cfg):
    """Negotiated protocol, cipher and group for each server (openssl s_client)."""
    out = {}
    for name, srv in (("isolation-gate", Ours(cfg, "available")), ("nginx", Nginx(cfg))):
        srv.start()
        try:
            r = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{srv.port()}",
                                "-CAfile", cfg.ca, "-brief"], input="", capture_output=True,
                               text=True, timeout=20)
            text = r.stdout + r.stderr
            facts = {}
            for key, pat in (("protocol", r"Protocol version: (\S+)"), ("cipher", r"Ciphersuite: (\S+)"),
                             ("group", r"(?:Server Temp Key|Peer Temp Key): ([^\n]+)"),
                             ("signature", r"Signature type: (\S+)"),
                             ("verification", r"Verification: (\S+)")):
                m = re.search(pat, text)
                facts[key] = m.group(1).strip() if m else "?"
            out[name] = facts
        finally:
            srv.stop()
    return out


def handshake_check(cfg, case, duration=2):
    """Runs both new-connection modes against nginx with an access log and
    counts full vs resumed handshakes and requests per connection."""
    out = {}
    for mode in ("close-resumed", "close-full"):
        ngx = Nginx(cfg, access_log=True)
        ngx.write_config(cfg.responses)
        ngx.start()
        try:
            w = run_wrk(cfg, NGINX_PORT, case, 16, mode, duration)
        finally:
            ngx.stop()
        lines = open(os.path.join(ngx.dir, "access.log")).read().split("\n")
        rows = [ln.split() for ln in lines if ln.strip()]
        conns = {r[0] for r in rows}
        out[mode] = {"requests_logged": len(rows), "connections": len(conns),
                     "resumed": sum(1 for r in rows if r[2] == "r"),
                     "full": sum(1 for r in rows if r[2] == "."),
                     "max_requests_per_connection": max((int(r[1]) for r in rows), default=0),
                     "protocol": sorted({r[3] for r in rows}), "cipher": sorted({r[4] for r in rows}),
                     "group": sorted({r[5] for r in rows}),
                     "min_request_length": min((int(r[6]) for r in rows), default=0),
                     "wrk_requests": w["requests"]}
    # Keep-alive: the whole body is read before the response (request_length).
    Nginx(cfg).write_config(cfg.responses)
    return out


def ready_times(cfg, repeats=5):
    times, logged = [], []
    for _ in range(repeats):
        srv = Ours(cfg, "available")
        times.append(srv.start())
        logged.append(srv.startup_ms_logged())
        srv.stop()
        time.sleep(0.2)
    return {"runs_ms": times, "median_ms": statistics.median(times), "logged_startup_ms": logged}


def catalog_case(cfg, results, typical, duration):
    """10 vs 100,000 Components: the typical pod at 16 connections, alternated."""
    big = cfg.catalog_dir
    n_files = len([f for f in os.listdir(big) if f.endswith(".yaml")])
    runs = []
    for rep in range(2):
        for label, comps in (("10", cfg.components), ("100000", big)):
            srv = Ours(cfg, "available", components=comps)
            srv.ready_timeout = 600
            row = measure(cfg, srv, typical, 16, "keep-alive", duration)
            t_ready = row["ready_ms"]
            row["catalog"] = label
            row["ready_ms"] = t_ready
            runs.append(row)
            log(f"catalog {label:>6}: ready {t_ready:8.1f} ms, idle RSS {row['rss_idle_kib']} KiB, "
                f"{row['rps']:.0f} req/s, p50 {row['latency_us']['p50']} us, p99 {row['latency_us']['p99']} us")
    results["catalog"] = {"runs": runs, "files": n_files}
    save(cfg, results)


def perf_profile(cfg, case, mode, seconds):
    """perf record of isolation-gate under wrk; top symbols and DSOs."""
    if not shutil.which("perf"):
        return None
    srv = Ours(cfg, "available")
    srv.start()
    data = os.path.join(cfg.out, f"perf-{mode}.data")
    try:
        wrk = threading.Thread(target=run_wrk, args=(cfg, OURS_PORT, case, 16, mode, seconds + 2))
        wrk.start()
        time.sleep(1)
        r = subprocess.run(["perf", "record", "-F", "1999", "-g", "-p", str(srv.proc.pid), "-o", data,
                            "--", "sleep", str(seconds)], capture_output=True, text=True)
        wrk.join()
    finally:
        srv.stop()
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-500:]}
    rep = {}
    for key, sort in (("symbols", "dso,symbol"), ("dsos", "dso")):
        p = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", sort,
                            "-g", "none", "--percent-limit", "0.05"], capture_output=True, text=True)
        rows = []
        for line in p.stdout.splitlines():
            m = re.match(r"\s+([0-9.]+)%\s+(.*)$", line)
            if m:
                rows.append([float(m.group(1)), re.sub(r"\s+", " ", m.group(2)).strip()])
        rep[key] = rows
    rep["command"] = f"perf record -F 1999 -g -p PID -- sleep {seconds}  (wrk -c 16 {mode} on {case['name']})"
    return rep


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--duration", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="only the typical pod (for trying the script)")
    ap.add_argument("--no-catalog", action="store_true")
    ap.add_argument("--no-perf", action="store_true")
    ap.add_argument("--no-counts", action="store_true", help="skip bench/counts.py (per-request counts)")
    args = ap.parse_args()

    cfg = Cfg(args.repo, args.build, args.out)
    cases = json.load(open(os.path.join(args.build, "corpus", "cases.json")))
    by_name = {c["name"]: c for c in cases}
    typical = by_name["pod-typical-RequireSetec"]

    started = time.time()
    results = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "duration_s": args.duration, "cases": cases, "rows": [],
               "ours_command": " ".join(Ours(cfg, "available").argv()).replace(args.repo + "/", ""),
               "loadavg_start": os.getloadavg()}

    log("capturing isolation-gate's responses and checking every decision")
    cfg.responses = capture_responses(cfg, cases)
    results["responses"] = {k: len(v) for k, v in cfg.responses.items()}
    ngx = Nginx(cfg)
    ngx.write_config(cfg.responses)
    results["nginx_command"] = " ".join(ngx.argv()).replace(args.repo + "/", "")
    results["nginx_conf"] = open(ngx.conf).read()
    results["tls"] = tls_facts(cfg)
    log("TLS:", results["tls"])
    results["handshakes"] = handshake_check(cfg, typical)
    log("handshakes:", results["handshakes"])
    save(cfg, results)

    results["ready"] = ready_times(cfg)
    log("ready:", results["ready"])

    d = args.duration
    # The full matrix for the typical pod with RequireSetec.
    for conns, mode in ((1, "keep-alive"), (16, "keep-alive"), (64, "keep-alive"),
                        (16, "close-full"), (16, "close-resumed")):
        pair(cfg, typical, conns, mode, d, cfg.responses, "available", results)
    # nginx answering without reading the body into memory, for comparison.
    if not args.quick:
        ours_row = results["rows"][1]["ours"]
        ngx_discard = measure(cfg, Nginx(cfg), typical, 16, "keep-alive", d,
                              expected_body=cfg.responses[typical["name"]], path="/discard/")
        results["nginx_discard"] = {"nginx": ngx_discard, "ours_rps": ours_row["rps"]}
        save(cfg, results)
    # The transport floor (Floor): typical pod at 16 and 64 keep-alive, 200 KB pod at 16.
    results["floor"] = []
    for name, conns in (("pod-typical-RequireSetec", 16), ("pod-typical-RequireSetec", 64),
                        ("pod-large-RequireSetec", 16)):
        if args.quick and (name != typical["name"] or conns != 16):
            continue
        row = measure(cfg, Floor(cfg, by_name[name]), by_name[name], conns, "keep-alive", d)
        results["floor"].append(row)
        log(f"{name:<26} c={conns:<3} transport floor {row['rps']:9.0f} req/s p99 "
            f"{row['latency_us']['p99'] / 1000:7.2f} ms cpu {row['cpu_us_per_req']:7.1f} us")
        save(cfg, results)
    # Every other case at 16 keep-alive connections.
    for case in cases:
        if case is typical or (args.quick and case["size"] != "pod-typical"):
            continue
        pair(cfg, case, 16, "keep-alive", d, cfg.responses, case["sandbox"], results)

    # The body-size series (RequireSetec on /mutate/pods, 16 keep-alive): its rows were measured
    # above (every case is); this names them, smallest first, for bench/report.py.
    series = [by_name[n] for n in ("pod-small-RequireSetec", "pod-typical-RequireSetec",
                                   "pod-64k-RequireSetec", "pod-large-RequireSetec",
                                   "pod-1m-RequireSetec") if n in by_name]
    results["body_size"] = [c["name"] for c in series if not args.quick or c is typical]
    save(cfg, results)

    if not args.no_catalog and os.path.isdir(cfg.catalog_dir):
        log("100,000-Component catalog")
        catalog_case(cfg, results, typical, d)

    if not args.no_counts:
        # After the load runs, before perf: what each server does per request (counts.json).
        log("per-request counts (bench/counts.py)")
        rc = subprocess.call([sys.executable, os.path.join(args.repo, "bench", "counts.py"),
                              "--build", args.build, "--out", args.out, "--duration", str(min(d, 5))])
        results["counts_rc"] = rc
        save(cfg, results)

    if not args.no_perf:
        log("perf profiles")
        results["perf"] = {"keep-alive": perf_profile(cfg, typical, "keep-alive", 8),
                           "close-full": perf_profile(cfg, typical, "close-full", 8)}
    results["loadavg_end"] = os.getloadavg()
    results["elapsed_s"] = time.time() - started
    save(cfg, results)
    log(f"done in {results['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
