"""Soak: the real cluster-mode server at steady load, for a while, while things change under it.

`isolation-gate serve --kubeconfig ... --cert-mode files` runs against the repository's test API server
(tests/apiserver/fake_apiserver.py, in this process) for --duration, while
- a few keep-alive client threads send AdmissionReviews to the four endpoints: decidable ones whose
  answer is certain (a Component trusted the whole time, one untrusted the whole time, a valid and an
  invalid Component), Components that churn, and undecidable ones (bad operation, empty namespace,
  duplicate keys, unknown Component);
- the serving certificate is rewritten every --rotate-every (a new key and certificate from the same CA,
  the files the server watches);
- Components churn: created, updated, content_trust flipped (trusted, untrusted, an invalid value),
  deleted, all the time;
- watches are dropped (abruptly, mid-event, with a TCP reset) and history compacted (so re-watches get
  410 Gone and relist).

Every answer is checked against what is certain (see check_*). It reports requests, failures (must be 0),
allows of undecidable requests (must be 0), wrong answers (must be 0), RSS and open fds at the end of
warm-up and at the end (RSS growth < 5%, no fd growth), and exits 1 on any breach. --doc FILE writes
the figures between the soak markers of FILE (docs/security.md's Soak section), replacing what is there.

Only /usr/bin/python3 and the packages the e2e tests use. Every wait is bounded.
"""

