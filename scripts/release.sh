#!/usr/bin/env bash
# One release command: the multi-arch image, the chart, the CLI tarballs, the
# SBOM and the checksums of isolation-gate VERSION, in dist/.
#
#   scripts/release.sh VERSION            # dry run: build everything into dist/, push nothing
#   scripts/release.sh VERSION --push     # also push image and chart (.github/workflows/release.yml)
#   IG_RELEASE_AMD64_BINARY=build/isolation-gate scripts/release.sh VERSION
#                                         # reuse an amd64 binary already built (CI's dry run)
#
# VERSION (a leading v is dropped) must be CMakeLists.txt's project VERSION
# and the chart's appVersion: the binary prints it. dist/ gets
#   isolation-gate-VERSION.oci.tar              OCI image index (linux/amd64, linux/arm64), oci-archive
#   isolation-gate-VERSION.digest               the index's digest (sha256:...)
#   isolation-gate-chart-VERSION.tgz            the chart: image.repository/tag/digest set
#   isolation-gate-VERSION-linux-ARCH.tar.gz    CLI: bin/isolation-gate ($ORIGIN/../lib rpath) + lib/
#   isolation-gate-VERSION.spdx.json            SBOM, SPDX 2.3 JSON
#   SHA256SUMS                                  sha256sum -c SHA256SUMS
# Both binaries are built here: amd64 natively, arm64 cross-compiled with
# Debian's multiarch toolchain (cmake/toolchain-arm64.cmake; never under
# emulation), then the arm64 binary runs once under qemu-user-static
# (`version`, `evaluate` on examples/) with the arm64 image's own root as its
# library root. The images hold the binary and its library closure only
# (scripts/image.sh). --push pushes the index with skopeo (digests preserved:
# the chart's digest is the pushed one) to $IG_IMAGE_REPO and the chart with
# `helm push` to $IG_CHART_REPO; the workflow logs in first and signs after.
#
# Environment: IG_IMAGE_REPO (ghcr.io/zeroroot-ai/isolation-gate),
# IG_CHART_REPO (oci://ghcr.io/zeroroot-ai/charts), IG_BUILD_JOBS (2),
# IG_NICE (15: builds run under nice).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

version="" push=0
for arg in "$@"; do
  case "$arg" in
    --push) push=1 ;;
    -*) echo "release: unknown option $arg" >&2; exit 2 ;;
    *) version="${arg#v}" ;;
  esac
done
[[ -n "$version" ]] || { echo "usage: scripts/release.sh VERSION [--push]" >&2; exit 2; }
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?$ ]] || {
  echo "release: VERSION must be semver (1.2.3, 1.2.3-rc.1), got $version" >&2; exit 2; }
cmake_version="$(sed -n 's/^project(isolation-gate VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
app_version="$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}.*/\1/p' charts/isolation-gate/Chart.yaml)"
if [[ "${version%%[-+]*}" != "$cmake_version" || "$app_version" != "$cmake_version" ]]; then
  echo "release: VERSION $version, CMakeLists.txt $cmake_version, Chart.yaml appVersion $app_version: bump them together" >&2
  exit 1
fi
image_repo="${IG_IMAGE_REPO:-ghcr.io/zeroroot-ai/isolation-gate}"
chart_repo="${IG_CHART_REPO:-oci://ghcr.io/zeroroot-ai/charts}"
jobs="${IG_BUILD_JOBS:-2}"
nice=(nice -n "${IG_NICE:-15}")
revision="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ -n "$(git status --porcelain -- CMakeLists.txt src cmake 2>/dev/null)" ]]; then
  ((push)) && { echo "release: uncommitted changes under src/ or CMakeLists.txt: not pushing" >&2; exit 1; }
  revision="$revision-dirty"
fi

SECONDS=0
step_t=0
step() { echo "release: [$SECONDS s, step $((SECONDS - step_t)) s] $*" >&2; step_t=$SECONDS; }

scripts/install-deps.sh --release
scripts/install-k8s-tools.sh
export PATH="$root/.tools/bin:$PATH"
dist="$root/dist"
work="$root/build-release"
rm -rf "$dist"; mkdir -p "$dist" "$work"
step "tools ready"

# 1. Binaries. RelWithDebInfo (-O2), as the image always was; tests off.
build() {  # build DIR [cmake args...]
  local dir="$1"; shift
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DIG_BUILD_TESTS=OFF -DIG_BUILD_BENCH=OFF -DIG_SANITIZE=OFF -DIG_REVISION="$revision" "$@" >/dev/null
  "${nice[@]}" ninja -C "$dir" -j "$jobs" isolation-gate
}
if [[ -n "${IG_RELEASE_AMD64_BINARY:-}" ]]; then
  amd64_bin="$IG_RELEASE_AMD64_BINARY"
  step "amd64: reusing $amd64_bin"
else
  build "$work/amd64"
  amd64_bin="$work/amd64/isolation-gate"
  step "amd64 built"
fi
build "$work/arm64" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-arm64.cmake"
arm64_bin="$work/arm64/isolation-gate"
step "arm64 cross-built"

