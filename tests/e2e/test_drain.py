"""Stopping and listening as the chart runs the binary:

- SIGHUP is logged and ignored;
- --drain-delay: at SIGTERM /readyz fails at once while the webhook keeps
  answering (endpoints are being removed); a second signal ends the delay;
  the exit is clean (0);
- from SIGTERM on every response carries Connection: close; under load from
  32 keep-alive clients no request fails or is reset, and a request still
  being sent when the delay ends is answered;
- the default listen address [::] is dual-stack: IPv4 and IPv6 clients
  reach the same listener.

Every wait is bounded; nothing asserts how long something took.
"""

import json
import os
import signal
import socket
import threading
import time
import unittest

import harness as h

DELAY = "30s"  # long enough that the checks below run inside it on any machine; a second signal ends it


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class Drain(unittest.TestCase):
    def test_sighup_is_ignored_sigterm_fails_readiness_keeps_serving_a_second_signal_ends_the_delay(self):
        g = h.GateServer(sandbox="available", extra_args=["--drain-delay", DELAY]).start()
        self.addCleanup(g.stop)
        conn = g.connection()  # a keep-alive connection opened before the signal
        review = h.pod_review(h.example_pod("report-parser-pod.yaml"))
        self.assertEqual(g.review("/mutate/pods", review, conn=conn)["response"]["allowed"], True)
        # SIGHUP is logged and ignored: it must not take the webhook down.
        g.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while not any("SIGHUP ignored" in l.get("msg", "") for l in g.log_lines()):
            self.assertLess(time.monotonic(), deadline, "no log line for SIGHUP")
            time.sleep(0.02)
        self.assertIsNone(g.proc.poll())
        self.assertEqual(g.probe("GET", "/readyz").status, 200)
        g.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while g.probe("GET", "/readyz").status == 200:
            self.assertLess(time.monotonic(), deadline, "readyz still 200 after SIGTERM")
            time.sleep(0.02)
        self.assertEqual(g.probe("GET", "/readyz").status, 503)
        self.assertEqual(g.probe("GET", "/healthz").status, 200)
        # Still serving: on the old connection and on a new one.
        self.assertEqual(g.review("/mutate/pods", review, conn=conn)["response"]["allowed"], True)
        self.assertEqual(g.review("/mutate/pods", review)["response"]["allowed"], True)
        self.assertIsNone(g.proc.poll())
        conn.close()
        g.proc.send_signal(signal.SIGTERM)  # the second one: drain now
        self.assertEqual(g.proc.wait(timeout=20), 0)
        msgs = [l.get("msg") for l in g.log_lines()]
        self.assertIn("stopping", msgs)
        self.assertEqual(msgs[-1], "stopped")


CLIENTS = 32
LOAD_DELAY = "2s"  # the drain delay under load: every client gets its Connection: close well within it


