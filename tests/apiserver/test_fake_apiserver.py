"""Self-tests of the test API server (fake_apiserver.py).

The client side is python3-kubernetes (an independent implementation: its
ApiClient, CustomObjectsApi and kubernetes.watch.Watch) where it applies, and a
raw TLS socket reading the chunked watch stream where chunk boundaries, dropped
connections and HTTP statuses matter. Every wait is bounded.

Run: /usr/bin/python3 -m unittest discover -s tests/apiserver -p 'test_*.py'
"""

import base64
import datetime
import http.client
import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request

import kubernetes
from kubernetes import client as kclient
from kubernetes.client.rest import ApiException

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_apiserver  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

GROUP, VERSION, PLURAL = "gibson.zeroroot.ai", "v1alpha1", "components"
CERT_DIR = None


def setUpModule():
    global CERT_DIR
    CERT_DIR = tempfile.mkdtemp(prefix="fake-apiserver-certs-")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", os.path.join(CERT_DIR, "tls.key"), "-out", os.path.join(CERT_DIR, "tls.crt"),
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)


def tearDownModule():
    shutil.rmtree(CERT_DIR, ignore_errors=True)


def cert():
    return os.path.join(CERT_DIR, "tls.crt")


def key():
    return os.path.join(CERT_DIR, "tls.key")


def wait_until(pred, timeout=5.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out after %.1fs waiting for %s" % (timeout, what))
        time.sleep(0.02)


class RawWatch:
    """A watch read over a raw TLS socket, keeping the HTTP chunks as sent."""

    def __init__(self, server, path, token, stop_after_events=None, timeout=15.0):
        self.server, self.path, self.token = server, path, token
        self.stop_after_events = stop_after_events
        self.timeout = timeout
        self.status = None
        self.headers = {}
        self.body = b""
        self.chunks = []
        self.terminated = False      # the terminating 0-length chunk was read
        self.eof = False             # the connection ended without it
        self.error = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def join(self, timeout=15.0):
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("raw watch did not end within %.1fs" % timeout)
        return self

    def run(self):
        return self.start().join(self.timeout + 5)

    def data(self):
        with self._lock:
            return b"".join(self.chunks)

    def events(self):
        lines = self.data().split(b"\n")
        return [json.loads(line) for line in lines[:-1] if line.strip()]

    def tail(self):
        return self.data().split(b"\n")[-1]

    def wait_events(self, n, timeout=5.0):
        return wait_until(lambda: len(self.events()) >= n or not self._thread.is_alive(), timeout,
                          "%d watch events" % n) and self.events()

    def _run(self):
        try:
            ctx = ssl.create_default_context(cafile=cert())
            raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=self.timeout)
            sock = ctx.wrap_socket(raw, server_hostname="localhost")
            self.sock = sock
            req = "GET %s HTTP/1.1\r\nHost: localhost\r\nAccept: application/json\r\n" % self.path
            if self.token:
                req += "Authorization: Bearer %s\r\n" % self.token
            sock.sendall((req + "\r\n").encode())
            f = self.f = sock.makefile("rb")
            status_line = f.readline()
            self.status = int(status_line.split()[1])
            while True:
                line = f.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                k, v = line.decode().split(":", 1)
                self.headers[k.strip().lower()] = v.strip()
            if "chunked" not in self.headers.get("transfer-encoding", ""):
                self.body = f.read(int(self.headers.get("content-length", "0")))
                return
            while True:
                line = f.readline()
                if not line:
                    self.eof = True
                    return
                size = int(line.strip(), 16)
                if size == 0:
                    f.readline()
                    self.terminated = True
                    return
                data = f.read(size)
                if len(data) < size:
                    with self._lock:
                        self.chunks.append(data)
                    self.eof = True
                    return
                crlf = f.read(2)
                with self._lock:
                    self.chunks.append(data)
                if crlf != b"\r\n":
                    self.eof = True
                    return
                if self.stop_after_events is not None and len(self.events()) >= self.stop_after_events:
                    sock.close()
                    return
        except (OSError, ssl.SSLError, ValueError) as e:
            self.error = e
            self.eof = True
        finally:
            for s in (getattr(self, "f", None), getattr(self, "sock", None)):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass


def valid_event_v1(name, ns="ns1", **extra):
    ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": ns},
          "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "gibson.zeroroot.ai/isolation-gate",
          "reportingInstance": "isolation-gate-0", "action": "Reconcile", "reason": "Ready", "type": "Normal",
          "note": "ok", "regarding": {"kind": "Component", "name": "c1", "namespace": ns}}
    ev.update(extra)
    return ev


class Base(unittest.TestCase):
    server_kwargs = {}

    def write_kubeconfig(self):
        """A kubeconfig for kubectl and helm: this server, its CA, the token."""
        path = os.path.join(self.tmp, "kubeconfig")
        with open(path, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "c",
                       "clusters": [{"name": "f", "cluster": {"server": self.server.url,
                                                              "certificate-authority": cert()}}],
                       "users": [{"name": "u", "user": {"token": self.token}}],
                       "contexts": [{"name": "c", "context": {"cluster": "f", "user": "u"}}]}, f)
        return path

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="fake-apiserver-test-")
        self.token = "token-one"
        self.token_file = os.path.join(self.tmp, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        kw = dict(bookmark_interval=0.3, too_large_rv_wait=0.3)
        kw.update(self.server_kwargs)
        self.server = FakeApiServer(cert(), key(), token_file=self.token_file, **kw).start()
        self.api = self.api_client(self.token)
        self.core = kclient.CoreV1Api(self.api)
        self.custom = kclient.CustomObjectsApi(self.api)

    def tearDown(self):
        self.server.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def api_client(self, token):
        cfg = kclient.Configuration()
        cfg.host = self.server.url
        cfg.ssl_ca_cert = cert()
        cfg.verify_ssl = True
        cfg.api_key = {"authorization": token}
        cfg.api_key_prefix = {"authorization": "Bearer"}
        api = kclient.ApiClient(cfg)
        self.addCleanup(api.close)
        self.addCleanup(api.rest_client.pool_manager.clear)   # close its keep-alive sockets
        return api

    def raw(self, method, path, body=None, content_type="application/json", token=None, headers=None):
        """-> (status, headers dict lower-cased, parsed body or raw bytes)."""
        ctx = ssl.create_default_context(cafile=cert())
        conn = http.client.HTTPSConnection("localhost", self.server.port, context=ctx, timeout=15)
        try:
            hdrs = {"Authorization": "Bearer " + (token or self.token)}
            if body is not None:
                hdrs["Content-Type"] = content_type
                if not isinstance(body, bytes):
                    body = json.dumps(body).encode()
            hdrs.update(headers or {})
            conn.request(method, path, body=body, headers=hdrs)
            r = conn.getresponse()
            data = r.read()
            try:
                data = json.loads(data)
            except ValueError:
                pass
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            conn.close()

    def assertStatus(self, body, code, reason):
        self.assertIsInstance(body, dict, body)
        self.assertEqual(body.get("kind"), "Status", body)
        self.assertEqual(body.get("apiVersion"), "v1", body)
        self.assertEqual(body.get("status"), "Failure", body)
        self.assertEqual(body.get("code"), code, body)
        self.assertEqual(body.get("reason"), reason, body)
        self.assertTrue(body.get("message"), body)

    def exc_status(self, exc):
        return json.loads(exc.body)

    def component(self, name, ns="default", trust="trusted", **extra):
        obj = {"apiVersion": GROUP + "/" + VERSION, "kind": "Component",
               "metadata": {"name": name, "namespace": ns},
               "spec": {"policy": {"content_trust": trust}}}
        obj.update(extra)
        return obj

    def node(self, name, ready=True, labels=None):
        return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}},
                "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


