#!/usr/bin/python3
"""Generates the benchmark corpus: AdmissionReviews and Components.

Standard library only (json, os, argparse). Deterministic: the same command
writes the same bytes.

  gen.py --out DIR                      the corpus (see below)
  gen.py --catalog DIR --count N        N extra Components (100 per file)

DIR/components/   the 10-Component catalog the servers load: the 3 example
                  Components (examples/components, namespace team-a) and 7
                  bench Components in namespace "bench" (bench-untrusted,
                  bench-trusted, bench-omitted and 4 more).
DIR/reviews/      one AdmissionReview (admission.k8s.io/v1) per case.
DIR/cases.json    the cases: name, file, endpoint, size class, the server
                  instance that gives the decision (--sandbox available or
                  unavailable) and the expected outcome, checked before each
                  load run.

Cases (size class x decision):
  pod-small / pod-typical / pod-large  on /mutate/pods
  pod-64k / pod-1m (RequireSetec only) on /mutate/pods: with the above, the
  body-size series 1, 8, 64, 200 KB, 1 MB
  deployment                           on /validate/workloads
  component                            on /validate/components
  decisions: RequireSetec (untrusted Component, --sandbox available),
             Deny (untrusted Component, --sandbox unavailable),
             AllowInProcess (trusted Component, --sandbox unavailable).
  A Component review is not gated: its three rows are an untrusted and a
  trusted Component (allowed) and one with an invalid content_trust (denied).
"""
import argparse
import json
import os
import shutil
import sys

NS = "bench"
LABEL = "gibson.zeroroot.ai/component"
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# Target body sizes in bytes (the generator grows env lists to reach them).
TARGETS = {"pod-small": 1024, "pod-typical": 8 * 1024, "pod-64k": 64 * 1024,
           "pod-large": 200 * 1024, "pod-1m": 1024 * 1024}
# The body-size series (RequireSetec on /mutate/pods): 1, 8, 64, 200 KB and 1 MB.
SIZE_SERIES = ("pod-small", "pod-typical", "pod-64k", "pod-large", "pod-1m")


def dumps(obj):
    # Compact-ish like the API server (which sends compact JSON).
    return json.dumps(obj, separators=(",", ":"), sort_keys=False)


def review(uid, kind, resource, name, obj, operation="CREATE", minimal=False):
    group, _, version = kind[0].rpartition("/") if "/" in kind[0] else ("", "", kind[0])
    gvk = {"group": group, "version": version, "kind": kind[1]}
    gvr = {"group": group, "version": version, "resource": resource}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": name,
            "namespace": NS,
            "operation": operation,
            "userInfo": {"username": "kubernetes-admin",
                         "groups": ["system:masters", "system:authenticated"]} if minimal else {
                "username": "system:serviceaccount:kube-system:replicaset-controller",
                "uid": "5d1c2b7e-0a0e-4a86-9f0e-2a3c4d5e6f70",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system",
                           "system:authenticated"],
            },
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        },
    }


def env_list(prefix, n):
    out = []
    for i in range(n):
        if i % 5 == 3:
            out.append({"name": f"{prefix}_SECRET_{i}",
                        "valueFrom": {"secretKeyRef": {"name": "bench-secrets", "key": f"key-{i}"}}})
        elif i % 5 == 4:
            out.append({"name": f"{prefix}_POD_{i}",
                        "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}})
        else:
            out.append({"name": f"{prefix}_SETTING_{i}", "value": f"value-{i}-" + "x" * (i % 17)})
    return out


# What every bench pod runs, declared by every bench Component (spec.command, spec.args,
# spec.exec: the init container's migration), so in-process pods are bound to it.
COMMAND = ["/usr/local/bin/worker"]
ARGS = ["--listen=:8080", "--log-format=json"]
MIGRATE = ["/migrate", "--up"]


def container(i, env_count, mounts):
    return {
        "name": f"worker-{i}",
        "image": f"registry.example.com/gibson/worker-{i}:1.{i}.0",
        "imagePullPolicy": "IfNotPresent",
        "command": list(COMMAND),
        "args": list(ARGS),
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "env": env_list(f"W{i}", env_count),
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"},
                      "limits": {"cpu": "1", "memory": "512Mi"}},
        "volumeMounts": [{"name": m, "mountPath": f"/mnt/{m}", "readOnly": True} for m in mounts],
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"},
                          "initialDelaySeconds": 5, "periodSeconds": 10, "timeoutSeconds": 1,
                          "successThreshold": 1, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080, "scheme": "HTTP"},
                           "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1,
                           "failureThreshold": 3},
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }


