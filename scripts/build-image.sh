#!/usr/bin/env bash
# Builds the isolation-gate container image from the Dockerfile with podman,
# without Docker Hub: when the base image docker.io/library/debian:bookworm-slim
# is not in local storage it is made from Debian's mirror with mmdebstrap and
# imported under that name, so `FROM debian:bookworm-slim` resolves locally.
# Then it smoke-tests the image (`version`, `evaluate` on examples/).
#
# Not part of the default test run (it takes minutes and needs root).
#
# The image is <repository>:<appVersion>, by default the chart's own default
# (image.repository in charts/isolation-gate/values.yaml, the tag its Chart.yaml
# appVersion), so the chart installed with default values runs what this built.
#
#   scripts/build-image.sh                 # build <repository>:<appVersion> and :latest
#   scripts/build-image.sh --print-image   # print <repository>:<appVersion>, build nothing
#   scripts/build-image.sh --rebuild-base  # remake the local base image first
#   IG_IMAGE=registry.example.com/other/isolation-gate scripts/build-image.sh
#   IG_SAVE=/tmp/isolation-gate.tar scripts/build-image.sh   # also `podman save` it
#   IG_NO_CACHE=1 scripts/build-image.sh   # rebuild every layer (cold-build timing)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
base="${IG_BASE_IMAGE:-docker.io/library/debian:bookworm-slim}"
chart="$root/charts/isolation-gate"
# image.repository: the first `repository:` under the top-level `image:` block.
chart_repo="$(awk '/^image:/ {in_image = 1; next}
  in_image && /^[^[:space:]#]/ {exit}
  in_image && /^[[:space:]]+repository:/ {sub(/^[[:space:]]+repository:[[:space:]]*/, ""); sub(/[[:space:]]+#.*$/, "");
    gsub(/^["\047]|["\047]$/, ""); print; exit}' "$chart/values.yaml")"
version="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' "$chart/Chart.yaml")"
[[ -n "$chart_repo" && -n "$version" ]] || {
  echo "build-image: cannot read image.repository from $chart/values.yaml or appVersion from Chart.yaml" >&2; exit 1; }
image="${IG_IMAGE:-$chart_repo}"
if [[ "${1:-}" == "--print-image" ]]; then
  echo "$image:$version"
  exit 0
fi
# The binary reports CMake's project(VERSION); it must be the chart's appVersion.
cmake_version="$(sed -n 's/^project(isolation-gate VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
if [[ "$cmake_version" != "$version" ]]; then
  echo "build-image: CMakeLists.txt project VERSION ($cmake_version) != Chart.yaml appVersion ($version)" >&2
  exit 1
fi
revision="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git -C "$root" status --porcelain -- CMakeLists.txt src 2>/dev/null)" ]]; then
  revision="$revision-dirty"
fi
rebuild_base=0
[[ "${1:-}" == "--rebuild-base" ]] && rebuild_base=1

# Limits for the containers this script runs (the sandbox's defaults are too
# high for some runtimes); runc is Debian's OCI runtime.
run_opts=(--rm --runtime runc --ulimit nofile=1024:4096 --ulimit nproc=1024:4096)

t0=$SECONDS
step() { echo "build-image: [$((SECONDS - t0))s] $*" >&2; }

# 1. Tools (Debian packages).
need=()
for p in podman buildah mmdebstrap runc uidmap; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if ((${#need[@]})); then
  step "installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# 2. Base image.
if ((rebuild_base)) || ! podman image exists "$base"; then
  step "making $base with mmdebstrap"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  # minbase (Essential + apt), trimmed like the official slim images. The
  # Valid-Until/Date options match this machine's apt configuration (a
  # snapshot mirror); they stay in the base image only, not in the Dockerfile.
  mmdebstrap --variant=minbase \
    --aptopt='Acquire::Check-Valid-Until "false"' \
    --aptopt='Acquire::Check-Date "false"' \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-include=/usr/share/locale/locale.alias' \
    bookworm "$work/rootfs.tar" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  podman import --change 'CMD ["bash"]' "$work/rootfs.tar" "$base" >/dev/null
  step "base image $base: $(podman image inspect "$base" --format '{{.Size}}') bytes"
fi

# 3. Build.
step "building $image:$version (revision $revision)"
tb=$SECONDS
cache_opts=()
[[ "${IG_NO_CACHE:-0}" == "1" ]] && cache_opts=(--no-cache)
podman build --isolation chroot --pull=never "${cache_opts[@]}" \
  --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
  --build-arg "BUILD_JOBS=$(nproc)" \
  -t "$image:$version" -t "$image:latest" \
  -f "$root/Dockerfile" "$root"
build_s=$((SECONDS - tb))
size="$(podman image inspect "$image:$version" --format '{{.Size}}')"
step "built in ${build_s}s, image size $size bytes"

# 4. Smoke tests.
user="$(podman image inspect "$image:$version" --format '{{.Config.User}}')"
entry="$(podman image inspect "$image:$version" --format '{{json .Config.Entrypoint}} {{json .Config.Cmd}}')"
step "user $user, entrypoint/cmd $entry"
[[ "$user" == "65532:65532" ]] || { echo "build-image: image user is '$user', want 65532:65532" >&2; exit 1; }

step "podman run $image version"
podman run "${run_opts[@]}" "$image:$version" version

if [[ -d "$root/examples/components" && -d "$root/examples/pods" ]]; then
  for sandbox in unavailable available; do
    step "podman run $image evaluate report-parser (untrusted), sandbox $sandbox"
    set +e
    podman run "${run_opts[@]}" -v "$root/examples:/examples:ro" "$image:$version" \
      evaluate --component /examples/components/report-parser.yaml \
               --pod /examples/pods/report-parser-pod.yaml --sandbox "$sandbox"
    rc=$?
    set -e
    echo "(exit $rc)"
    # 125-127: podman or the binary could not start; >128: killed by a signal.
    if ((rc >= 125)); then echo "build-image: evaluate failed to run (exit $rc)" >&2; exit 1; fi
  done
fi

if [[ -n "${IG_SAVE:-}" ]]; then
  step "saving to $IG_SAVE"
  podman save -o "$IG_SAVE" "$image:$version"
fi
step "done: $image:$version (build ${build_s}s, total $((SECONDS - t0))s)"