class TestObjects(Base):
    def test_a_new_namespace_gets_its_default_service_account(self):
        # kube-controller-manager's serviceaccounts controller: pods that name no ServiceAccount need it.
        self.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "fresh"}})
        sa = self.core.read_namespaced_service_account("default", "fresh")
        self.assertEqual((sa.metadata.name, sa.metadata.namespace), ("default", "fresh"))
        self.assertTrue(sa.metadata.uid)
        self.assertEqual([s.metadata.name for s in self.core.list_namespaced_service_account("fresh").items],
                         ["default"])

    def test_create_get_delete_and_error_status_bodies(self):
        created = self.core.create_node(self.node("n1"))
        md = created.metadata
        self.assertTrue(md.uid)
        self.assertIsNotNone(md.creation_timestamp)
        self.assertEqual(md.generation, 1)
        self.assertEqual(md.resource_version, self.server.resource_version())
        self.assertEqual(created.status.conditions[0].type, "Ready")   # core Node: status kept on create
        with self.assertRaises(ApiException) as cm:
            self.core.create_node(self.node("n1"))
        self.assertEqual(cm.exception.status, 409)
        self.assertStatus(self.exc_status(cm.exception), 409, "AlreadyExists")
        with self.assertRaises(ApiException) as cm:
            self.core.read_node("missing")
        self.assertStatus(self.exc_status(cm.exception), 404, "NotFound")
        self.assertEqual(self.exc_status(cm.exception)["details"]["name"], "missing")
        self.core.delete_node("n1")
        self.assertIsNone(self.server.get("nodes", "n1"))
        # every resource of the table has a working path (with the least its validation accepts)
        least = {"pods": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
                 "events": {"involvedObject": {"namespace": "ns1"}},
                 "events.events.k8s.io": valid_event_v1("x")}
        for res in fake_apiserver.RESOURCES:
            base = res.prefix + ("/namespaces/ns1/" if res.namespaced else "/") + res.plural
            st, _, body = self.raw("POST", base, dict(least.get(res.id, {}), metadata={"name": "x"}))
            self.assertEqual(st, 201, (base, body))
            self.assertEqual(body["kind"], res.kind)
            st, _, body = self.raw("GET", base + "/x")
            self.assertEqual((st, body["metadata"]["name"]), (200, "x"), base)
            st, _, body = self.raw("GET", base)
            self.assertEqual(body["kind"], res.kind + "List")
        st, _, body = self.raw("GET", "/apis/gibson.zeroroot.ai/v1alpha1/components")
        self.assertEqual([i["metadata"]["namespace"] for i in body["items"]], ["ns1"])
        st, _, body = self.raw("GET", "/api/v1/nothings")
        self.assertStatus(body, 404, "NotFound")
        st, _, body = self.raw("PUT", "/api/v1/nodes", {"metadata": {"name": "x"}})
        self.assertStatus(body, 405, "MethodNotAllowed")
        st, _, body = self.raw("POST", "/api/v1/nodes", b"{not json")
        self.assertStatus(body, 400, "BadRequest")
        st, _, body = self.raw("POST", "/api/v1/nodes", {"metadata": {"name": "Bad_Name"}})
        self.assertStatus(body, 422, "Invalid")
        st, _, body = self.raw("POST", "/api/v1/namespaces/ns1/secrets",
                               {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
        self.assertEqual((st, body["data"], "stringData" in body), (201, {"k": "dg=="}, False))
        st, _, body = self.raw("GET", "/version")
        self.assertEqual((st, body["major"]), (200, "1"))
        st, _, body = self.raw("GET", "/healthz")
        self.assertEqual((st, body), (200, b"ok"))

    def test_stale_update_is_409_conflict(self):
        self.core.create_node(self.node("n1"))
        first = self.core.read_node("n1")
        first.metadata.labels = {"a": "1"}
        updated = self.core.replace_node("n1", first)
        self.assertNotEqual(updated.metadata.resource_version, first.metadata.resource_version)
        first.metadata.labels = {"a": "2"}       # still carries the old resourceVersion
        with self.assertRaises(ApiException) as cm:
            self.core.replace_node("n1", first)
        self.assertStatus(self.exc_status(cm.exception), 409, "Conflict")
        self.assertEqual(self.core.read_node("n1").metadata.labels, {"a": "1"})
        # updating a missing object is 404, not a create
        with self.assertRaises(ApiException) as cm:
            self.core.replace_node("n2", self.node("n2"))
        self.assertEqual(cm.exception.status, 404)

    def test_merge_patch_json_patch_and_generation(self):
        self.custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, self.component("c1"))
        got = self.custom.patch_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, "c1",
            {"metadata": {"labels": {"team": "a"}}, "spec": {"policy": {"content_trust": "untrusted"}, "x": None}})
        self.assertEqual(got["spec"]["policy"]["content_trust"], "untrusted")
        self.assertEqual(got["metadata"]["labels"], {"team": "a"})
        self.assertEqual(got["metadata"]["generation"], 2)
        got = self.custom.patch_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c1",
                                                         {"metadata": {"labels": {"team": None, "b": "c"}}})
        self.assertEqual(got["metadata"]["labels"], {"b": "c"})
        self.assertEqual(got["metadata"]["generation"], 2)        # metadata only: no bump
        path = "/apis/%s/%s/namespaces/default/%s/c1" % (GROUP, VERSION, PLURAL)
        ops = [
            {"op": "test", "path": "/spec/policy/content_trust", "value": "untrusted"},
            {"op": "add", "path": "/spec/list", "value": [1, 3]},
            {"op": "add", "path": "/spec/list/1", "value": 2},
            {"op": "add", "path": "/spec/list/-", "value": 4},
            {"op": "replace", "path": "/spec/policy/content_trust", "value": "trusted"},
            {"op": "copy", "from": "/spec/list", "path": "/spec/copied"},
            {"op": "move", "from": "/spec/copied", "path": "/spec/moved"},
            {"op": "remove", "path": "/spec/list/0"},
            {"op": "add", "path": "/metadata/annotations", "value": {"a~b/c": "1"}},
            {"op": "test", "path": "/metadata/annotations/a~0b~1c", "value": "1"},
        ]
        st, _, body = self.raw("PATCH", path, ops, "application/json-patch+json")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["spec"], {"policy": {"content_trust": "trusted"}, "list": [2, 3, 4], "moved": [1, 2, 3, 4]})
        self.assertEqual(body["metadata"]["generation"], 3)
        before = self.server.resource_version()
        st, _, body = self.raw("PATCH", path, [{"op": "test", "path": "/spec/list/0", "value": 99}],
                               "application/json-patch+json")
        self.assertStatus(body, 422, "Invalid")
        st, _, body = self.raw("PATCH", path, [{"op": "remove", "path": "/spec/nope"}], "application/json-patch+json")
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(self.server.resource_version(), before)     # failed patches change nothing
        st, _, body = self.raw("PATCH", path, {"spec": {}}, "application/strategic-merge-patch+json")
        self.assertStatus(body, 415, "UnsupportedMediaType")
        # the python client sends a dict patch for a Node as a strategic merge patch: refused
        self.core.create_node(self.node("n1"))
        with self.assertRaises(ApiException) as cm:
            self.core.patch_node("n1", {"spec": {"unschedulable": True}})
        self.assertEqual(cm.exception.status, 415)
        # a resourceVersion in a merge patch is a precondition
        st, _, body = self.raw("PATCH", path, {"metadata": {"resourceVersion": "1"}, "spec": {"z": 1}},
                               "application/merge-patch+json")
        self.assertStatus(body, 409, "Conflict")

    def test_status_subresource_touches_only_status(self):
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, "default", PLURAL, self.component("c1", status={"phase": "ignored-on-create"}))
        obj = self.custom.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c1")
        self.assertNotIn("status", obj)                       # CRD: create ignores .status
        got = self.custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, "default", PLURAL, "c1",
            {"status": {"phase": "Ready"}, "spec": {"policy": {"content_trust": "untrusted"}},
             "metadata": {"labels": {"x": "y"}}})
        self.assertEqual(got["status"], {"phase": "Ready"})
        self.assertEqual(got["spec"]["policy"]["content_trust"], "trusted")
        self.assertNotIn("labels", got["metadata"])
        self.assertEqual(got["metadata"]["generation"], 1)
        self.assertNotEqual(got["metadata"]["resourceVersion"], obj["metadata"]["resourceVersion"])
        # PUT on /status with a changed spec: spec ignored
        got["spec"] = {"policy": {"content_trust": "untrusted"}}
        got["status"] = {"phase": "Degraded"}
        got = self.custom.replace_namespaced_custom_object_status(GROUP, VERSION, "default", PLURAL, "c1", got)
        self.assertEqual((got["status"]["phase"], got["spec"]["policy"]["content_trust"]), ("Degraded", "trusted"))
        self.assertEqual(got["metadata"]["generation"], 1)
        # main resource: .status changes ignored, spec change bumps generation
        got["status"] = {"phase": "Hacked"}
        got["spec"] = {"policy": {"content_trust": "untrusted"}}
        got = self.custom.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c1", got)
        self.assertEqual(got["status"]["phase"], "Degraded")
        self.assertEqual(got["metadata"]["generation"], 2)
        # nodes have a status subresource too
        self.core.create_node(self.node("n1"))
        st, _, body = self.raw("PATCH", "/api/v1/nodes/n1", {"status": {"conditions": []}}, "application/merge-patch+json")
        self.assertEqual(body["status"]["conditions"][0]["type"], "Ready")
        st, _, body = self.raw("PATCH", "/api/v1/nodes/n1/status", {"status": {"conditions": []}},
                               "application/merge-patch+json")
        self.assertEqual(body["status"]["conditions"], [])
        st, _, body = self.raw("GET", "/apis/node.k8s.io/v1/runtimeclasses/x/status")
        self.assertStatus(body, 404, "NotFound")

    def test_finalizers_delay_deletion(self):
        self.server.create("components", self.component("c1", metadata={"name": "c1", "namespace": "default",
                                                                         "finalizers": ["f/x"]}))
        out = self.custom.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "c1")
        self.assertTrue(out["metadata"]["deletionTimestamp"])
        self.assertIsNotNone(self.server.get("components", "c1", "default"))
        self.server.patch("components", "c1", {"metadata": {"finalizers": None}}, namespace="default")
        self.assertIsNone(self.server.get("components", "c1", "default"))

    def test_selectors(self):
        for i, zone in enumerate(["a", "b", "a"]):
            self.server.create("nodes", self.node("n%d" % i, labels={"zone": zone, "idx": str(i)}))
        names = lambda lst: [n.metadata.name for n in lst.items]  # noqa: E731
        self.assertEqual(names(self.core.list_node(label_selector="zone=a")), ["n0", "n2"])
        self.assertEqual(names(self.core.list_node(label_selector="zone!=a")), ["n1"])
        self.assertEqual(names(self.core.list_node(label_selector="zone in (a,b),idx notin (0)")), ["n1", "n2"])
        self.assertEqual(names(self.core.list_node(label_selector="!nope,zone")), ["n0", "n1", "n2"])
        self.assertEqual(names(self.core.list_node(field_selector="metadata.name=n1")), ["n1"])
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(field_selector="spec.bogus=1")
        self.assertEqual(cm.exception.status, 400)
        # a watch with a label selector sees objects move into and out of it
        rv = self.server.resource_version()
        self.server.patch("nodes", "n1", {"metadata": {"labels": {"zone": "a"}}})
        self.server.patch("nodes", "n0", {"metadata": {"labels": {"zone": "b"}}})
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&labelSelector=zone%%3Da&resourceVersion=%s&timeoutSeconds=1"
                     % rv, self.token).run()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in w.events()],
                         [("ADDED", "n1"), ("DELETED", "n0")])

    def test_endpoint_slices_are_served_and_selected_by_service_label(self):
        disc = kclient.DiscoveryV1Api(self.api)
        for name, service, port in (("web-a", "web", 8443), ("web-b", "web", 9443), ("db-a", "db", 5432)):
            self.server.create("endpointslices", {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
                "metadata": {"name": name, "namespace": "default", "labels": {"kubernetes.io/service-name": service}},
                "addressType": "IPv4",
                "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
        got = disc.list_namespaced_endpoint_slice("default", label_selector="kubernetes.io/service-name=web")
        self.assertEqual(sorted((s.metadata.name, s.ports[0].port) for s in got.items),
                         [("web-a", 8443), ("web-b", 9443)])
        self.assertTrue(got.items[0].endpoints[0].conditions.ready)


class TestList(Base):
    def test_pagination_is_a_consistent_snapshot_across_writes(self):
        for i in range(7):
            self.server.create("nodes", self.node("n%d" % i))
        page = self.core.list_node(limit=3)
        snap_rv = page.metadata.resource_version
        self.assertEqual([n.metadata.name for n in page.items], ["n0", "n1", "n2"])
        self.assertEqual(page.metadata.remaining_item_count, 4)
        self.assertTrue(page.metadata._continue)
        seen = [n.metadata.name for n in page.items]
        # writes between pages: a create, a delete, a modification after the cursor
        self.server.create("nodes", self.node("n35"))
        self.server.delete("nodes", "n4")
        self.server.patch("nodes", "n5", {"metadata": {"labels": {"changed": "yes"}}})
        while page.metadata._continue:
            page = self.core.list_node(limit=3, _continue=page.metadata._continue)
            self.assertEqual(page.metadata.resource_version, snap_rv)
            seen += [n.metadata.name for n in page.items]
            for n in page.items:
                self.assertNotIn("changed", n.metadata.labels or {})
                self.assertLessEqual(int(n.metadata.resource_version), int(snap_rv))
        self.assertEqual(seen, ["n%d" % i for i in range(7)])
        fresh = self.core.list_node()
        self.assertEqual([n.metadata.name for n in fresh.items], ["n0", "n1", "n2", "n3", "n35", "n5", "n6"])
        self.assertEqual(fresh.metadata.resource_version, self.server.resource_version())
        self.assertIsNone(fresh.metadata._continue)

    def test_continue_expires_after_compaction_with_410(self):
        for i in range(4):
            self.server.create("nodes", self.node("n%d" % i))
        page = self.core.list_node(limit=2)
        token = page.metadata._continue
        self.server.create("nodes", self.node("n9"))
        self.server.compact()
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(limit=2, _continue=token)
        st = self.exc_status(cm.exception)
        self.assertStatus(st, 410, "Expired")
        self.assertEqual(st["message"], fake_apiserver.CONTINUE_EXPIRED_MESSAGE)
        # the newer form carries an inconsistent continue token
        self.server.set_continue_expired_token(True)
        st, _, body = self.raw("GET", "/api/v1/nodes?limit=2&continue=" + urllib.parse.quote(token, safe=""))
        self.assertStatus(body, 410, "Expired")
        rest = self.core.list_node(limit=10, _continue=body["metadata"]["continue"])
        self.assertEqual([n.metadata.name for n in rest.items], ["n2", "n3", "n9"])
        # continue tokens are opaque and need URL encoding: a raw '+' arrives as a space -> 400
        self.assertIn("+", token)
        st, _, body = self.raw("GET", "/api/v1/nodes?limit=2&continue=" + token)
        self.assertStatus(body, 400, "BadRequest")
        st, _, body = self.raw("GET", "/api/v1/nodes?limit=2&resourceVersion=5&continue="
                               + urllib.parse.quote(token, safe=""))
        self.assertStatus(body, 400, "BadRequest")

    def test_resource_version_semantics(self):
        self.server.create("nodes", self.node("n0"))
        old = self.server.resource_version()
        self.server.create("nodes", self.node("n1"))
        # resourceVersion=N, no limit: not older than N -> the most recent
        lst = self.core.list_node(resource_version=old)
        self.assertEqual(len(lst.items), 2)
        # resourceVersionMatch=Exact (or the legacy limit+N): exactly N
        lst = self.core.list_node(resource_version=old, resource_version_match="Exact")
        self.assertEqual([n.metadata.name for n in lst.items], ["n0"])
        self.assertEqual(lst.metadata.resource_version, old)
        lst = self.core.list_node(resource_version=old, limit=10)
        self.assertEqual([n.metadata.name for n in lst.items], ["n0"])
        lst = self.core.list_node(resource_version="0")
        self.assertEqual(len(lst.items), 2)
        self.server.compact()
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(resource_version=old, resource_version_match="Exact")
        self.assertStatus(self.exc_status(cm.exception), 410, "Expired")
        # a resourceVersion the server has not reached: waits (bounded), then 504
        future = str(int(self.server.resource_version()) + 100)
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(resource_version=future)
        self.assertStatus(self.exc_status(cm.exception), 504, "Timeout")
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(resource_version_match="Exact")
        self.assertEqual(cm.exception.status, 400)
        # resourceVersions strictly increase across every resource
        a = self.server.create("components", self.component("c1"))["metadata"]["resourceVersion"]
        b = self.server.create("leases", {"metadata": {"name": "l", "namespace": "x"}})["metadata"]["resourceVersion"]
        self.assertLess(int(a), int(b))

    def test_bounded_history_compacts_by_itself(self):
        srv = FakeApiServer(cert(), key(), max_history=10).start()
        self.addCleanup(srv.stop)
        first = srv.resource_version()
        for i in range(40):
            srv.create("nodes", self.node("n%02d" % i))
        self.assertGreater(int(srv.compacted_resource_version()), int(first))
        self.assertEqual(len(srv.list("nodes")), 40)
        w = RawWatch(srv, "/api/v1/nodes?watch=1&resourceVersion=" + first, None).run()
        self.assertEqual(w.events()[0]["object"]["code"], 410)
        recent = srv.compacted_resource_version()
        w = RawWatch(srv, "/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion=" + recent, None).run()
        self.assertEqual(len(w.events()), int(srv.resource_version()) - int(recent))

    def test_one_mebibyte_object_in_list_and_watch(self):
        big = "x" * (1024 * 1024)
        rv = self.server.resource_version()
        self.server.set_watch_chunking("random", seed=7)
        self.custom.create_namespaced_custom_object(
            GROUP, VERSION, "ns1", PLURAL, self.component("big", ns="ns1", spec={"blob": big}))
        lst = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        self.assertEqual(len(lst["items"][0]["spec"]["blob"]), len(big))
        w = kubernetes.watch.Watch()
        events = []
        for ev in w.stream(self.custom.list_namespaced_custom_object, GROUP, VERSION, "ns1", PLURAL,
                           resource_version=rv, timeout_seconds=5):
            events.append(ev)
            w.stop()
        self.assertEqual(events[0]["type"], "ADDED")
        self.assertEqual(events[0]["object"]["spec"]["blob"], big)


class TestWatch(Base):
    def test_replay_from_resource_version(self):
        self.server.create("nodes", self.node("before"))
        rv = self.server.resource_version()
        self.core.create_node(self.node("n1"))
        n = self.core.read_node("n1")
        n.metadata.labels = {"x": "1"}
        self.core.replace_node("n1", n)
        self.core.delete_node("n1")
        w = kubernetes.watch.Watch()
        got = []
        for ev in w.stream(self.core.list_node, resource_version=rv, timeout_seconds=5):
            got.append((ev["type"], ev["object"].metadata.name, int(ev["object"].metadata.resource_version)))
            if len(got) == 3:
                w.stop()
        self.assertEqual([g[:2] for g in got], [("ADDED", "n1"), ("MODIFIED", "n1"), ("DELETED", "n1")])
        self.assertEqual(sorted(g[2] for g in got), [g[2] for g in got])
        self.assertGreater(got[0][2], int(rv))
        self.assertEqual(str(got[2][2]), self.server.resource_version())   # DELETED carries the deletion RV

    def test_no_resource_version_starts_with_current_state_then_changes(self):
        self.server.create("nodes", self.node("a"))
        self.server.create("nodes", self.node("b"))
        w = RawWatch(self.server, "/api/v1/nodes?watch=true&timeoutSeconds=3", self.token).start()
        self.server.wait_for_watch("nodes")
        self.server.create("nodes", self.node("c"))
        events = w.wait_events(3)
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in events[:3]],
                         [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c")])
        self.assertEqual(events[0]["object"]["kind"], "Node")
        w.join()
        self.assertTrue(w.terminated)
        self.assertEqual(w.headers.get("transfer-encoding"), "chunked")
        # the watch on one object (its name in the path, or a field selector)
        w = RawWatch(self.server, "/api/v1/watch/nodes/b?timeoutSeconds=1", self.token).run()
        self.assertEqual([e["object"]["metadata"]["name"] for e in w.events()], ["b"])

    def test_bookmarks_periodic_and_final(self):
        self.server.create("nodes", self.node("a"))
        rv = self.server.resource_version()
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=2&resourceVersion="
                     + rv, self.token).start()
        self.server.wait_for_watch("nodes")
        self.server.create("components", self.component("c1"))     # another resource moves the global RV
        w.join()
        self.assertTrue(w.terminated, "the stream ends cleanly at timeoutSeconds")
        events = w.events()
        bms = [e for e in events if e["type"] == "BOOKMARK"]
        self.assertGreaterEqual(len(bms), 3, events)
        self.assertEqual(events[-1]["type"], "BOOKMARK")
        self.assertEqual(events[-1]["object"], {"kind": "Node", "apiVersion": "v1",
                                                "metadata": {"resourceVersion": self.server.resource_version()}})
        self.assertNotIn("BOOKMARK", [e["type"] for e in RawWatch(
            self.server, "/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion=" + rv, self.token).run().events()])
        # python-kubernetes passes BOOKMARKs through
        w2 = kubernetes.watch.Watch()
        types = [ev["type"] for ev in w2.stream(self.core.list_node, resource_version=rv, timeout_seconds=1,
                                                allow_watch_bookmarks=True)]
        self.assertIn("BOOKMARK", types)
        # sendInitialEvents: state, then a bookmark marking its end
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
                     "&allowWatchBookmarks=true&timeoutSeconds=1", self.token).run()
        ev = w.events()
        self.assertEqual(ev[0]["type"], "ADDED")
        self.assertEqual(ev[1]["object"]["metadata"]["annotations"], {"k8s.io/initial-events-end": "true"})

    def test_410_after_compaction_as_error_event_and_as_http(self):
        rv = self.server.resource_version()
        self.server.create("nodes", self.node("a"))
        self.server.compact()
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&resourceVersion=" + rv, self.token).run()
        self.assertEqual(w.status, 200)
        self.assertTrue(w.terminated)
        (ev,) = w.events()
        self.assertEqual(ev["type"], "ERROR")
        self.assertStatus(ev["object"], 410, "Expired")
        self.assertIn("too old resource version", ev["object"]["message"])
        w = kubernetes.watch.Watch()
        with self.assertRaises(ApiException) as cm:
            for _ in w.stream(self.core.list_node, resource_version=rv, timeout_seconds=2):
                pass
        self.assertEqual(cm.exception.status, 410)
        # watching from the compacted revision itself is fine
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&timeoutSeconds=1&resourceVersion="
                     + self.server.compacted_resource_version(), self.token).run()
        self.assertEqual(w.events(), [])
        self.server.set_watch_expired_mode("http")
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&resourceVersion=" + rv, self.token).run()
        self.assertEqual(w.status, 410)
        self.assertStatus(json.loads(w.body), 410, "Expired")

    def _events_after(self, rv, n, path="/api/v1/nodes"):
        w = RawWatch(self.server, path + "?watch=1&timeoutSeconds=2&resourceVersion=" + rv, self.token).run()
        self.assertTrue(w.terminated)
        self.assertEqual(w.tail(), b"")
        ev = w.events()
        self.assertEqual(len(ev), n)
        return w

    def test_split_events(self):
        rv = self.server.resource_version()
        for i in range(6):
            self.server.create("nodes", self.node("n%d" % i, labels={"unicode": "z"}))
        self.server.patch("nodes", "n0", {"metadata": {"annotations": {"text": "h\u00e9llo \u2603 \U0001F600"}}})
        self.server.set_watch_chunking("byte")
        w = self._events_after(rv, 7)
        self.assertTrue(all(len(c) == 1 for c in w.chunks))
        self.assertEqual(w.events()[6]["object"]["metadata"]["annotations"]["text"], "h\u00e9llo \u2603 \U0001F600")
        self.server.set_watch_chunking("random", seed=3, max_chunk=50)
        w = self._events_after(rv, 7)
        self.assertTrue(any(not c.endswith(b"\n") for c in w.chunks), "boundaries fall mid-JSON")
        self.assertTrue(any(c.count(b"\n") >= 1 and not c.endswith(b"\n") for c in w.chunks) or
                        any(c.count(b"\n") >= 2 for c in w.chunks), "a chunk spans events")
        self.server.set_watch_chunking("coalesce")
        w = self._events_after(rv, 7)
        self.assertTrue(any(c.count(b"\n") >= 2 for c in w.chunks), "several events in one chunk")
        # the independent client decodes a randomly split stream
        self.server.set_watch_chunking("random", seed=11, max_chunk=20)
        kw = kubernetes.watch.Watch()
        names = [e["object"].metadata.name for e in kw.stream(self.core.list_node, resource_version=rv,
                                                             timeout_seconds=1)]
        self.assertEqual(names, ["n0", "n1", "n2", "n3", "n4", "n5", "n0"])

    def test_dropped_connections(self):
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&resourceVersion=" + self.server.resource_version(),
                     self.token).start()
        self.assertEqual(self.server.wait_for_watch("nodes"), 1)
        self.assertEqual(self.server.open_watches("nodes"), 1)
        started = self.server.watches_started("nodes")
        self.server.create("nodes", self.node("a"))
        w.wait_events(1)
        self.assertEqual(self.server.drop_watches("nodes"), 1)
        w.join()
        self.assertTrue(w.eof)
        self.assertFalse(w.terminated)
        self.server.wait_for_watches_closed("nodes")
        # after K events, cutting the next event in half
        rv = self.server.resource_version()
        for i in range(4):
            self.server.create("nodes", self.node("b%d" % i))
        self.server.drop_watches(after_events=2, mid_event=True, future=True)
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&resourceVersion=" + rv, self.token).run()
        self.assertTrue(w.eof and not w.terminated)
        self.assertEqual([e["object"]["metadata"]["name"] for e in w.events()], ["b0", "b1"])
        self.assertTrue(w.tail().startswith(b'{"type":"ADDED"'))
        self.assertGreater(self.server.watches_started("nodes"), started)
        self.server.wait_for_watch("nodes", min_open=0, started_after=started)
        self.server.clear_watch_drops()
        # python-kubernetes sees the broken stream as an error
        self.server.drop_watches(after_events=1, future=True, rst=True)
        kw = kubernetes.watch.Watch()
        with self.assertRaises(Exception):
            for _ in kw.stream(self.core.list_node, resource_version=rv, timeout_seconds=5):
                pass


