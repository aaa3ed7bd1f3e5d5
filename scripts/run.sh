#!/usr/bin/env bash
# Builds isolation-gate and runs the admission webhook locally (no cluster) on
# the shipped example Components, printing curl commands that get real
# decisions back. Stop it with Ctrl-C.
#   scripts/run.sh                                # sandbox unavailable: Deny / AllowInProcess
#   SANDBOX=available scripts/run.sh              # RequireSetec for both
#   GIBSON_UNTRUSTED_EXEC=customer-isolation scripts/run.sh   # the self-hosted shape
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
ninja -C build isolation-gate >/dev/null

sandbox="${SANDBOX:-unavailable}"
port="${PORT:-8443}"
metrics_port="${METRICS_PORT:-8080}"
run_dir="$root/build/run"
mkdir -p "$run_dir"

cat <<TXT

isolation-gate (local mode): HTTPS webhook on https://localhost:$port, probes and
metrics on http://localhost:$metrics_port, sandbox $sandbox, shape ${GIBSON_UNTRUSTED_EXEC:-setec-only (default)}.

In another terminal, ask it about the example pods:

  curl -s --cacert $run_dir/ca.pem -H 'Content-Type: application/json' \\
    --data @examples/reviews/report-parser-pod.json https://localhost:$port/mutate/pods | python3 -m json.tool

  curl -s --cacert $run_dir/ca.pem -H 'Content-Type: application/json' \\
    --data @examples/reviews/docs-indexer-pod.json https://localhost:$port/mutate/pods | python3 -m json.tool

  curl -s http://localhost:$metrics_port/metrics

Offline, without the server:

  build/isolation-gate evaluate --component examples/components/report-parser.yaml \\
    --pod examples/pods/report-parser-pod.yaml --sandbox $sandbox

TXT
exec build/isolation-gate serve --local --components examples/components --sandbox "$sandbox" \
  --listen "127.0.0.1:$port" --metrics-listen "127.0.0.1:$metrics_port" --ca-out "$run_dir/ca.pem"
