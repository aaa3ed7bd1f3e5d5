#!/usr/bin/python3
"""Connection exhaustion: how long does a legitimate client's request take
while someone holds 10,000 idle TCP connections to the webhook?

Starts `isolation-gate serve --local` (the e2e harness's GateServer: real
binary, real TLS, example Components), then for each scenario measures N
tries of a legitimate client from 127.0.0.1, each a new TCP connection, a
full TLS handshake (no resumption), one AdmissionReview POST and its answer:

  baseline     nobody else connected
  one-source   an attacker process holds --connections idle TCP connections
               from 127.0.0.2 (they never send a byte: no ClientHello)
  many-sources the same number spread over --sources addresses
               (127.0.0.2, 127.0.0.3, ...)

The attacker reopens every connection the server closes (rejected at once
over a cap, or closed by the TLS handshake timeout), so the pressure lasts.
It runs in its own process, so that it does not share the measuring
client's interpreter lock. Prints a Markdown table: p50/p99/max in ms over
the answered tries, and how many tries failed (refused, reset, closed).

RLIMIT_NOFILE: the script raises its soft limit to the hard one (the server
inherits it, and raises its own the same way); it needs connections + 100.

Usage (from the source tree, after a build):
  /usr/bin/python3 bench/exhaustion.py [--binary build/isolation-gate]
      [--connections 10000] [--sources 10] [--tries 200] [--server-arg=--max-connections=4096 ...]
"""

import argparse
import json
import os
import platform
import resource
import selectors
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))


def raise_nofile(wanted):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft = hard
    if soft != resource.RLIM_INFINITY and soft < wanted:
        sys.exit("RLIMIT_NOFILE is %d (hard), %d needed: raise it (ulimit -Hn) first" % (soft, wanted))
    return soft


# -- the attacker (a child process: `exhaustion.py --attack PORT N SOURCES`) ----

def attack(port, count, sources):
    raise_nofile(count + 100)
    sel = selectors.DefaultSelector()
    addrs = ["127.0.0.%d" % (2 + i) for i in range(sources)]
    state = {"opened": 0, "closed_by_server": 0, "connect_errors": 0}

    def open_one(slot):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST on our close
        s.bind((addrs[slot % len(addrs)], 0))
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        except OSError:
            state["connect_errors"] += 1
            s.close()
            return False
        sel.register(s, selectors.EVENT_READ, slot)
        state["opened"] += 1
        return True

    pending = list(range(count))
    first_pass = count  # slots not yet tried once
    announced = False
    while True:
        # Reopen what was closed, in bounded batches (the kernel's accept
        # queue is finite too).
        batch, pending = pending[:2000], pending[2000:]
        for slot in batch:
            if not open_one(slot):
                pending.append(slot)
        first_pass -= min(first_pass, len(batch))
        if not announced and first_pass == 0:
            print(json.dumps({"holding": count}), flush=True)  # every slot tried once
            announced = True
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(1)
            except OSError:
                data = b""
            if not data:  # closed by the server: reopen
                sel.unregister(s)
                s.close()
                state["closed_by_server"] += 1
                pending.append(key.data)
        if os.getppid() == 1:  # the measuring process is gone
            return


# -- the legitimate client -------------------------------------------------------