class TestWatchCacheFaults(Base):
    """The faults a reflector must survive (issue 26), seen through python3-kubernetes."""

    def test_resource_version_0_is_served_whole_from_the_watch_cache(self):
        for i in range(5):
            self.server.create("nodes", self.node("n%d" % i))
        lst = self.core.list_node(resource_version="0", limit=2)
        self.assertEqual(len(lst.items), 5)            # the watch cache ignores the limit
        self.assertIsNone(lst.metadata._continue)
        self.assertEqual(len(self.core.list_node(limit=2).items), 2)   # a quorum list pages

    def test_watch_only_failure_lists_but_cannot_watch(self):
        self.server.create("nodes", self.node("n0"))
        for code in (403, 500):
            self.server.inject_fault(code, path="/api/v1/nodes$", watch=True, count=None)
            self.assertEqual([n.metadata.name for n in self.core.list_node().items], ["n0"])
            w = kubernetes.watch.Watch()
            with self.assertRaises(ApiException) as cm:
                for _ in w.stream(self.core.list_node, timeout_seconds=5, _request_timeout=10):
                    pass
            self.assertEqual(cm.exception.status, code)
            self.server.clear_faults()

    def test_rewind_answers_too_large_resource_version_to_clients_ahead(self):
        self.server.create("nodes", self.node("n0"))
        restored = self.server.resource_version()
        self.server.create("nodes", self.node("n1"))
        ahead = self.server.resource_version()
        started = self.server.watches_started("nodes")
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&resourceVersion=" + ahead, self.token, timeout=10)
        t = threading.Thread(target=w.run)
        t.start()
        self.server.wait_for_watch("nodes", started_after=started)
        self.assertEqual(self.server.rewind(restored), restored)
        t.join(10)
        self.assertFalse(t.is_alive(), "the open watch was not dropped")
        self.assertEqual(self.server.resource_version(), restored)
        # A client ahead of the server: list and watch at its resourceVersion -> 504 with the cause.
        for call in (lambda: self.core.list_node(resource_version=ahead),
                     lambda: list(kubernetes.watch.Watch().stream(self.core.list_node, resource_version=ahead,
                                                                   timeout_seconds=2, _request_timeout=10))):
            with self.assertRaises(ApiException) as cm:
                call()
            st = self.exc_status(cm.exception)
            self.assertStatus(st, 504, "Timeout")
            self.assertIn("Too large resource version", st["message"])
            self.assertEqual(st["details"]["causes"][0]["reason"], "ResourceVersionTooLarge")
        # A quorum list sees the restored state; writes reuse the revisions after it.
        self.assertEqual([n.metadata.name for n in self.core.list_node().items], ["n0"])
        n2 = self.server.create("nodes", self.node("n2"))
        self.assertEqual(int(n2["metadata"]["resourceVersion"]), int(restored) + 1)

    def test_a_silent_watch_sends_nothing_until_the_silence_ends(self):
        self.server.create("nodes", self.node("n0"))
        rv = self.server.resource_version()
        self.server.set_watch_silence("nodes")
        self.server.create("nodes", self.node("n1"))
        got = []
        w = kubernetes.watch.Watch()
        with self.assertRaises(Exception) as cm:   # urllib3's read timeout: not one byte came
            for ev in w.stream(self.core.list_node, resource_version=rv, allow_watch_bookmarks=True,
                               timeout_seconds=1, _request_timeout=(5, 1.5)):
                got.append(ev)
        self.assertIn("timed out", str(cm.exception).lower())
        self.assertEqual(got, [])      # no event, no bookmark, not even the end at timeoutSeconds
        self.server.wait_for_watches_closed("nodes", timeout=5)   # the client's close ends it
        # Other resources are not silenced; lifting the silence lets the held events through.
        self.server.set_watch_silence("nodes", enabled=False)
        names = []
        for ev in kubernetes.watch.Watch().stream(self.core.list_node, resource_version=rv, timeout_seconds=1,
                                                  _request_timeout=10):
            names.append(ev["object"].metadata.name)
        self.assertEqual(names, ["n1"])
        # future=False: only the watch open now goes silent; a new one works (a dead connection).
        rv = self.server.resource_version()
        started = self.server.watches_started("nodes")
        w = RawWatch(self.server, "/api/v1/nodes?watch=1&allowWatchBookmarks=true&timeoutSeconds=30&resourceVersion="
                     + rv, self.token, timeout=3).start()
        self.server.wait_for_watch("nodes", started_after=started)
        self.server.set_watch_silence("nodes", future=False)
        self.server.create("nodes", self.node("n2"))
        names = [ev["object"].metadata.name for ev in kubernetes.watch.Watch().stream(
            self.core.list_node, resource_version=rv, timeout_seconds=1, _request_timeout=10)]
        self.assertEqual(names, ["n2"])
        w.join(10)      # its read timed out: nothing came, not even a bookmark
        self.assertNotIn(b'"n2"', w.data())

    def test_continue_tokens_expire_while_a_slow_list_pages_through(self):
        for i in range(4):
            self.server.create("nodes", self.node("n%d" % i))
        self.server.set_continue_ttl(60)
        page = self.core.list_node(limit=2)
        self.assertEqual(len(self.core.list_node(limit=2, _continue=page.metadata._continue).items), 2)
        # The same token presented later than the TTL allows (a slow client; 0: at once): 410.
        self.server.set_continue_ttl(0)
        with self.assertRaises(ApiException) as cm:
            self.core.list_node(limit=2, _continue=page.metadata._continue)
        self.assertStatus(self.exc_status(cm.exception), 410, "Expired")
        self.assertEqual(len(self.core.list_node().items), 4)   # one unpaginated list works
        self.server.reset_faults()      # tokens live until compaction again
        page = self.core.list_node(limit=2)
        self.assertEqual(len(self.core.list_node(limit=2, _continue=page.metadata._continue).items), 2)


class TestFaultsAndAuth(Base):
    def test_token_rotation_gives_old_token_401(self):
        self.assertEqual(self.core.list_node().items, [])
        with open(self.token_file, "w") as f:
            f.write("token-two\n")
        with self.assertRaises(ApiException) as cm:
            self.core.list_node()
        self.assertStatus(self.exc_status(cm.exception), 401, "Unauthorized")
        self.assertEqual(kclient.CoreV1Api(self.api_client("token-two")).list_node().items, [])
        st, _, body = self.raw("GET", "/api/v1/nodes", token="nope")
        self.assertStatus(body, 401, "Unauthorized")
        self.server.set_tokens(["extra"])
        self.assertEqual(self.raw("GET", "/api/v1/nodes", token="extra")[0], 200)
        conn = http.client.HTTPSConnection("localhost", self.server.port,
                                           context=ssl.create_default_context(cafile=cert()), timeout=5)
        conn.request("GET", "/api/v1/nodes")
        r = conn.getresponse()
        self.assertEqual(r.status, 401)
        r.read()
        conn.request("GET", "/healthz")                 # same keep-alive connection, no token needed
        r = conn.getresponse()
        self.assertEqual((r.status, r.read()), (200, b"ok"))
        conn.close()
        e = self.server.wait_for_request(path="^/api/v1/nodes$", header=("Authorization", "Bearer token-two"))
        self.assertEqual(e["status"], 200)
        self.assertIn("OpenAPI-Generator", e["user_agent"])

    def test_token_lifetimes_and_revocation_give_401(self):
        self.server.add_token("short", ttl=0.5)
        self.server.add_token("long")
        short = kclient.CoreV1Api(self.api_client("short"))
        self.assertEqual(short.list_node().items, [])
        wait_until(lambda: self.raw("GET", "/api/v1/nodes", token="short")[0] == 401, timeout=10,
                   what="the short-lived token to expire")
        with self.assertRaises(ApiException) as cm:
            short.list_node()
        self.assertStatus(self.exc_status(cm.exception), 401, "Unauthorized")
        self.assertEqual(self.raw("GET", "/api/v1/nodes", token="long")[0], 200)
        self.server.revoke_token("long")
        self.assertEqual(self.raw("GET", "/api/v1/nodes", token="long")[0], 401)
        self.assertEqual(self.raw("GET", "/api/v1/nodes")[0], 200)   # the token file's is still good

    def test_429_with_retry_after_and_other_faults(self):
        self.server.inject_fault(429, method="GET", path="^/api/v1/nodes$", retry_after=3)
        st, hdrs, body = self.raw("GET", "/api/v1/nodes")
        self.assertEqual(st, 429)
        self.assertEqual(hdrs["retry-after"], "3")
        self.assertStatus(body, 429, "TooManyRequests")
        self.assertEqual(body["details"]["retryAfterSeconds"], 3)
        self.assertEqual(self.raw("GET", "/api/v1/nodes")[0], 200)           # count=1: used up
        for code, reason in [(401, "Unauthorized"), (403, "Forbidden"), (404, "NotFound"),
                             (500, "InternalError"), (503, "ServiceUnavailable")]:
            self.server.inject_fault(code, path="/runtimeclasses", count=2)
            for _ in range(2):
                st, _, body = self.raw("GET", "/apis/node.k8s.io/v1/runtimeclasses")
                self.assertStatus(body, code, reason)
            self.assertEqual(self.raw("GET", "/apis/node.k8s.io/v1/runtimeclasses")[0], 200)
        # watch-only fault; list unaffected
        self.server.inject_fault(500, path="/nodes", watch=True, count=None)
        self.assertEqual(self.raw("GET", "/api/v1/nodes")[0], 200)
        w = RawWatch(self.server, "/api/v1/nodes?watch=1", self.token).run()
        self.assertEqual(w.status, 500)
        self.server.clear_faults()
        # closing without an answer
        self.server.inject_fault("close", path="/nodes")
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError, ssl.SSLError)):
            self.raw("GET", "/api/v1/nodes")
        self.assertEqual(self.raw("GET", "/api/v1/nodes")[0], 200)

    def test_delays_and_request_log(self):
        mark = self.server.request_mark()
        self.server.add_delay(0.4, path="/leases", count=1)
        t0 = time.monotonic()
        self.assertEqual(self.raw("GET", "/apis/coordination.k8s.io/v1/namespaces/x/leases",
                                  headers={"User-Agent": "isolation-gate/test"})[0], 200)
        self.assertGreaterEqual(time.monotonic() - t0, 0.4)
        e = self.server.wait_for_request(method="GET", path="/leases", since=mark, timeout=2)
        self.assertEqual((e["status"], e["user_agent"]), (200, "isolation-gate/test"))
        with self.assertRaises(TimeoutError):
            self.server.wait_for_request(path="/never", timeout=0.2)
        self.assertEqual(len(self.server.requests(since=mark, path="/leases")), 1)

    def test_clearing_a_delay_releases_the_requests_it_holds(self):
        rule = self.server.add_delay(60.0, path="/nodes$", count=1)
        got = []
        t = threading.Thread(target=lambda: got.append(self.raw("GET", "/api/v1/nodes")[0]))
        t.start()
        self.server.wait_for_request(method="GET", path="/nodes$", timeout=5)
        self.assertEqual(got, [])  # held
        self.server.clear_delays(rule)
        t.join(10)  # bounded; far below the rule's 60 s
        self.assertFalse(t.is_alive(), "the held request was not released")
        self.assertEqual(got, [200])

    def test_a_delayed_answer_is_held_after_the_write_is_stored(self):
        rule = self.server.add_delay(60.0, method="POST", path="/configmaps$", count=1, answer=True)
        got = []
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "late"}}
        t = threading.Thread(target=lambda: got.append(
            self.raw("POST", "/api/v1/namespaces/default/configmaps", body=body)[0]))
        t.start()
        self.server.wait_for_request(method="POST", path="/configmaps$", timeout=5)
        # Stored, its answer still held: a retry of the create meets the object.
        deadline = time.monotonic() + 5
        while self.server.get("configmaps", "late", namespace="default") is None and time.monotonic() < deadline:
            time.sleep(0.01)
        self.assertIsNotNone(self.server.get("configmaps", "late", namespace="default"))
        self.assertEqual(got, [])
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/default/configmaps", body=body)[0], 409)
        self.server.clear_delays(rule)
        t.join(10)  # bounded; far below the rule's 60 s
        self.assertFalse(t.is_alive(), "the held answer was not released")
        self.assertEqual(got, [201])

    def test_go_away_and_come_back_on_the_same_port(self):
        port = self.server.port
        w = RawWatch(self.server, "/api/v1/nodes?watch=1", self.token).start()
        self.server.wait_for_watch("nodes")
        self.server.go_away()
        w.join()
        self.assertFalse(w.terminated)
        with self.assertRaises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        self.server.create("nodes", self.node("while-away"))
        self.server.come_back()
        self.assertEqual(self.server.port, port)
        self.assertEqual([n.metadata.name for n in self.core.list_node().items], ["while-away"])


