#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/)
from the examples and a few hand-made cases. Run once when the examples
change; the output is checked in. The kubeconfig seeds embed a throw-away
self-signed CA and client certificate made for the corpus (no secret: the
keys are test material, and they exist only so the fuzzer reaches the
success path)."""
import base64, copy, json, os, pathlib, shutil

root = pathlib.Path(__file__).resolve().parents[2]
out = root / "tests/fuzz/corpus"
here = pathlib.Path(__file__).resolve().parent


def write(target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


# admission_review_fuzz: byte 0 = path (0 mutate, 1 validate pods, 2 workloads, 3 components).
pod = json.loads((root / "examples/reviews/report-parser-pod.json").read_text())
trusted = json.loads((root / "examples/reviews/docs-indexer-pod.json").read_text())
def review(obj, kind, op="CREATE", ns="team-a", **extra):
    r = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
         "request": {"uid": "u-1", "kind": kind, "namespace": ns, "name": obj.get("metadata", {}).get("name", ""),
                     "operation": op, "object": obj, **extra}}
    return json.dumps(r, separators=(",", ":"))
adm = "admission_review_fuzz"
for i in range(4):
    write(adm, f"report-parser-pod-{i}", bytes([i]) + json.dumps(pod).encode())
    write(adm, f"docs-indexer-pod-{i}", bytes([i]) + json.dumps(trusted).encode())
p = pod["request"]["object"]
on_sandbox = copy.deepcopy(p); on_sandbox["spec"]["runtimeClassName"] = "kata-fc"
write(adm, "validate-on-sandbox", b"\x01" + review(on_sandbox, {"group": "", "version": "v1", "kind": "Pod"}).encode())
host = copy.deepcopy(p); host["spec"]["hostNetwork"] = True
write(adm, "host-network", b"\x00" + review(host, {"group": "", "version": "v1", "kind": "Pod"}).encode())
write(adm, "bogus-operation", b"\x00" + review(p, {"group": "", "version": "v1", "kind": "Pod"}, op="BOGUS").encode())
write(adm, "delete", b"\x00" + review(p, {"group": "", "version": "v1", "kind": "Pod"}, op="DELETE").encode())
write(adm, "no-namespace", b"\x00" + review(p, {"group": "", "version": "v1", "kind": "Pod"}, ns="").encode())
write(adm, "duplicate-key", b"\x00" + review(p, {"group": "", "version": "v1", "kind": "Pod"}).replace(
    '"operation":"CREATE"', '"operation":"CREATE","operation":"CREATE"').encode())
write(adm, "ephemeral", b"\x01" + review(p, {"group": "", "version": "v1", "kind": "Pod"}, op="UPDATE",
                                        subResource="ephemeralcontainers").encode())
deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "rp", "namespace": "team-a"},
          "spec": {"template": {"metadata": {"labels": {"gibson.zeroroot.ai/component": "report-parser"}},
                                "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}
write(adm, "deployment", b"\x02" + review(deploy, {"group": "apps", "version": "v1", "kind": "Deployment"}).encode())
cron = {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "cj"},
        "spec": {"jobTemplate": {"spec": {"template": {"metadata": {"labels": {"gibson.zeroroot.ai/component": "docs-indexer"}},
                                                        "spec": {"containers": [{"name": "c", "image": "x:1"}]}}}}}}
write(adm, "cronjob", b"\x02" + review(cron, {"group": "batch", "version": "v1", "kind": "CronJob"}, op="UPDATE").encode())
comp = {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component", "metadata": {"name": "x", "namespace": "team-a"},
        "spec": {"kind": "tool", "image": "x:1", "policy": {"content_trust": "untrusted"}}}
write(adm, "component", b"\x03" + review(comp, {"group": "gibson.zeroroot.ai", "version": "v1alpha1", "kind": "Component"}).encode())
bad = copy.deepcopy(comp); bad["spec"]["policy"]["content_trust"] = "Trusted"
write(adm, "component-bad-trust", b"\x03" + review(bad, {"group": "gibson.zeroroot.ai", "version": "v1alpha1", "kind": "Component"}, op="UPDATE").encode())
write(adm, "healthz", b"\x1d")
# What runs and what reaches the host (docs/security.md, "A pod is its Component's code").
code = copy.deepcopy(trusted["request"]["object"])
code["metadata"]["annotations"] = {"io.katacontainers.config.hypervisor.path": "/x", "io.katacontainers.y": "z"}
main = code["spec"]["containers"][0]
main.update(command=["sh", "-c", "x"], args=["a", "b"], envFrom=[{"configMapRef": {"name": "c"}}],
            env=[{"name": "LD_PRELOAD", "value": "/x.so"}, {"name": "A"}, {"name": "NODE_OPTIONS", "valueFrom": {}}],
            lifecycle={"postStart": {"exec": {"command": ["sh"]}}, "preStop": {"httpGet": {"port": 80}}},
            livenessProbe={"exec": {"command": ["true"]}}, readinessProbe={"httpGet": {"port": 80}},
            startupProbe={"exec": {"command": []}},
            securityContext={"privileged": False, "capabilities": {"add": ["SYS_ADMIN", "CAP_CHOWN"], "drop": ["ALL"]}})
code["spec"]["volumes"] = [{"name": "h", "hostPath": {"path": "/"}}, {"name": "i", "image": {"reference": "x:1"}},
                           {"name": "c", "configMap": {"name": "c"}}]
code["spec"]["ephemeralContainers"] = [{"name": "d", "image": "busybox", "securityContext": {"privileged": True}}]
pod_kind = {"group": "", "version": "v1", "kind": "Pod"}
write(adm, "code-binding", b"\x00" + review(code, pod_kind).encode())
old_pod = copy.deepcopy(code); del old_pod["spec"]["ephemeralContainers"]
write(adm, "debug-container", b"\x01" + review(code, pod_kind, op="UPDATE", subResource="ephemeralcontainers",
                                              oldObject=old_pod,
                                              userInfo={"username": "u", "groups": ["system:masters"]}).encode())
declared = copy.deepcopy(comp)
declared["spec"].update(command=["/app"], args=["--x"], exec=[{"command": ["/bin/check"]}])
loosened = copy.deepcopy(declared); loosened["spec"]["policy"]["content_trust"] = "trusted"
write(adm, "component-trust-loosened", b"\x03" + review(loosened, {"group": "gibson.zeroroot.ai", "version": "v1alpha1",
                                                                   "kind": "Component"}, op="UPDATE",
                                                        oldObject=declared,
                                                        userInfo={"username": "u", "groups": ["g"]}).encode())

# component_fuzz: the example Components, as YAML and as JSON, and the traps.
cf = "component_fuzz"
for f in sorted((root / "examples/components").glob("*.yaml")):
    write(cf, f.name, f.read_bytes())
write(cf, "component.json", json.dumps(comp, indent=1))
write(cf, "declared.json", json.dumps(declared, indent=1))
write(cf, "two-docs.yaml", "---\n" + (root / "examples/components/report-parser.yaml").read_text() +
      "---\n" + (root / "examples/components/docs-indexer.yaml").read_text())
write(cf, "duplicate-trust.yaml", "apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\nmetadata: {name: x}\n"
      "spec:\n  policy:\n    content_trust: untrusted\n    content_trust: trusted\n")
write(cf, "aliases.yaml", "a: &a [1, 2]\nb: &b [*a, *a]\nc: [*b, *b]\nmetadata: &m {name: x}\nkind: Component\n")
write(cf, "flow.yaml", "{apiVersion: gibson.zeroroot.ai/v1alpha1, kind: Component, metadata: {name: \"y\"}, "
      "spec: {policy: {content_trust: ~}}}\n")

# kubeconfig_fuzz
ca = (here / "corpus-material/ca.crt").read_bytes()
cl_crt = (here / "corpus-material/client.crt").read_bytes()
cl_key = (here / "corpus-material/client.key").read_bytes()
b64 = lambda b: base64.b64encode(b).decode()
kc = "kubeconfig_fuzz"
write(kc, "token.yaml", f"""apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443/
    certificate-authority-data: {b64(ca)}
