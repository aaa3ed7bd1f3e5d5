"""A CA rotation with a replica that lags (docs/operations.md, "Self-managed certificates"):
two replicas of the real binary against the repository's test API server,
the second one's Secret watch held back by the server (a delay rule on its
watch request), its EndpointSlice naming it a ready replica of the Service.

- the old CA stays in every caBundle while the lagging replica serves the
  leaf it signed: the leader observed it (it dials every ready endpoint);
- every TLS handshake to both replicas, verified against the caBundle as
  published at that moment, succeeds throughout;
- once the lag is released the lagging replica serves the new leaf and the
  old CA leaves ca.crt and the caBundles, for that observation (the
  leader's log says so), before the old CA would have expired.

Every wait is bounded; nothing asserts how long something took.
"""

import base64
import os
import socket
import ssl
import sys
import threading
import unittest

import harness as h
import test_cluster as tc
import test_operator as to

sys.path.insert(0, os.path.join(h.SOURCE_DIR, "tests", "apiserver"))

GATE_NS = to.GATE_NS
SECRET = to.SECRET
# The CA rotates at two thirds of its lifetime; the leaf switches a tenth of
# its validity after the new bundle is in place; the old CA then has a third
# of its lifetime left, the window in which only an observation can drop it.
LIFETIME = int(90 * h.SLOWDOWN)
LIFETIME_ARGS = ["--cert-validity", "%ds" % LIFETIME, "--ca-validity", "%ds" % LIFETIME]
# The lagging replica never leads (the Lease is the leader's, renewed), and
# its API client waits as long for the held watch as the test may take.
PATIENT_ELECTION = ["--lease-duration", "%ds" % (4 * LIFETIME), "--renew-deadline", "%ds" % (3 * LIFETIME),
                    "--retry-period", "500ms"]


def pem_certificates(pem):
    return [b for b in pem.split("-----END CERTIFICATE-----") if "-----BEGIN CERTIFICATE-----" in b]


def endpoint_slice(name, port):
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": GATE_NS,
                         "labels": {"kubernetes.io/service-name": h.SERVICE_NAME}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": port, "protocol": "TCP"}]}