class TestClientCertificates(Base):
    """x509 authentication: client certificates signed by --client-ca, seen by python3-kubernetes."""

    def setUp(self):
        self.certs_dir = tempfile.mkdtemp(prefix="fake-apiserver-client-")
        self.addCleanup(shutil.rmtree, self.certs_dir, True)
        self.client_certs = fake_apiserver.make_client_certificates(self.certs_dir, ["alice", "mallory"])
        self.server_kwargs = {"client_ca": self.client_certs["ca"]}
        super().setUp()

    def cert_client(self, cn):
        cfg = kclient.Configuration()
        cfg.host = self.server.url
        cfg.ssl_ca_cert = cert()
        cfg.cert_file, cfg.key_file = self.client_certs[cn]
        api = kclient.ApiClient(cfg)
        self.addCleanup(api.close)
        self.addCleanup(api.rest_client.pool_manager.clear)
        return kclient.CoreV1Api(api)

    def test_client_certificate_authenticates_and_a_denied_cn_gets_401(self):
        self.assertEqual(self.cert_client("alice").list_node().items, [])
        e = self.server.wait_for_request(path="^/api/v1/nodes$")
        self.assertEqual(e["client_cn"], "alice")
        self.assertEqual(e["user"]["username"], "alice")
        self.server.deny_client_cn("mallory")
        with self.assertRaises(ApiException) as cm:
            self.cert_client("mallory").list_node()
        self.assertStatus(self.exc_status(cm.exception), 401, "Unauthorized")
        # Without a certificate, tokens work as before.
        self.assertEqual(self.core.list_node().items, [])
        self.assertEqual(self.raw("GET", "/api/v1/nodes", token="nope")[0], 401)


