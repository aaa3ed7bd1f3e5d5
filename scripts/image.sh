#!/usr/bin/env bash
# The shell-less runtime image, from a binary already built (no compiler, no
# network, no base image): the binary, the shared libraries it loads (its
# DT_NEEDED closure, scripts/closure.py, each file from the Debian package
# that ships it on this machine: the packages the binary was linked
# against), CA certificates, /etc/passwd and /etc/group entries for the
# non-root user 65532, and the dpkg status stanzas of those packages in
# /var/lib/dpkg/status.d/ (as distroless images: scanners read them; no dpkg).
# Nothing else: no shell, no package manager, no coreutils. Committed with
# buildah onto `scratch`.
#
#   scripts/image.sh --arch amd64 --binary build/isolation-gate --tag localhost/isolation-gate:dev
#       [--version 0.1.0] [--revision abc1234] [--closure-json FILE]
#       [--keep-rootfs DIR]   (the image's root, kept: release.sh runs the
#                              arm64 binary under qemu with it as library root)
#
# scripts/test.sh runs it on the optimised build's binary (stage image);
# scripts/release.sh on the amd64 and arm64 release binaries.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

arch="" binary="" tag="" version="" revision="" closure_json="" keep_rootfs=""
while (($#)); do
  case "$1" in
    --arch) arch="$2"; shift 2 ;;
    --binary) binary="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --version) version="$2"; shift 2 ;;
    --revision) revision="$2"; shift 2 ;;
    --closure-json) closure_json="$2"; shift 2 ;;
    --keep-rootfs) keep_rootfs="$2"; shift 2 ;;
    *) echo "image.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n "$arch" && -n "$binary" && -n "$tag" ]] || { echo "usage: image.sh --arch amd64|arm64 --binary PATH --tag NAME" >&2; exit 2; }
case "$arch" in
  amd64) strip=strip ;;
  arm64) strip=aarch64-linux-gnu-strip ;;
  *) echo "image.sh: --arch amd64|arm64" >&2; exit 2 ;;
esac
[[ -n "$version" ]] || version="$(sed -n 's/^project(isolation-gate VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")"
[[ -n "$revision" ]] || revision="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"

work="$(mktemp -d)"
ctr=""
cleanup() { [[ -n "$ctr" ]] && buildah rm "$ctr" >/dev/null 2>&1; rm -rf "$work"; }
trap cleanup EXIT
rootfs="$work/rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/var/lib/dpkg/status.d"

# The binary, stripped (the test build keeps line tables).
"$strip" -o "$rootfs/usr/local/bin/isolation-gate" "$binary"
chmod 0755 "$rootfs/usr/local/bin/isolation-gate"
python3 "$root/scripts/closure.py" "$binary" --arch "$arch" --json "$work/closure.json" --rootfs "$rootfs" 2>/dev/null

# CA certificates (Debian's ca-certificates bundle) and the non-root user.
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'nonroot:x:65532:\n' > "$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"

# Package metadata: the closure's packages and ca-certificates.
python3 - "$work/closure.json" "$arch" <<'PY' > "$work/packages.txt"
import json, sys
c = json.load(open(sys.argv[1]))
for p in c["packages"]:
    print("%s:%s" % (p["name"], p["arch"]) if p["arch"] != "all" else p["name"])
print("ca-certificates")
PY
while read -r spec; do
  dpkg-query -s "$spec" > "$rootfs/var/lib/dpkg/status.d/${spec%%:*}"
done < "$work/packages.txt"
chmod -R go-w "$rootfs"

ctr="$(buildah from --arch "$arch" --os linux scratch)"
buildah copy --quiet "$ctr" "$rootfs/" / >/dev/null
buildah config --arch "$arch" --os linux \
  --user 65532:65532 --workingdir / \
  --entrypoint '["/usr/local/bin/isolation-gate"]' --cmd serve \
  --port 8443 --port 8080 \
  --label org.opencontainers.image.title=isolation-gate \
  --label "org.opencontainers.image.description=Kubernetes admission webhook that decides where Gibson component pods may run: in the setec microVM sandbox, in-process, or not at all." \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label org.opencontainers.image.vendor=zeroroot.ai \
  --label org.opencontainers.image.source=https://github.com/zeroroot-ai/isolation-gate \
  --label org.opencontainers.image.licenses=NOASSERTION \
  "$ctr"
buildah commit --quiet --rm --format oci "$ctr" "$tag" >/dev/null
ctr=""
[[ -z "$closure_json" ]] || cp "$work/closure.json" "$closure_json"
echo "image.sh: $tag ($arch): $(wc -l < "$work/packages.txt") packages, $(du -sk "$rootfs" | cut -f1) KiB" >&2
[[ -z "$keep_rootfs" ]] || { rm -rf "$keep_rootfs"; mv "$rootfs" "$keep_rootfs"; }
