# syntax=docker/dockerfile:1
# isolation-gate container image.
#
#   build:   scripts/build-image.sh            (buildah/podman, works offline
#                                               with a local base image)
#            docker build -t isolation-gate .  (anywhere Docker Hub is reachable)
#   run:     podman run --rm isolation-gate version
#
# Two stages on the same Debian release, so the runtime libraries are exactly
# the ones the binary was linked against.

ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim

# ---------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libcpprest-dev nlohmann-json3-dev libssl-dev libyaml-cpp-dev \
      libboost-dev libboost-system-dev libcli11-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Only what the binary is built from (tests, charts and docs stay out, so
# editing them does not rebuild the image; scripts/revision.cmake writes the
# build's revision).
COPY CMakeLists.txt ./
COPY scripts/revision.cmake ./scripts/revision.cmake
COPY src ./src

ARG BUILD_JOBS=2
# RelWithDebInfo (-O2) is the build the test suite runs; the installed binary is
# stripped. (Release's -O3 trips GCC 12's false-positive -Werror=restrict in
# libstdc++'s string code.)
ARG BUILD_TYPE=RelWithDebInfo
# There is no .git in the context: the revision `isolation-gate version` prints
# comes from scripts/build-image.sh.
ARG REVISION=unknown
RUN cmake -S . -B /build -G Ninja \
      -DCMAKE_BUILD_TYPE="${BUILD_TYPE}" -DIG_REVISION="${REVISION}" \
      -DIG_BUILD_TESTS=OFF -DIG_BUILD_BENCH=OFF -DIG_SANITIZE=OFF \
      -DCMAKE_INSTALL_PREFIX=/usr/local \
 && cmake --build /build -j "${BUILD_JOBS}" --target isolation-gate \
 && cmake --install /build --strip --prefix /out/usr/local

# The Debian packages that own the shared libraries the binary links (ldd ->
# dpkg -S), for the runtime stage to install: nothing more, nothing missed.
RUN set -eu; \
    bin=/out/usr/local/bin/isolation-gate; \
    ldd "$bin" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' | sort -u > /out/libs.txt; \
    : > /out/runtime-packages.txt; \
    while read -r lib; do \
      pkg=""; \
      for p in "$lib" "$(readlink -f "$lib")" "/usr$lib" "${lib#/usr}"; do \
        pkg="$(dpkg -S "$p" 2>/dev/null | head -n1 | cut -d: -f1)" && [ -n "$pkg" ] && break; \
      done; \
      [ -n "$pkg" ] || { echo "no package owns $lib" >&2; exit 1; }; \
      echo "$pkg" >> /out/runtime-packages.txt; \
    done < /out/libs.txt; \
    sort -u -o /out/runtime-packages.txt /out/runtime-packages.txt; \
    echo "runtime packages:"; cat /out/runtime-packages.txt

# ---------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS runtime

ARG DEBIAN_FRONTEND=noninteractive
COPY --from=build /out/runtime-packages.txt /usr/local/share/isolation-gate/runtime-packages.txt
RUN apt-get update \
 && xargs -a /usr/local/share/isolation-gate/runtime-packages.txt \
      apt-get install -y --no-install-recommends \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/* /var/log/apt /var/log/dpkg.log

COPY --from=build /out/usr/local/bin/isolation-gate /usr/local/bin/isolation-gate
# Fail the build if a library is missing (ldd prints "not found").
RUN ! ldd /usr/local/bin/isolation-gate | grep -q "not found"

ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="isolation-gate" \
      org.opencontainers.image.description="Kubernetes admission webhook that decides where Gibson component pods may run: in the setec microVM sandbox, in-process, or not at all." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.vendor="zeroroot.ai" \
      org.opencontainers.image.source="https://github.com/zeroroot-ai/isolation-gate" \
      org.opencontainers.image.base.name="debian:bookworm-slim"

# Non-root, matching the chart's securityContext (runAsUser/runAsGroup 65532).
USER 65532:65532
# 8443: admission webhooks (HTTPS); 8080: /metrics, /healthz, /readyz.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/isolation-gate"]
CMD ["serve"]