class TestPodsAndEviction(Base):
    def pod(self, name, ns="default", labels=None, phase="Running", ready=True, **extra):
        """A pod as the kubelet would have it (back door: status kept)."""
        obj = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]},
               "status": {"phase": phase,
                          "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
        obj["metadata"].update(extra)
        return self.server.create("pods", obj)

    def pdb(self, name, selector, ns="default", allowed=1, current=3, desired=2, **status):
        self.server.create("poddisruptionbudgets", {
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": {"minAvailable": desired, "selector": selector}})
        st = {"disruptionsAllowed": allowed, "currentHealthy": current, "desiredHealthy": desired,
              "expectedPods": current, "observedGeneration": 1}
        st.update(status)
        return self.server.patch("poddisruptionbudgets", name, {"status": st}, namespace=ns, subresource="status")

    def evict(self, name, delete_options=None, ns="default", query="", body_name=None):
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name if body_name is None else body_name, "namespace": ns}}
        if delete_options is not None:
            body["deleteOptions"] = delete_options
        return self.raw("POST", "/api/v1/namespaces/%s/pods/%s/eviction%s" % (ns, name, query), body)

    def test_pods_status_subresource_and_field_selectors(self):
        pod = kclient.V1Pod(metadata=kclient.V1ObjectMeta(name="p1", labels={"app": "web"}),
                            spec=kclient.V1PodSpec(containers=[kclient.V1Container(name="c", image="busybox")]),
                            status=kclient.V1PodStatus(phase="Running"))
        created = self.core.create_namespaced_pod("default", pod)
        self.assertEqual((created.status.phase, created.status.qos_class), ("Pending", "BestEffort"))
        st, _, body = self.raw("POST", "/api/v1/namespaces/default/pods", {"metadata": {"name": "bad"}, "spec": {}})
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["message"], 'Pod "bad" is invalid: spec.containers: Required value')
        st, _, body = self.raw("POST", "/api/v1/namespaces/default/pods",
                               {"metadata": {"name": "bad"}, "spec": {"containers": [{"name": "c"}]}})
        self.assertEqual(body["details"]["causes"][0]["field"], "spec.containers[0].image")
        # /status changes only status; the main resource keeps it
        st, _, body = self.raw("PATCH", "/api/v1/namespaces/default/pods/p1/status",
                               {"status": {"phase": "Running", "podIP": "10.0.0.1"}, "spec": {"nodeName": "n9"}},
                               "application/merge-patch+json")
        self.assertEqual((st, body["status"]["phase"], body["spec"].get("nodeName")), (200, "Running", None))
        got = self.core.read_namespaced_pod("p1", "default")
        got.status.phase = "Failed"
        got.spec.containers[0].image = "busybox:2"           # image is one of the mutable fields
        got = self.core.replace_namespaced_pod("p1", "default", got)
        self.assertEqual((got.status.phase, got.spec.containers[0].image), ("Running", "busybox:2"))
        st, _, body = self.raw("PATCH", "/api/v1/namespaces/default/pods/p1", {"spec": {"restartPolicy": "Never"}},
                               "application/merge-patch+json")
        self.assertStatus(body, 422, "Invalid")
        self.assertTrue(body["message"].startswith('Pod "p1" is invalid: spec: Forbidden: pod updates may not'), body)
        # field selectors (the back door may set spec.nodeName, as a binding would)
        self.pod("p2", ns="ns2", phase="Succeeded")
        self.server.patch("pods", "p1", {"spec": {"nodeName": "n2"}}, namespace="default")
        names = lambda lst: [(p.metadata.namespace, p.metadata.name) for p in lst.items]  # noqa: E731
        self.assertEqual(names(self.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")),
                         [("ns2", "p2")])
        self.assertEqual(names(self.core.list_pod_for_all_namespaces(field_selector="status.phase=Running")),
                         [("default", "p1")])
        self.assertEqual(names(self.core.list_pod_for_all_namespaces(field_selector="metadata.namespace=ns2")),
                         [("ns2", "p2")])
        self.assertEqual(names(self.core.list_pod_for_all_namespaces(field_selector="metadata.name=p1")),
                         [("default", "p1")])
        self.assertEqual(names(self.core.list_namespaced_pod("default", label_selector="app=web")),
                         [("default", "p1")])
        rv = self.server.resource_version()
        self.server.patch("pods", "p2", {"status": {"phase": "Running"}}, namespace="ns2", subresource="status")
        w = RawWatch(self.server, "/api/v1/pods?watch=1&fieldSelector=status.phase%%3DRunning&resourceVersion=%s"
                     % rv, self.token, stop_after_events=1).run()
        self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in w.events()], [("ADDED", "p2")])
        st, _, body = self.raw("GET", "/api/v1")
        self.assertIn(("pods/eviction", "Eviction", "policy"),
                      [(r["name"], r["kind"], r.get("group")) for r in body["resources"]])

    def test_eviction_without_a_budget(self):
        self.pod("p1")
        mark = self.server.request_mark()
        self.core.create_namespaced_pod_eviction(
            "p1", "default", kclient.V1Eviction(metadata=kclient.V1ObjectMeta(name="p1", namespace="default")))
        self.assertIsNone(self.server.get("pods", "p1"))
        self.assertEqual(self.server.evictions(), [["default", "p1"]])
        self.assertEqual(len(self.server.requests(since=mark, method="POST", path="/pods/p1/eviction$", status=201)), 1)
        self.pod("p2")
        st, _, body = self.evict("p2")
        self.assertEqual((st, body), (201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                            "status": "Success", "code": 201}))
        with self.assertRaises(ApiException) as cm:
            self.core.read_namespaced_pod("p2", "default")
        self.assertEqual(cm.exception.status, 404)
        # errors
        st, _, body = self.evict("gone")
        self.assertStatus(body, 404, "NotFound")
        self.assertEqual(body["message"], 'pods "gone" not found')
        self.pod("p3")
        st, _, body = self.evict("p3", body_name="other")
        self.assertStatus(body, 400, "BadRequest")
        self.assertEqual(body["message"], "name in URL does not match name in Eviction object")
        st, _, body = self.raw("GET", "/api/v1/namespaces/default/pods/p3/eviction")
        self.assertStatus(body, 405, "MethodNotAllowed")
        # DeleteOptions preconditions, like DELETE
        st, _, body = self.evict("p3", {"preconditions": {"uid": "not-the-uid"}})
        self.assertStatus(body, 409, "Conflict")
        st, _, body = self.evict("p3", {"preconditions": {"resourceVersion": "1"}})
        self.assertStatus(body, 409, "Conflict")
        self.assertIsNotNone(self.server.get("pods", "p3"))
        p3 = self.server.get("pods", "p3")
        st, _, body = self.evict("p3", {"preconditions": {"uid": p3["metadata"]["uid"],
                                                          "resourceVersion": p3["metadata"]["resourceVersion"]}})
        self.assertEqual(st, 201, body)
        self.assertEqual(self.server.evictions(), [["default", "p1"], ["default", "p2"], ["default", "p3"]])
        # dry run: answered, nothing changes
        self.pod("p4")
        rv = self.server.resource_version()
        st, _, body = self.evict("p4", query="?dryRun=All")
        self.assertEqual(st, 201, body)
        st, _, body = self.evict("p4", {"dryRun": ["All"]})
        self.assertEqual(st, 201, body)
        self.assertEqual((self.server.resource_version(), len(self.server.evictions())), (rv, 3))
        # a pod with finalizers: the DisruptionTarget condition, then deletionTimestamp; it stays
        self.pod("p5", finalizers=["example.com/keep"])
        st, _, body = self.evict("p5")
        self.assertEqual(st, 201, body)
        p5 = self.server.get("pods", "p5")
        self.assertTrue(p5["metadata"]["deletionTimestamp"])
        cond = [c for c in p5["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        self.assertEqual([(c["status"], c["reason"], c["message"]) for c in cond],
                         [("True", "EvictionByEvictionAPI", "Eviction API: evicting")])

    def test_eviction_respects_the_disruption_budget(self):
        policy = kclient.PolicyV1Api(self.api)
        created = policy.create_namespaced_pod_disruption_budget("default", kclient.V1PodDisruptionBudget(
            metadata=kclient.V1ObjectMeta(name="web"),
            spec=kclient.V1PodDisruptionBudgetSpec(min_available=2, selector=kclient.V1LabelSelector(
                match_labels={"app": "web"},
                match_expressions=[kclient.V1LabelSelectorRequirement(key="tier", operator="In", values=["a"]),
                                   kclient.V1LabelSelectorRequirement(key="canary", operator="DoesNotExist")])),
            status=kclient.V1PodDisruptionBudgetStatus(disruptions_allowed=5, current_healthy=5,
                                                       desired_healthy=0, expected_pods=5)))
        self.assertEqual((created.status.disruptions_allowed, created.status.current_healthy), (0, 0))  # reset
        got = policy.read_namespaced_pod_disruption_budget("web", "default")
        got.status.disruptions_allowed, got.status.current_healthy = 1, 3
        got.status.desired_healthy, got.status.expected_pods, got.status.observed_generation = 2, 3, 1
        policy.replace_namespaced_pod_disruption_budget_status("web", "default", got)
        for name in ("a", "b"):
            self.pod(name, labels={"app": "web", "tier": "a"})
        self.pod("canary", labels={"app": "web", "tier": "a", "canary": "1"})    # not selected
        rv = self.server.resource_version()
        st, _, body = self.evict("a")
        self.assertEqual(st, 201, body)
        pdb = self.server.get("poddisruptionbudgets", "web")
        self.assertEqual(pdb["status"]["disruptionsAllowed"], 0)
        self.assertIn("a", pdb["status"]["disruptedPods"])
        self.assertEqual([(c["type"], c["status"], c["reason"]) for c in pdb["status"]["conditions"]],
                         [("DisruptionAllowed", "False", "InsufficientPods")])
        self.assertGreater(int(pdb["metadata"]["resourceVersion"]), int(rv))
        w = RawWatch(self.server, "/apis/policy/v1/namespaces/default/poddisruptionbudgets?watch=1&resourceVersion=%s"
                     % rv, self.token, stop_after_events=1).run()
        self.assertEqual([(e["type"], e["object"]["status"]["disruptionsAllowed"]) for e in w.events()],
                         [("MODIFIED", 0)])
        # the budget is spent: 429, and the pod stays
        st, hdrs, body = self.evict("b")
        self.assertStatus(body, 429, "TooManyRequests")
        self.assertEqual(body["message"], "Cannot evict pod as it would violate the pod's disruption budget.")
        self.assertEqual(body["details"]["causes"], [{"reason": "DisruptionBudget", "message":
                         "The disruption budget web needs 2 healthy pods and has 3 currently"}])
        self.assertNotIn("retry-after", hdrs)
        with self.assertRaises(ApiException) as cm:
            self.core.create_namespaced_pod_eviction(
                "b", "default", kclient.V1Eviction(metadata=kclient.V1ObjectMeta(name="b", namespace="default")))
        self.assertEqual(cm.exception.status, 429)
        self.assertIsNotNone(self.server.get("pods", "b"))
        # not selected by the budget (DoesNotExist fails): evicted
        self.assertEqual(self.evict("canary")[0], 201)
        # terminal and pending pods are evicted without looking at budgets
        self.pod("done", labels={"app": "web", "tier": "a"}, phase="Succeeded")
        self.pod("waiting", labels={"app": "web", "tier": "a"}, phase="Pending")
        self.assertEqual(self.evict("done")[0], 201)
        self.assertEqual(self.evict("waiting")[0], 201)
        # an unready pod while the budget is met: evicted without using the budget
        self.server.patch("poddisruptionbudgets", "web", {"status": {"disruptionsAllowed": 0, "currentHealthy": 2}},
                          subresource="status")
        self.pod("sick", labels={"app": "web", "tier": "a"}, ready=False)
        self.assertEqual(self.evict("sick")[0], 201)
        self.assertEqual(self.server.get("poddisruptionbudgets", "web")["status"]["disruptionsAllowed"], 0)
        self.assertEqual(self.server.evictions(), [["default", n] for n in ("a", "canary", "done", "waiting", "sick")])
        # a spec change (main resource: status kept, generation 2) not yet observed by the disruption
        # controller: 429 with Retry-After
        self.server.patch("poddisruptionbudgets", "web", {"status": {"disruptionsAllowed": 1}}, subresource="status")
        st, _, body = self.raw("PATCH", "/apis/policy/v1/namespaces/default/poddisruptionbudgets/web",
                               {"spec": {"minAvailable": 1}, "status": {"disruptionsAllowed": 9}},
                               "application/merge-patch+json")
        self.assertEqual((body["metadata"]["generation"], body["status"]["disruptionsAllowed"]), (2, 1))
        st, hdrs, body = self.evict("b")
        self.assertStatus(body, 429, "TooManyRequests")
        self.assertEqual((hdrs.get("retry-after"), body["details"]["retryAfterSeconds"]), ("10", 10))
        self.assertIn("still being processed", body["details"]["causes"][0]["message"])
        # negative: 403
        self.server.patch("poddisruptionbudgets", "web", {"status": {"disruptionsAllowed": -1, "observedGeneration": 2}},
                          subresource="status")
        st, _, body = self.evict("b")
        self.assertStatus(body, 403, "Forbidden")
        # two budgets: 500, a Status without a reason
        self.pdb("web-too", {"matchExpressions": [{"key": "app", "operator": "Exists"}]})
        st, _, body = self.evict("b")
        self.assertEqual((st, body["code"], body["status"], "reason" in body), (500, 500, "Failure", False))
        self.assertEqual(body["message"],
                         "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")
        self.assertIsNotNone(self.server.get("pods", "b"))
        # budgets in other namespaces do not count; an empty selector selects every pod of its namespace
        self.server.delete("poddisruptionbudgets", "web")
        self.server.delete("poddisruptionbudgets", "web-too")
        self.pdb("all", {}, ns="ns2", allowed=0)
        self.assertEqual(self.evict("b")[0], 201)
        self.pod("x", ns="ns2")
        self.assertStatus(self.evict("x", ns="ns2")[2], 429, "TooManyRequests")

    def test_label_selector_matching(self):
        m = fake_apiserver.selector_matches
        labels = {"app": "web", "tier": "a"}
        self.assertFalse(m(None, labels))
        self.assertTrue(m({}, labels))
        self.assertTrue(m({"matchLabels": {"app": "web"}}, labels))
        self.assertFalse(m({"matchLabels": {"app": "db"}}, labels))
        exprs = lambda *e: {"matchExpressions": [dict(zip(("key", "operator", "values"), x)) for x in e]}  # noqa: E731
        self.assertTrue(m(exprs(("tier", "In", ["a", "b"])), labels))
        self.assertFalse(m(exprs(("tier", "In", ["b"])), labels))
        self.assertFalse(m(exprs(("zone", "In", ["b"])), labels))
        self.assertTrue(m(exprs(("tier", "NotIn", ["b"])), labels))
        self.assertTrue(m(exprs(("zone", "NotIn", ["b"])), labels))
        self.assertFalse(m(exprs(("tier", "NotIn", ["a"])), labels))
        self.assertTrue(m(exprs(("app", "Exists", [])), labels))
        self.assertFalse(m(exprs(("zone", "Exists", [])), labels))
        self.assertTrue(m(exprs(("zone", "DoesNotExist", [])), labels))
        self.assertFalse(m(exprs(("app", "DoesNotExist", [])), labels))
        self.assertFalse(m(exprs(("app", "Bogus", [])), labels))          # invalid: matches nothing
        self.assertFalse(m(exprs(("app", "In", [])), labels))


class TestOperatorResources(Base):
    """Leases, TLS secrets, both Event APIs and webhook configurations: create, get, PUT with a stale
    resourceVersion, merge and JSON patch, watch by name; and the validation the real server does."""

    CASES = [
        ("/apis/coordination.k8s.io/v1/namespaces/ns1/leases",
         {"spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
        ("/api/v1/namespaces/ns1/secrets",
         {"type": "kubernetes.io/tls", "data": {"tls.crt": base64.b64encode(b"CERT").decode(),
                                                "tls.key": base64.b64encode(b"KEY").decode()}}),
        ("/api/v1/namespaces/ns1/events",
         {"involvedObject": {"kind": "Component", "name": "c1", "namespace": "ns1"}, "reason": "Ready",
          "message": "ok", "type": "Normal", "count": 1, "source": {"component": "isolation-gate"}}),
        ("/apis/events.k8s.io/v1/namespaces/ns1/events", {k: v for k, v in valid_event_v1("x").items()
                                                         if k not in ("metadata", "apiVersion", "kind")}),
        ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
         {"webhooks": [{"name": "pods.isolation-gate.zeroroot.ai", "sideEffects": "None",
                        "admissionReviewVersions": ["v1"], "clientConfig": {"caBundle": "Q0E="}}]}),
        ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
         {"webhooks": [{"name": "pods.isolation-gate.zeroroot.ai", "sideEffects": "None",
                        "admissionReviewVersions": ["v1"], "clientConfig": {"caBundle": "Q0E="}}]}),
    ]

    def test_create_get_put_conflict_patches_and_watch_by_name(self):
        for base, fields in self.CASES:
            with self.subTest(base=base):
                rv0 = self.server.resource_version()
                for name in ("one", "other"):
                    st, _, body = self.raw("POST", base, dict(fields, metadata={"name": name}))
                    self.assertEqual(st, 201, body)
                st, _, obj = self.raw("GET", base + "/one")
                self.assertEqual((st, obj["metadata"]["name"]), (200, "one"))
                stale = json.loads(json.dumps(obj))
                obj["metadata"]["labels"] = {"v": "1"}
                st, _, obj = self.raw("PUT", base + "/one", obj)
                self.assertEqual((st, obj["metadata"]["labels"]), (200, {"v": "1"}))
                stale["metadata"]["labels"] = {"v": "stale"}
                st, _, body = self.raw("PUT", base + "/one", stale)
                self.assertStatus(body, 409, "Conflict")
                st, _, obj = self.raw("PATCH", base + "/one", {"metadata": {"annotations": {"a": "1"}}},
                                      "application/merge-patch+json")
                self.assertEqual((st, obj["metadata"]["annotations"], obj["metadata"]["labels"]),
                                 (200, {"a": "1"}, {"v": "1"}))
                st, _, obj = self.raw("PATCH", base + "/one",
                                      [{"op": "test", "path": "/metadata/labels/v", "value": "1"},
                                       {"op": "replace", "path": "/metadata/labels/v", "value": "2"}],
                                      "application/json-patch+json")
                self.assertEqual((st, obj["metadata"]["labels"]), (200, {"v": "2"}))
                st, _, body = self.raw("PATCH", base + "/one", [{"op": "test", "path": "/metadata/labels/v",
                                                                 "value": "1"}], "application/json-patch+json")
                self.assertStatus(body, 422, "Invalid")
                w = RawWatch(self.server, "%s?watch=1&fieldSelector=metadata.name%%3Done&resourceVersion=%s"
                             % (base, rv0), self.token, stop_after_events=4).run()
                self.assertEqual([(e["type"], e["object"]["metadata"]["name"]) for e in w.events()],
                                 [("ADDED", "one")] + [("MODIFIED", "one")] * 3)
                self.assertEqual(w.events()[-1]["object"]["metadata"]["resourceVersion"],
                                 obj["metadata"]["resourceVersion"])

    def test_lease_with_the_coordination_client(self):
        coord = kclient.CoordinationV1Api(self.api)
        lease = coord.create_namespaced_lease("ns1", kclient.V1Lease(
            metadata=kclient.V1ObjectMeta(name="isolation-gate-leader"),
            spec=kclient.V1LeaseSpec(holder_identity="pod-a", lease_duration_seconds=15)))
        got = coord.read_namespaced_lease("isolation-gate-leader", "ns1")
        self.assertEqual(got.spec.holder_identity, "pod-a")
        got.spec.holder_identity = "pod-b"
        renewed = coord.replace_namespaced_lease("isolation-gate-leader", "ns1", got)
        self.assertEqual(renewed.spec.holder_identity, "pod-b")
        lease.spec.holder_identity = "pod-c"           # carries the creation's resourceVersion
        with self.assertRaises(ApiException) as cm:
            coord.replace_namespaced_lease("isolation-gate-leader", "ns1", lease)
        self.assertEqual(cm.exception.status, 409)
        self.assertStatus(self.exc_status(cm.exception), 409, "Conflict")
        self.assertEqual(coord.read_namespaced_lease("isolation-gate-leader", "ns1").spec.holder_identity, "pod-b")
        names = [item.metadata.name for item in coord.list_namespaced_lease(
            "ns1", field_selector="metadata.name=isolation-gate-leader").items]
        self.assertEqual(names, ["isolation-gate-leader"])

    def test_secret_validation(self):
        base = "/api/v1/namespaces/ns1/secrets"
        st, _, body = self.raw("POST", base, {"metadata": {"name": "plain"}, "data": {"k": "dg=="}})
        self.assertEqual((st, body["type"]), (201, "Opaque"))                 # defaulted
        st, _, body = self.raw("POST", base, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                              "data": {"tls.crt": "Q0VSVA=="}})
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["message"], 'Secret "tls" is invalid: data[tls.key]: Required value')
        st, _, body = self.raw("POST", base, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                              "data": {"tls.crt": "not base64!", "tls.key": "S0VZ"}})
        self.assertStatus(body, 400, "BadRequest")
        self.assertIn("illegal base64 data at input byte 3", body["message"])
        st, _, body = self.raw("POST", base, {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                                              "stringData": {"tls.crt": "CERT", "tls.key": "KEY"}})
        self.assertEqual((st, body["data"]["tls.key"]), (201, "S0VZ"))
        body["type"] = "Opaque"
        st, _, body = self.raw("PUT", base + "/tls", body)
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["details"]["causes"][0]["field"], "type")
        st, _, body = self.raw("PATCH", base + "/tls", {"data": {"tls.key": None}}, "application/merge-patch+json")
        self.assertStatus(body, 422, "Invalid")
        secret = self.core.read_namespaced_secret("tls", "ns1")
        self.assertEqual(base64.b64decode(secret.data["tls.crt"]), b"CERT")

    def test_event_validation_both_groups(self):
        events = kclient.EventsV1Api(self.api)
        made = events.create_namespaced_event("ns1", kclient.EventsV1Event(
            metadata=kclient.V1ObjectMeta(name="e1"), event_time=datetime.datetime.now(datetime.timezone.utc),
            reporting_controller="gibson.zeroroot.ai/isolation-gate", reporting_instance="isolation-gate-0",
            action="Reconcile", reason="Ready", type="Normal", note="ok",
            regarding=kclient.V1ObjectReference(kind="Component", name="c1", namespace="ns1")))
        self.assertEqual(made.reporting_controller, "gibson.zeroroot.ai/isolation-gate")
        base = "/apis/events.k8s.io/v1/namespaces/ns1/events"
        for missing in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
            with self.subTest(missing=missing):
                ev = valid_event_v1("e2")
                del ev[missing]
                st, _, body = self.raw("POST", base, ev)
                self.assertStatus(body, 422, "Invalid")
                self.assertTrue(body["message"].startswith('Event.events.k8s.io "e2" is invalid: '), body)
                self.assertIn(missing, [c["field"] for c in body["details"]["causes"]])
                self.assertIn("%s: Required value" % missing, body["message"])
        st, _, body = self.raw("POST", base, valid_event_v1("e2", type="Info"))
        self.assertEqual(body["details"]["causes"][0]["field"], "type")
        st, _, body = self.raw("POST", base, valid_event_v1("e2", deprecatedCount=3))
        self.assertEqual(body["details"]["causes"][0]["field"], "deprecatedCount")
        ev = valid_event_v1("e2")
        del ev["metadata"]["name"]
        st, _, body = self.raw("POST", base, ev)
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["details"]["causes"][0]["field"], "metadata.name")
        ev["metadata"]["generateName"] = "ig-"
        st, _, body = self.raw("POST", base, ev)
        self.assertEqual(st, 201, body)
        self.assertTrue(body["metadata"]["name"].startswith("ig-"))
        # updates: the series may change, what happened may not
        st, _, body = self.raw("PATCH", base + "/e1", {"series": {"count": 2, "lastObservedTime":
                                                                  "2026-01-01T00:01:00.000000Z"}},
                               "application/merge-patch+json")
        self.assertEqual((st, body["series"]["count"]), (200, 2))
        st, _, body = self.raw("PATCH", base + "/e1", {"action": "Other"}, "application/merge-patch+json")
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["message"], 'Event.events.k8s.io "e1" is invalid: action: Invalid value: "Other": '
                         'field is immutable')
        # core/v1: the involved object's namespace must be the event's; a new-style event needs the rest
        core = "/api/v1/namespaces/ns1/events"
        st, _, body = self.raw("POST", core, {"metadata": {"name": "c1"}, "involvedObject": {"namespace": "ns2"}})
        self.assertStatus(body, 422, "Invalid")
        self.assertEqual(body["message"], 'Event "c1" is invalid: involvedObject.namespace: Invalid value: "ns2": '
                         'does not match event.namespace')
        st, _, body = self.raw("POST", core, {"metadata": {"name": "c1"}, "involvedObject": {"namespace": "ns1"},
                                              "eventTime": "2026-01-01T00:00:00.000000Z", "reason": "Ready"})
        self.assertStatus(body, 422, "Invalid")
        fields = [c["field"] for c in body["details"]["causes"]]
        self.assertEqual([f for f in fields if f != "source"], ["reportingInstance", "action"])
        self.assertIn("source", fields)
        made = self.core.create_namespaced_event("ns1", kclient.CoreV1Event(
            metadata=kclient.V1ObjectMeta(name="c2"), reason="Ready", message="ok", type="Normal",
            involved_object=kclient.V1ObjectReference(kind="Component", name="c1", namespace="ns1")))
        self.assertEqual(made.involved_object.name, "c1")
        st, _, body = self.raw("POST", core, {"metadata": {}, "involvedObject": {"namespace": "ns1"}})
        self.assertEqual(body["details"]["causes"][0]["field"], "metadata.name")


class WebhookServer:
    """A tiny HTTPS admission webhook: behaviours by path; every AdmissionReview received is kept."""

    def __init__(self, cert_file, key_file):
        self.reviews = []                 # (path, review)
        self.lock = threading.Lock()
        self.release = threading.Event()  # ends /slow early at teardown
        self.behaviours = {}
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                review = json.loads(body)
                path = urllib.parse.urlsplit(self.path).path
                with outer.lock:
                    outer.reviews.append((path, review, self.path))
                resp = outer.behaviours[path](review)
                resp = dict({"uid": review["request"]["uid"]}, **resp)
                data = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": resp}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.handle_error = lambda *a: None      # a caller that timed out closed the connection
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert_file, key_file)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(10)

    def received(self, path=None):
        with self.lock:
            return [r for p, r, _ in self.reviews if path is None or p == path]

    def raw_paths(self):
        with self.lock:
            return [raw for _, _, raw in self.reviews]


def allow(review, warnings=None):
    out = {"allowed": True}
    if warnings:
        out["warnings"] = warnings
    return out


