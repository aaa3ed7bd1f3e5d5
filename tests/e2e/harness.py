"""End-to-end harness for isolation-gate: the real binary over real HTTPS.

- GateServer starts `isolation-gate serve --local` as a subprocess in a
  temporary directory, reads the bound ports from its "serving" log line,
  waits for /readyz and always stops (then kills) it on teardown.
- The client verifies the serving certificate exactly as the API server does
  with a webhook's caBundle: against the CA file, for the Service DNS name
  (isolation-gate.isolation-gate-system.svc), while connecting to 127.0.0.1.
- Helpers build AdmissionReviews, decode and apply returned patches with an
  independent RFC 6902 implementation (python3-jsonpatch) and load the result
  as a Pod with python3-kubernetes models.

Only /usr/bin/python3, the standard library, jsonpatch, kubernetes and yaml.
Every wait is bounded.
"""

import base64
import copy
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import unittest
import uuid

import jsonpatch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("IG_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
BINARY = os.environ.get("IG_BINARY") or os.path.join(SOURCE_DIR, "build", "isolation-gate")
EXAMPLES = os.path.join(SOURCE_DIR, "examples")
EXAMPLE_COMPONENTS = os.path.join(EXAMPLES, "components")
EXAMPLE_PODS = os.path.join(EXAMPLES, "pods")

SERVICE_NAME = "isolation-gate"
GATE_NAMESPACE = "isolation-gate-system"
SERVICE_HOST = SERVICE_NAME + "." + GATE_NAMESPACE + ".svc"

COMPONENT_LABEL = "gibson.zeroroot.ai/component"
ISOLATION_ANNOTATION = "gibson.zeroroot.ai/isolation"
SHAPE_ENV = "GIBSON_UNTRUSTED_EXEC"

# A sanitized binary (scripts/test.sh exports ASAN_OPTIONS / TSAN_OPTIONS for
# those stages) runs several times slower, beside the other e2e files under
# ctest -j: every bound a test waits on is this many times longer there. The
# bounds stay bounds; nothing asserts how long anything took.
SLOWDOWN = 3.0 if (os.environ.get("ASAN_OPTIONS") or os.environ.get("TSAN_OPTIONS")) else 1.0
START_TIMEOUT = 15.0
# Leader election as the operator tests run it: a short Lease, so handovers
# take seconds. The renew deadline also bounds the Lease-and-certificates
# client's requests (its lists and watches too), so under a sanitizer every
# figure gets SLOWDOWN: at 2 s a loaded machine lost the Lease and timed out
# the certificate watches over and over (CI's ASan stage).
LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 3.0 * SLOWDOWN, 2.0 * SLOWDOWN, 0.5 * SLOWDOWN
ELECTION = ["--lease-duration", "%dms" % (LEASE_DURATION * 1000), "--renew-deadline", "%dms" % (RENEW_DEADLINE * 1000),
            "--retry-period", "%dms" % (RETRY_PERIOD * 1000)]
REQUEST_TIMEOUT = 15.0
STOP_TIMEOUT = 10.0


def require_binary():
    """The binary is required: a missing one is a failure, never a skip."""
    if not os.access(BINARY, os.X_OK):
        raise AssertionError("isolation-gate binary not found at %s (set IG_BINARY)" % BINARY)


def load_yaml(path):
    with open(path, "r", encoding="utf-8") as f:
        return yaml.safe_load(f)


def example_pod(name):
    return load_yaml(os.path.join(EXAMPLE_PODS, name))


def example_component(name):
    return load_yaml(os.path.join(EXAMPLE_COMPONENTS, name))


def run_binary(args, env=None, timeout=60, cwd=None, stdin_data=None):
    """Run the binary to completion (bounded). Returns CompletedProcess (bytes)."""
    full_env = dict(os.environ)
    if env is not None:
        for k, v in env.items():
            if v is None:
                full_env.pop(k, None)
            else:
                full_env[k] = v
    return subprocess.run([BINARY] + list(args), env=full_env, cwd=cwd, timeout=timeout,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, input=stdin_data)


def make_certs(out_dir, extra_ip="127.0.0.1"):
    args = ["certs", "--out-dir", out_dir, "--service-name", SERVICE_NAME,
            "--namespace", GATE_NAMESPACE]
    if extra_ip:
        args += ["--ip", extra_ip]
    proc = run_binary(args, timeout=60)
    if proc.returncode != 0:
        raise AssertionError("certs failed (%d): %s" % (proc.returncode, proc.stderr.decode(errors="replace")))
    return {name: os.path.join(out_dir, name) for name in ("ca.crt", "ca.key", "tls.crt", "tls.key")}


def client_context(*cafiles):
    ctx = ssl.create_default_context(cafile=cafiles[0])
    for extra in cafiles[1:]:
        ctx.load_verify_locations(cafile=extra)
    return ctx


class VerifiedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to (host, port) but verifies the certificate for server_hostname."""

    def __init__(self, host, port, context, server_hostname=SERVICE_HOST, timeout=REQUEST_TIMEOUT):
        super().__init__(host, port, timeout=timeout, context=context)
        self._ig_context = context
        self._ig_server_hostname = server_hostname

    def connect(self):
        sock = socket.create_connection((self.host, self.port), self.timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ig_context.wrap_socket(sock, server_hostname=self._ig_server_hostname)


class Response(object):
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    def json(self):
        return json.loads(self.body.decode("utf-8"))

    def __repr__(self):
        return "Response(%d, %r)" % (self.status, self.body[:500])


class GateServer(object):
    """One `isolation-gate serve --local` process.

    shape: value for GIBSON_UNTRUSTED_EXEC, or None to unset it.
    tls: "files" (certs from `certs`, passed with --tls-cert/--tls-key),
         "self" (the server makes its own chain; --ca-out), or, in cluster
         mode, "self-managed" (--cert-mode self-managed: the test writes the
         CA bundle to trust into ca_file).
    kubeconfig: cluster mode (no --local): the kubeconfig of the test API
         server; --cert-mode files. wait_ready=False returns once it serves,
         ready or not (cluster mode is ready only when its caches synced).
    """

    def __init__(self, sandbox="unavailable", shape=None, components=EXAMPLE_COMPONENTS,
                 runtime_class=None, namespace=None, tls="files", extra_args=(),
                 kubeconfig=None, wait_ready=True, env=None):
        self.sandbox = sandbox
        self.env = dict(env or {})
        self.shape = shape
        self.components = components
        self.runtime_class = runtime_class
        self.namespace = namespace
        self.tls = tls
        self.extra_args = list(extra_args)
        self.kubeconfig = kubeconfig
        self.wait_ready = wait_ready
        self.proc = None
        self.tmp = None
        self.host = "127.0.0.1"
        self.port = None
        self.metrics_port = None
        self.ca_file = None
        self.cert_files = None
        self.serving_line = None
        self._stderr = None

    # -- lifecycle -----------------------------------------------------
    def start(self):
        require_binary()
        self.tmp = tempfile.mkdtemp(prefix="ig-e2e-")
        if self.kubeconfig is None:
            args = ["serve", "--local", "--components", self.components, "--sandbox", self.sandbox]
        else:
            args = ["serve", "--kubeconfig", self.kubeconfig,
                    "--cert-mode", "self-managed" if self.tls == "self-managed" else "files"]
        args += ["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"]
        if self.tls == "self-managed":
            self.ca_file = os.path.join(self.tmp, "ca-bundle.pem")  # the test writes what the Secret holds
        elif self.tls == "files":
            self.cert_files = make_certs(os.path.join(self.tmp, "certs"))
            self.ca_file = self.cert_files["ca.crt"]
            args += ["--tls-cert", self.cert_files["tls.crt"], "--tls-key", self.cert_files["tls.key"]]
        else:
            self.ca_file = os.path.join(self.tmp, "ca-out.pem")
            args += ["--ca-out", self.ca_file]
        if self.runtime_class is not None:
            args += ["--runtime-class", self.runtime_class]
        if self.namespace is not None:
            args += ["--namespace", self.namespace]
        if not any(a.startswith("--drain-delay") for a in self.extra_args):
            args += ["--drain-delay", "0s"]  # tests stop servers often; the drain tests set their own
        if self.kubeconfig is not None and not any(a.startswith("--kube-lookup-timeout") for a in self.extra_args):
            # A review's live GET waits 2s in production; a sanitized binary
            # beside other e2e files gets the same SLOWDOWN as every bound.
            args += ["--kube-lookup-timeout", "%dms" % (2000 * SLOWDOWN)]
        args += self.extra_args
        env = dict(os.environ)
        env.pop(SHAPE_ENV, None)
        if self.shape is not None:
            env[SHAPE_ENV] = self.shape
        env.update(self.env)
        self._stderr_path = os.path.join(self.tmp, "stderr.log")
        self._stderr = open(self._stderr_path, "wb")
        self.proc = subprocess.Popen([BINARY] + args, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     start_new_session=True)
        try:
            self._wait_serving()
            if self.wait_ready:
                self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_serving(self):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for line in self.log_lines():
                if line.get("msg") == "serving":
                    self.serving_line = line
                    self.port = int(line["webhook"].rsplit(":", 1)[1])
                    self.metrics_port = int(line["metrics"].rsplit(":", 1)[1])
                    return
            if self.proc.poll() is not None:
                raise AssertionError("isolation-gate exited with %s before serving:\n%s"
                                     % (self.proc.returncode, self.stderr_text()))
            time.sleep(0.02)
        raise AssertionError("isolation-gate did not log 'serving' within %ss:\n%s"
                             % (START_TIMEOUT, self.stderr_text()))

    def _wait_ready(self, timeout=START_TIMEOUT):
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                r = self.probe("GET", "/readyz", timeout=2)
                if r.status == 200:
                    return
                last = r
            except OSError as e:
                last = e
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        raise AssertionError("isolation-gate not ready: %r\n%s" % (last, self.stderr_text()))

    def stop(self):
        """SIGTERM, bounded wait, then SIGKILL. Returns the exit code."""
        rc = None
        if self.proc is not None:
            if self.proc.poll() is None:
                try:
                    self.proc.send_signal(signal.SIGTERM)
                    rc = self.proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    rc = self.proc.wait(timeout=STOP_TIMEOUT)
            else:
                rc = self.proc.returncode
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None
        if rc is not None and rc < 0 and rc != -signal.SIGKILL:
            # Ended by a signal we did not send (an abort: a sanitizer's report,
            # std::terminate): its last words go where CI shows them.
            lines = self.stderr_text().splitlines()
            first = next((i for i, l in enumerate(lines) if "ERROR:" in l or "terminate" in l),
                         max(0, len(lines) - 40))
            sys.stderr.write("the gate ended by signal %d; its log from line %d:\n%s\n"
                             % (-rc, first + 1, "\n".join(l[:300] for l in lines[first:first + 60])))
        if self.tmp is not None:
            if os.environ.get("IG_E2E_KEEP"):  # investigating: keep the gate's files and log
                sys.stderr.write("kept %s\n" % self.tmp)
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=STOP_TIMEOUT)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self):
        try:
            with open(self._stderr_path, "rb") as f:
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def log_lines(self):
        out = []
        for raw in self.stderr_text().splitlines():
            raw = raw.strip()
            if not raw.startswith("{"):
                continue
            try:
                out.append(json.loads(raw))
            except ValueError:
                pass
        return out

    # -- clients -------------------------------------------------------
    def context(self, *extra_cafiles):
        return client_context(self.ca_file, *extra_cafiles)

    def connection(self, context=None, server_hostname=SERVICE_HOST, timeout=REQUEST_TIMEOUT):
        return VerifiedHTTPSConnection(self.host, self.port, context or self.context(),
                                       server_hostname=server_hostname, timeout=timeout)

    def tls_socket(self, context=None, server_hostname=SERVICE_HOST, timeout=REQUEST_TIMEOUT):
        """A raw TLS socket to the webhook listener (handshake done)."""
        sock = socket.create_connection((self.host, self.port), timeout)
        try:
            return (context or self.context()).wrap_socket(sock, server_hostname=server_hostname)
        except BaseException:
            sock.close()
            raise

    def request(self, method, path, body=None, headers=None, content_type="application/json",
                timeout=REQUEST_TIMEOUT, conn=None):
        own = conn is None
        conn = conn or self.connection(timeout=timeout)
        try:
            hdrs = {}
            if body is not None and content_type is not None:
                hdrs["Content-Type"] = content_type
            hdrs.update(headers or {})
            if isinstance(body, (dict, list)):
                body = json.dumps(body).encode("utf-8")
            elif isinstance(body, str):
                body = body.encode("utf-8")
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data)
        finally:
            if own:
                conn.close()

    def post(self, path, body, **kw):
        return self.request("POST", path, body=body, **kw)

    def review(self, path, review, conn=None, query=""):
        """POST an AdmissionReview; asserts HTTP 200 and returns the parsed review."""
        r = self.post(path + query, review, conn=conn)
        if r.status != 200:
            raise AssertionError("%s answered HTTP %d: %r" % (path, r.status, r.body[:2000]))
        return r.json()

    def probe(self, method, path, body=None, headers=None, timeout=REQUEST_TIMEOUT):
        conn = http.client.HTTPConnection(self.host, self.metrics_port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            data = resp.read()
            return Response(resp.status, dict((k.lower(), v) for k, v in resp.getheaders()), data)
        finally:
            conn.close()

    def metrics(self):
        r = self.probe("GET", "/metrics")
        if r.status != 200:
            raise AssertionError("/metrics answered %d" % r.status)
        return r.body.decode("utf-8")

    def metric_values(self, name):
        """Sum of every sample of metric `name` (any labels)."""
        total = 0.0
        found = False
        for line in self.metrics().splitlines():
            if line.startswith("#") or not line.strip():
                continue
            metric = line.split("{", 1)[0].split(" ", 1)[0]
            if metric == name:
                total += float(line.rsplit(" ", 1)[1])
                found = True
        return total if found else None


class ServerTestCase(unittest.TestCase):
    """Starts one server for the class (setUpClass) and stops it afterwards."""

    server_kwargs = {}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = GateServer(**cls.server_kwargs)
        cls.server.start()
        cls.addClassCleanup(cls.server.stop)


# -- AdmissionReview builders -----------------------------------------------

def new_uid():
    return str(uuid.uuid4())


def admission_review(obj, *, group, version, kind, resource, namespace="team-a", name=None,
                     operation="CREATE", uid=None, dry_run=False,
                     api_version="admission.k8s.io/v1", old_object=None, sub_resource=None):
    if name is None and isinstance(obj, dict):
        name = ((obj.get("metadata") or {}).get("name")) or ""
    req = {
        "uid": uid or new_uid(),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": resource},
        "name": name or "",
        "namespace": namespace,
        "operation": operation,
        "userInfo": {"username": "e2e", "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": old_object,
        "dryRun": dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1",
                    "kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions"},
    }
    if sub_resource:
        req["subResource"] = sub_resource
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": req}


def pod_review(pod, namespace=None, **kw):
    if namespace is None:
        namespace = ((pod or {}).get("metadata") or {}).get("namespace") or "team-a"
    return admission_review(pod, group="", version="v1", kind="Pod", resource="pods",
                            namespace=namespace, **kw)


WORKLOAD_RESOURCES = {
    "Deployment": ("apps", "deployments"),
    "StatefulSet": ("apps", "statefulsets"),
    "DaemonSet": ("apps", "daemonsets"),
    "ReplicaSet": ("apps", "replicasets"),
    "Job": ("batch", "jobs"),
    "CronJob": ("batch", "cronjobs"),
}


def workload_review(obj, namespace=None, **kw):
    group, resource = WORKLOAD_RESOURCES[obj["kind"]]
    if namespace is None:
        namespace = (obj.get("metadata") or {}).get("namespace") or "team-a"
    return admission_review(obj, group=group, version="v1", kind=obj["kind"], resource=resource,
                            namespace=namespace, **kw)


def component_review(obj, namespace="team-a", **kw):
    return admission_review(obj, group="gibson.zeroroot.ai", version="v1alpha1", kind="Component",
                            resource="components", namespace=namespace, **kw)


def component_image(component):
    """spec.image of the example Component `component`: what its pods must run
    (docs/security.md, "Pods are bound to their Component"); a placeholder for
    names that are no example."""
    path = os.path.join(EXAMPLE_COMPONENTS, "%s.yaml" % component) if component else None
    if path and os.path.exists(path):
        return load_yaml(path)["spec"]["image"]
    return "registry.example.com/x:1"


def make_pod(name="p", component="docs-indexer", namespace="team-a", annotations=None,
             labels=None, spec_extra=None, containers=None, metadata_extra=None):
    meta = {"name": name, "namespace": namespace}
    lbls = dict(labels or {})
    if component is not None:
        lbls[COMPONENT_LABEL] = component
    if lbls:
        meta["labels"] = lbls
    if annotations is not None:
        meta["annotations"] = annotations
    if metadata_extra:
        meta.update(metadata_extra)
    spec = {"containers": containers or [{"name": "main", "image": component_image(component)}]}
    if spec_extra:
        spec.update(spec_extra)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pod_template(component="report-parser", spec_extra=None, labels=None):
    pod = make_pod(component=component, spec_extra=spec_extra, labels=labels)
    return {"metadata": {"labels": pod["metadata"].get("labels", {})}, "spec": pod["spec"]}


def make_workload(kind, name="w", component="report-parser", namespace="team-a", spec_extra=None):
    tmpl = pod_template(component=component, spec_extra=spec_extra, labels={"app": name})
    meta = {"name": name, "namespace": namespace}
    selector = {"matchLabels": {"app": name}}
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                "spec": {"replicas": 1, "selector": selector, "template": tmpl}}
    if kind == "StatefulSet":
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                "spec": {"serviceName": name, "selector": selector, "template": tmpl}}
    if kind in ("DaemonSet", "ReplicaSet"):
        return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta,
                "spec": {"selector": selector, "template": tmpl}}
    tmpl["spec"]["restartPolicy"] = "Never"
    if kind == "Job":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta, "spec": {"template": tmpl}}
    if kind == "CronJob":
        return {"apiVersion": "batch/v1", "kind": kind, "metadata": meta,
                "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": tmpl}}}}
    raise ValueError(kind)


# -- patches -------------------------------------------------------------------

_API_CLIENT = None


def api_client():
    global _API_CLIENT
    if _API_CLIENT is None:
        import kubernetes
        _API_CLIENT = kubernetes.client.ApiClient()
    return _API_CLIENT


def to_v1pod(obj):
    """Load a dict as kubernetes.client.V1Pod (client-side validation on)."""
    return api_client()._ApiClient__deserialize(copy.deepcopy(obj), "V1Pod")


def decode_patch(response):
    """The RFC 6902 operations of an AdmissionResponse (asserts patchType)."""
    if response.get("patchType") != "JSONPatch":
        raise AssertionError("patchType is %r, expected JSONPatch" % response.get("patchType"))
    raw = base64.b64decode(response["patch"], validate=True)
    ops = json.loads(raw.decode("utf-8"))
    if not isinstance(ops, list) or not ops:
        raise AssertionError("patch is not a non-empty list of operations: %r" % ops)
    return ops


def apply_response_patch(original, response):
    """Applies the response's patch to a copy of `original` with python3-jsonpatch."""
    ops = decode_patch(response)
    return jsonpatch.apply_patch(copy.deepcopy(original), ops, in_place=False), ops


def patched_pod(original, response):
    """Apply the patch and load the result as V1Pod. Returns (V1Pod, patched dict, ops)."""
    patched, ops = apply_response_patch(original, response)
    return to_v1pod(patched), patched, ops


# -- raw sockets -----------------------------------------------------------------

def half_close(sock):
    """shutdown(SHUT_WR) of the TCP connection under `sock`, keeping TLS usable.

    ssl.SSLSocket.shutdown() drops the TLS object (later reads would return
    raw records), so the FIN is sent through a duplicate descriptor."""
    dup = socket.fromfd(sock.fileno(), socket.AF_INET, socket.SOCK_STREAM)
    try:
        dup.shutdown(socket.SHUT_WR)
    finally:
        dup.close()


def recv_until_closed(sock, timeout=REQUEST_TIMEOUT, limit=1 << 20):
    """Reads until EOF, error or timeout (bounded). Returns bytes."""
    deadline = time.monotonic() + timeout
    chunks = []
    total = 0
    while time.monotonic() < deadline and total < limit:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        except (ssl.SSLError, OSError):
            break
        if not data:
            break
        chunks.append(data)
        total += len(data)
    return b"".join(chunks)


def recv_http_response(sock, timeout=REQUEST_TIMEOUT):
    """Reads one HTTP/1.1 response with Content-Length from a raw socket.

    Returns (status, headers-dict, body) or (None, {}, raw bytes) when the
    connection closed before a full response."""
    deadline = time.monotonic() + timeout
    buf = b""
    while b"\r\n\r\n" not in buf:
        if time.monotonic() >= deadline:
            return None, {}, buf
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except (socket.timeout, ssl.SSLError, OSError):
            return None, {}, buf
        if not data:
            return None, {}, buf
        buf += data
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if status == 100:
        # An interim response; the caller decides what to do next.
        return status, headers, rest
    length = int(headers.get("content-length", "0"))
    while len(rest) < length and time.monotonic() < deadline:
        sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except (socket.timeout, ssl.SSLError, OSError):
            break
        if not data:
            break
        rest += data
    return status, headers, rest[:length]
