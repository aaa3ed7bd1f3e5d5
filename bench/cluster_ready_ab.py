#!/usr/bin/env python3
"""Interleaved A/B of start-to-ready at the default client limits (5 qps / burst 10):
10,000 Components + 1,000 Nodes on the test API server, --kube-list-page-size 500
(client-go's page) vs the default 5000. Usage: bench/cluster_ready_ab.py [PAIRS]
with IG_BINARY (default build/isolation-gate). Ports 28443/28080 (not bench.py's).
"""
import os, sys, subprocess, time, statistics, tempfile
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO + "/bench"); sys.path.insert(0, REPO + "/tests/apiserver")
import bench, cluster
from fake_apiserver import FakeApiServer
BIN = os.environ.get("IG_BINARY", REPO + "/build/isolation-gate")
tmp = tempfile.mkdtemp(prefix="clab-")
subprocess.run([BIN, "certs", "--out-dir", tmp + "/api", "--dns", "localhost", "--ip", "127.0.0.1"], check=True, capture_output=True)
subprocess.run([BIN, "certs", "--out-dir", tmp + "/gate", "--dns", "localhost", "--ip", "127.0.0.1"], check=True, capture_output=True)
api = FakeApiServer(tmp + "/api/tls.crt", tmp + "/api/tls.key", tokens=("t",), bookmark_interval=5.0, max_history=20000).start()
api.create("runtimeclasses", {"metadata": {"name": cluster.RC, "labels": {"setec.zeroroot.ai/runtime": "fc"}}, "handler": cluster.RC,
  "scheduling": {"nodeSelector": {"setec.zeroroot.ai/runtime.firecracker": "true"}, "tolerations": [{"key": "setec.zeroroot.ai/dedicated", "operator": "Exists"}]}})
for i in range(1000): api.create("nodes", cluster.node(i))
for i in range(10000): api.create("components", cluster.generated_component(i))
kc = tmp + "/kubeconfig"
open(kc, "w").write("apiVersion: v1\nkind: Config\ncurrent-context: b\nclusters:\n- name: b\n  cluster:\n    server: %s\n    certificate-authority: %s\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: b\n  context: {cluster: b, user: u}\n" % (api.url, tmp + "/api/ca.crt"))
env = {k: v for k, v in os.environ.items() if k != "GIBSON_UNTRUSTED_EXEC"}
def run(extra):
    argv = [BIN, "serve", "--tls-cert", tmp + "/gate/tls.crt", "--tls-key", tmp + "/gate/tls.key", "--listen", "127.0.0.1:%d" % 28443,
            "--metrics-listen", "127.0.0.1:%d" % 28080, "--kubeconfig", kc, "--cert-mode", "files"] + extra
    t0 = time.monotonic(); p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    while time.monotonic() - t0 < 60:
        if bench.http_get_status(28080, "/readyz") == 200:
            ms = (time.monotonic() - t0) * 1000; bench.terminate(p); return ms
        if p.poll() is not None: raise RuntimeError("exited %s" % p.returncode)
        time.sleep(0.002)
    bench.terminate(p); raise RuntimeError("not ready")
A, B = [], []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    A.append(run(["--kube-list-page-size", "500"])); B.append(run([]))
print("page 500 (before):  median %.0f ms %s" % (statistics.median(A), ["%.0f" % x for x in A]))
print("page 5000 (after):  median %.0f ms %s" % (statistics.median(B), ["%.0f" % x for x in B]))
print("loadavg", open("/proc/loadavg").read().strip())
api.stop()