def json_patch_response(ops):
    return {"allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


class TestAdmissionWebhooks(Base):
    """The fake API server calls the webhooks of its stored webhook configurations, as kube-apiserver does."""

    @classmethod
    def setUpClass(cls):
        cls.wh_dir = tempfile.mkdtemp(prefix="fake-apiserver-webhook-")
        cls.wh_cert = os.path.join(cls.wh_dir, "tls.crt")
        cls.wh_key = os.path.join(cls.wh_dir, "tls.key")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
             "-keyout", cls.wh_key, "-out", cls.wh_cert, "-subj", "/CN=wh.gate.svc",
             "-addext", "subjectAltName=DNS:wh.gate.svc,DNS:localhost,IP:127.0.0.1"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        with open(cls.wh_cert, "rb") as f:
            cls.ca_bundle = base64.b64encode(f.read()).decode()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.wh_dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.wh = WebhookServer(self.wh_cert, self.wh_key).start()
        self.addCleanup(self.wh.stop)
        self.wh.behaviours.update({"/allow": allow, "/deny": lambda r: {"allowed": False, "status": {
            "code": 403, "reason": "Forbidden", "message": "no pods here"}}})
        self.server.set_service_endpoints({"gate/wh": "127.0.0.1:%d" % self.wh.port})
        self.server.create("namespaces", {"metadata": {"name": "apps", "labels": {"gate": "on"}}})
        self.server.create("namespaces", {"metadata": {"name": "plain"}})

    def hook(self, name, path, operations=("CREATE",), resources=("pods",), groups=("",), **extra):
        w = {"name": name, "clientConfig": {"service": {"namespace": "gate", "name": "wh", "path": path,
                                                        "port": 443}, "caBundle": self.ca_bundle},
             "rules": [{"apiGroups": list(groups), "apiVersions": ["*"], "operations": list(operations),
                        "resources": list(resources), "scope": "*"}],
             "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
             "timeoutSeconds": 5}
        w.update(extra)
        return w

    def configure(self, name="gate", mutating=(), validating=()):
        if mutating:
            self.server.put("mutatingwebhookconfigurations", {"metadata": {"name": name}, "webhooks": list(mutating)})
        if validating:
            self.server.put("validatingwebhookconfigurations",
                            {"metadata": {"name": name}, "webhooks": list(validating)})

    def pod(self, name, ns="apps", labels=None):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns,
                                                               "labels": labels or {}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}}

    def test_allowed_create_sends_a_complete_review_and_records_the_call(self):
        self.wh.behaviours["/allow"] = lambda r: dict(allow(r, ["careful: \"quoted\""]),
                                                      auditAnnotations={"decision": "AllowInProcess"})
        self.configure(validating=[self.hook("allow.example.com", "/allow")])
        mark = self.server.request_mark()
        status, headers, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p1"))
        self.assertEqual(status, 201, body)
        self.assertEqual(headers.get("warning"), '299 - "careful: \\"quoted\\""')
        stored = self.server.get("pods", "p1", namespace="apps")
        self.assertIsNotNone(stored)
        [review] = self.wh.received("/allow")
        self.assertEqual((review["apiVersion"], review["kind"]), ("admission.k8s.io/v1", "AdmissionReview"))
        req = review["request"]
        self.assertEqual(req["operation"], "CREATE")
        self.assertEqual(req["kind"], {"group": "", "version": "v1", "kind": "Pod"})
        self.assertEqual(req["resource"], {"group": "", "version": "v1", "resource": "pods"})
        self.assertEqual(req["requestKind"], req["kind"])
        self.assertEqual((req["name"], req["namespace"]), ("p1", "apps"))
        self.assertNotIn("subResource", req)
        self.assertIs(req["dryRun"], False)
        self.assertIsNone(req["oldObject"])
        self.assertEqual(req["options"], {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"})
        self.assertEqual(req["userInfo"]["username"], "fake-apiserver-user")
        # validating webhooks see the object as it will be stored
        self.assertEqual(req["object"]["metadata"]["uid"], stored["metadata"]["uid"])
        self.assertEqual(req["object"]["status"]["phase"], "Pending")
        self.assertRegex(self.wh.raw_paths()[0], r"^/allow\?timeout=5s$")
        [call] = self.server.webhook_calls()
        self.assertEqual((call["name"], call["uid"], call["allowed"], call["type"]),
                         ("allow.example.com", req["uid"], True, "validating"))
        self.assertEqual(call["response"]["auditAnnotations"], {"decision": "AllowInProcess"})
        self.assertEqual(call["warnings"], ['careful: "quoted"'])
        [entry] = self.server.requests(since=mark, method="POST", path="/pods$")
        self.assertEqual(entry["admission"], [{"name": "allow.example.com", "type": "validating",
                                               "uid": req["uid"], "allowed": True, "error": None,
                                               "patched": False}])
        # a requester named by add_user appears in userInfo
        self.server.add_user("alice-token", "alice", groups=["admins"])
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p2"),
                                  token="alice-token")[0], 201)
        self.assertEqual(self.wh.received("/allow")[-1]["request"]["userInfo"],
                         {"username": "alice", "groups": ["admins"]})

    def test_denial_reaches_the_kubernetes_client_and_nothing_is_stored(self):
        self.configure(validating=[self.hook("deny.example.com", "/deny")])
        with self.assertRaises(ApiException) as cm:
            self.core.create_namespaced_pod("apps", self.pod("p1"))
        self.assertEqual(cm.exception.status, 403)
        st = self.exc_status(cm.exception)
        self.assertStatus(st, 403, "Forbidden")
        self.assertEqual(st["message"], 'admission webhook "deny.example.com" denied the request: no pods here')
        self.assertIsNone(self.server.get("pods", "p1", namespace="apps"))
        self.assertEqual([c["allowed"] for c in self.server.webhook_calls()], [False])
        # a denial without status: 400 "without explanation"
        self.wh.behaviours["/deny"] = lambda r: {"allowed": False}
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p2"))
        self.assertEqual(status, 400, body)
        self.assertEqual(body["message"], 'admission webhook "deny.example.com" denied the request without explanation')

    def test_mutating_patch_is_applied_and_if_needed_webhooks_are_reinvoked(self):
        self.wh.behaviours["/observe"] = allow
        self.wh.behaviours["/patch"] = lambda r: json_patch_response(
            [{"op": "add", "path": "/metadata/annotations", "value": {"gate/decision": "RequireSetec"}},
             {"op": "add", "path": "/spec/runtimeClassName", "value": "kata-fc"}])
        self.configure("a-first", mutating=[self.hook("observe.example.com", "/observe",
                                                      reinvocationPolicy="IfNeeded")])
        self.configure("b-second", mutating=[self.hook("patch.example.com", "/patch")],
                       validating=[self.hook("allow.example.com", "/allow")])
        created = self.core.create_namespaced_pod("apps", self.pod("p1"))
        self.assertEqual(created.metadata.annotations, {"gate/decision": "RequireSetec"})
        self.assertEqual(created.spec.runtime_class_name, "kata-fc")
        stored = self.server.get("pods", "p1", namespace="apps")
        self.assertEqual(stored["spec"]["runtimeClassName"], "kata-fc")
        observed = self.wh.received("/observe")
        self.assertEqual(len(observed), 2, "IfNeeded: called again after a later webhook changed the object")
        self.assertNotIn("runtimeClassName", observed[0]["request"]["object"]["spec"])
        self.assertEqual(observed[1]["request"]["object"]["spec"]["runtimeClassName"], "kata-fc")
        self.assertEqual(len(self.wh.received("/patch")), 1)
        [val] = self.wh.received("/allow")
        self.assertEqual(val["request"]["object"]["spec"]["runtimeClassName"], "kata-fc")
        self.assertEqual([(c["name"], c["patched"]) for c in self.server.webhook_calls()],
                         [("observe.example.com", False), ("patch.example.com", True),
                          ("observe.example.com", False), ("allow.example.com", False)])

    def test_selectors_and_rules_decide_which_webhooks_are_called(self):
        ns_sel = {"matchLabels": {"gate": "on"},
                  "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                        "values": ["kube-system"]}]}
        self.configure(validating=[
            self.hook("ns.example.com", "/allow", namespaceSelector=ns_sel),
            self.hook("obj.example.com", "/allow", objectSelector={"matchExpressions": [
                {"key": "app", "operator": "Exists"}]}),
            self.hook("status.example.com", "/allow", operations=("UPDATE",), resources=("pods/status",)),
            self.hook("star.example.com", "/allow", operations=("UPDATE",), resources=("*",)),
            self.hook("eph.example.com", "/allow", operations=("UPDATE",), resources=("pods/ephemeralcontainers",)),
            self.hook("ns-objects.example.com", "/allow", resources=("namespaces",),
                      namespaceSelector={"matchLabels": {"gate": "on"}}),
        ])

        def called(fn):
            n = len(self.server.webhook_calls())
            fn()
            return sorted(c["name"] for c in self.server.webhook_calls(since=n))
        self.assertEqual(called(lambda: self.core.create_namespaced_pod("plain", self.pod("a", "plain"))), [])
        self.assertEqual(called(lambda: self.core.create_namespaced_pod("apps", self.pod("b"))), ["ns.example.com"])
        self.assertEqual(called(lambda: self.core.create_namespaced_pod("plain", self.pod("c", "plain",
                                                                                          {"app": "x"}))),
                         ["obj.example.com"])
        merge = "application/merge-patch+json"
        self.assertEqual(called(lambda: self.raw("PATCH", "/api/v1/namespaces/apps/pods/b/status",
                                                 {"status": {"phase": "Running"}}, merge)), ["status.example.com"])
        self.assertEqual(called(lambda: self.raw("PATCH", "/api/v1/namespaces/apps/pods/b",
                                                 {"metadata": {"labels": {"k": "v"}}}, merge)), ["star.example.com"])
        eph = {"spec": {"ephemeralContainers": [{"name": "debug", "image": "busybox"}]}}
        self.assertEqual(called(lambda: self.assertEqual(self.raw(
            "PATCH", "/api/v1/namespaces/apps/pods/b/ephemeralcontainers", eph,
            "application/merge-patch+json")[0], 200)), ["eph.example.com"])
        req = self.wh.received("/allow")[-1]["request"]
        self.assertEqual((req["subResource"], req["kind"]["kind"], req["oldObject"]["metadata"]["name"]),
                         ("ephemeralcontainers", "Pod", "b"))
        self.assertEqual(self.server.get("pods", "b", namespace="apps")["spec"]["ephemeralContainers"][0]["name"],
                         "debug")
        # a Namespace is matched against its own labels; a pod in a namespace that does not exist: 404
        self.assertEqual(called(lambda: self.core.create_namespace({"metadata": {"name": "n1"}})), [])
        self.assertEqual(called(lambda: self.core.create_namespace(
            {"metadata": {"name": "n2", "labels": {"gate": "on"}}})), ["ns-objects.example.com"])
        self.assertEqual(self.server.get("namespaces", "n2")["metadata"]["labels"],
                         {"gate": "on", "kubernetes.io/metadata.name": "n2"}, "set by the API server")
        # every namespace counts as labelled kubernetes.io/metadata.name, back-door ones too
        self.server.create("namespaces", {"metadata": {"name": "kube-system", "labels": {"gate": "on"}}})
        self.assertEqual(called(lambda: self.core.create_namespaced_pod("kube-system", self.pod("k", "kube-system"))),
                         [])
        status, _, body = self.raw("POST", "/api/v1/namespaces/ghost/pods", self.pod("d", "ghost"))
        self.assertEqual((status, body["message"]), (404, 'namespaces "ghost" not found'))

    def test_dry_run_is_admitted_and_stores_nothing(self):
        self.configure(mutating=[self.hook("patch.example.com", "/allow")],
                       validating=[self.hook("allow.example.com", "/allow", operations=("*",))])
        rv = self.server.resource_version()
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods?dryRun=All", self.pod("p1"))
        self.assertEqual(status, 201, body)
        self.assertEqual(body["metadata"]["name"], "p1")
        self.assertIsNone(self.server.get("pods", "p1", namespace="apps"))
        self.assertEqual(self.server.resource_version(), rv)
        reviews = self.wh.received("/allow")
        self.assertEqual([r["request"]["dryRun"] for r in reviews], [True, True])
        self.assertEqual(reviews[0]["request"]["options"]["dryRun"], ["All"])
        # dry-run update and delete of a stored pod: admitted, nothing changes
        self.server.create("pods", self.pod("p2"))
        rv = self.server.resource_version()
        self.assertEqual(self.raw("PATCH", "/api/v1/namespaces/apps/pods/p2?dryRun=All",
                                  {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")[0], 200)
        self.assertEqual(self.raw("DELETE", "/api/v1/namespaces/apps/pods/p2?dryRun=All")[0], 200)
        self.assertEqual(self.server.resource_version(), rv)
        self.assertIsNotNone(self.server.get("pods", "p2", namespace="apps"))
        delete_req = self.wh.received("/allow")[-1]["request"]
        self.assertEqual((delete_req["operation"], delete_req["object"], delete_req["dryRun"]), ("DELETE", None, True))
        self.assertEqual(delete_req["oldObject"]["metadata"]["name"], "p2")
        # a webhook with side effects cannot take a dry run
        self.configure("side", validating=[self.hook("side.example.com", "/allow", sideEffects="Some")])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods?dryRun=All", self.pod("p3"))
        self.assertEqual((status, body["message"]), (400, 'admission webhook "side.example.com" does not support dry run'))

    def test_unreachable_webhook_fails_closed_or_is_ignored(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
        s.close()
        self.server.add_service_endpoint("gate/dead", "127.0.0.1:%d" % dead)
        hook = self.hook("dead.example.com", "/allow")
        hook["clientConfig"]["service"]["name"] = "dead"
        self.configure(validating=[hook])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p1"))
        self.assertEqual(status, 500, body)
        self.assertStatus(body, 500, "InternalError")
        self.assertIn('failed calling webhook "dead.example.com": failed to call webhook: Post '
                      '"https://dead.gate.svc:443/allow?timeout=5s"', body["message"])
        self.assertIn("connection refused", body["message"])
        self.assertIsNone(self.server.get("pods", "p1", namespace="apps"))
        [call] = self.server.webhook_calls()
        self.assertIsNone(call["allowed"])
        self.assertIn("connection refused", call["error"])
        hook["failurePolicy"] = "Ignore"
        self.configure(validating=[hook])
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p2"))[0], 201)
        self.assertIsNotNone(self.server.get("pods", "p2", namespace="apps"))
        # a service the test did not map is a DNS failure
        hook = self.hook("nodns.example.com", "/allow")
        hook["clientConfig"]["service"]["name"] = "nowhere"
        self.configure(validating=[hook])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p3"))
        self.assertEqual(status, 500, body)
        self.assertIn("lookup nowhere.gate.svc: no such host", body["message"])

    def test_tls_is_verified_against_the_ca_bundle_and_the_service_name(self):
        hook = self.hook("noca.example.com", "/allow")
        hook["clientConfig"]["caBundle"] = ""          # system roots: our CA is not among them
        self.configure(validating=[hook])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p1"))
        self.assertEqual(status, 500, body)
        self.assertIn('failed calling webhook "noca.example.com"', body["message"])
        self.assertIn("x509: certificate signed by unknown authority", body["message"])
        self.assertEqual(self.wh.received(), [], "the webhook never saw a request")
        # the right CA but a service name the certificate does not carry
        self.server.add_service_endpoint("other/wh", "127.0.0.1:%d" % self.wh.port)
        hook = self.hook("wrongname.example.com", "/allow")
        hook["clientConfig"]["service"]["namespace"] = "other"
        self.configure(validating=[hook])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p2"))
        self.assertEqual(status, 500, body)
        self.assertIn("x509: certificate is not valid for wh.other.svc", body["message"])
        # clientConfig.url, checked against the URL's host
        hook = self.hook("url.example.com", "/allow")
        hook["clientConfig"] = {"url": "https://localhost:%d/allow" % self.wh.port, "caBundle": self.ca_bundle}
        self.configure(validating=[hook])
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p3"))[0], 201)
        self.assertEqual(len(self.wh.received("/allow")), 1)

    def test_timeout_is_honoured(self):
        self.wh.behaviours["/slow"] = lambda r: (self.wh.release.wait(20), allow(r))[1]
        self.configure(validating=[self.hook("slow.example.com", "/slow", timeoutSeconds=1)])
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p1"))
        self.assertEqual(status, 500, body)
        self.assertIn('failed calling webhook "slow.example.com"', body["message"])
        self.assertIn("context deadline exceeded", body["message"])
        self.assertIsNone(self.server.get("pods", "p1", namespace="apps"))

    def test_a_webhook_can_read_the_api_while_it_admits(self):
        # the gate looks its Component up live during admission: the store is not locked meanwhile
        self.server.create("components", self.component("tool", ns="apps"))
        seen = []

        def lookup(review):
            status, _, body = self.raw("GET", "/apis/%s/%s/namespaces/apps/components/tool" % (GROUP, VERSION))
            seen.append((status, body.get("metadata", {}).get("name")))
            return allow(review)
        self.wh.behaviours["/lookup"] = lookup
        self.configure(mutating=[self.hook("lookup.example.com", "/lookup")],
                       validating=[self.hook("lookup.example.com", "/lookup")])
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p1"))[0], 201)
        self.assertEqual(seen, [(200, "tool"), (200, "tool")])

    def test_bad_answers_are_call_errors_and_follow_the_failure_policy(self):
        patch = json_patch_response([{"op": "add", "path": "/metadata/labels/x", "value": "y"}])
        answers = {
            "/uid": lambda r: {"allowed": True, "uid": "not-" + r["request"]["uid"]},
            "/type": lambda r: dict(patch, patchType="MergePatch"),
            "/bad-path": lambda r: json_patch_response([{"op": "replace", "path": "/nope/x", "value": 1}]),
            "/patch": lambda r: patch,
        }
        self.wh.behaviours.update(answers)
        for path, policy, code, text in [
                ("/uid", "Fail", 500, 'failed calling webhook "t.example.com": received invalid webhook response: '
                                      'expected response.uid='),
                ("/uid", "Ignore", 201, None),
                ("/type", "Fail", 500, 'failed calling webhook "t.example.com": unsupported patch type "MergePatch"'),
                ("/type", "Ignore", 201, None),
                ("/bad-path", "Ignore", 500, "Internal error occurred"),   # a patch that does not apply: always
        ]:
            self.configure(mutating=[self.hook("t.example.com", path, failurePolicy=policy)])
            name = ("p-%s-%s" % (path[1:], policy)).lower()
            status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod(name))
            self.assertEqual(status, code, (path, policy, body))
            if text:
                self.assertIn(text, body["message"])
            else:
                self.assertNotIn("x", body["metadata"].get("labels") or {}, "an ignored failure changes nothing")
        # a patch for a DELETE cannot apply: internal error
        self.server.create("pods", self.pod("gone"))
        self.configure(mutating=[self.hook("t.example.com", "/patch", operations=("DELETE",))])
        status, _, body = self.raw("DELETE", "/api/v1/namespaces/apps/pods/gone")
        self.assertEqual(status, 500, body)
        self.assertIn('admission webhook "t.example.com" attempted to modify the object', body["message"])
        self.assertIsNotNone(self.server.get("pods", "gone", namespace="apps"))

    def test_a_write_made_while_webhooks_run_is_not_lost(self):
        # GuaranteedUpdate: a patch is re-applied to the newer object and admitted again
        self.server.create("pods", self.pod("p1"))
        calls = []

        def meddle(review):
            calls.append(review["request"]["object"]["metadata"].get("labels"))
            if len(calls) == 1:
                self.server.patch("pods", "p1", {"metadata": {"labels": {"b": "2"}}}, namespace="apps")
            return allow(review)
        self.wh.behaviours["/meddle"] = meddle
        self.configure(mutating=[self.hook("meddle.example.com", "/meddle", operations=("UPDATE", "CREATE"))])
        status, _, body = self.raw("PATCH", "/api/v1/namespaces/apps/pods/p1", {"metadata": {"labels": {"a": "1"}}},
                                   "application/merge-patch+json")
        self.assertEqual(status, 200, body)
        self.assertEqual(calls, [{"a": "1"}, {"a": "1", "b": "2"}])
        self.assertEqual(self.server.get("pods", "p1", namespace="apps")["metadata"]["labels"], {"a": "1", "b": "2"})
        # a create whose name is taken while it is admitted: 409, the other object stays
        calls.clear()
        self.wh.behaviours["/meddle"] = lambda r: (self.server.create("pods", self.pod("p2", labels={"by": "other"})),
                                                   allow(r))[1]
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", self.pod("p2"))
        self.assertEqual((status, body.get("reason")), (409, "AlreadyExists"), body)
        self.assertEqual(self.server.get("pods", "p2", namespace="apps")["metadata"]["labels"], {"by": "other"})

    def test_generate_name_is_absent_for_mutating_and_filled_for_validating_webhooks(self):
        self.configure(mutating=[self.hook("m.example.com", "/allow")], validating=[self.hook("v.example.com", "/allow")])
        pod = self.pod("")
        pod["metadata"] = {"generateName": "job-", "namespace": "apps"}
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods", pod)
        self.assertEqual(status, 201, body)
        mut, val = self.wh.received("/allow")
        self.assertNotIn("name", mut["request"])
        self.assertEqual(val["request"]["name"], body["metadata"]["name"])
        self.assertTrue(body["metadata"]["name"].startswith("job-"))

    def test_eviction_is_a_create_of_an_eviction(self):
        self.configure(validating=[self.hook("evict.example.com", "/deny", resources=("pods/eviction",))])
        self.server.create("pods", self.pod("p1"))
        ev = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p1", "namespace": "apps"}}
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/pods/p1/eviction", ev)
        self.assertEqual(status, 403, body)
        self.assertIsNotNone(self.server.get("pods", "p1", namespace="apps"))
        req = self.wh.received("/deny")[-1]["request"]
        self.assertEqual((req["operation"], req["subResource"], req["kind"], req["name"]),
                         ("CREATE", "eviction", {"group": "policy", "version": "v1", "kind": "Eviction"}, "p1"))
        self.wh.behaviours["/deny"] = allow
        self.assertEqual(self.raw("POST", "/api/v1/namespaces/apps/pods/p1/eviction", ev)[0], 201)
        self.assertIsNone(self.server.get("pods", "p1", namespace="apps"))

    def test_configurations_back_door_and_switch_bypass_admission(self):
        everything = {"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*/*"]}
        self.configure(validating=[self.hook("deny.example.com", "/deny", rules=[everything])])
        # the webhook configurations themselves are never sent to webhooks
        status, _, body = self.raw("PUT", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gate",
                                   dict(self.server.get("validatingwebhookconfigurations", "gate")))
        self.assertEqual(status, 200, body)
        # the back door neither
        self.server.create("pods", self.pod("p0"))
        self.assertEqual(self.server.webhook_calls(), [])
        # an API write of any other resource is
        status, _, body = self.raw("POST", "/api/v1/namespaces/apps/secrets",
                                   {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
        self.assertEqual(status, 403, body)
        status, _, body = self.raw("DELETE", "/api/v1/namespaces/apps/pods/p0")
        self.assertEqual(status, 403, body)
        self.assertEqual(self.wh.received("/deny")[-1]["request"]["operation"], "DELETE")
        self.server.set_admission(False)
        self.assertEqual(self.raw("DELETE", "/api/v1/namespaces/apps/pods/p0")[0], 200)
        self.assertEqual(len(self.server.webhook_calls()), 2)


class TestServerSideApply(Base):
    """Server-side apply and managedFields (structured-merge-diff as kube-apiserver runs it), checked with
    python3-kubernetes (ApiClient.call_api with application/apply-patch+yaml) and kubectl apply --server-side."""

    PATH = "/apis/%s/%s/namespaces/team/components/%%s" % (GROUP, VERSION)

    def apply(self, name, body, manager, force=None, sub="/status", yaml_text=None):
        query = [("fieldManager", manager)] if manager is not None else []
        if force is not None:
            query.append(("force", force))
        return self.api.call_api(
            self.PATH % name + sub, "PATCH", query_params=query,
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=yaml_text if yaml_text is not None else json.dumps(body), response_type="object",
            auth_settings=["BearerToken"], _return_http_data_only=True)

    @staticmethod
    def config(name, **fields):
        return dict({"apiVersion": GROUP + "/" + VERSION, "kind": "Component",
                     "metadata": {"name": name, "namespace": "team"}}, **fields)

    @staticmethod
    def conditions(*types, status="True"):
        return [{"type": t, "status": status, "reason": "R" + t, "message": "m",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"} for t in types]

    @staticmethod
    def entry(obj, manager, operation="Apply"):
        found = [e for e in obj["metadata"].get("managedFields", [])
                 if e["manager"] == manager and e["operation"] == operation]
        return found[0] if found else None

    def setUp(self):
        super().setUp()
        self.custom.create_namespaced_custom_object(GROUP, VERSION, "team", PLURAL, self.component("c", "team"))

    def test_status_apply_owns_only_its_fields_and_keeps_another_managers_condition(self):
        gate = self.config("c", status={"isolation": "Deny", "runtimeClassName": "kata-fc",
                                        "conditions": self.conditions("Admitted", "Drifted")})
        self.apply("c", gate, "isolation-gate", "true")
        other = self.apply("c", self.config("c", status={"conditions": self.conditions("Ready")}), "someone-else")
        self.assertEqual([c["type"] for c in other["status"]["conditions"]], ["Admitted", "Drifted", "Ready"])
        # the gate applies again without runtimeClassName and Drifted: both go, someone else's condition stays
        gate["status"] = {"isolation": "AllowInProcess", "conditions": self.conditions("Admitted", status="False")}
        out = self.apply("c", gate, "isolation-gate", "true")
        self.assertEqual(out["status"]["isolation"], "AllowInProcess")
        self.assertNotIn("runtimeClassName", out["status"])
        self.assertEqual([(c["type"], c["status"]) for c in out["status"]["conditions"]],
                         [("Admitted", "False"), ("Ready", "True")])
        mine = self.entry(out, "isolation-gate")
        self.assertEqual((mine["subresource"], mine["fieldsType"], mine["apiVersion"]),
                         ("status", "FieldsV1", GROUP + "/" + VERSION))
        self.assertEqual(mine["fieldsV1"], {"f:status": {"f:isolation": {}, "f:conditions": {
            'k:{"type":"Admitted"}': {".": {}, "f:type": {}, "f:status": {}, "f:reason": {}, "f:message": {},
                                      "f:lastTransitionTime": {}}}}})
        theirs = self.entry(out, "someone-else")
        self.assertEqual(list(theirs["fieldsV1"]["f:status"]["f:conditions"]), ['k:{"type":"Ready"}'])
        # the Component's creator is an Update entry named from the user agent (python3-kubernetes' prefix)
        creator = [e for e in out["metadata"]["managedFields"] if e["operation"] == "Update"]
        self.assertEqual(len(creator), 1)
        self.assertEqual(creator[0]["manager"], "OpenAPI-Generator")
        self.assertIn("f:spec", creator[0]["fieldsV1"])
        self.assertNotIn("subresource", creator[0])
        # the same apply again changes nothing: no new resourceVersion
        again = self.apply("c", gate, "isolation-gate", "true")
        self.assertEqual(again["metadata"]["resourceVersion"], out["metadata"]["resourceVersion"])

    def test_conflict_without_force_and_shared_ownership_of_equal_values(self):
        self.apply("c", self.config("c", status={"isolation": "Deny",
                                                 "conditions": self.conditions("Admitted")}), "isolation-gate", "true")
        with self.assertRaises(ApiException) as cm:
            self.apply("c", self.config("c", status={"isolation": "RequireSetec"}), "someone-else")
        st = self.exc_status(cm.exception)
        self.assertStatus(st, 409, "Conflict")
        self.assertEqual(st["message"], 'Apply failed with 1 conflict: conflict with "isolation-gate" with '
                                        'subresource "status": .status.isolation')
        self.assertEqual(st["details"]["causes"], [{
            "reason": "FieldManagerConflict", "field": ".status.isolation",
            "message": 'conflict with "isolation-gate" with subresource "status"'}])
        # two conflicts: one message listing both paths
        with self.assertRaises(ApiException) as cm:
            self.apply("c", self.config("c", status={"isolation": "RequireSetec", "conditions": self.conditions(
                "Admitted", status="False")}), "someone-else")
        st = self.exc_status(cm.exception)
        self.assertTrue(st["message"].startswith('Apply failed with 2 conflicts: conflicts with "isolation-gate" '
                                                 'with subresource "status":\n- '), st["message"])
        self.assertIn('.status.conditions[type="Admitted"].status', st["message"])
        # an equal value is no conflict: both own it
        out = self.apply("c", self.config("c", status={"isolation": "Deny"}), "someone-else")
        self.assertEqual(self.entry(out, "someone-else")["fieldsV1"], {"f:status": {"f:isolation": {}}})
        self.assertIn("f:isolation", self.entry(out, "isolation-gate")["fieldsV1"]["f:status"])
        # force takes the field: the gate no longer owns it
        out = self.apply("c", self.config("c", status={"isolation": "RequireSetec"}), "someone-else", "true")
        self.assertEqual(out["status"]["isolation"], "RequireSetec")
        self.assertNotIn("f:isolation", self.entry(out, "isolation-gate")["fieldsV1"]["f:status"])

    def test_options_validation_media_types_yaml_and_upsert(self):
        with self.assertRaises(ApiException) as cm:
            self.apply("c", self.config("c", status={}), None)
        st = self.exc_status(cm.exception)
        self.assertStatus(st, 422, "Invalid")
        self.assertEqual(st["message"], 'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: '
                                        'is required for apply patch')
        self.assertEqual(st["details"]["causes"], [{"reason": "FieldValueRequired", "field": "fieldManager",
                                                    "message": "Required value: is required for apply patch"}])
        st, _, body = self.raw("PATCH", self.PATH % "c" + "?force=true", {"spec": {"kind": "x"}},
                               "application/merge-patch+json")
        self.assertEqual(st, 422)
        self.assertEqual(body["message"], 'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be '
                                          'specified for non-apply patch')
        st, _, body = self.raw("PATCH", self.PATH % "c", {"spec": {}}, "application/strategic-merge-patch+json")
        self.assertEqual(st, 415)
        self.assertIn("application/apply-patch+yaml", body["message"])
        # a YAML body
        out = self.apply("c", None, "yaml-writer", yaml_text=(
            "apiVersion: %s/%s\nkind: Component\nmetadata:\n  name: c\nstatus:\n  driftedPods: 3\n"
            % (GROUP, VERSION)))
        self.assertEqual(out["status"]["driftedPods"], 3)
        # upsert: applying to a missing object creates it (main resource; 201); a subresource is 404
        with self.assertRaises(ApiException) as cm:
            self.apply("new", self.config("new", status={"isolation": "Deny"}), "someone")
        self.assertEqual(cm.exception.status, 404)
        created = self.api.call_api(
            self.PATH % "new", "PATCH", query_params=[("fieldManager", "creator")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=json.dumps(self.config("new", spec={"kind": "tool", "image": "a"})), response_type="object",
            auth_settings=["BearerToken"], _return_http_data_only=False)
        self.assertEqual(created[1], 201)
        self.assertEqual(created[0]["spec"], {"kind": "tool", "image": "a"})
        self.assertTrue(created[0]["metadata"]["uid"])
        self.assertEqual(self.entry(created[0], "creator")["fieldsV1"], {"f:spec": {"f:kind": {}, "f:image": {}}})
        # applying it again without image removes image (the applier owned it alone)
        out = self.api.call_api(
            self.PATH % "new", "PATCH", query_params=[("fieldManager", "creator")],
            header_params={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json"},
            body=json.dumps(self.config("new", spec={"kind": "tool"})), response_type="object",
            auth_settings=["BearerToken"], _return_http_data_only=True)
        self.assertEqual(out["spec"], {"kind": "tool"})
        self.assertEqual(out["metadata"]["generation"], 2)

    def test_updates_record_their_manager_and_take_fields(self):
        self.apply("c", self.config("c", status={"isolation": "Deny"}), "isolation-gate", "true")
        # a merge patch of the status by another writer takes the field from the applier (no conflict)
        st, _, body = self.raw("PATCH", self.PATH % "c" + "/status?fieldManager=patcher",
                               {"status": {"isolation": "AllowInProcess"}}, "application/merge-patch+json")
        self.assertEqual(st, 200, body)
        self.assertIsNone(self.entry(body, "isolation-gate"))
        upd = self.entry(body, "patcher", "Update")
        self.assertEqual((upd["subresource"], upd["fieldsV1"]), ("status", {"f:status": {"f:isolation": {}}}))
        # without fieldManager: the user agent's prefix names the manager
        st, _, body = self.raw("PATCH", self.PATH % "c", {"metadata": {"labels": {"x": "y"}}},
                               "application/merge-patch+json", headers={"User-Agent": "tool/1.2 (linux)"})
        self.assertEqual(self.entry(body, "tool", "Update")["fieldsV1"],
                         {"f:metadata": {"f:labels": {".": {}, "f:x": {}}}})
        # a pod: containers are a list keyed by name, merged per item
        self.core.create_namespaced_pod("team", {"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "a", "image": "i"}, {"name": "b", "image": "i"}]}})
        st, _, body = self.raw("PATCH", "/api/v1/namespaces/team/pods/p?fieldManager=img", json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "b", "image": "j"}]}}).encode(), "application/apply-patch+yaml")
        self.assertEqual(st, 409, body)
        self.assertEqual(body["details"]["causes"][0]["field"], '.spec.containers[name="b"].image')
        st, _, body = self.raw("PATCH", "/api/v1/namespaces/team/pods/p?fieldManager=img&force=true", json.dumps({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "b", "image": "j"}]}}).encode(), "application/apply-patch+yaml")
        self.assertEqual(st, 200, body)
        self.assertEqual([(c["name"], c["image"]) for c in body["spec"]["containers"]], [("a", "i"), ("b", "j")])

    def test_kubectl_apply_server_side_conflict_and_force_conflicts(self):
        kubectl = os.path.join(HERE, "..", "..", ".tools", "bin", "kubectl")
        if not os.path.exists(kubectl):
            self.skipTest("no .tools/bin/kubectl")
        kubeconfig = self.write_kubeconfig()

        def run(*args, doc):
            # --validate=false: this server has no OpenAPI document
            return subprocess.run([kubectl, "--kubeconfig", kubeconfig, "apply", "--validate=false",
                                   "--server-side", "-f", "-"] + list(args), input=json.dumps(doc),
                                  capture_output=True, text=True, timeout=60)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "team"},
              "data": {"a": "1", "b": "1"}}
        r = run(doc=cm)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("serverside-applied", r.stdout)
        cm["data"] = {"a": "2"}
        r = run("--field-manager", "other", doc=cm)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('Apply failed with 1 conflict: conflict with "kubectl": .data.a', r.stderr)
        r = run("--field-manager", "other", "--force-conflicts", doc=cm)
        self.assertEqual(r.returncode, 0, r.stderr)
        stored = self.server.get("configmaps", "cm", "team")
        self.assertEqual(stored["data"], {"a": "2", "b": "1"})
        owners = {e["manager"]: e["fieldsV1"] for e in stored["metadata"]["managedFields"]}
        self.assertEqual(owners, {"kubectl": {"f:data": {"f:b": {}}}, "other": {"f:data": {"f:a": {}}}})
        # kubectl applies again without b: b goes (it was kubectl's alone)
        cm["data"] = {}
        r = run(doc=dict(cm, data={"c": "3"}))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.server.get("configmaps", "cm", "team")["data"], {"a": "2", "c": "3"})


