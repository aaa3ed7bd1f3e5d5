"""Stopping and listening as the chart runs the binary:

- SIGHUP is logged and ignored;
- --drain-delay: at SIGTERM /readyz fails at once while the webhook keeps
  answering (endpoints are being removed); a second signal ends the delay;
  the exit is clean (0);
- the default listen address [::] is dual-stack: IPv4 and IPv6 clients
  reach the same listener.

Every wait is bounded; nothing asserts how long something took.
"""

import os
import signal
import socket
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