# 2. Images (one per architecture), the arm64 one's root kept to run the binary in.
tag="localhost/isolation-gate:$version"
for arch in amd64 arm64; do
  bin_var="${arch}_bin"
  rm -rf "$work/rootfs-$arch"
  scripts/image.sh --arch "$arch" --binary "${!bin_var}" --tag "$tag-$arch" \
    --version "$version" --revision "$revision" --closure-json "$work/closure-$arch.json" \
    --keep-rootfs "$work/rootfs-$arch"
done
step "images built"

# 3. The arm64 binary, once, under qemu-user-static, with the image's root as
# its library root: what the image holds is enough to run it.
qemu=(qemu-aarch64-static -L "$work/rootfs-arm64" "$work/rootfs-arm64/usr/local/bin/isolation-gate")
# Every library the arm64 loader maps (its trace, as ldd prints it) is in the
# image's root: qemu's -L falls back to the host's paths, so a library
# missing from the root would otherwise go unseen.
LD_TRACE_LOADED_OBJECTS=1 "${qemu[@]}" > "$work/arm64-ldd.txt"
cat "$work/arm64-ldd.txt"
awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' "$work/arm64-ldd.txt" | while read -r lib; do
  [[ -e "$work/rootfs-arm64$lib" ]] || { echo "release: $lib is not in the arm64 image" >&2; exit 1; }
done
"${qemu[@]}" version | tee "$work/arm64-version.txt"
grep -q "^isolation-gate $cmake_version " "$work/arm64-version.txt"
set +e
"${qemu[@]}" evaluate --component examples/components/report-parser.yaml \
  --pod examples/pods/report-parser-pod.yaml --sandbox available > "$work/arm64-evaluate.txt"
rc_arm=$?
"$amd64_bin" evaluate --component examples/components/report-parser.yaml \
  --pod examples/pods/report-parser-pod.yaml --sandbox available > "$work/amd64-evaluate.txt"
rc_amd=$?
set -e
cat "$work/arm64-evaluate.txt"
if ((rc_arm != rc_amd)) || ! cmp -s "$work/arm64-evaluate.txt" "$work/amd64-evaluate.txt"; then
  echo "release: the arm64 binary's evaluate (exit $rc_arm) differs from amd64's (exit $rc_amd)" >&2
  diff "$work/amd64-evaluate.txt" "$work/arm64-evaluate.txt" >&2 || true
  exit 1
fi
step "arm64 binary ran under qemu (version, evaluate: same as amd64)"

# 4. The OCI image index, as an oci-archive.
buildah manifest rm "$tag" >/dev/null 2>&1 || true
buildah manifest create "$tag" >/dev/null
for arch in amd64 arm64; do
  buildah manifest add --arch "$arch" --os linux "$tag" "containers-storage:$tag-$arch" >/dev/null
done
oci="$dist/isolation-gate-$version.oci.tar"
buildah manifest push --quiet --all --format oci "$tag" "oci-archive:$oci:$version"
buildah manifest rm "$tag" >/dev/null
digest="$(python3 - "$oci" <<'PY'
import json, sys, tarfile
with tarfile.open(sys.argv[1]) as t:
    index = json.load(t.extractfile("index.json"))
print(index["manifests"][0]["digest"])
PY
)"
echo "$digest" > "$dist/isolation-gate-$version.digest"
step "image index $digest"