class TestHelmDryRun(Base):
    def test_helm_install_dry_run_server_of_the_chart(self):
        helm = os.path.join(HERE, "..", "..", ".tools", "bin", "helm")
        if not os.path.exists(helm):
            self.skipTest("no .tools/bin/helm")
        kubeconfig = self.write_kubeconfig()
        self.server.create("namespaces", {"metadata": {"name": "isolation-gate-system"}})
        env = dict(os.environ, KUBECONFIG=kubeconfig, HELM_CACHE_HOME=os.path.join(self.tmp, "hc"),
                   HELM_CONFIG_HOME=os.path.join(self.tmp, "hcfg"), HELM_DATA_HOME=os.path.join(self.tmp, "hd"))
        r = subprocess.run([helm, "install", "ig", os.path.join(HERE, "..", "..", "charts", "isolation-gate"),
                            "-n", "isolation-gate-system", "--dry-run=server", "--disable-openapi-validation",
                            "--set", "image.allowPlaceholder=true"],
                           capture_output=True, text=True, env=env, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        # every object was looked up on the server (its kind is served), nothing was written
        looked_up = {e["path"].split("/")[-2] for e in self.server.requests(method="GET", status=404)}
        for plural in ("deployments", "services", "serviceaccounts", "clusterroles", "rolebindings",
                       "networkpolicies", "customresourcedefinitions"):
            self.assertIn(plural, looked_up)
        self.assertEqual([e for e in self.server.requests() if e["method"] != "GET"], [])


class TestProtobufBodies(Base):
    """client-go's typed clientsets send Secrets, ConfigMaps and DeleteOptions as protobuf."""

    @staticmethod
    def _field(num, value):
        if isinstance(value, int):
            out, v = bytearray(), value
            while True:
                b, v = v & 0x7F, v >> 7
                out.append(b | (0x80 if v else 0))
                if not v:
                    return bytes([num << 3]) + bytes(out)
        data = value.encode() if isinstance(value, str) else value
        return bytes([num << 3 | 2]) + bytes([len(data)]) + data     # short fields only

    def _unknown(self, api_version, kind, raw):
        f = self._field
        return b"k8s\x00" + f(1, f(1, api_version) + f(2, kind)) + f(2, raw)

    def _post(self, path, body, ct="application/vnd.kubernetes.protobuf", method="POST"):
        ctx = ssl.create_default_context(cafile=cert())
        conn = http.client.HTTPSConnection("localhost", self.server.port, context=ctx, timeout=10)
        conn.request(method, path, body=body, headers={"Authorization": "Bearer " + self.token, "Content-Type": ct,
                                                       "Accept": "application/vnd.kubernetes.protobuf,application/json"})
        r = conn.getresponse()
        out = (r.status, r.getheader("Content-Type"), json.loads(r.read() or b"null"))
        conn.close()
        return out

    def test_secret_created_from_protobuf_answered_in_json(self):
        f = self._field
        meta = f(1, "s1") + f(11, f(1, "owner") + f(2, "helm")) + f(12, f(1, "a") + f(2, "b"))
        raw = f(1, meta) + f(2, f(1, "release") + f(2, b"\x00\x01\xff")) + f(3, "helm.sh/release.v1")
        code, ct, out = self._post("/api/v1/namespaces/default/secrets", self._unknown("v1", "Secret", raw))
        self.assertEqual(code, 201, out)
        self.assertEqual(ct, "application/json")
        stored = self.server.get("secrets", "s1", namespace="default")
        self.assertEqual(stored["data"], {"release": base64.b64encode(b"\x00\x01\xff").decode()})
        self.assertEqual(stored["type"], "helm.sh/release.v1")
        self.assertEqual(stored["metadata"]["labels"], {"owner": "helm"})
        self.assertEqual(stored["metadata"]["annotations"], {"a": "b"})
        # DeleteOptions in protobuf: a failed precondition is refused as the API server refuses it
        opts = self._unknown("meta.k8s.io/v1", "DeleteOptions", f(2, f(1, "not-the-uid")))
        code, _, out = self._post("/api/v1/namespaces/default/secrets/s1", opts, method="DELETE")
        self.assertEqual(code, 409, out)
        opts = self._unknown("meta.k8s.io/v1", "DeleteOptions", f(4, "Background"))
        code, _, out = self._post("/api/v1/namespaces/default/secrets/s1", opts, method="DELETE")
        self.assertEqual(code, 200, out)
        self.assertIsNone(self.server.get("secrets", "s1", namespace="default"))

    def test_malformed_protobuf_is_a_bad_request(self):
        f = self._field
        for body in (b"{}",                                                   # no magic
                     b"k8s\x00\x0a\x05\x0a",                                  # truncated
                     self._unknown("v1", "Secret", b"\x0a\x7f\x01"),         # metadata longer than the body
                     b"k8s\x00" + f(2, b"")):                                # no kind
            code, _, out = self._post("/api/v1/namespaces/default/secrets", body)
            self.assertEqual(code, 400, (body, out))
            self.assertEqual(out["reason"], "BadRequest")
        self.assertEqual(self.server.list("secrets", namespace="default"), [])


class TestHelmInstall(Base):
    """A real helm install, list, upgrade, history and uninstall of the chart against the server: helm's
    release Secrets arrive as protobuf; there is no OpenAPI, hence --disable-openapi-validation."""

    def _helm(self, *args, timeout=120):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, HELM_CACHE_HOME=os.path.join(self.tmp, "hc"),
                   HELM_CONFIG_HOME=os.path.join(self.tmp, "hcfg"), HELM_DATA_HOME=os.path.join(self.tmp, "hd"))
        return subprocess.run([self.helm] + list(args), capture_output=True, text=True, env=env, timeout=timeout)

    def test_helm_install_upgrade_uninstall_of_the_chart(self):
        self.helm = os.path.join(HERE, "..", "..", ".tools", "bin", "helm")
        if not os.path.exists(self.helm):
            self.skipTest("no .tools/bin/helm")
        self.kubeconfig = self.write_kubeconfig()
        ns = "isolation-gate-system"
        self.server.create("namespaces", {"metadata": {"name": ns}})
        chart = os.path.join(HERE, "..", "..", "charts", "isolation-gate")
        r = self._helm("install", "ig", chart, "-n", ns, "--disable-openapi-validation",
                       "--set", "image.allowPlaceholder=true")
        self.assertEqual(r.returncode, 0, r.stderr)
        # the release Secret came as protobuf and is stored as the real server stores it
        self.assertTrue(self.server.requests(method="POST", path=r"/secrets$", status=201,
                                             header=("Content-Type", "application/vnd.kubernetes.protobuf")))
        rel = self.server.get("secrets", "sh.helm.release.v1.ig.v1", namespace=ns)
        self.assertEqual(rel["type"], "helm.sh/release.v1")
        self.assertEqual(rel["metadata"]["labels"]["status"], "deployed")
        dep = self.server.get("deployments", "ig-isolation-gate", namespace=ns)
        self.assertIsNotNone(dep)
        self.assertIsNotNone(self.server.get("customresourcedefinitions", "components.gibson.zeroroot.ai"))

        r = self._helm("list", "-n", ns, "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([(x["name"], x["status"], str(x["revision"])) for x in json.loads(r.stdout)],
                         [("ig", "deployed", "1")])

        r = self._helm("upgrade", "ig", chart, "-n", ns, "--disable-openapi-validation",
                       "--set", "image.allowPlaceholder=true", "--set", "replicas=2")
        self.assertEqual(r.returncode, 0, r.stderr)
        after = self.server.get("deployments", "ig-isolation-gate", namespace=ns)
        self.assertEqual(after["metadata"]["uid"], dep["metadata"]["uid"])     # updated in place
        self.assertEqual((dep["spec"]["replicas"], after["spec"]["replicas"]), (3, 2))
        r = self._helm("history", "ig", "-n", ns, "-o", "json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual([(str(x["revision"]), x["status"]) for x in json.loads(r.stdout)],
                         [("1", "superseded"), ("2", "deployed")])
        self.assertEqual(self.server.get("secrets", "sh.helm.release.v1.ig.v1",
                                         namespace=ns)["metadata"]["labels"]["status"], "superseded")

        # --no-hooks: helm validates a hook's manifest against the OpenAPI document before creating it (the
        # pre-delete cleanup Job), uninstall has no --disable-openapi-validation, and this server serves none
        r = self._helm("uninstall", "ig", "-n", ns, "--no-hooks")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIsNone(self.server.get("deployments", "ig-isolation-gate", namespace=ns))
        self.assertEqual([s["metadata"]["name"] for s in self.server.list("secrets", namespace=ns)
                          if s.get("type") == "helm.sh/release.v1"], [])
        # helm.sh/resource-policy: keep (crds.keep)
        self.assertIsNotNone(self.server.get("customresourcedefinitions", "components.gibson.zeroroot.ai"))
        r = self._helm("list", "-n", ns, "-o", "json")
        self.assertEqual((r.returncode, json.loads(r.stdout)), (0, []), r.stderr)