class ZeroLostRequests(unittest.TestCase):
    """32 threads, each a keep-alive connection posting AdmissionReviews in a
    loop and reconnecting when the server answers Connection: close. SIGTERM
    mid-load; once /readyz has failed (what removes the endpoint in a
    cluster) a client stops at the next Connection: close, as a client does
    whose endpoint is gone. The endpoint is "removed" once every client has
    been told Connection: close at least once after SIGTERM (and so has
    reconnected during the drain). Every request must be answered 200 with
    its uid; once a client has been told Connection: close after SIGTERM,
    every later answer to it must carry Connection: close too (the server is
    draining); the process must exit 0."""

    def test_sigterm_under_keep_alive_load_loses_nothing(self):
        g = h.GateServer(sandbox="available", extra_args=["--drain-delay", LOAD_DELAY]).start()
        self.addCleanup(g.stop)
        pod = h.example_pod("report-parser-pod.yaml")
        removed = threading.Event()   # /readyz failed: the endpoint is gone
        give_up = threading.Event()   # test teardown: stop whatever still runs
        lock = threading.Lock()
        stats = {"ok": 0, "while_draining": 0, "connections": 0, "closed_by_server": 0}
        failures = []
        finished = []
        told_to_close = set()  # clients answered Connection: close after SIGTERM
        signalled = threading.Event()

        def client(i):
            conn = None
            draining = False  # told Connection: close after SIGTERM
            try:
                while not give_up.is_set():
                    if conn is None:
                        conn = g.connection()
                        with lock:
                            stats["connections"] += 1
                    review = h.pod_review(pod)
                    conn.request("POST", "/mutate/pods", body=json.dumps(review).encode(),
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    body = resp.read()
                    if resp.status != 200:
                        raise AssertionError("HTTP %d: %r" % (resp.status, body[:300]))
                    answer = json.loads(body)["response"]
                    if answer["uid"] != review["request"]["uid"] or answer["allowed"] is not True:
                        raise AssertionError("wrong answer: %r" % answer)
                    close = (resp.getheader("Connection") or "").lower() == "close"
                    if draining and not close:
                        raise AssertionError("a keep-alive answer while draining")
                    with lock:
                        stats["ok"] += 1
                        if draining:
                            stats["while_draining"] += 1
                        if close:
                            stats["closed_by_server"] += 1
                            if signalled.is_set():
                                told_to_close.add(i)
                                draining = True
                    if close:
                        conn.close()
                        conn = None
                        if removed.is_set():
                            break
                with lock:
                    finished.append(i)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                with lock:
                    failures.append("client %d: %r" % (i, e))
            finally:
                if conn is not None:
                    conn.close()

        threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
        self.addCleanup(give_up.set)
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while stats["ok"] < CLIENTS * 4 and not failures:
            self.assertLess(time.monotonic(), deadline, "the load did not get going: %r" % stats)
            time.sleep(0.01)
        before = dict(stats)
        signalled.set()
        g.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while g.probe("GET", "/readyz").status == 200:
            self.assertLess(time.monotonic(), deadline, "readyz still 200 after SIGTERM")
            time.sleep(0.01)
        while len(told_to_close) < CLIENTS and not failures:
            self.assertLess(time.monotonic(), deadline, "not every client was told to close: %r" % stats)
            time.sleep(0.005)
        removed.set()
        for t in threads:
            t.join(timeout=60)
        self.assertEqual(failures, [])
        self.assertEqual(sorted(finished), list(range(CLIENTS)), "clients still running")
        self.assertEqual(g.proc.wait(timeout=30), 0)
        # Load ran on both sides of SIGTERM, and the drain made clients reconnect.
        self.assertGreater(stats["ok"], before["ok"])
        self.assertGreater(stats["while_draining"], 0)
        self.assertGreater(stats["connections"], CLIENTS)  # reconnections during the drain were served
        msgs = [l.get("msg") for l in g.log_lines()]
        self.assertEqual(msgs[-1], "stopped")
        self.assertFalse([l for l in g.log_lines() if l.get("level") == "warn" and "grace" in l.get("msg", "")])

    def test_a_request_still_arriving_when_the_delay_ends_is_answered(self):
        g = h.GateServer(sandbox="available", extra_args=["--drain-delay", "30s"]).start()
        self.addCleanup(g.stop)
        idle = g.tls_socket()  # keep-alive, idle through the whole drain: closed only at its end
        body = json.dumps(h.pod_review(h.example_pod("report-parser-pod.yaml"))).encode()
        head = ("POST /mutate/pods HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n" % (h.SERVICE_HOST, len(body))).encode()
        slow = g.tls_socket()
        g.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 20
        while g.probe("GET", "/readyz").status == 200:
            self.assertLess(time.monotonic(), deadline, "readyz still 200 after SIGTERM")
            time.sleep(0.02)
        slow.sendall(head + body[:10])  # a request on its way ...
        g.proc.send_signal(signal.SIGTERM)  # ... when the delay ends
        deadline = time.monotonic() + 20
        while not any(l.get("msg", "").startswith("draining") for l in g.log_lines()):
            self.assertLess(time.monotonic(), deadline, "no 'draining' log line")
            time.sleep(0.02)
        slow.sendall(body[10:])
        status, headers, answer = h.recv_http_response(slow)
        self.assertEqual(status, 200, answer)
        self.assertEqual(headers.get("connection"), "close")
        self.assertEqual(json.loads(answer)["response"]["allowed"], True)
        self.assertEqual(h.recv_until_closed(idle), b"")  # closed, nothing sent on it
        self.assertEqual(g.proc.wait(timeout=20), 0)
        slow.close()
        idle.close()


class DualStack(unittest.TestCase):
    @unittest.skipUnless(has_ipv6_loopback(), "no IPv6 loopback on this machine")
    def test_an_any_address_listener_takes_ipv4_and_ipv6_clients(self):
        g = h.GateServer(sandbox="available", extra_args=["--listen", "[::]:0", "--metrics-listen", "[::]:0"])
        g.start()
        self.addCleanup(g.stop)
        self.assertTrue(g.serving_line["webhook"].startswith("[::]:"), g.serving_line)
        review = h.pod_review(h.example_pod("report-parser-pod.yaml"))
        self.assertEqual(g.review("/mutate/pods", review)["response"]["allowed"], True)  # over 127.0.0.1
        for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
            with socket.socket(family, socket.SOCK_STREAM) as s:
                s.settimeout(5)
                s.connect((host, g.metrics_port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                self.assertTrue(h.recv_until_closed(s).startswith(b"HTTP/1.1 200"), host)


if __name__ == "__main__":
    unittest.main()
