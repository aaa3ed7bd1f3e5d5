#!/usr/bin/env bash
# The whole benchmark, from a clean checkout, in one command:
#
#   bench/run.sh                 # full run (~15-20 min on 2 cores), writes docs/benchmarks.md
#   BENCH_DURATION=3 bench/run.sh --quick   # a short trial (typical pod only); same outputs
#
# Steps: install the Debian packages (scripts/install-deps.sh --bench: wrk,
# nginx-light, Google Benchmark...), build Release in build-bench/, generate
# the corpus (bench/corpus/gen.py) and a fixed certificate, run the Google
# Benchmark microbenchmarks, run the load benchmark (bench/bench.py:
# isolation-gate and nginx, both fresh per row, driven by wrk over loopback
# TLS; and isolation-gate's transport with a handler of zero cost, the
# floor: bench/floor/), count what each server does per request (bench/counts.py), profile
# with perf, then write docs/benchmarks.md (bench/report.py).
# Raw results: build-bench/results/ (results.json, micro.json, logs, perf).
# Options (passed to bench/bench.py): --quick, --no-catalog, --no-perf, --no-counts
# (bench/counts.py, per-request counts, runs after the load runs and before perf).
# Environment: BENCH_DURATION (seconds per wrk run, default 10),
# BENCH_DOC (output document, default docs/benchmarks.md).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
build="$repo/build-bench"
out="$build/results"
duration="${BENCH_DURATION:-10}"
doc="${BENCH_DOC:-$repo/docs/benchmarks.md}"
t0=$(date +%s)
step() { printf '\n== bench: %s (%ss)\n' "$*" "$(($(date +%s) - t0))" >&2; }

step "dependencies"
scripts/install-deps.sh --bench

step "build (Release) in build-bench/"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DIG_BUILD_BENCH=ON -DIG_BUILD_TESTS=OFF -DCMAKE_CXX_FLAGS= >/dev/null
ninja -C "$build" isolation-gate micro_bench transport_floor
cc -shared -fPIC -O2 -Wall -o "$build/no_resume.so" bench/wrk/no_resume.c -ldl

step "corpus and certificate"
/usr/bin/python3 bench/corpus/gen.py --out "$build/corpus"
if [[ " $* " != *" --no-catalog "* && " $* " != *" --quick "* ]]; then
  # 99,990 generated Components + the corpus' 10 = 100,000 in the catalog.
  /usr/bin/python3 bench/corpus/gen.py --catalog "$build/catalog-100k" --count 99990
  cp "$build"/corpus/components/*.yaml "$build/catalog-100k/"
fi
if [[ ! -s "$build/bench-certs/tls.crt" ]]; then
  "$build/isolation-gate" certs --out-dir "$build/bench-certs" --ip 127.0.0.1 --dns localhost >/dev/null
fi

rm -rf "$out"
mkdir -p "$out"

step "microbenchmarks"
"$build/micro_bench" --benchmark_min_time=0.2 --benchmark_out="$out/micro.json" \
  --benchmark_out_format=json >"$out/micro.txt"
tail -n +1 "$out/micro.txt" | grep -E '^(serve|serve_catalog)/' >&2 || true

step "load benchmark (wrk, ${duration}s per run)"
/usr/bin/python3 bench/bench.py --repo "$repo" --build "$build" --out "$out" --duration "$duration" "$@"

step "report"
/usr/bin/python3 bench/report.py --repo "$repo" --results "$out" --out "$doc" \
  --total-seconds "$(($(date +%s) - t0))" --args="$*"
step "done: $doc"