users:
- name: u
  user:
    token: abc
contexts:
- name: dev
  context: {{cluster: c, user: u, namespace: team-a}}
""")
write(kc, "client-cert.yaml", f"""apiVersion: v1
kind: Config
current-context: x
clusters: [{{name: c, cluster: {{server: "https://[::1]:8443", certificate-authority-data: {b64(ca)}}}}}]
users: [{{name: u, user: {{client-certificate-data: {b64(cl_crt)}, client-key-data: {b64(cl_key)}}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
""")
write(kc, "exec.yaml", "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters: [{name: c, cluster: {server: https://h}}]\n"
      "users: [{name: u, user: {exec: {command: aws}}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}]\n")
write(kc, "duplicate.yaml", "apiVersion: v1\nkind: Config\ncurrent-context: a\ncurrent-context: b\n")

# watch_decoder_fuzz: byte 0 = number of split bytes, then the split bytes, then the stream.
wd = "watch_decoder_fuzz"
ev = lambda t, o: json.dumps({"type": t, "object": o}) + "\n"
node = {"kind": "Node", "metadata": {"name": "a", "resourceVersion": "1"}}
stream = ev("ADDED", node) + ev("MODIFIED", node) + "\r\n" + ev("DELETED", node) + ev("BOOKMARK", {"metadata": {"resourceVersion": "9"}})
write(wd, "events-bytewise", b"\x00" + stream.encode())
write(wd, "events-chunks", b"\x03\x07\x40\x11" + stream.encode())
write(wd, "error-status", b"\x01\x20" + (ev("ADDED", node) + ev("ERROR", {"kind": "Status", "code": 410, "reason": "Expired"})).encode())
write(wd, "partial", b"\x02\x05\x09" + (ev("ADDED", node) + '{"type":"ADDED","obj').encode())
write(wd, "not-json", b"\x01\x03" + (ev("ADDED", node) + "{\n").encode())
write(wd, "long-line", b"\x01\xff" + ev("ADDED", {"data": {"k": "x" * 600}}).encode())
# list_decoder_fuzz: a LIST answer's body.
ld = "list_decoder_fuzz"
write(ld, "page", json.dumps({"kind": "NodeList", "apiVersion": "v1",
                              "metadata": {"resourceVersion": "42", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEifQ"},
                              "items": [node, {"metadata": {"name": "b"}, "spec": {"items": [1, [2]]}}]}).encode())
write(ld, "scalars", b'{"items":[1,"two",null,true,-3.5e2,[],{}],"metadata":{"continue":null}}')
write(ld, "twice", b'{"items":[],"items":[{}]}')
write(ld, "not-a-list", b'{"metadata":{"resourceVersion":7},"items":{}}')
print("corpora written under", out)

# pod_text_fuzz: byte 0 = the request's kind (0 Pod, 1 Deployment, ... 6 CronJob), then request.object.
pt = "pod_text_fuzz"
rich = {"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "rich", "namespace": "team-a",
                     "labels": {"gibson.zeroroot.ai/component": "report-parser", "app": "x"},
                     "annotations": {"io.katacontainers.config.hypervisor.path": "/x", "a": "b",
                                     "gibson.zeroroot.ai/isolation": "setec", "io.katacontainers.b": "1"}},
        "spec": {"runtimeClassName": "kata-fc", "hostNetwork": False, "hostPID": None,
                 "containers": [{"name": "c", "image": "registry.example.com/x:1", "command": ["/bin/x"],
                                 "args": [], "env": [{"name": "LD_PRELOAD", "value": "/a.so"}, {"name": "A"}],
                                 "envFrom": [{"configMapRef": {"name": "m"}}],
                                 "lifecycle": {"postStart": {"exec": {"command": ["sh", "-c", "true"]}},
                                               "preStop": {"httpGet": {"port": 80}}},
                                 "livenessProbe": {"exec": {}}, "readinessProbe": {"tcpSocket": {"port": 1}},
                                 "securityContext": {"privileged": True,
                                                     "capabilities": {"add": ["NET_ADMIN", "CHOWN"]}}},
                                {"image": "b:1"}],
                 "initContainers": [{"name": "i", "image": "registry.example.com/x:1", "command": ["migrate"]}],
                 "ephemeralContainers": [{"name": "dbg", "image": "busybox"}],
                 "volumes": [{"name": "h", "hostPath": {"path": "/"}}, {"name": "img", "image": {"reference": "r:1"}},
                             {"name": "cm", "configMap": {"name": "m"}}, {"image": {}}]}}
write(pt, "rich-pod", b"\x00" + json.dumps(rich).encode())
write(pt, "rich-pod-indented", b"\x00" + json.dumps(rich, indent=2).encode())
write(pt, "report-parser-pod", b"\x00" + json.dumps(p).encode())
write(pt, "docs-indexer-pod", b"\x00" + json.dumps(trusted["request"]["object"]).encode())
tmpl = {"metadata": rich["metadata"], "spec": rich["spec"]}
write(pt, "deployment", b"\x01" + json.dumps({"apiVersion": "apps/v1", "kind": "Deployment",
                                              "metadata": {"name": "d"}, "spec": {"replicas": 1, "template": tmpl}}).encode())
write(pt, "cronjob", b"\x06" + json.dumps({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"generateName": "c-"},
                                           "spec": {"jobTemplate": {"spec": {"template": tmpl}}}}).encode())
write(pt, "no-type-meta", b"\x05" + json.dumps({"spec": {"template": tmpl}}).encode())
write(pt, "escaped", b"\x00" + json.dumps({"kind": "Pod", "spec": {"containers": [{"name": "a\"b", "command": ["\u00e9\n"]}]}}).encode())
write(pt, "wrong-types", b"\x00" + b'{"kind":"Pod","spec":{"containers":[{"name":1,"env":[{"name":2},"x"]}],"volumes":[{"name":3}]}}')