class LaggingReplica(to.OperatorCase):
    def setUp(self):
        super().setUp()
        mutating, validating = to.webhook_configurations()
        self.api.create("mutatingwebhookconfigurations", mutating)
        self.api.create("validatingwebhookconfigurations", validating)
        # As the chart pre-creates it.
        self.api.create("secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                    "metadata": {"name": SECRET, "namespace": GATE_NS}}, namespace=GATE_NS)

    def bundles(self):
        out = []
        for kind in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            for w in self.api.get(kind, to.WEBHOOKS)["webhooks"]:
                out.append(w["clientConfig"].get("caBundle", ""))
        return out

    def secret_ca(self):
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        return base64.b64decode(s["data"]["ca.crt"]).decode() if s else ""

    def bundle_pem(self):
        b = self.bundles()[0]
        return base64.b64decode(b).decode() if b else ""

    def served(self, port, bundle):
        """The DER certificate the replica on `port` presents, verified against `bundle`."""
        ctx = ssl.create_default_context(cadata=bundle)
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname=h.SERVICE_HOST) as s:
                return s.getpeercert(binary_form=True)

    def secret_leaf_der(self):
        s = self.api.get("secrets", SECRET, namespace=GATE_NS)
        return ssl.PEM_cert_to_DER_cert(base64.b64decode(s["data"]["tls.crt"]).decode())

    def test_the_old_ca_leaves_only_once_the_lagging_replica_serves_the_new_leaf(self):
        a = self.gate_with("gate-a", tls="self-managed", wait_ready=False, extra=LIFETIME_ARGS)
        self.wait_leader(a, "gate-a leads")
        tc.wait_until("caBundle in every webhook", lambda: all(self.bundles()) and len(set(self.bundles())) == 1)
        a._wait_ready()
        self.api.create("endpointslices", endpoint_slice("isolation-gate-a", a.port), namespace=GATE_NS)
        first_bundle = self.bundle_pem()
        self.assertEqual(len(pem_certificates(first_bundle)), 1)
        first_leaf = self.served(a.port, first_bundle)

        # The next watch of the Secret (gate-b's: gate-a's is open) is held until released.
        self.api.wait_for_watch("secrets", timeout=to.WAIT)
        mark = self.api.request_mark()
        hold = self.api.add_delay(600, method="GET", path=r"/namespaces/%s/secrets$" % GATE_NS, watch=True, count=1)
        self.addCleanup(self.api.clear_delays)
        b = h.GateServer(kubeconfig=self.kubeconfig, tls="self-managed", wait_ready=True,
                         extra_args=PATIENT_ELECTION + LIFETIME_ARGS, env={"POD_NAME": "gate-b"})
        b.start()
        self.addCleanup(b.stop)
        self.api.wait_for_request(method="GET", path=r"/secrets$", watch=True, since=mark, timeout=to.WAIT)
        self.assertTrue(self.holder().startswith("gate-a"), self.holder())
        self.assertEqual(self.served(b.port, first_bundle), first_leaf)
        self.api.create("endpointslices", endpoint_slice("isolation-gate-b", b.port), namespace=GATE_NS)

        # Handshakes to both replicas, each verified against the caBundle published at that moment.
        failures, seen = [], []
        stop = threading.Event()

        def handshakes():
            while not stop.is_set():
                bundle = self.bundle_pem()
                for name, port in (("gate-a", a.port), ("gate-b", b.port)):
                    try:
                        seen.append((name, len(pem_certificates(bundle)), self.served(port, bundle)))
                    except (OSError, ssl.SSLError) as e:
                        failures.append("%s with %d CA(s): %r" % (name, len(pem_certificates(bundle)), e))
                stop.wait(0.1)
        t = threading.Thread(target=handshakes)
        t.start()
        try:
            # The rotation: the new CA joins the bundle, then gate-a serves a leaf of it.
            tc.wait_until("gate-a serves a leaf of the new CA",
                          lambda: len(pem_certificates(self.bundle_pem())) == 2
                          and self.secret_leaf_der() != first_leaf
                          and self.served(a.port, self.bundle_pem()) == self.secret_leaf_der(),
                          timeout=2 * LIFETIME)
            # The leader has looked at both replicas and keeps the old CA: gate-b lags.
            tc.wait_until("the leader keeping the old CA for the replica that lags",
                          lambda: any("the old CA stays in ca.crt" in l.get("msg", "") for l in a.log_lines()))
            self.assertEqual(len(pem_certificates(self.bundle_pem())), 2)
            self.assertEqual(len(pem_certificates(self.secret_ca())), 2)
            self.assertEqual(self.served(b.port, self.bundle_pem()), first_leaf)

            # Released: gate-b catches up, then the old CA leaves.
            self.api.clear_delays(hold)
            new_leaf = self.secret_leaf_der()
            tc.wait_until("gate-b serves the new leaf", lambda: self.served(b.port, self.bundle_pem()) == new_leaf)
            tc.wait_until("the old CA gone from ca.crt and every caBundle",
                          lambda: len(pem_certificates(self.secret_ca())) == 1
                          and all(self.bundles()) and len(set(self.bundles())) == 1
                          and len(pem_certificates(self.bundle_pem())) == 1)
            tc.wait_until("handshakes with the new CA alone in the bundle",
                          lambda: ("gate-a", 1, new_leaf) in seen and ("gate-b", 1, new_leaf) in seen)
        finally:
            stop.set()
            t.join(timeout=30)
        self.assertFalse(t.is_alive())
        self.assertEqual(failures, [])
        self.assertTrue(any("dropped the old CA from ca.crt (every ready replica serves a leaf of the new one)"
                            in l.get("msg", "") for l in a.log_lines()), a.stderr_text()[-3000:])
        # Both replicas were seen serving while the bundle held two CAs, gate-b on the old leaf.
        self.assertIn(("gate-b", 2, first_leaf), seen)
        # Every request was granted by the chart (the EndpointSlices' list and watch included).
        granted = tc.assert_granted(self, self.api.requests())
        self.assertIn(("discovery.k8s.io", "endpointslices", "watch", None, GATE_NS), granted)


if __name__ == "__main__":
    unittest.main()