def volumes(n):
    out = []
    for i in range(n):
        name = f"vol-{i}"
        kind = i % 4
        if kind == 0:
            out.append({"name": name, "configMap": {"name": f"cm-{i}", "defaultMode": 420}})
        elif kind == 1:
            out.append({"name": name, "secret": {"secretName": f"secret-{i}", "defaultMode": 420}})
        elif kind == 2:
            out.append({"name": name, "emptyDir": {"sizeLimit": "64Mi"}})
        else:
            out.append({"name": name, "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}})
    return out


def pod_spec(containers, env_count, volume_count, init=False):
    vols = volumes(volume_count)
    names = [v["name"] for v in vols]
    spec = {
        "containers": [container(i, env_count, names[i::max(containers, 1)]) for i in range(containers)],
        "volumes": vols,
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "bench-worker",
        "securityContext": {"runAsUser": 10001, "runAsGroup": 10001, "fsGroup": 10001,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}],
        "priority": 0,
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
    }
    if init:
        spec["initContainers"] = [{"name": "init-schema", "image": "registry.example.com/gibson/migrate:3.1.0",
                                   "command": list(MIGRATE),
                                   "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}}}]
    return spec


def pod_metadata(name, component):
    return {
        "name": name,
        "generateName": name.rsplit("-", 1)[0] + "-",
        "namespace": NS,
        "labels": {LABEL: component, "app.kubernetes.io/name": component,
                   "app.kubernetes.io/part-of": "gibson", "app.kubernetes.io/version": "1.4.2",
                   "pod-template-hash": "7c9f6d8b5"},
        "annotations": {"kubectl.kubernetes.io/default-container": "worker-0",
                        "prometheus.io/scrape": "true", "prometheus.io/port": "9090"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name.rsplit("-", 1)[0],
                             "uid": "9a1f3c2e-7b6d-4e5f-8a9b-0c1d2e3f4a5b", "controller": True,
                             "blockOwnerDeletion": True}],
    }


def component_image(name):
    return f"registry.example.com/gibson/{name}:1.0.0"


def bind_images(spec, component):
    """Every container runs its Component's spec.image (pods are bound to it)."""
    for key in ("containers", "initContainers"):
        for c in spec.get(key, []):
            c["image"] = component_image(component)
    return spec


def make_pod(size, component, uid):
    containers, volume_count = {"pod-small": (1, 0), "pod-typical": (2, 4), "pod-64k": (8, 32),
                                "pod-large": (24, 96), "pod-1m": (48, 192)}[size]
    name = f"{component}-{size}-5f7d9"

    def build(env_count):
        spec = bind_images(pod_spec(containers, env_count, volume_count, init=size != "pod-small"), component)
        meta = pod_metadata(name, component)
        if size == "pod-small":  # `kubectl run`: one container, few fields
            c = spec["containers"][0]
            for k in ("livenessProbe", "readinessProbe", "securityContext", "ports", "volumeMounts",
                      "terminationMessagePath", "terminationMessagePolicy",
                      "imagePullPolicy", "env"):  # command and args: what its Component declares
                c.pop(k, None)
            meta["labels"] = {LABEL: component, "run": "small"}
            meta.pop("generateName")
            for k in ("tolerations", "securityContext", "preemptionPolicy", "enableServiceLinks",
                      "schedulerName", "volumes"):
                spec.pop(k, None)
            meta.pop("ownerReferences")
            meta.pop("annotations")
        obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
        return review(uid, ("v1", "Pod"), "pods", name, obj, minimal=size == "pod-small")

    return grow(build, TARGETS[size])


def grow(build, target):
    """Smallest env count whose review is at least `target` bytes (or closest)."""
    best = build(0)
    for env_count in range(0, 400):
        r = build(env_count)
        if len(dumps(r)) >= target:
            # pick whichever of env_count and env_count-1 is closer to the target
            if env_count and abs(len(dumps(best)) - target) < abs(len(dumps(r)) - target):
                return best
            return r
        best = r
    return best


def make_deployment(component, uid):
    name = f"{component}-deployment"
    template_spec = bind_images(pod_spec(2, 12, 4, init=True), component)
    meta = pod_metadata(name + "-x", component)
    for k in ("name", "generateName", "namespace", "ownerReferences"):
        meta.pop(k)
    obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS, "generation": 1,
                     "labels": {"app.kubernetes.io/name": component},
                     "annotations": {"deployment.kubernetes.io/revision": "1"}},
        "spec": {
            "replicas": 3,
            "revisionHistoryLimit": 10,
            "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app.kubernetes.io/name": component}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {"metadata": meta, "spec": template_spec},
        },
    }
    return review(uid, ("apps/v1", "Deployment"), "deployments", name, obj)


def component_doc(name, trust, namespace=NS, kind="tool"):
    doc = {"apiVersion": "gibson.zeroroot.ai/v1alpha1", "kind": "Component",
           "metadata": {"name": name, "namespace": namespace},
           "spec": {"kind": kind, "image": component_image(name), "command": COMMAND, "args": ARGS,
                    "exec": [{"command": MIGRATE}]}}
    if trust is not None:
        doc["spec"]["policy"] = {"content_trust": trust}
    return doc


