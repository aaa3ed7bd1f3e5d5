"""The webhook listener's transport, end to end over real TLS:

- connection exhaustion: a connection that never finishes its TLS handshake
  is closed after --tls-handshake-timeout (while one that did keeps its slot
  under the longer header timeout); --max-connections-per-source and
  --max-connections close connections beyond them at once, counted by reason;
- protocol and ciphers, probed with `openssl s_client`: TLS 1.0 and 1.1
  refused, 1.2 and 1.3 accepted, only forward-secret AEAD suites negotiated;
- --client-ca: without a client certificate, or with one from another CA,
  the handshake is refused; with the right one the webhook answers 200; the
  file is reloaded when it changes.

Every wait is bounded; nothing asserts how long something took.
"""

import json
import os
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import unittest

import harness as h

OPENSSL = shutil.which("openssl")
# What the server may negotiate for TLS 1.2: ECDHE key exchange, AEAD ciphers.
FORWARD_SECRET_AEAD_12 = {
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305",
}
TLS13_SUITES = {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
HEALTHZ = ("GET /healthz HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % h.SERVICE_HOST).encode()


def metric(g, name, **labels):
    """The value of one series of `name` with (at least) these labels, or None."""
    for line in g.metrics().splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        series, _, value = line.rpartition(" ")
        if series.split("{", 1)[0] != name:
            continue
        if all('%s="%s"' % kv in series for kv in labels.items()):
            return float(value)
    return None


def wait_for(pred, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def closed_at_once(sock, timeout=10):
    """True when the peer closes `sock` (EOF or reset) without sending a byte."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def s_client(port, *args, request=None, timeout=30):
    """Runs openssl s_client against the webhook; returns (returncode, stdout+stderr)."""
    cmd = [OPENSSL, "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", h.SERVICE_HOST]
    cmd += list(args)
    if request is not None:
        cmd.append("-quiet")  # no session dump; waits for the server to close
    proc = subprocess.run(cmd, input=request or b"", stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout)
    return proc.returncode, proc.stdout.decode("utf-8", errors="replace")


def negotiated(output):
    """The cipher a finished s_client handshake negotiated, or None."""
    for line in output.splitlines():
        line = line.strip()
        # "New, TLSv1.2, Cipher is ECDHE-ECDSA-AES128-GCM-SHA256" ("(NONE)" when it failed)
        if line.startswith("New,") and "Cipher is " in line:
            cipher = line.split("Cipher is ", 1)[1].strip()
            return None if cipher == "(NONE)" else cipher
    return None


def openssl_ciphers(*args):
    out = subprocess.run([OPENSSL, "ciphers"] + list(args), stdout=subprocess.PIPE, check=True, timeout=30)
    return [c for c in out.stdout.decode().strip().split(":") if c]


def run_openssl(*args):
    proc = subprocess.run([OPENSSL] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if proc.returncode != 0:
        raise AssertionError("openssl %s: %s" % (" ".join(args), proc.stderr.decode(errors="replace")))


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    run_openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=" + name,
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    return crt, key


def make_client_cert(d, name, ca):
    key, csr, crt = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".crt"))
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n")
    run_openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", key, "-out", csr, "-subj", "/CN=" + name)
    run_openssl("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-set_serial", "0x%x" % os.getpid(),
                "-days", "2", "-out", crt, "-extfile", ext)
    return crt, key


class Exhaustion(unittest.TestCase):
    def test_a_connection_that_never_speaks_tls_is_closed_after_the_handshake_timeout(self):
        g = h.GateServer(sandbox="available", extra_args=["--tls-handshake-timeout", "1s"]).start()
        self.addCleanup(g.stop)
        handshaken = g.tls_socket()  # past the handshake: the 10s header timeout applies
        self.addCleanup(handshaken.close)
        silent = socket.create_connection((g.host, g.port), timeout=10)
        self.addCleanup(silent.close)
        self.assertTrue(closed_at_once(silent, timeout=20), "the silent connection was not closed")
        # The deadline closes the socket first and the failed handshake is
        # counted when its completion runs, so the count may trail the close.
        wait_for(lambda: metric(g, "isolation_gate_tls_handshake_timeouts_total", listener="webhook") == 1,
                 "the handshake timeout to be counted")
        self.assertEqual(metric(g, "isolation_gate_tls_handshake_timeouts_total", listener="webhook"), 1)
        # Closed for its handshake, not by a header timeout: the handshaken one still serves.
        handshaken.sendall(HEALTHZ)
        status, _, body = h.recv_http_response(handshaken)
        self.assertEqual(status, 200, body)

    def test_connections_beyond_the_per_source_and_total_caps_are_closed_at_once(self):
        g = h.GateServer(sandbox="available",
                         extra_args=["--max-connections", "6", "--max-connections-per-source", "3"]).start()
        self.addCleanup(g.stop)
        held = []
        self.addCleanup(lambda: [s.close() for s in held])

        def open_tls(source):
            sock = socket.create_connection((g.host, g.port), timeout=10, source_address=(source, 0))
            tls = g.context().wrap_socket(sock, server_hostname=h.SERVICE_HOST)
            held.append(tls)
            return tls

        for _ in range(3):
            open_tls("127.0.0.2")
        wait_for(lambda: metric(g, "isolation_gate_connections_active", listener="webhook") == 3, "3 connections")
        fourth = socket.create_connection((g.host, g.port), timeout=10, source_address=("127.0.0.2", 0))
        held.append(fourth)
        self.assertTrue(closed_at_once(fourth), "a 4th connection from one source was served")
        self.assertEqual(metric(g, "isolation_gate_connections_rejected_total", listener="webhook",
                                reason="per_source"), 1)
        # Other sources are served (and a request answered) up to the total.
        self.assertEqual(g.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")))
                         ["response"]["allowed"], True)
        for source in ("127.0.0.3", "127.0.0.3", "127.0.0.1"):
            open_tls(source)
        wait_for(lambda: metric(g, "isolation_gate_connections_active", listener="webhook") == 6, "6 connections")
        seventh = socket.create_connection((g.host, g.port), timeout=10, source_address=("127.0.0.4", 0))
        held.append(seventh)
        self.assertTrue(closed_at_once(seventh), "a 7th connection was served over --max-connections 6")
        self.assertEqual(metric(g, "isolation_gate_connections_rejected_total", listener="webhook",
                                reason="total"), 1)
        self.assertEqual(metric(g, "isolation_gate_connections_rejected_total", listener="webhook",
                                reason="per_source"), 1)
        # A slot given back is served again.
        held.pop(0).close()
        wait_for(lambda: metric(g, "isolation_gate_connections_active", listener="webhook") == 5, "a freed slot")
        again = open_tls("127.0.0.2")
        again.sendall(HEALTHZ)
        status, _, body = h.recv_http_response(again)
        self.assertEqual(status, 200, body)

    def test_bad_values_are_refused(self):
        for args in (["--max-connections", "10", "--max-connections-per-source", "11"],
                     ["--tls-handshake-timeout", "10ms"], ["--max-connections", "0"]):
            with self.subTest(args=args):
                proc = h.run_binary(["serve", "--local", "--components", h.EXAMPLE_COMPONENTS] + args)
                self.assertEqual(proc.returncode, 2, proc.stderr)


class TlsRecords(h.ServerTestCase):
    """TLS on the socket's descriptor (tls/direct_stream.h) against real clients:
    records that stop half way, TLS 1.2 and 1.3 with a body of many records."""

    server_kwargs = {"sandbox": "available", "extra_args": ["--tls-handshake-timeout", "1s"]}

    # The first 5 bytes of an application-data record announcing 100 bytes, and 10 of them.
    PARTIAL_RECORD = bytes([0x17, 0x03, 0x03, 0x00, 0x64]) + b"z" * 10

    def raw_twin(self, tls):
        """A second socket object on the TLS socket's connection, to write bytes past TLS."""
        return socket.socket(fileno=os.dup(tls.fileno()))

    def test_a_partial_client_hello_then_silence_is_closed_by_the_handshake_timeout(self):
        before = metric(self.server, "isolation_gate_tls_handshake_timeouts_total", listener="webhook")
        s = socket.create_connection((self.server.host, self.server.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00]) + b"\x01\x00")  # a ClientHello's first 7 bytes
        self.assertTrue(closed_at_once(s, timeout=20), "the stalled handshake was not closed")
        wait_for(lambda: metric(self.server, "isolation_gate_tls_handshake_timeouts_total",
                                listener="webhook") >= before + 1, "the handshake timeout to be counted")

    def test_a_peer_that_closes_mid_record_leaves_the_server_serving(self):
        requests = metric(self.server, "isolation_gate_http_requests_total", listener="webhook")
        for prefix in (b"", ("POST /mutate/pods HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                             "Content-Length: 1000\r\n\r\n" % h.SERVICE_HOST).encode()):
            with self.subTest(after_header=bool(prefix)):
                tls = self.server.tls_socket()
                if prefix:
                    tls.sendall(prefix)
                raw = self.raw_twin(tls)
                raw.sendall(self.PARTIAL_RECORD)
                raw.close()
                tls.close()
        wait_for(lambda: metric(self.server, "isolation_gate_connections_active", listener="webhook") == 0,
                 "the half-record connections to be closed")
        self.assertEqual(metric(self.server, "isolation_gate_http_requests_total", listener="webhook"), requests)
        r = self.server.request("GET", "/healthz")
        self.assertEqual(r.status, 200, r)

    def test_tls_1_2_and_1_3_clients_get_a_large_review_answered(self):
        pod = h.example_pod("report-parser-pod.yaml")
        pod.setdefault("metadata", {}).setdefault("annotations", {})["padding"] = "p" * (200 * 1024)
        body = json.dumps(h.pod_review(pod)).encode()
        self.assertGreater(len(body), 200 * 1024)
        for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
            with self.subTest(version=version.name):
                ctx = self.server.context()
                ctx.minimum_version = ctx.maximum_version = version
                conn = self.server.connection(context=ctx)
                self.addCleanup(conn.close)
                for _ in range(2):  # keep-alive: the second request on the same connection
                    r = self.server.request("POST", "/mutate/pods", body=body, conn=conn)
                    self.assertEqual(r.status, 200, r)
                    review = json.loads(r.body)
                    self.assertIn("allowed", review["response"])
                self.assertEqual(conn.sock.version(), {ssl.TLSVersion.TLSv1_2: "TLSv1.2",
                                                       ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version])


@unittest.skipUnless(OPENSSL, "openssl is not installed")
class Protocols(h.ServerTestCase):
    server_kwargs = {"sandbox": "available"}

    def test_tls_1_0_and_1_1_are_refused(self):
        for flag in ("-tls1", "-tls1_1"):
            with self.subTest(flag=flag):
                # SECLEVEL=0: the client offers the old protocol; the server must refuse it.
                rc, out = s_client(self.server.port, flag, "-cipher", "DEFAULT:@SECLEVEL=0")
                self.assertNotEqual(rc, 0, out)
                self.assertIsNone(negotiated(out), out)
                self.assertIn("alert protocol version", out)  # the server's refusal, not the client's

    def test_tls_1_2_and_1_3_are_accepted_with_forward_secret_aead_suites(self):
        rc, out = s_client(self.server.port, "-tls1_2")
        self.assertIn(negotiated(out), FORWARD_SECRET_AEAD_12, out)
        rc, out = s_client(self.server.port, "-tls1_3")
        self.assertIn(negotiated(out), TLS13_SUITES, out)
        for suite in sorted(TLS13_SUITES):
            with self.subTest(suite=suite):
                rc, out = s_client(self.server.port, "-tls1_3", "-ciphersuites", suite)
                self.assertEqual(negotiated(out), suite, out)
        rc, out = s_client(self.server.port, "-tls1_2", request=HEALTHZ)
        self.assertIn("HTTP/1.1 200", out)

    def test_only_forward_secret_aead_suites_are_negotiated_in_tls_1_2(self):
        # Every TLS 1.2 suite this OpenSSL knows, offered alone.
        offered = openssl_ciphers("-s", "-tls1_2", "ALL:COMPLEMENTOFALL:@SECLEVEL=0")
        self.assertGreater(len(offered), 20)
        accepted = set()
        for cipher in offered:
            rc, out = s_client(self.server.port, "-tls1_2", "-cipher", cipher + ":@SECLEVEL=0")
            got = negotiated(out)
            if got is not None:
                self.assertEqual(got, cipher, out)
                accepted.add(got)
        self.assertTrue(accepted, "no TLS 1.2 suite accepted")
        self.assertLessEqual(accepted, FORWARD_SECRET_AEAD_12)
        for refused in ("AES128-SHA", "AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES128-SHA256",
                        "ECDHE-RSA-AES256-SHA384"):
            self.assertIn(refused, offered)
            self.assertNotIn(refused, accepted)


@unittest.skipUnless(OPENSSL, "openssl is not installed")
class ClientAuthentication(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ig-client-ca-")
        cls.ca_a = make_ca(cls.dir, "apiserver-client-ca")
        cls.ca_b = make_ca(cls.dir, "some-other-ca")
        cls.client_a = make_client_cert(cls.dir, "kube-apiserver", cls.ca_a)
        cls.client_b = make_client_cert(cls.dir, "intruder", cls.ca_b)
        cls.ca_file = os.path.join(cls.dir, "client-ca.crt")
        shutil.copy(cls.ca_a[0], cls.ca_file)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def start(self):
        g = h.GateServer(sandbox="available", extra_args=["--client-ca", self.ca_file]).start()
        self.addCleanup(g.stop)
        return g

    def answers(self, g, cert=None):
        """True when a /healthz over TLS (with this client certificate) gets 200."""
        args = ["-tls1_3"] + (["-cert", cert[0], "-key", cert[1]] if cert else [])
        rc, out = s_client(g.port, *args, request=HEALTHZ)
        return "HTTP/1.1 200" in out

    def test_without_a_client_certificate_the_handshake_is_refused(self):
        g = self.start()
        for version in ("-tls1_2", "-tls1_3"):
            rc, out = s_client(g.port, version, request=HEALTHZ)
            self.assertNotIn("HTTP/1.1", out)
            self.assertIn("alert", out)
        # Python's client alike: no answer, an alert instead.
        with self.assertRaises((ssl.SSLError, ConnectionError)):
            sock = g.tls_socket()
            try:
                sock.sendall(HEALTHZ)
                if not sock.recv(1):
                    raise ConnectionError("closed")
            finally:
                sock.close()
        wait_for(lambda: metric(g, "isolation_gate_tls_handshake_failures_total", listener="webhook") >= 3,
                 "handshake failures counted")

    def test_a_certificate_from_another_ca_is_refused(self):
        g = self.start()
        for version in ("-tls1_2", "-tls1_3"):
            rc, out = s_client(g.port, version, "-cert", self.client_b[0], "-key", self.client_b[1],
                               request=HEALTHZ)
            self.assertNotIn("HTTP/1.1", out)
            self.assertIn("alert", out)

    def test_the_right_certificate_gets_answers(self):
        g = self.start()
        self.assertTrue(self.answers(g, self.client_a))
        rc, out = s_client(g.port, "-tls1_2", "-cert", self.client_a[0], "-key", self.client_a[1],
                           request=HEALTHZ)
        self.assertIn("HTTP/1.1 200", out)
        # An AdmissionReview over Python's client with the certificate.
        ctx = g.context()
        ctx.load_cert_chain(self.client_a[0], self.client_a[1])
        conn = g.connection(context=ctx)
        self.addCleanup(conn.close)
        answer = g.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")), conn=conn)
        self.assertEqual(answer["response"]["allowed"], True)

    def test_the_client_ca_file_is_reloaded_when_it_changes(self):
        ca_file = os.path.join(self.dir, "reloaded-ca.crt")
        shutil.copy(self.ca_a[0], ca_file)
        g = h.GateServer(sandbox="available", extra_args=["--client-ca", ca_file]).start()
        self.addCleanup(g.stop)
        self.assertTrue(self.answers(g, self.client_a))
        self.assertFalse(self.answers(g, self.client_b))
        tmp = ca_file + ".tmp"
        shutil.copy(self.ca_b[0], tmp)
        os.rename(tmp, ca_file)  # atomically, as a kubelet volume update does
        wait_for(lambda: self.answers(g, self.client_b), "the new client CA to be used")
        self.assertFalse(self.answers(g, self.client_a))
        # A file that holds no certificate keeps the current CA (and says so).
        with open(tmp, "w") as f:
            f.write("not a certificate\n")
        os.rename(tmp, ca_file)
        wait_for(lambda: any("reload failed" in l.get("msg", "") for l in g.log_lines()), "the reload error")
        self.assertTrue(self.answers(g, self.client_b))
        self.assertFalse(self.answers(g, self.client_a))

    def test_a_missing_or_empty_client_ca_file_stops_serve(self):
        empty = os.path.join(self.dir, "empty.crt")
        open(empty, "w").close()
        for path in (os.path.join(self.dir, "missing.crt"), empty):
            with self.subTest(path=path):
                proc = h.run_binary(["serve", "--local", "--components", h.EXAMPLE_COMPONENTS,
                                     "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                     "--client-ca", path], timeout=30)
                self.assertNotEqual(proc.returncode, 0)
                self.assertIn(path, proc.stderr.decode(errors="replace"))


if __name__ == "__main__":
    unittest.main()
