#!/usr/bin/env bash
# Installs every Debian package isolation-gate needs to build, run and test.
# Idempotent: when everything is present it installs nothing and runs no apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libcpprest-dev nlohmann-json3-dev libssl-dev libyaml-cpp-dev libboost-dev libboost-system-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-14 libclang-rt-14-dev
  openssl curl ca-certificates unzip
  python3 python3-jsonpatch python3-kubernetes python3-yaml python3-jsonschema
  prometheus  # promtool, for the alert tests (tests/packaging/test_alerts.py)
)
# helm and kubectl come from the npm registry (scripts/install-k8s-tools.sh).
command -v npm >/dev/null 2>&1 || packages+=(npm)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(wrk nginx-light)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
