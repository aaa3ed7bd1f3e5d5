#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs what is missing, builds,
# then runs (1) the unit tests and the end-to-end tests (real binary over real
# HTTPS, patches checked with python3-jsonpatch) under AddressSanitizer and
# UndefinedBehaviorSanitizer, (2) the fuzz targets briefly, the threaded unit
# tests under ThreadSanitizer, (3) the end-to-end tests again, the test API
# server's self-test and packaging (Helm chart, CRD, manifests, the GitHub
# workflows) on the optimised binary, with a short soak beside them, and (4)
# the shell-less runtime image made from the optimised build's binary (stage
# image, tests/image). Every unit test runs in (1); the optimised build is the
# product's binary only.
# No base image, compiler or network in stage image: the optimised build's
# binary and its libraries are copied onto scratch.
#   scripts/test.sh              # everything; each stage prints "== stage X: N s =="
#   IG_SKIP_SANITIZERS=1 scripts/test.sh   # only the optimised build
# Run time: README.md, "Two commands" (earlier figures: bench/history.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# Per-stage wall time in the log ("== stage X: N s =="), and the total at the end;
# under it the stage's CPU time (user+sys of the processes it ran and waited
# for) and the load average, so a time taken beside another build can be read.
SECONDS=0
stage_start=0
clk_tck="$(getconf CLK_TCK)"
cpu_total() {  # this shell's cutime + cstime (/proc/PID/stat fields 16, 17), in seconds
  local st; read -r -a st < "/proc/$$/stat"
  echo $(( (st[15] + st[16]) / clk_tck ))
}
stage_cpu=0
stage_done() {
  local cpu; cpu="$(cpu_total)"
  echo "== stage $1: $((SECONDS - stage_start)) s =="
  echo "   ($1: CPU $((cpu - stage_cpu)) s; $(uptime | sed 's/.*load/load/'))"
  stage_start=$SECONDS; stage_cpu=$cpu
}
trap 'echo "== total: $SECONDS s =="' EXIT

scripts/install-deps.sh
scripts/install-k8s-tools.sh
export PATH="$root/.tools/bin:$PATH"
jobs="$(nproc)"
# ctest entries (unit_tests, one per e2e file, the API server's and the
# packaging checks) mostly wait on servers and timers: twice the cores.
ctest_jobs="$((jobs * 2))"
stage_done deps

if [[ "${IG_SKIP_SANITIZERS:-0}" != "1" ]]; then
  echo "== ASan+UBSan build =="
  # -g1 (line tables) keeps sanitizer reports readable and the build quicker.
  # IG_UNITY: the libraries are unity-built, batches of 8 files (CMakeLists.txt):
  # the instrumented code each file instantiates from nlohmann/json is compiled
  # once per batch, not once per file. Sanitizer builds only; the optimised
  # build below compiles every file on its own, as the image does.
  # IG_UNITY_TESTS: the unit test files compiled in groups (CMakeLists.txt),
  # here, in the TSan build and in the optimised build.
  # IG_CTEST_UNIT_CASES=OFF: ctest runs unit_tests as one entry, one process
  # (a sanitized process start costs ~1 s), beside the e2e entries.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DIG_SANITIZE=ON \
    -DIG_UNITY=ON -DIG_UNITY_TESTS=ON -DIG_CTEST_UNIT_CASES=OFF \
    -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" >/dev/null
  ninja -C build-asan -j "$jobs" unit_tests isolation-gate
  stage_done asan-build
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # All unit tests in one process, and the end-to-end tests (one entry per
  # tests/e2e file) against the sanitized binary, side by side.
  ctest --test-dir build-asan --output-on-failure -j "$ctest_jobs" -R '^(unit_tests|e2e\..*)$'
  stage_done asan-tests
  unset ASAN_OPTIONS UBSAN_OPTIONS
fi

if [[ "${IG_SKIP_SANITIZERS:-0}" != "1" ]]; then
  # Every libFuzzer target 15 s, two at a time, from its seed corpus; fails
  # on any finding (scripts/fuzz.sh; the campaign is `scripts/fuzz.sh` alone).
  scripts/fuzz.sh 15
  stage_done fuzz
  echo "== ThreadSanitizer build =="
  # Only the threaded tests (server, reflector/store, leader election, event
  # recorder, certificate reload): tsan_tests in CMakeLists.txt.
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DIG_TSAN=ON \
    -DIG_UNITY=ON -DIG_UNITY_TESTS=ON -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" >/dev/null
  ninja -C build-tsan -j "$jobs" tsan_tests
  stage_done tsan-build
  TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/unit/tsan_suppressions.txt" \
    build-tsan/tsan_tests --gtest_brief=1
  stage_done tsan-run
fi

echo "== Optimised build =="
# RelWithDebInfo (-O2 -DNDEBUG, as the image) with -g1, line tables, instead
# of -g: GCC's code does not depend on the debug level (the same
# instructions, objdump -d), and full -g costs half as much CPU again.
# The product's files each on their own (no IG_UNITY), as the image. Only
# the binary: the unit tests ran, all of them, under the sanitizers above
# (IG_SKIP_SANITIZERS=1 builds and runs them here instead).
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
  -DIG_UNITY_TESTS=ON -DIG_CTEST_UNIT_CASES=OFF >/dev/null
if [[ "${IG_SKIP_SANITIZERS:-0}" != "1" ]]; then
  ninja -C build -j "$jobs" isolation-gate
  opt_ctest=(-E '^unit_tests$')
else
  ninja -C build -j "$jobs"
  opt_ctest=()
fi
stage_done opt-build
# The soak (2 minutes of the cluster-mode binary at steady load, certificate
# rotation, churn, dropped watches; scripts/soak.sh) mostly waits: it runs
# beside the ctest entries, which mostly wait too. Its checks are of
# answers, RSS and fds, not of latency.
scripts/soak.sh --duration 2m > build/soak.log 2>&1 &
soak_pid=$!
ctest_rc=0
ctest --test-dir build --output-on-failure -j "$ctest_jobs" "${opt_ctest[@]}" || ctest_rc=$?
soak_rc=0
wait "$soak_pid" || soak_rc=$?
cat build/soak.log
[[ $ctest_rc -eq 0 ]] || { echo "optimised ctest failed ($ctest_rc)" >&2; exit "$ctest_rc"; }
[[ $soak_rc -eq 0 ]] || { echo "soak failed ($soak_rc)" >&2; exit "$soak_rc"; }
stage_done opt-ctest-and-soak

# The shell-less runtime image made from this optimised build's binary
# (scripts/image.sh: the binary and its library closure onto scratch with
# buildah; no compiling, no network), then run by tests/image: no /bin/sh,
# dpkg or apt in it, `version`, `evaluate` on examples/, `serve --local`
# answering /readyz and an AdmissionReview. The multi-arch release build is
# .ci/run's next stage (scripts/release.sh), not part of this command.
scripts/install-deps.sh --image
image_tag="localhost/isolation-gate:test"
scripts/image.sh --arch "$(dpkg --print-architecture)" --binary build/isolation-gate --tag "$image_tag"
IG_IMAGE="$image_tag" IG_BINARY="$root/build/isolation-gate" /usr/bin/python3 -m unittest discover -v -s tests/image
stage_done image