def one_try(g, body):
    conn = g.connection(timeout=10)  # a new connection and a full handshake each time
    try:
        conn.request("POST", "/mutate/pods", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status != 200 or b'"allowed":true' not in data.replace(b" ", b""):
            raise RuntimeError("HTTP %d" % resp.status)
    finally:
        conn.close()


def measure(g, tries, body):
    times, failures = [], 0
    for _ in range(tries):
        t0 = time.perf_counter()
        try:
            one_try(g, body)
        except Exception:  # noqa: BLE001 - counted
            failures += 1
            continue
        times.append((time.perf_counter() - t0) * 1000)
    return times, failures


def webhook_active(g):
    for line in g.metrics().splitlines():
        if line.startswith('isolation_gate_connections_active{listener="webhook"}'):
            return int(float(line.rsplit(" ", 1)[1]))
    return 0


def row(name, times, failures, tries):
    if not times:
        return "| %s | - | - | - | %d/%d |" % (name, failures, tries)
    times = sorted(times)
    p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
    return "| %s | %.1f | %.1f | %.1f | %d/%d |" % (name, statistics.median(times), p99, times[-1], failures,
                                                    tries)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--attack", nargs=3, type=int, metavar=("PORT", "N", "SOURCES"), help=argparse.SUPPRESS)
    ap.add_argument("--binary", default=os.path.join(SOURCE_DIR, "build", "isolation-gate"))
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--sources", type=int, default=10, help="attacker addresses in the many-sources scenario")
    ap.add_argument("--tries", type=int, default=200)
    ap.add_argument("--settle", type=float, default=4.0,
                    help="seconds to let the attack reach a steady state (past the handshake timeout)")
    ap.add_argument("--server-arg", action="append", default=[], help="extra serve flag (repeatable)")
    args = ap.parse_args()
    if args.attack:
        return attack(*args.attack)

    limit = raise_nofile(args.connections + 100)
    os.environ["IG_BINARY"] = os.path.abspath(args.binary)
    import harness as h  # after IG_BINARY is set
    review = h.pod_review(h.example_pod("report-parser-pod.yaml"))
    body = json.dumps(review).encode()

    g = h.GateServer(sandbox="available", extra_args=args.server_arg).start()
    results = []
    try:
        one_try(g, body)  # warm up
        results.append(("baseline", *measure(g, args.tries, body)))
        for name, sources in (("%d idle from 1 source" % args.connections, 1),
                              ("%d idle from %d sources" % (args.connections, args.sources), args.sources)):
            attacker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--attack", str(g.port),
                                         str(args.connections), str(sources)], stdout=subprocess.PIPE)
            try:
                t0 = time.monotonic()
                line = attacker.stdout.readline()  # {"holding": N} once every connection was opened once
                print("%s: attacker up after %.1fs" % (name, time.monotonic() - t0), file=sys.stderr)
                if not line:
                    raise RuntimeError("the attacker stopped")
                time.sleep(args.settle)
                active = webhook_active(g)
                times, failures = measure(g, args.tries, body)
                results.append(("%s (server: %d open)" % (name, active or 0), times, failures))
            finally:
                attacker.kill()
                attacker.wait(timeout=10)
            deadline = time.monotonic() + 30  # let the server see the attacker's resets
            while webhook_active(g) > 0 and time.monotonic() < deadline:
                time.sleep(0.1)
        rejected = {}
        for line in g.metrics().splitlines():
            if line.startswith("isolation_gate_connections_rejected_total{listener=\"webhook\""):
                rejected[line.split('reason="', 1)[1].split('"', 1)[0]] = int(float(line.rsplit(" ", 1)[1]))
        timeouts = g.metric_values("isolation_gate_tls_handshake_timeouts_total")
    finally:
        g.stop()

    print("machine: %s, %d cores, %s; RLIMIT_NOFILE %d; %s UTC" % (
        platform.machine(), os.cpu_count(), platform.platform(), limit,
        time.strftime("%Y-%m-%d %H:%M", time.gmtime())))
    print("command: %s" % " ".join([os.path.relpath(sys.argv[0], SOURCE_DIR)] + sys.argv[1:]))
    print("server flags: %s (defaults otherwise: --max-connections 4096, --max-connections-per-source 2048,"
          " --tls-handshake-timeout 3s)" % (" ".join(args.server_arg) or "none"))
    print()
    print("| legitimate client: new TCP + TLS handshake + AdmissionReview, %d tries | p50 ms | p99 ms | max ms |"
          " failed |" % args.tries)
    print("|---|---|---|---|---|")
    for name, times, failures in results:
        print(row(name, times, failures, args.tries))
    print()
    print("rejected at once: %s; handshake timeouts: %d" % (
        ", ".join("%s=%d" % kv for kv in sorted(rejected.items())), int(timeouts or 0)))


if __name__ == "__main__":
    main()
