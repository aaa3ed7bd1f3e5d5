"""Bad input never crashes and never allows (docs/architecture.md, "Errors"), over real HTTPS.

After every test the server must still be alive and answering.
"""

import json
import os
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as h  # noqa: E402

MIB = 1024 * 1024
ENDPOINTS = ("/mutate/pods", "/validate/pods", "/validate/workloads", "/validate/components")


def request_bytes(method, path, body=b"", headers=None, content_type="application/json"):
    lines = ["%s %s HTTP/1.1" % (method, path), "Host: " + h.SERVICE_HOST]
    if content_type:
        lines.append("Content-Type: " + content_type)
    hdrs = dict(headers or {})
    if "Transfer-Encoding" not in hdrs and "Content-Length" not in hdrs:
        hdrs["Content-Length"] = str(len(body))
    for k, v in hdrs.items():
        lines.append("%s: %s" % (k, v))
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class BadInput(h.ServerTestCase):
    server_kwargs = {"sandbox": "available"}

    def setUp(self):
        self.sockets = []

    def tearDown(self):
        for s in self.sockets:
            try:
                s.close()
            except OSError:
                pass
        # Whatever the test sent, the server is alive and still decides correctly.
        self.assertTrue(self.server.alive(), self.server.stderr_text()[-4000:])
        self.assert_still_serving()

    def assert_still_serving(self):
        resp = self.server.review("/mutate/pods", h.pod_review(h.example_pod("report-parser-pod.yaml")))
        self.assertIs(resp["response"]["allowed"], True)
        self.assertEqual(self.server.probe("GET", "/healthz").status, 200)

    def tls(self, timeout=h.REQUEST_TIMEOUT):
        s = self.server.tls_socket(timeout=timeout)
        self.sockets.append(s)
        return s

    def assert_json_error(self, r, status):
        self.assertEqual(r.status, status, r)
        self.assertTrue(r.headers.get("content-type", "").startswith("application/json"), r.headers)
        body = r.json()
        self.assertIsInstance(body, dict)
        return body

    def assert_undecidable(self, review, path="/mutate/pods", *fragments):
        out = self.server.review(path, review)
        self.assertEqual(out["kind"], "AdmissionReview")
        resp = out["response"]
        self.assertEqual(resp["uid"], review["request"]["uid"])
        self.assertIs(resp["allowed"], False, resp)
        self.assertNotIn("patch", resp)
        msg = resp["status"]["message"]
        self.assertTrue(msg)
        for f in fragments:
            self.assertIn(f, msg)
        return resp

    # -- not JSON / not an AdmissionReview -> 4xx with a JSON body ----------------------
    def test_invalid_json_gets_400_with_a_json_status_body(self):
        for body in (b"{not json", b"", b"{\"apiVersion\": ", b"null x", b"\x00\x01"):
            for path in ENDPOINTS:
                with self.subTest(body=body, path=path):
                    status = self.assert_json_error(self.server.post(path, body), 400)
                    self.assertEqual(status.get("kind"), "Status")
                    self.assertEqual(status.get("code"), 400)
                    self.assertTrue(status.get("message"))

    def test_a_repeated_member_name_anywhere_gets_400_never_an_answer(self):
        # With the last one winning, "operation" could say CREATE to one reader and DELETE to another,
        # or a label name a trusted Component after an untrusted one. The API server never sends one.
        base = json.dumps(h.pod_review(h.make_pod(component="report-parser")))
        bodies = (base.replace('"operation": "CREATE"', '"operation": "DELETE", "operation": "CREATE"'),
                  base.replace('"labels": {', '"labels": {"gibson.zeroroot.ai/component": "docs-indexer", '),
                  base.replace('"spec": {', '"spec": {"unread": {"x": 1, "x": 2}, '))
        for body in bodies:
            self.assertNotEqual(body, base)
            for path in ENDPOINTS:
                with self.subTest(body=body[:80], path=path):
                    status = self.assert_json_error(self.server.post(path, body.encode()), 400)
                    self.assertIn("duplicate member name", status.get("message", ""))

    def test_json_that_is_not_an_admission_review_gets_400(self):
        pod = h.make_pod()
        for body in ([], "text", 42, {"a": 1}, pod,
                     {"apiVersion": "admission.k8s.io/v2", "kind": "AdmissionReview", "request": {"uid": "u"}},
                     {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionResponse", "request": {"uid": "u"}}):
            with self.subTest(body=str(body)[:60]):
                self.assert_json_error(self.server.post("/mutate/pods", json.dumps(body)), 400)

    def test_review_without_request_or_uid_gets_400(self):
        base = h.pod_review(h.make_pod())
        variants = []
        r = json.loads(json.dumps(base)); del r["request"]; variants.append(r)
        r = json.loads(json.dumps(base)); r["request"] = None; variants.append(r)
        r = json.loads(json.dumps(base)); r["request"] = [1]; variants.append(r)
        r = json.loads(json.dumps(base)); del r["request"]["uid"]; variants.append(r)
        r = json.loads(json.dumps(base)); r["request"]["uid"] = ""; variants.append(r)
        r = json.loads(json.dumps(base)); r["request"]["uid"] = 7; variants.append(r)
        for review in variants:
            for path in ENDPOINTS:
                with self.subTest(review=str(review.get("request"))[:60], path=path):
                    body = self.assert_json_error(self.server.post(path, review), 400)
                    self.assertIn("request", body.get("message", ""))

    # -- AdmissionReviews that cannot be decided -> 200, allowed false ------------------------
    def test_missing_object_is_answered_not_allowed(self):
        for path in ENDPOINTS:
            for obj in ("absent", None, [], "pod", 3):
                with self.subTest(path=path, object=obj):
                    if path == "/validate/workloads":
                        review = h.workload_review(h.make_workload("Deployment"))
                    elif path == "/validate/components":
                        review = h.component_review(h.example_component("docs-indexer.yaml"))
                    else:
                        review = h.pod_review(h.make_pod())
                    if obj == "absent":
                        del review["request"]["object"]
                    else:
                        review["request"]["object"] = obj
                    self.assert_undecidable(review, path, "object")

    def test_wrong_kind_on_an_endpoint_is_answered_not_allowed(self):
        deployment = h.workload_review(h.make_workload("Deployment"))
        pod = h.pod_review(h.make_pod())
        comp = h.component_review(h.example_component("docs-indexer.yaml"))
        service = h.admission_review({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
                                     group="", version="v1", kind="Service", resource="services")
        cases = [("/mutate/pods", deployment), ("/validate/pods", deployment), ("/mutate/pods", comp),
                 ("/validate/workloads", pod), ("/validate/workloads", comp),
                 ("/validate/components", pod), ("/validate/components", deployment)]
        for path in ENDPOINTS:
            cases.append((path, service))
        for path, review in cases:
            with self.subTest(path=path, kind=review["request"]["kind"]["kind"]):
                self.assert_undecidable(review, path, review["request"]["kind"]["kind"])

    def test_object_kind_that_disagrees_with_request_kind_is_answered_not_allowed(self):
        # request.kind is the API server's word for what is admitted; an object of another
        # kind must not be evaluated (or patched) as if it were what the request says.
        cases = []
        r = h.pod_review(h.make_pod())
        r["request"]["object"] = h.make_workload("Deployment", component="docs-indexer")
        cases += [("/mutate/pods", r), ("/validate/pods", r)]
        r = h.workload_review(h.make_workload("Deployment"))
        r["request"]["object"] = h.make_pod(component="docs-indexer")
        cases.append(("/validate/workloads", r))
        r = h.workload_review(h.make_workload("Deployment"))
        r["request"]["object"] = h.make_workload("Job", component="docs-indexer")
        cases.append(("/validate/workloads", r))
        for path, review in cases:
            with self.subTest(path=path, object_kind=review["request"]["object"]["kind"]):
                resp = self.server.review(path, review)["response"]
                self.assertIs(resp["allowed"], False, resp)
                self.assertNotIn("patch", resp)

    def test_missing_kind_or_operation_is_answered_not_allowed(self):
        for field in ("kind", "operation", "namespace"):
            with self.subTest(field=field):
                review = h.pod_review(h.make_pod(namespace=None))
                del review["request"]["object"]["metadata"]["namespace"]
                del review["request"][field]
                self.assert_undecidable(review, "/mutate/pods")

    def test_wrongly_typed_pod_fields_are_answered_not_allowed_naming_the_field(self):
        cases = [("spec", [], "spec"), ("hostNetwork", "yes", "spec.hostNetwork"),
                 ("containers", {"a": 1}, "spec.containers"),
                 ("labels", ["x"], "metadata.labels"),
                 ("runtimeClassName", 5, "spec.runtimeClassName")]
        for field, value, path in cases:
            with self.subTest(field=field):
                pod = h.make_pod(component="docs-indexer")
                if field == "spec":
                    pod["spec"] = value
                elif field == "labels":
                    pod["metadata"]["labels"] = value
                else:
                    pod["spec"][field] = value
                self.assert_undecidable(h.pod_review(pod), "/mutate/pods", path)

    # -- HTTP-level refusals ----------------------------------------------------------------
    def test_wrong_content_type_gets_415(self):
        body = json.dumps(h.pod_review(h.make_pod()))
        for ct in ("text/plain", "application/yaml", "application/json-patch+json",
                   "application/x-www-form-urlencoded", None):
            with self.subTest(content_type=ct):
                r = self.server.post("/mutate/pods", body, content_type=ct)
                self.assert_json_error(r, 415)

    def test_json_content_type_with_parameters_is_accepted(self):
        body = json.dumps(h.pod_review(h.make_pod()))
        for ct in ("application/json; charset=utf-8", "Application/JSON"):
            with self.subTest(content_type=ct):
                self.assertEqual(self.server.post("/mutate/pods", body, content_type=ct).status, 200)

    def test_wrong_method_gets_405(self):
        for method in ("GET", "PUT", "DELETE", "PATCH"):
            for path in ENDPOINTS:
                with self.subTest(method=method, path=path):
                    self.assert_json_error(self.server.request(method, path), 405)
        self.assert_json_error(self.server.request("POST", "/healthz", body=b"{}"), 405)

    def test_unknown_path_gets_404(self):
        for path in ("/", "/mutate", "/mutate/pods/", "/mutate/deployments", "/validate/pods/x",
                     "/MUTATE/PODS", "/mutate//pods", "/../mutate/pods"):
            with self.subTest(path=path):
                self.assert_json_error(self.server.post(path, b"{}"), 404)

    def test_body_over_3_mib_gets_413(self):
        big = b'{"pad":"' + b"x" * (3 * MIB + 1024) + b'"}'
        s = self.tls()
        # The Content-Length alone is over the limit: the server answers 413
        # before reading the body. Send the head and the body's first 64 KiB
        # from this thread only (an SSL socket must not be read and written
        # from two threads at once), then read the answer.
        s.settimeout(20)
        s.sendall(request_bytes("POST", "/mutate/pods", big)[: 64 * 1024])
        status, headers, body = h.recv_http_response(s, timeout=20)
        self.assertEqual(status, 413, body[:200])
        self.assertIsInstance(json.loads(body.decode()), dict)

    def test_body_of_exactly_3_mib_is_not_refused_for_size(self):
        review = h.pod_review(h.make_pod(component="docs-indexer"))
        review["request"]["object"]["metadata"]["annotations"] = {"pad": ""}
        raw = json.dumps(review).encode()
        review["request"]["object"]["metadata"]["annotations"]["pad"] = "x" * (3 * MIB - len(raw))
        raw = json.dumps(review).encode()
        self.assertEqual(len(raw), 3 * MIB)
        r = self.server.post("/mutate/pods", raw)
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.json()["response"]["allowed"])

    def test_body_over_3_mib_with_expect_100_continue_gets_413_before_the_body(self):
        s = self.tls()
        s.sendall(request_bytes("POST", "/mutate/pods", b"",
                                headers={"Content-Length": str(4 * MIB), "Expect": "100-continue"}))
        status, headers, body = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 413, body[:200])

    def test_expect_100_continue_with_a_small_body_is_served(self):
        review = json.dumps(h.pod_review(h.example_pod("report-parser-pod.yaml"))).encode()
        s = self.tls()
        s.sendall(request_bytes("POST", "/mutate/pods", b"",
                                headers={"Content-Length": str(len(review)), "Expect": "100-continue"}))
        status, _, rest = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 100)
        s.sendall(review)
        status, _, body = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(body.decode())["response"]["allowed"])

    def test_chunked_body_over_3_mib_gets_413(self):
        s = self.tls()
        chunk = b"x" * (256 * 1024)
        head = request_bytes("POST", "/mutate/pods", b"", headers={"Transfer-Encoding": "chunked"})
        data = head + (b"%x\r\n" % len(chunk) + chunk + b"\r\n") * 14 + b"0\r\n\r\n"
        # One thread only: an SSL socket must not be read and written from two
        # threads at once (OpenSSL forbids it; it made this test flaky). The
        # server answers 413 at 3 MiB and then reads (drains) the last 0.5 MiB,
        # so the whole send completes and the answer waits in our buffer.
        s.settimeout(20)
        s.sendall(data)
        status, _, body = h.recv_http_response(s, timeout=20)
        self.assertEqual(status, 413, body[:200])

    def test_oversized_headers_are_refused(self):
        s = self.tls()
        s.sendall(request_bytes("POST", "/mutate/pods", b"{}", headers={"X-Big": "a" * (64 * 1024)}))
        status, _, _ = h.recv_http_response(s, timeout=10)
        self.assertIn(status, (400, 431, None))
        self.assertNotEqual(status, 200)

    # -- parser limits ---------------------------------------------------------------------------
    def test_100000_deep_nesting_gets_400_and_the_server_still_answers(self):
        deep_arrays = b"[" * 100000 + b"]" * 100000
        deep_objects = b'{"a":' * 100000 + b"1" + b"}" * 100000
        review = h.pod_review(h.make_pod())
        prefix, suffix = json.dumps(review).encode().split(b'"oldObject": null')
        for deep in (deep_arrays, deep_objects):
            for body in (deep, prefix + b'"oldObject": ' + deep + suffix):
                with self.subTest(size=len(body), kind=body[:1]):
                    self.assert_json_error(self.server.post("/mutate/pods", body), 400)
        # Unbalanced (never closed) nesting too.
        self.assert_json_error(self.server.post("/validate/pods", b"[" * 200000), 400)

    def test_invalid_utf8_in_a_string_gets_400(self):
        review = json.dumps(h.pod_review(h.make_pod(name="PLACEHOLDER"))).encode()
        for bad in (b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80", b"\xe2\x82"):
            with self.subTest(bad=bad):
                body = review.replace(b"PLACEHOLDER", b"x" + bad + b"y")
                self.assert_json_error(self.server.post("/mutate/pods", body), 400)
        lone = review.replace(b"PLACEHOLDER", b"x\\udc00y")
        self.assert_json_error(self.server.post("/mutate/pods", lone), 400)

    def test_non_ascii_names_survive_in_messages(self):
        pod = h.make_pod(name="p\u00e9-\u2603", component="ghost-\u00fc")
        resp = self.server.review("/mutate/pods", h.pod_review(pod))["response"]
        self.assertFalse(resp["allowed"])
        self.assertIn("ghost-\u00fc", resp["status"]["message"])

    # -- misbehaving clients ----------------------------------------------------------------------
    def test_slow_client_sending_headers_byte_by_byte_is_served(self):
        review = json.dumps(h.pod_review(h.example_pod("report-parser-pod.yaml"))).encode()
        raw = request_bytes("POST", "/mutate/pods", review)
        head_len = raw.index(b"\r\n\r\n") + 4
        s = self.tls(timeout=10)
        delay = 2.0 / head_len
        started = time.monotonic()
        for i in range(head_len):
            s.sendall(raw[i:i + 1])
            time.sleep(delay)
        s.sendall(raw[head_len:])
        self.assertGreater(time.monotonic() - started, 1.5)
        status, _, body = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 200, body[:200])
        self.assertTrue(json.loads(body.decode())["response"]["allowed"])

    def test_silent_connections_do_not_block_other_clients(self):
        silent = []
        try:
            for _ in range(8):  # TCP only: no TLS handshake at all
                silent.append(socket.create_connection((self.server.host, self.server.port), 5))
            for _ in range(8):  # TLS done, then nothing
                silent.append(self.server.tls_socket(timeout=5))
            started = time.monotonic()
            for _ in range(10):
                resp = self.server.review("/mutate/pods", h.pod_review(h.example_pod("docs-indexer-pod.yaml")))
                self.assertTrue(resp["response"]["allowed"])
            self.assertLess(time.monotonic() - started, 5.0)
        finally:
            for s in silent:
                s.close()

    def test_half_closed_client_after_a_partial_request_is_closed_cleanly(self):
        raw = request_bytes("POST", "/mutate/pods", json.dumps(h.pod_review(h.make_pod())).encode())
        for cut in (10, raw.index(b"\r\n\r\n") + 4 + 20):
            with self.subTest(cut=cut):
                s = self.tls(timeout=10)
                s.sendall(raw[:cut])
                started = time.monotonic()
                h.half_close(s)  # TCP FIN under the TLS stream
                rest = h.recv_until_closed(s, timeout=8)
                self.assertLess(time.monotonic() - started, 8, "the server kept a half-closed client")
                self.assertFalse(rest.startswith(b"HTTP/1.1 200"), rest[:100])

    def test_half_closed_client_after_a_complete_request_is_answered(self):
        review = json.dumps(h.pod_review(h.example_pod("report-parser-pod.yaml"))).encode()
        s = self.tls(timeout=10)
        s.sendall(request_bytes("POST", "/mutate/pods", review))
        h.half_close(s)
        status, _, body = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(body.decode())["response"]["allowed"])

    def test_half_closed_plain_http_probe_client_is_answered(self):
        s = socket.create_connection((self.server.host, self.server.metrics_port), 10)
        self.sockets.append(s)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        status, _, _ = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 200)

    def test_chunk_size_minus_one_gets_400_and_the_server_still_answers(self):
        # Regression: cpprestsdk's http_listener aborted the process on this body.
        for chunk_line in (b"-1\r\n", b"-1\r\n\r\n", b"fffffffffffffffff\r\n", b"zz\r\n"):
            with self.subTest(chunk=chunk_line):
                s = self.tls(timeout=10)
                s.sendall(request_bytes("POST", "/mutate/pods", b"",
                                        headers={"Transfer-Encoding": "chunked"}) + chunk_line)
                status, _, body = h.recv_http_response(s, timeout=10)
                self.assertEqual(status, 400, body[:200])
                self.assertTrue(self.server.alive())
                self.assert_still_serving()
        # And on the plain-HTTP listener.
        s = socket.create_connection((self.server.host, self.server.metrics_port), 10)
        self.sockets.append(s)
        s.sendall(b"POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n")
        status, _, _ = h.recv_http_response(s, timeout=10)
        self.assertEqual(status, 400)

    def test_plain_http_on_the_tls_port_does_not_hurt(self):
        s = socket.create_connection((self.server.host, self.server.port), 10)
        self.sockets.append(s)
        s.sendall(b"POST /mutate/pods HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        data = h.recv_until_closed(s, timeout=10)
        self.assertFalse(data.startswith(b"HTTP/1.1 200"))

    def test_probe_listener_never_serves_admission_paths(self):
        review = json.dumps(h.pod_review(h.example_pod("report-parser-pod.yaml")))
        for path in ENDPOINTS:
            for method in ("POST", "GET"):
                with self.subTest(path=path, method=method):
                    r = self.server.probe(method, path, body=review if method == "POST" else None,
                                          headers={"Content-Type": "application/json"})
                    self.assertEqual(r.status, 404, r)
                    self.assertNotIn(b"AdmissionReview", r.body)

    def test_probes_answer_on_both_listeners(self):
        for path in ("/healthz", "/readyz", "/metrics"):
            with self.subTest(path=path):
                self.assertEqual(self.server.probe("GET", path).status, 200)
                self.assertEqual(self.server.request("GET", path).status, 200)

    def test_head_response_carries_no_body(self):
        # RFC 9110 9.3.2: no content in a response to HEAD; a body would be read as the start
        # of the next response on a keep-alive connection.
        pipelined = (b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                     b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        for listener in ("probe", "webhook"):
            with self.subTest(listener=listener):
                if listener == "probe":
                    s = socket.create_connection((self.server.host, self.server.metrics_port), 10)
                    self.sockets.append(s)
                else:
                    s = self.tls(timeout=10)
                s.sendall(pipelined)
                data = h.recv_until_closed(s, timeout=5)
                head_resp, sep, rest = data.partition(b"\r\n\r\n")
                self.assertTrue(head_resp.startswith(b"HTTP/1.1 200"), data[:200])
                self.assertTrue(rest.startswith(b"HTTP/1.1 200"),
                                "bytes after the HEAD response headers: %r" % rest[:80])

    def test_keep_alive_connection_survives_a_bad_review(self):
        conn = self.server.connection()
        try:
            self.assertEqual(self.server.post("/mutate/pods", b"{bad", conn=conn).status, 400)
            ok = self.server.review("/mutate/pods", h.pod_review(h.make_pod()), conn=conn)
            self.assertTrue(ok["response"]["allowed"])
        finally:
            conn.close()

    def test_metrics_count_reviews_and_errors(self):
        before_errors = self.server.metric_values("isolation_gate_http_errors_total") or 0
        before_reviews = self.server.metric_values("isolation_gate_admission_reviews_total") or 0
        self.server.post("/mutate/pods", b"{bad")
        self.server.post("/nope", b"{}")
        self.server.review("/validate/pods", h.pod_review(h.make_pod()))
        s = self.tls(timeout=10)
        s.sendall(request_bytes("POST", "/mutate/pods", b"", headers={"Transfer-Encoding": "chunked"}) + b"-1\r\n")
        h.recv_http_response(s, timeout=10)
        self.assertGreaterEqual(self.server.metric_values("isolation_gate_http_errors_total"), before_errors + 2)
        self.assertGreaterEqual(self.server.metric_values("isolation_gate_admission_reviews_total"),
                                before_reviews + 1)
        self.assertGreaterEqual(self.server.metric_values("isolation_gate_http_protocol_errors_total"), 1)
        self.assertGreaterEqual(self.server.metric_values("isolation_gate_connections_accepted_total"), 1)
        self.assertEqual(self.server.metric_values("isolation_gate_sandbox_available"), 1)


if __name__ == "__main__":
    unittest.main()
