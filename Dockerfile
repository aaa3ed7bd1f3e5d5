# syntax=docker/dockerfile:1
# isolation-gate container image.
#
#   build:   scripts/build-image.sh            (buildah/podman, works offline
#                                               with a local base image)
#            docker build -t isolation-gate .  (anywhere Docker Hub is reachable)
#   run:     podman run --rm isolation-gate version
#
# The build stage compiles on Debian bookworm; the runtime stage is `scratch`
# with the binary, the shared libraries it loads (copied from the build
# stage's Debian packages, so exactly the ones it was linked against), CA
# certificates and /etc/passwd for the non-root user: no shell, no package
# manager. scripts/image.sh makes the same image from a binary already built
# (the test command's, the release's), without this Dockerfile.

ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim

# ---------------------------------------------------------------------------
FROM ${DEBIAN_IMAGE} AS build

ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libcpprest-dev nlohmann-json3-dev libssl-dev libyaml-cpp-dev \
      libboost-dev libboost-system-dev libcli11-dev \
      python3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /src
# Only what the binary is built from (tests, charts and docs stay out, so
# editing them does not rebuild the image; scripts/revision.cmake writes the
# build's revision).
COPY CMakeLists.txt ./
COPY scripts/revision.cmake scripts/closure.py ./scripts/
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

# The runtime root: the binary, the shared libraries it loads (its DT_NEEDED
# closure, each file from the Debian package that ships it here: the
# packages it was linked against; scripts/closure.py, as scripts/image.sh
# does), CA certificates, the non-root user, and the dpkg status stanzas of
# those packages (for scanners; there is no dpkg). No shell, no package manager.
# The chroot at the end runs the binary with nothing but that root.
RUN set -eu; \
    r=/out/rootfs; \
    mkdir -p "$r/usr/local/bin" "$r/etc/ssl/certs" "$r/var/lib/dpkg/status.d"; \
    cp /out/usr/local/bin/isolation-gate "$r/usr/local/bin/isolation-gate"; \
    python3 scripts/closure.py "$r/usr/local/bin/isolation-gate" --arch "$(dpkg --print-architecture)" \
      --json /out/closure.json --rootfs "$r"; \
    cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/"; \
    echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' > "$r/etc/passwd"; \
    echo 'nonroot:x:65532:' > "$r/etc/group"; \
    for p in $(python3 -c 'import json; print(" ".join(p["name"] + ":" + p["arch"] for p in json.load(open("/out/closure.json"))["packages"]))') ca-certificates; do \
      dpkg-query -s "$p" > "$r/var/lib/dpkg/status.d/${p%%:*}"; \
    done; \
    chmod -R go-w "$r"; \
    chroot "$r" /usr/local/bin/isolation-gate version

# ---------------------------------------------------------------------------
# Shell-less: nothing but /out/rootfs (the same content as scripts/image.sh's).
FROM scratch AS runtime
COPY --from=build /out/rootfs/ /

ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="isolation-gate" \
      org.opencontainers.image.description="Kubernetes admission webhook that decides where Gibson component pods may run: in the setec microVM sandbox, in-process, or not at all." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.vendor="zeroroot.ai" \
      org.opencontainers.image.source="https://github.com/zeroroot-ai/isolation-gate"

# Non-root, matching the chart's securityContext (runAsUser/runAsGroup 65532).
USER 65532:65532
# 8443: admission webhooks (HTTPS); 8080: /metrics, /healthz, /readyz.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/isolation-gate"]
CMD ["serve"]