def component_yaml(doc):
    lines = ["apiVersion: " + doc["apiVersion"], "kind: Component", "metadata:",
             "  name: " + doc["metadata"]["name"], "  namespace: " + doc["metadata"]["namespace"],
             "spec:", "  kind: " + doc["spec"]["kind"], "  image: " + doc["spec"]["image"],
             "  command: " + json.dumps(doc["spec"]["command"]), "  args: " + json.dumps(doc["spec"]["args"]),
             "  exec:", "    - command: " + json.dumps(doc["spec"]["exec"][0]["command"])]
    if "policy" in doc["spec"]:
        lines += ["  policy:", "    content_trust: " + doc["spec"]["policy"]["content_trust"]]
    return "\n".join(lines) + "\n"


def make_component_review(name, trust, uid):
    doc = component_doc(name, trust)
    doc["metadata"].update({"uid": "0f0e0d0c-0b0a-4909-8807-060504030201", "generation": 1,
                            "labels": {"app.kubernetes.io/part-of": "gibson"}})
    return review(uid, ("gibson.zeroroot.ai/v1alpha1", "Component"), "components", name, doc)


def write_corpus(out):
    comp_dir = os.path.join(out, "components")
    rev_dir = os.path.join(out, "reviews")
    for d in (comp_dir, rev_dir):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    # 10 Components: the 3 examples and 7 bench ones.
    examples = os.path.join(REPO, "examples", "components")
    for f in sorted(os.listdir(examples)):
        if f.endswith((".yaml", ".yml")):
            shutil.copy(os.path.join(examples, f), os.path.join(comp_dir, "example-" + f))
    bench = [("bench-untrusted", "untrusted"), ("bench-trusted", "trusted"), ("bench-omitted", None),
             ("bench-agent", "trusted"), ("bench-plugin", "untrusted"), ("bench-connector", "trusted"),
             ("bench-tool", "untrusted")]
    for name, trust in bench:
        with open(os.path.join(comp_dir, name + ".yaml"), "w") as f:
            f.write(component_yaml(component_doc(name, trust)))

    cases = []
    n = 0

    def add(name, endpoint, size, decision, sandbox, body, expect):
        nonlocal n
        path = os.path.join(rev_dir, name + ".json")
        text = dumps(body)
        with open(path, "w") as f:
            f.write(text)
        cases.append({"name": name, "file": path, "endpoint": endpoint, "size": size,
                      "decision": decision, "sandbox": sandbox, "bytes": len(text), "expect": expect})

    def uid():
        nonlocal n
        n += 1
        return f"00000000-bench-4000-8000-{n:012d}"

    # expect: allowed, whether a patch is present, the audit "decision" annotation.
    decisions = [("RequireSetec", "bench-untrusted", "available"),
                 ("Deny", "bench-untrusted", "unavailable"),
                 ("AllowInProcess", "bench-trusted", "unavailable")]
    for size in ("pod-small", "pod-typical", "pod-large"):
        for decision, comp, sandbox in decisions:
            add(f"{size}-{decision}", "/mutate/pods", size, decision, sandbox,
                make_pod(size, comp, uid()),
                {"allowed": decision != "Deny", "patch": decision != "Deny", "decision": decision})
    for size in ("pod-64k", "pod-1m"):  # the rest of the body-size series: RequireSetec only
        add(f"{size}-RequireSetec", "/mutate/pods", size, "RequireSetec", "available",
            make_pod(size, "bench-untrusted", uid()),
            {"allowed": True, "patch": True, "decision": "RequireSetec"})
    for decision, comp, sandbox in decisions:
        add(f"deployment-{decision}", "/validate/workloads", "deployment", decision, sandbox,
            make_deployment(comp, uid()),
            {"allowed": decision != "Deny", "patch": False, "decision": decision})
    for label, trust, allowed in (("untrusted", "untrusted", True), ("trusted", "trusted", True),
                                  ("invalid", "maybe", False)):
        add(f"component-{label}", "/validate/components", "component", label, "available",
            make_component_review(f"bench-new-{label}", trust, uid()),
            {"allowed": allowed, "patch": False, "decision": None})
    with open(os.path.join(out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)
    for c in cases:
        print(f"  {c['name']:<28} {c['endpoint']:<22} {c['bytes']:>7} bytes", file=sys.stderr)


def write_catalog(out, count, per_file=100):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    trusts = ["trusted", "untrusted", None]
    kinds = ["tool", "agent", "plugin", "connector"]
    for start in range(0, count, per_file):
        docs = []
        for i in range(start, min(start + per_file, count)):
            doc = component_doc(f"catalog-{i:06d}", trusts[i % 3], namespace=f"tenant-{i % 1000:03d}",
                                kind=kinds[i % 4])
            docs.append(component_yaml(doc))
        with open(os.path.join(out, f"catalog-{start // per_file:05d}.yaml"), "w") as f:
            f.write("---\n".join(docs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="corpus directory")
    ap.add_argument("--catalog", help="directory for --count generated Components")
    ap.add_argument("--count", type=int, default=100000)
    args = ap.parse_args()
    if args.out:
        write_corpus(args.out)
    if args.catalog:
        write_catalog(args.catalog, args.count)
    if not args.out and not args.catalog:
        ap.error("give --out and/or --catalog")


if __name__ == "__main__":
    main()