import argparse
import hashlib
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("IG_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "e2e"))
sys.path.insert(0, os.path.join(SOURCE_DIR, "tests", "apiserver"))

import harness as h  # noqa: E402
from fake_apiserver import FakeApiServer  # noqa: E402

NS = "team-a"
IMAGE = "registry.example.com/gibson/soak:1.0"
TRUSTED = "stable-trusted"      # trusted for the whole run
UNTRUSTED = "stable-untrusted"  # untrusted for the whole run
UNKNOWN = "never-created"       # never exists
CHURN_STATES = ("trusted", "untrusted", "invalid", "absent")
# A churn Component counts as "certainly not trusted" only when it has not been trusted for this
# long before the request was sent: the cache may lag the API server by a watch event, a dropped
# watch's re-watch (backoff about 1 s) or a relist.
CACHE_LAG_MARGIN = 10.0
BEGIN_MARK = "<!-- soak:begin (written by scripts/soak.sh --doc; do not edit by hand) -->"
END_MARK = "<!-- soak:end -->"


def parse_duration(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError("not a duration: %r (e.g. 30m, 90s, 1h)" % text)
    value = float(m.group(1))
    return value * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]


def log(msg):
    sys.stdout.write("[soak %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stdout.flush()


# -- the Component world ---------------------------------------------------------------------------

def component(name, trust, generation_note=0):
    spec = {"kind": "tool", "image": IMAGE}
    if trust is not None:
        spec["policy"] = {"content_trust": trust}
    return {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
            "metadata": {"name": name, "namespace": NS,
                         "annotations": {"soak.example.com/note": str(generation_note)}},
            "spec": spec}


class Timeline(object):
    """What each churn Component was, when (monotonic). A change is recorded before its API write
    starts (begin) and completed when the write returns (end): it happened somewhere in [before,
    after]; while the write is in flight `after` is unknown (infinity), so a checker that reads the
    timeline during a write assumes the worst for both states."""

    INF = float("inf")

    def __init__(self, names):
        self.lock = threading.Lock()
        self.changes = {n: [[0.0, 0.0, "absent"]] for n in names}

    def begin(self, name, state):
        with self.lock:
            entry = [time.monotonic(), self.INF, state]
            self.changes[name].append(entry)
            return entry

    def end(self, entry):
        with self.lock:
            entry[1] = time.monotonic()

    def certainly_untrusted(self, name, since, until):
        """True when `name` was not trusted at any moment in [since, until]."""
        with self.lock:
            changes = [tuple(c) for c in self.changes[name]]
        for i, (before, _after, state) in enumerate(changes):
            # This state held (at most) from `before` until the next change's `after`.
            end = changes[i + 1][1] if i + 1 < len(changes) else self.INF
            if state == "trusted" and before <= until and end >= since:
                return False
        return True

    def ever_trusted_before(self, name, until):
        with self.lock:
            return any(state == "trusted" and before <= until for before, _a, state in self.changes[name])


# -- requests --------------------------------------------------------------------------------------

def pod(name, comp, namespace=NS):
    p = h.make_pod(name=name, component=comp, namespace=namespace,
                   containers=[{"name": "main", "image": IMAGE}])
    return p


def workload(comp):
    w = h.make_workload("Deployment", name="soak-deploy", component=comp)
    for c in w["spec"]["template"]["spec"]["containers"]:
        c["image"] = IMAGE
    return w


def raw_with_duplicate(review):
    """The review as JSON text with a duplicate key inside `request` (the API server never sends one)."""
    text = json.dumps(review)
    # "operation": "CREATE" appears once; add a second "operation" right after the first.
    return text.replace('"operation": "CREATE"', '"operation": "CREATE", "operation": "CREATE"', 1)


class Case(object):
    """One kind of request: how to build it and what must hold of its answer."""

    def __init__(self, name, path, build, expect, undecidable=False, churn=None):
        self.name = name
        self.path = path
        self.build = build          # () -> bytes body
        self.expect = expect        # "allow", "deny" or "churn"
        self.undecidable = undecidable
        self.churn = churn          # churn Component name for expect == "churn"


def review_bytes(review):
    return json.dumps(review).encode("utf-8")


def make_cases(churn_names):
    cases = []
    endpoints = {
        "/mutate/pods": lambda comp, **kw: h.pod_review(pod("soak-pod", comp), **kw),
        "/validate/pods": lambda comp, **kw: h.pod_review(pod("soak-pod", comp), **kw),
        "/validate/workloads": lambda comp, **kw: h.workload_review(workload(comp), **kw),
    }
    for path, make in endpoints.items():
        cases.append(Case("trusted " + path, path, lambda m=make: review_bytes(m(TRUSTED)), "allow"))
        cases.append(Case("untrusted " + path, path, lambda m=make: review_bytes(m(UNTRUSTED)), "deny"))
        cases.append(Case("unknown component " + path, path, lambda m=make: review_bytes(m(UNKNOWN)),
                          "deny", undecidable=True))
        for c in churn_names:
            cases.append(Case("churn " + path, path, lambda m=make, c=c: review_bytes(m(c)), "churn", churn=c))
    comp_make = lambda trust, **kw: h.component_review(component("soak-new", trust), **kw)  # noqa: E731
    endpoints["/validate/components"] = lambda _comp, **kw: comp_make("trusted", **kw)
    cases.append(Case("valid component", "/validate/components",
                      lambda: review_bytes(comp_make("untrusted")), "allow"))
    cases.append(Case("invalid content_trust", "/validate/components",
                      lambda: review_bytes(comp_make("maybe")), "deny", undecidable=True))
    # Undecidable on every endpoint (with a Component that would be allowed otherwise).
    for path, make in endpoints.items():
        for op in ("BOGUS", "create", "CREATE "):
            cases.append(Case("operation %r %s" % (op, path), path,
                              lambda m=make, op=op: review_bytes(m(TRUSTED, operation=op)), "deny",
                              undecidable=True))
        if path != "/validate/components":
            cases.append(Case("empty namespace " + path, path,
                              lambda m=make: review_bytes(m(TRUSTED, namespace="")), "deny", undecidable=True))
        cases.append(Case("duplicate key " + path, path,
                          lambda m=make: raw_with_duplicate(m(TRUSTED)).encode("utf-8"), "deny",
                          undecidable=True))
    return cases


class Stats(object):
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.failures = 0
        self.undecidable = 0
        self.undecidable_allowed = 0
        self.wrong = 0
        self.churn_checked = 0      # churn answers checked as "certainly not trusted"
        self.by_endpoint = {}
        self.examples = []          # the first few breaches, for the report
        self.cert_fingerprints = set()
        self.connections = 0

    def breach(self, what):
        with self.lock:
            if len(self.examples) < 20:
                self.examples.append(what)


def check(case, status, body, t_send, t_recv, timeline, stats):
    """Counts the answer; returns nothing. A breach is counted and remembered."""
    allowed = None
    response = {}
    if status == 200:
        try:
            review = json.loads(body.decode("utf-8"))
            response = review["response"]
            allowed = response["allowed"]
        except (ValueError, KeyError, TypeError):
            with stats.lock:
                stats.failures += 1
            stats.breach("%s: HTTP 200 without an AdmissionReview answer: %r" % (case.name, body[:300]))
            return
    elif case.undecidable and status == 400:
        allowed = False  # refused as not a readable AdmissionReview: not an allow
    else:
        # Any other refusal at the HTTP level is a failed request (the API server would reject the pod).
        with stats.lock:
            stats.failures += 1
        stats.breach("%s: HTTP %d: %r" % (case.name, status, body[:300]))
        return
    decision = (response.get("auditAnnotations") or {}).get("decision")
    with stats.lock:
        stats.by_endpoint[case.path] = stats.by_endpoint.get(case.path, 0) + 1
        if case.undecidable:
            stats.undecidable += 1
            if allowed:
                stats.undecidable_allowed += 1
    if case.undecidable and allowed:
        stats.breach("%s: ALLOWED an undecidable request: %r" % (case.name, response))
        return
    wrong = None
    if case.expect == "allow" and allowed is not True:
        wrong = "expected allowed"
    elif case.expect == "deny" and allowed is not False:
        wrong = "expected denied"
    elif case.expect == "allow" and case.path == "/mutate/pods" and decision != "AllowInProcess":
        wrong = "expected decision AllowInProcess"
    elif case.expect == "churn":
        trust_seen = (response.get("auditAnnotations") or {}).get("content-trust")
        if allowed:
            # Allowed only as AllowInProcess (the sandbox is unavailable the whole run), for a Component
            # the gate saw as trusted and that was trusted at some time before the answer ...
            if case.path == "/mutate/pods" and decision != "AllowInProcess":
                wrong = "allowed a churn pod with decision %r" % decision
            elif not timeline.ever_trusted_before(case.churn, t_recv):
                wrong = "allowed a Component that was never trusted"
            elif trust_seen not in (None, "trusted"):
                wrong = "allowed with content-trust %r" % trust_seen
            # ... and never when it has certainly not been trusted for a while.
            elif timeline.certainly_untrusted(case.churn, t_send - CACHE_LAG_MARGIN, t_recv):
                wrong = "allowed a Component untrusted/absent since %.0fs before the request" % CACHE_LAG_MARGIN
        if timeline.certainly_untrusted(case.churn, t_send - CACHE_LAG_MARGIN, t_recv):
            with stats.lock:
                stats.churn_checked += 1
    if wrong:
        with stats.lock:
            stats.wrong += 1
        stats.breach("%s: %s: %r" % (case.name, wrong, response))


class Client(threading.Thread):
    """One keep-alive connection (renewed every `reconnect_every` requests, so rotated certificates are
    seen), sending cases round-robin from a random start, at `rate` requests per second."""

    def __init__(self, index, gate, cases, rate, stop, pause, timeline, stats, reconnect_every=50):
        super().__init__(name="client-%d" % index, daemon=True)
        self.gate = gate
        self.cases = list(cases)
        random.Random(index).shuffle(self.cases)
        self.rate = rate
        self.stop = stop
        self.pause = pause          # set: close the connection and wait (for a quiet measurement)
        self.paused = threading.Event()
        self.timeline = timeline
        self.stats = stats
        self.reconnect_every = reconnect_every
        self.conn = None
        self.sent_on_conn = 0

    def _connect(self):
        self.conn = self.gate.connection(timeout=15.0)
        self.conn.connect()
        der = self.conn.sock.getpeercert(binary_form=True)
        with self.stats.lock:
            self.stats.cert_fingerprints.add(hashlib.sha256(der).hexdigest())
            self.stats.connections += 1
        self.sent_on_conn = 0

    def _close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
        self.conn = None

    def run(self):
        interval = 1.0 / self.rate
        i = 0
        next_at = time.monotonic()
        while not self.stop.is_set():
            if self.pause.is_set():
                self._close()
                self.paused.set()
                while self.pause.is_set() and not self.stop.is_set():
                    time.sleep(0.05)
                self.paused.clear()
                next_at = time.monotonic()
                continue
            case = self.cases[i % len(self.cases)]
            i += 1
            try:
                if self.conn is None or self.sent_on_conn >= self.reconnect_every:
                    self._close()
                    self._connect()
                body = case.build()
                t_send = time.monotonic()
                self.conn.request("POST", case.path, body=body, headers={"Content-Type": "application/json"})
                resp = self.conn.getresponse()
                data = resp.read()
                t_recv = time.monotonic()
                self.sent_on_conn += 1
                with self.stats.lock:
                    self.stats.requests += 1
                if (resp.getheader("Connection") or "").lower() == "close":
                    self._close()
                check(case, resp.status, data, t_send, t_recv, self.timeline, self.stats)
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                with self.stats.lock:
                    self.stats.requests += 1
                    self.stats.failures += 1
                self.stats.breach("%s: request failed: %s: %s" % (case.name, type(e).__name__, e))
                self._close()
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self.stop.wait(delay)
            else:
                next_at = time.monotonic()  # behind: do not burst to catch up


# -- things that change under the server -----------------------------------------------------------

class Churn(threading.Thread):
    """Creates, updates (trust flipped, or only an annotation), deletes the churn Components, and
    touches the stable ones without changing their trust."""

    def __init__(self, api, names, timeline, stop, seed=1):
        super().__init__(name="churn", daemon=True)
        self.api, self.names, self.timeline, self.stop = api, names, timeline, stop
        self.rng = random.Random(seed)
        self.state = {n: "absent" for n in names}
        self.writes = 0
        self.errors = 0
        self.note = 0

    def _write(self, name, new):
        entry = self.timeline.begin(name, new)
        if new == "absent":
            self.api.delete("components", name, namespace=NS)
        else:
            trust = "maybe" if new == "invalid" else new
            self.note += 1
            self.api.put("components", component(name, trust, self.note), namespace=NS)
        # Only a write that returned ends its interval: after a failed one the previous state may
        # last for ever, as far as the checks are concerned (and churn errors fail the soak anyway).
        self.timeline.end(entry)
        self.state[name] = new
        self.writes += 1

    def run(self):
        while not self.stop.is_set():
            try:
                name = self.rng.choice(self.names)
                r = self.rng.random()
                if r < 0.15:
                    # Touch a stable Component: a MODIFIED event, the trust unchanged.
                    self.note += 1
                    which = self.rng.choice([(TRUSTED, "trusted"), (UNTRUSTED, "untrusted")])
                    self.api.put("components", component(which[0], which[1], self.note), namespace=NS)
                    self.writes += 1
                elif r < 0.35 and self.state[name] != "absent":
                    self._write(name, self.state[name])  # same trust, new annotation
                else:
                    # Untrusted more often than not, so "certainly untrusted" windows occur.
                    new = self.rng.choice(["trusted", "untrusted", "untrusted", "untrusted", "invalid", "absent"])
                    self._write(name, new)
            except Exception as e:  # noqa: BLE001
                self.errors += 1
                log("churn error: %s" % e)
            self.stop.wait(self.rng.uniform(0.1, 0.6))


class WatchDropper(threading.Thread):
    """Drops the server's watches every few seconds in varied ways; compacts history now and then so a
    re-watch from an old resourceVersion gets 410 Gone and relists."""

    def __init__(self, api, stop, seed=2):
        super().__init__(name="drops", daemon=True)
        self.api, self.stop = api, stop
        self.rng = random.Random(seed)
        self.drops = 0
        self.compactions = 0

    def run(self):
        while not self.stop.wait(self.rng.uniform(3.0, 8.0)):
            try:
                resource = self.rng.choice([None, "components", "components", "nodes", "runtimeclasses"])
                mode = self.rng.choice(["now", "mid_event", "rst", "after"])
                if mode == "now":
                    self.api.drop_watches(resource)
                elif mode == "mid_event":
                    self.api.drop_watches(resource, after_events=0, mid_event=True)
                elif mode == "rst":
                    self.api.drop_watches(resource, rst=True)
                else:
                    self.api.drop_watches(resource, after_events=self.rng.randint(1, 5))
                self.drops += 1
                if self.rng.random() < 0.25:
                    self.api.compact()
                    self.compactions += 1
            except Exception as e:  # noqa: BLE001
                log("drop error: %s" % e)


class Rotator(threading.Thread):
    """Rewrites the server's --tls-cert/--tls-key every `every` seconds: a new P-256 key and a new
    certificate (same names) signed by the same CA, each file replaced atomically (key first)."""

    def __init__(self, cert_files, every, stop, workdir):
        super().__init__(name="rotate", daemon=True)
        self.files, self.every, self.stop, self.workdir = cert_files, every, stop, workdir
        self.rotations = 0
        self.errors = 0

    def rotate_once(self):
        d = tempfile.mkdtemp(dir=self.workdir, prefix="rot-")
        key, csr, crt = (os.path.join(d, n) for n in ("tls.key", "tls.csr", "tls.crt"))
        ext = os.path.join(d, "ext.cnf")
        with open(ext, "w") as f:
            f.write("subjectAltName=DNS:%s,DNS:%s.%s,DNS:%s,IP:127.0.0.1\n"
                    "extendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n"
                    "basicConstraints=critical,CA:FALSE\n"
                    % (h.SERVICE_HOST, h.SERVICE_NAME, h.GATE_NAMESPACE, h.SERVICE_NAME))
        run = lambda *a: subprocess.run(a, check=True, timeout=30, stdout=subprocess.DEVNULL,  # noqa: E731
                                        stderr=subprocess.PIPE)
        run("openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
        run("openssl", "req", "-new", "-key", key, "-subj", "/CN=" + h.SERVICE_HOST, "-out", csr)
        run("openssl", "x509", "-req", "-in", csr, "-CA", self.files["ca.crt"], "-CAkey", self.files["ca.key"],
            "-set_serial", str(int(time.time() * 1000)), "-days", "2", "-sha256", "-extfile", ext, "-out", crt)
        os.chmod(key, 0o600)
        os.replace(key, self.files["tls.key"])
        os.replace(crt, self.files["tls.crt"])
        self.rotations += 1

    def run(self):
        while not self.stop.wait(self.every):
            try:
                self.rotate_once()
                log("serving certificate rotated (%d)" % self.rotations)
            except Exception as e:  # noqa: BLE001
                self.errors += 1
                log("rotation error: %s" % e)


# -- the process's resources -----------------------------------------------------------------------

def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS for %d" % pid)


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def quiet_measure(gate, clients, pause, settle_timeout=20.0):
    """Pauses the clients (they close their connections), waits until the gate's fd count is steady
    (the same on three readings 0.5 s apart, or settle_timeout), measures RSS and fds, resumes."""
    pause.set()
    deadline = time.monotonic() + 15.0
    while not all(c.paused.is_set() or not c.is_alive() for c in clients) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = gate.proc.pid
    readings = []
    deadline = time.monotonic() + settle_timeout
    while time.monotonic() < deadline:
        readings.append(fd_count(pid))
        if len(readings) >= 3 and readings[-1] == readings[-2] == readings[-3]:
            break
        time.sleep(0.5)
    result = {"rss_kib": rss_kib(pid), "fds": readings[-1], "fd_readings": readings}
    pause.clear()
    return result


# -- the doc ---------------------------------------------------------------------------------------

def write_doc(path, text):
    with open(path, "r", encoding="utf-8") as f:
        doc = f.read()
    block = BEGIN_MARK + "\n" + text.rstrip("\n") + "\n" + END_MARK
    if BEGIN_MARK in doc and END_MARK in doc:
        start = doc.index(BEGIN_MARK)
        end = doc.index(END_MARK, start) + len(END_MARK)
        doc = doc[:start] + block + doc[end:]
    else:
        m = re.search(r"^## Soak\n", doc, re.M)
        if not m:
            raise SystemExit("%s has no '## Soak' section and no soak markers" % path)
        nxt = re.search(r"^## ", doc[m.end():], re.M)
        section_end = m.end() + nxt.start() if nxt else len(doc)
        body = doc[m.end():section_end].replace("(to be written)\n", "")
        doc = doc[:m.end()] + body.rstrip("\n") + "\n\n" + block + "\n\n" + doc[section_end:]
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(doc)
    os.replace(tmp, path)


def metric(gate, name):
    try:
        return gate.metric_values(name)
    except Exception:  # noqa: BLE001
        return None


# -- main ------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=parse_duration, default=parse_duration("30m"))
    ap.add_argument("--doc", help="write the figures into this file's soak markers (docs/security.md)")
    ap.add_argument("--clients", type=int, default=4, help="keep-alive client threads")
    ap.add_argument("--rate", type=float, default=40.0, help="requests per second, all clients together")
    ap.add_argument("--rotate-every", type=parse_duration, default=60.0)
    ap.add_argument("--churn-components", type=int, default=4)
    ap.add_argument("--warmup", type=parse_duration, default=None,
                    help="default: a fifth of the duration, between 30 s and 2 min")
    ap.add_argument("--max-rss-growth", type=float, default=5.0, help="percent, after warm-up")
    args = ap.parse_args(argv)
    warmup = args.warmup if args.warmup is not None else max(30.0, min(120.0, args.duration / 5))
    if warmup >= args.duration:
        ap.error("--duration must be longer than the warm-up (%.0fs)" % warmup)
    h.require_binary()
    command = "scripts/soak.sh --duration %s" % fmt_duration(args.duration)

    workdir = tempfile.mkdtemp(prefix="ig-soak-")
    certs = h.make_certs(os.path.join(workdir, "api"))
    token_file = os.path.join(workdir, "token")
    with open(token_file, "w") as f:
        f.write("soak-token\n")
    api = FakeApiServer(certs["tls.crt"], certs["tls.key"], token_file=token_file, bookmark_interval=1.0,
                        max_history=100000).start()
    gate = None
    stop = threading.Event()
    changes_stop = stop  # replaced by its own event once the churn threads exist
    pause = threading.Event()
    threads = []
    breaches = []
    try:
        # One Ready Node and no RuntimeClass: the sandbox is unavailable the whole run, so in the
        # setec-only shape a trusted Component is AllowInProcess and an untrusted one is denied.
        api.create("nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}, "spec": {},
                             "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
        api.create("components", component(TRUSTED, "trusted"))
        api.create("components", component(UNTRUSTED, "untrusted"))
        churn_names = ["churn-%d" % i for i in range(args.churn_components)]
        kubeconfig = os.path.join(workdir, "kubeconfig")
        with open(kubeconfig, "w") as f:
            f.write(KUBECONFIG % {"server": api.url, "ca": certs["ca.crt"], "token": token_file})
        gate = h.GateServer(kubeconfig=kubeconfig, wait_ready=True).start()
        log("gate pid %d serving on %d; duration %.0fs, warm-up %.0fs, %d clients at %.0f req/s"
            % (gate.proc.pid, gate.port, args.duration, warmup, args.clients, args.rate))

        timeline = Timeline(churn_names)
        stats = Stats()
        cases = make_cases(churn_names)
        clients = [Client(i, gate, cases, args.rate / args.clients, stop, pause, timeline, stats)
                   for i in range(args.clients)]
        changes_stop = threading.Event()  # churn, drops and rotation stop before the end measurement
        churn = Churn(api, churn_names, timeline, changes_stop)
        dropper = WatchDropper(api, changes_stop)
        rotator = Rotator(gate.cert_files, args.rotate_every, changes_stop, workdir)
        threads = clients + [churn, dropper, rotator]
        started = time.monotonic()
        for t in threads:
            t.start()

        stop.wait(warmup)
        warm = quiet_measure(gate, clients, pause)
        warm_requests = stats.requests
        log("warm-up done: RSS %d KiB, %d fds, %d requests" % (warm["rss_kib"], warm["fds"], warm_requests))
        samples = []
        end_at = started + args.duration
        while time.monotonic() < end_at:
            stop.wait(min(30.0, max(0.0, end_at - time.monotonic())))
            if not gate.alive():
                breaches.append("the server exited (%s)" % gate.proc.returncode)
                break
            samples.append((rss_kib(gate.proc.pid), fd_count(gate.proc.pid), time.monotonic() - started))
            with stats.lock:
                log("%d requests, %d failed, %d undecidable (%d allowed), %d wrong; RSS %d KiB, %d fds"
                    % (stats.requests, stats.failures, stats.undecidable, stats.undecidable_allowed,
                       stats.wrong, samples[-1][0], samples[-1][1]))
        # The end: stop changing things, then a quiet measurement like the warm-up's.
        changes_stop.set()
        for t in (churn, dropper, rotator):
            t.join(timeout=60)
        end = quiet_measure(gate, clients, pause) if gate.alive() else None
        stop.set()
        for t in threads:
            t.join(timeout=20)
        elapsed = time.monotonic() - started

        reloads = metric(gate, "isolation_gate_tls_reloads_total")
        relists = metric(gate, "isolation_gate_reflector_relists_total")
        watches = metric(gate, "isolation_gate_reflector_watches_total")
        rss_growth = 100.0 * (end["rss_kib"] - warm["rss_kib"]) / warm["rss_kib"] if end else float("nan")
        peak_rss = max([warm["rss_kib"]] + [s[0] for s in samples] + ([end["rss_kib"]] if end else []))
        if stats.failures:
            breaches.append("%d failed requests" % stats.failures)
        if stats.undecidable_allowed:
            breaches.append("%d undecidable requests allowed" % stats.undecidable_allowed)
        if stats.wrong:
            breaches.append("%d wrong answers" % stats.wrong)
        if end is None:
            breaches.append("no end measurement (the server is gone)")
        else:
            if rss_growth >= args.max_rss_growth:
                breaches.append("RSS grew %.1f%% after warm-up (limit %.1f%%)" % (rss_growth, args.max_rss_growth))
            if end["fds"] > warm["fds"]:
                breaches.append("open fds grew from %d to %d" % (warm["fds"], end["fds"]))
        if rotator.rotations == 0 and args.duration > args.rotate_every:
            breaches.append("the certificate never rotated")
        if reloads is not None and reloads < rotator.rotations:
            breaches.append("%d rotations but only %d reloads" % (rotator.rotations, reloads))
        if len(stats.cert_fingerprints) < min(2, rotator.rotations + 1):
            breaches.append("clients saw %d serving certificates" % len(stats.cert_fingerprints))
        if churn.errors or rotator.errors:
            breaches.append("harness errors: churn %d, rotation %d" % (churn.errors, rotator.errors))

        figures = [
            ("command", "`%s` (ran %s; %d keep-alive clients, target %.0f req/s, achieved %.1f req/s)"
             % (command, fmt_duration(elapsed), args.clients, args.rate, stats.requests / elapsed)),
            ("when", time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())),
            ("requests", "%d (%s)" % (stats.requests, ", ".join("%s %d" % kv for kv in sorted(stats.by_endpoint.items())))),
            ("failed requests", str(stats.failures)),
            ("undecidable requests / allowed", "%d / %d" % (stats.undecidable, stats.undecidable_allowed)),
            ("wrong answers (certain cases)", str(stats.wrong)),
            ("churn answers checked as certainly untrusted", str(stats.churn_checked)),
            ("certificate rotations / reloads / certificates seen by clients",
             "%d / %s / %d" % (rotator.rotations, fmt_num(reloads), len(stats.cert_fingerprints))),
            ("Component writes (churn)", str(churn.writes)),
            ("watch drops / compactions / relists after 410 / watches opened",
             "%d / %d / %s / %s" % (dropper.drops, dropper.compactions, fmt_num(relists), fmt_num(watches))),
            ("RSS after warm-up (%.0fs) / at end / peak" % warmup,
             "%d KiB / %s KiB / %d KiB (growth %+.2f%%, limit 5%%)"
             % (warm["rss_kib"], end["rss_kib"] if end else "-", peak_rss, rss_growth)),
            ("RSS under load (KiB at minute)", rss_trajectory(samples)),
            ("open fds after warm-up / at end", "%d / %s" % (warm["fds"], end["fds"] if end else "-")),
            ("verdict", "PASS" if not breaches else "FAIL: " + "; ".join(breaches)),
        ]
        table = "| figure | value |\n|---|---|\n" + "".join("| %s | %s |\n" % f for f in figures)
        print(table)
        if stats.examples:
            log("first breaches:\n  " + "\n  ".join(stats.examples))
        if args.doc:
            write_doc(args.doc, table)
            log("figures written to %s" % args.doc)
    except Exception:
        traceback.print_exc()
        breaches.append("the soak itself failed")
    finally:
        stop.set()
        changes_stop.set()
        pause.clear()
        if gate is not None:
            if breaches:
                tail = gate.stderr_text().splitlines()[-30:]
                log("server log tail:\n" + "\n".join(tail))
            gate.stop()
        api.stop()
        subprocess.run(["rm", "-rf", workdir], timeout=60)
    if breaches:
        log("FAIL: " + "; ".join(breaches))
        return 1
    log("PASS")
    return 0


def rss_trajectory(samples, points=8):
    """About `points` of the 30 s samples, evenly spaced, as "RSS@minute" (the last one always)."""
    if not samples:
        return "-"
    step = max(1, -(-len(samples) // points))
    chosen = samples[::step]
    if chosen[-1] is not samples[-1]:
        chosen.append(samples[-1])
    return ", ".join("%d@%.1f" % (rss, at / 60) for rss, _fds, at in chosen)


def fmt_duration(seconds):
    if seconds >= 60 and abs(seconds / 60 - round(seconds / 60)) < 0.02:
        return "%dm" % round(seconds / 60)
    return "%.0fs" % seconds


def fmt_num(v):
    return "-" if v is None else "%d" % v


KUBECONFIG = """apiVersion: v1
kind: Config
current-context: soak
clusters:
- name: soak
  cluster:
    server: %(server)s
    certificate-authority: %(ca)s
users:
- name: gate
  user:
    tokenFile: %(token)s
contexts:
- name: soak
  context: {cluster: soak, user: gate, namespace: isolation-gate-system}
"""

if __name__ == "__main__":
    sys.exit(main())
