#!/usr/bin/env bash
# Coverage-guided fuzzing with libFuzzer (clang-14, ASan+UBSan), one target
# per attack surface (tests/fuzz/*_fuzz.cpp; docs/security.md, "Fuzzing and
# sanitizers"): builds build-fuzz/ with -DIG_FUZZ=ON and runs each target for
# SECONDS, two at a time (IG_FUZZ_JOBS), from its seed corpus
# tests/fuzz/corpus/<target>/ (inputs found on the way are kept under
# build-fuzz/corpus/, never in the repository). Fails on any finding: a
# crash, a sanitizer report, a broken invariant, a hang (-timeout), a leak or
# an out-of-memory; the input is saved as build-fuzz/artifacts/<target>-*.
#   scripts/fuzz.sh              # the longer run: every target 300 s
#   scripts/fuzz.sh 15           # what scripts/test.sh runs
#   scripts/fuzz.sh 600 component_fuzz kubeconfig_fuzz
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
seconds="${1:-300}"
shift || true
all=(admission_review_fuzz component_fuzz kubeconfig_fuzz list_decoder_fuzz pod_text_fuzz watch_decoder_fuzz)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
jobs="${IG_FUZZ_JOBS:-2}"
out="$root/build-fuzz"

echo "== libFuzzer build (clang-14, ASan+UBSan) =="
# IG_UNITY: the libraries unity-built, as in scripts/test.sh's sanitizer builds.
cmake -S . -B "$out" -G Ninja -DCMAKE_CXX_COMPILER=clang++-14 -DIG_FUZZ=ON -DIG_BUILD_TESTS=OFF \
  -DIG_UNITY=ON -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-O1 -g1" >/dev/null
SECONDS=0
ninja -C "$out" -j "$(nproc)" "${targets[@]}"
echo "== stage fuzz-build: $SECONDS s =="

# Per-target options: inputs up to 64 KiB (a review or a manifest is a few).
run_one() {
  local t="$1" corpus="$out/corpus/$1" log="$out/logs/$1.log"
  mkdir -p "$corpus" "$out/artifacts" "$out/logs"
  cp -n "$root/tests/fuzz/corpus/$t"/* "$corpus/" 2>/dev/null || true
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    "$out/$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$out/artifacts/$t-" "$corpus" >"$log" 2>&1
}

echo "== libFuzzer: ${targets[*]}, ${seconds} s each, ${jobs} at a time =="
mkdir -p "$out/logs"
failed=()
running=0
for t in "${targets[@]}"; do
  if (( running >= jobs )); then wait -n || true; running=$((running - 1)); fi
  rm -f "$out/logs/$t.rc"
  ( if run_one "$t"; then echo 0; else echo $?; fi >"$out/logs/$t.rc" ) &
  running=$((running + 1))
done
wait
for t in "${targets[@]}"; do
  if [[ "$(cat "$out/logs/$t.rc" 2>/dev/null)" == 0 ]]; then status=ok; else status=FAILED; failed+=("$t"); fi
  log="$out/logs/$t.log"
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)"
  cov="$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)"
  echo "$t: $status, ${runs:-?} runs, ${rate:-?} exec/s, ${cov:-cov: ?}, corpus $(ls "$out/corpus/$t" | wc -l) files"
  if [[ $status == FAILED ]]; then
    echo "--- $log (last 60 lines) ---"
    tail -60 "$log"
  fi
done
if (( ${#failed[@]} > 0 )); then
  echo "fuzzing found something in: ${failed[*]} (inputs in $out/artifacts/)" >&2
  exit 1
fi