class TestControlAndCommandLine(unittest.TestCase):
    def test_command_line_and_control_api(self):
        tmp = tempfile.mkdtemp(prefix="fake-apiserver-cli-")
        self.addCleanup(shutil.rmtree, tmp, True)
        token_file = os.path.join(tmp, "token")
        with open(token_file, "w") as f:
            f.write("cli-token")
        port_file, control_file = os.path.join(tmp, "port"), os.path.join(tmp, "control")
        proc = subprocess.Popen([sys.executable, os.path.join(HERE, "fake_apiserver.py"), "--tls-cert", cert(),
                                 "--tls-key", key(), "--port", "0", "--port-file", port_file, "--token-file",
                                 token_file, "--control-port", "0", "--control-port-file", control_file,
                                 "--service-endpoint", "gate/wh=127.0.0.1:9"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: os.path.exists(port_file) and os.path.exists(control_file), 10, "port files")
            with open(port_file) as f1, open(control_file) as f2:
                port, cport = int(f1.read()), int(f2.read())

            def control(method, **kw):
                req = urllib.request.Request("http://127.0.0.1:%d/%s" % (cport, method),
                                             data=json.dumps(kw).encode(), method="POST")
                with urllib.request.urlopen(req, timeout=10) as r:
                    return json.loads(r.read())["result"]

            created = control("create", resource="runtimeclasses",
                              obj={"metadata": {"name": "kata-fc", "labels": {"setec.zeroroot.ai/runtime": "x"}},
                                   "handler": "kata-fc"})
            self.assertEqual(created["kind"], "RuntimeClass")
            ctx = ssl.create_default_context(cafile=cert())
            conn = http.client.HTTPSConnection("localhost", port, context=ctx, timeout=10)
            conn.request("GET", "/apis/node.k8s.io/v1/runtimeclasses/kata-fc",
                         headers={"Authorization": "Bearer cli-token"})
            r = conn.getresponse()
            self.assertEqual((r.status, json.loads(r.read())["handler"]), (200, "kata-fc"))
            conn.close()
            self.assertEqual(control("wait_for_request", path="/runtimeclasses/kata-fc", timeout=5)["status"], 200)
            self.assertEqual(control("inject_fault", status=503, path="/runtimeclasses"), 1)
            with self.assertRaises(urllib.error.HTTPError) as cm:
                control("wait_for_request", path="/never", timeout=0.1)
            self.assertEqual(cm.exception.code, 408)
            with self.assertRaises(urllib.error.HTTPError) as cm:
                control("no_such_method")
            self.assertEqual(cm.exception.code, 404)
            self.assertEqual(control("resource_version"), created["metadata"]["resourceVersion"])
            self.assertEqual(control("webhook_calls"), [])
            self.assertIs(control("set_admission", enabled=False), False)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            proc.stdout.close()
            proc.stderr.close()
        self.assertEqual(proc.returncode, 0)


if __name__ == "__main__":
    unittest.main()
