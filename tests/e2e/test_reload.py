"""Serving certificate hot reload (docs/architecture.md, "Request path", step 1), over real HTTPS.

Each test runs its own server: they replace its certificate files.
"""

import json
import os
import shutil
import ssl
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

RELOAD_DEADLINE = 3.5  # the server polls every second


def der_of(pem_path):
    with open(pem_path, "r", encoding="ascii") as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def replace_atomically(src, dst):
    """Write src's bytes to a temporary file next to dst, then rename over dst."""
    tmp = dst + ".tmp-e2e"
    shutil.copyfile(src, tmp)
    os.rename(tmp, dst)


class CertificateReload(unittest.TestCase):
    def setUp(self):
        self.server = h.GateServer(sandbox="available")
        self.server.start()
        self.addCleanup(self.server.stop)
        self.new_dir = tempfile.mkdtemp(prefix="ig-e2e-new-")
        self.addCleanup(shutil.rmtree, self.new_dir, True)
        self.new = h.make_certs(self.new_dir)
        self.old_der = der_of(self.server.cert_files["tls.crt"])
        self.new_der = der_of(self.new["tls.crt"])
        self.assertNotEqual(self.old_der, self.new_der)
        # Trusts both CAs so that either certificate verifies for the service name.
        self.ctx = self.server.context(self.new["ca.crt"])

    def peer(self):
        with self.server.tls_socket(context=self.ctx, timeout=5) as s:
            return s.getpeercert(binary_form=True), s.getpeercert()["serialNumber"]

    def install_new_pair(self):
        replace_atomically(self.new["tls.key"], self.server.cert_files["tls.key"])
        replace_atomically(self.new["tls.crt"], self.server.cert_files["tls.crt"])

    def wait_for_peer(self, der, deadline=RELOAD_DEADLINE):
        started = time.monotonic()
        while time.monotonic() - started < deadline:
            got, _ = self.peer()
            if got == der:
                return time.monotonic() - started
            time.sleep(0.1)
        return None

    def decide(self, conn=None):
        if conn is None:
            conn = self.server.connection(context=self.ctx)
            self.addCleanup(conn.close)
        out = self.server.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")), conn=conn)
        self.assertTrue(out["response"]["allowed"])

    def test_new_connections_see_the_new_certificate_within_3_seconds(self):
        old_der, old_serial = self.peer()
        self.assertEqual(old_der, self.old_der)
        keep_alive = self.server.connection(context=self.ctx)
        self.addCleanup(keep_alive.close)
        self.decide(conn=keep_alive)
        reloads_before = self.server.metric_values("isolation_gate_tls_reloads_total")

        self.install_new_pair()
        took = self.wait_for_peer(self.new_der)
        self.assertIsNotNone(took, "new certificate not served within %ss:\n%s"
                             % (RELOAD_DEADLINE, self.server.stderr_text()[-3000:]))
        _, new_serial = self.peer()
        self.assertNotEqual(new_serial, old_serial)

        # The connection opened before the reload still completes requests on the old certificate.
        self.assertEqual(keep_alive.sock.getpeercert(binary_form=True), self.old_der)
        self.decide(conn=keep_alive)
        self.decide(conn=keep_alive)
        self.assertGreater(self.server.metric_values("isolation_gate_tls_reloads_total"), reloads_before)

        # Clients that only know the new CA now verify; the service name still matches.
        with self.server.tls_socket(context=h.client_context(self.new["ca.crt"])) as s:
            self.assertEqual(s.getpeercert(binary_form=True), self.new_der)

    def test_request_in_flight_during_a_reload_completes(self):
        review = json.dumps(h.pod_review(h.example_pod("docs-indexer-pod.yaml"))).encode()
        s = self.server.tls_socket(context=self.ctx, timeout=10)
        self.addCleanup(s.close)
        head = ("POST /mutate/pods HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                "Content-Length: %d\r\n\r\n" % (h.SERVICE_HOST, len(review))).encode()
        s.sendall(head + review[:50])
        self.install_new_pair()
        self.assertIsNotNone(self.wait_for_peer(self.new_der))
        s.sendall(review[50:])
        status, _, body = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 200, body[:300])
        self.assertTrue(json.loads(body.decode())["response"]["allowed"])

    def test_half_written_key_does_not_break_serving(self):
        key_path = self.server.cert_files["tls.key"]
        with open(self.new["tls.key"], "rb") as f:
            new_key = f.read()
        # A writer that is not atomic: half the new key in place, then a pause.
        with open(key_path, "wb") as f:
            f.write(new_key[: len(new_key) // 2])
        time.sleep(1.6)  # at least one poll sees the broken file
        der, _ = self.peer()
        self.assertEqual(der, self.old_der)
        self.decide()
        self.assertTrue(any("reload failed" in l.get("msg", "") for l in self.server.log_lines()),
                        self.server.stderr_text()[-2000:])
        # Garbage and a mismatched pair are refused the same way.
        with open(key_path, "wb") as f:
            f.write(b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
        replace_atomically(self.new["tls.crt"], self.server.cert_files["tls.crt"])
        time.sleep(1.6)
        der, _ = self.peer()
        self.assertEqual(der, self.old_der)
        self.decide()
        # Finishing the write recovers without a restart.
        replace_atomically(self.new["tls.key"], key_path)
        self.assertIsNotNone(self.wait_for_peer(self.new_der), self.server.stderr_text()[-2000:])
        self.decide()
        self.assertTrue(self.server.alive())

    def test_removed_certificate_files_keep_the_current_certificate(self):
        os.unlink(self.server.cert_files["tls.crt"])
        os.unlink(self.server.cert_files["tls.key"])
        time.sleep(1.6)
        der, _ = self.peer()
        self.assertEqual(der, self.old_der)
        self.decide()
        self.install_new_pair()
        self.assertIsNotNone(self.wait_for_peer(self.new_der))

    def test_sigterm_stops_gracefully_with_exit_0_despite_idle_keep_alive(self):
        idle = self.server.connection(context=self.ctx)
        self.addCleanup(idle.close)
        self.decide(conn=idle)  # leaves an idle keep-alive connection open
        started = time.monotonic()
        rc = self.server.stop()
        self.assertEqual(rc, 0)
        self.assertLess(time.monotonic() - started, 5.0)


if __name__ == "__main__":
    unittest.main()