# 5. CLI tarballs: the binary with an $ORIGIN/../lib rpath (DT_RPATH, so the
# bundled libraries' own dependencies are found there too) and every library
# it loads but glibc's; each bundled library's runpath is $ORIGIN.
for arch in amd64 arm64; do
  bin_var="${arch}_bin"
  name="isolation-gate-$version-linux-$arch"
  d="$work/$name"
  rm -rf "$d"; mkdir -p "$d/bin" "$d/lib"
  strip_tool=strip; [[ $arch == arm64 ]] && strip_tool=aarch64-linux-gnu-strip
  "$strip_tool" -o "$d/bin/isolation-gate" "${!bin_var}"
  python3 scripts/closure.py "${!bin_var}" --arch "$arch" --json "$work/cli-closure-$arch.json" --libdir "$d/lib" 2>/dev/null
  patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$d/bin/isolation-gate"
  for lib in "$d"/lib/*; do patchelf --set-rpath '$ORIGIN' "$lib"; done
  glibc="$(for f in "$d/bin/isolation-gate" "$d"/lib/*; do readelf -W --dyn-syms "$f"; done \
    | grep -o 'GLIBC_[0-9.]*' | sort -u -t. -k1,1 -k2,2n -k3,3n | tail -n1)"
  cat > "$d/README.txt" <<TXT
isolation-gate $version (revision $revision), linux/$arch

bin/isolation-gate runs as is: its rpath (\$ORIGIN/../lib) finds the shared
libraries in lib/ (cpprestsdk, yaml-cpp, OpenSSL, brotli, zlib, libstdc++,
from Debian 12 "bookworm"), so nothing but the C library is taken from the host.
Needs: Linux on $arch with glibc >= ${glibc#GLIBC_} (Debian 12 or newer, or any
distribution of that glibc or newer).
No shell or wrapper is involved; move the directory anywhere, keeping bin/
and lib/ side by side.

  bin/isolation-gate version
  bin/isolation-gate evaluate --component COMPONENT.yaml --pod POD.yaml
TXT
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$(git log -1 --format=%ct 2>/dev/null || date +%s)" \
    -C "$work" -czf "$dist/$name.tar.gz" "$name"
done
# The amd64 one runs here with an empty environment, loading every library
# but glibc's from its lib/ (the loader's trace); the arm64 one under qemu.
cli_amd64="$work/isolation-gate-$version-linux-amd64"
env -i LD_TRACE_LOADED_OBJECTS=1 "$cli_amd64/bin/isolation-gate" > "$work/cli-amd64-ldd.txt"
awk '/=> \//{print $1, $3}' "$work/cli-amd64-ldd.txt" | while read -r so path; do
  if [[ -e "$cli_amd64/lib/$so" && "$(readlink -f "$path")" != "$(readlink -f "$cli_amd64/lib/$so")" ]]; then
    echo "release: the CLI tarball's binary loads $so from $path, not its lib/" >&2; exit 1
  fi
done
env -i "$cli_amd64/bin/isolation-gate" version
env -i qemu-aarch64-static -L /usr/aarch64-linux-gnu "$work/isolation-gate-$version-linux-arm64/bin/isolation-gate" version
step "CLI tarballs"

# 6. The chart: a copy whose values.yaml names the released image (repository,
# tag, and digest if the chart has an image.digest value), packaged.
rm -rf "$work/chart"; mkdir -p "$work/chart"
cp -r charts/isolation-gate "$work/chart/"
python3 - "$work/chart/isolation-gate/values.yaml" "$image_repo" "$version" "$digest" <<'PY'
import re, sys
path, repo, tag, digest = sys.argv[1:]
lines = open(path).read().split("\n")
in_image, done = False, set()
for i, line in enumerate(lines):
    if re.match(r"^image:\s*(#.*)?$", line):
        in_image = True
        continue
    if in_image and re.match(r"^[^\s#]", line):
        in_image = False
    if not in_image:
        continue
    m = re.match(r"^(\s+)(repository|tag|digest):(\s*)(\S.*)?$", line)
    if m and m.group(2) not in done:
        value = {"repository": repo, "tag": tag, "digest": digest}[m.group(2)]
        lines[i] = '%s%s: "%s"' % (m.group(1), m.group(2), value)
        done.add(m.group(2))
missing = {"repository", "tag"} - done
if missing:
    sys.exit("release: values.yaml image block has no %s" % ", ".join(sorted(missing)))
open(path, "w").write("\n".join(lines))
print("release: chart values image.%s set" % ", image.".join(sorted(done)), file=sys.stderr)
PY
helm package "$work/chart/isolation-gate" --version "$version" --app-version "$version" -d "$work" >/dev/null
mv "$work/isolation-gate-$version.tgz" "$dist/isolation-gate-chart-$version.tgz"
rendered="$(helm template isolation-gate "$dist/isolation-gate-chart-$version.tgz" -n isolation-gate-system)"
grep -E '^\s+image: ' <<<"$rendered" | sort -u >&2
grep -qE "^\s+image: \"?$image_repo(:$version|@$digest)\"?\$" <<<"$rendered" || {
  echo "release: the packaged chart does not render $image_repo:$version or @$digest" >&2; exit 1; }
step "chart packaged"

# 7. SBOM, then the checksums of everything.
files=()
for f in "$dist"/*.tar "$dist"/*.tar.gz "$dist"/*.tgz; do
  files+=(--file "$(basename "$f")=$(sha256sum "$f" | cut -d' ' -f1)")
done
python3 scripts/sbom.py --version "$version" --revision "$revision" --image-digest "$digest" \
  --out "$dist/isolation-gate-$version.spdx.json" "${files[@]}" "$work/closure-amd64.json" "$work/closure-arm64.json"
(cd "$dist" && sha256sum -- *.tar *.tar.gz *.tgz *.spdx.json *.digest > SHA256SUMS && sha256sum -c --quiet SHA256SUMS)
step "SBOM and SHA256SUMS"
ls -l "$dist" >&2

# 8. Push (the release workflow only).
if ((push)); then
  skopeo copy --all --preserve-digests "oci-archive:$oci:$version" "docker://$image_repo:$version"
  pushed="$(skopeo inspect --raw "docker://$image_repo:$version" | sha256sum | cut -d' ' -f1)"
  [[ "sha256:$pushed" == "$digest" ]] || { echo "release: pushed index sha256:$pushed != $digest" >&2; exit 1; }
  helm push "$dist/isolation-gate-chart-$version.tgz" "$chart_repo"
  step "pushed $image_repo@$digest and the chart to $chart_repo"
else
  step "dry run: nothing pushed (--push pushes $image_repo:$version and the chart to $chart_repo)"
fi
echo "release: done in $SECONDS s: $dist" >&2
