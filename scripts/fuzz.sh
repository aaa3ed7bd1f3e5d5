#!/usr/bin/env bash
# Coverage-guided fuzzing of the admission request path with libFuzzer
# (clang-14, ASan+UBSan), seeded with the example AdmissionReviews. Not part
# of the default test run.
#   scripts/fuzz.sh [seconds]     # default 120
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
seconds="${1:-120}"
out="$root/build-fuzz"
mkdir -p "$out/corpus"
cp examples/reviews/*.json "$out/corpus/"
srcs=(src/base/*.cpp src/policy/*.cpp src/model/*.cpp src/admission/*.cpp tests/fuzz/admission_review_fuzz.cpp)
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -Isrc "${srcs[@]}" -lyaml-cpp -o "$out/admission_review_fuzz"
"$out/admission_review_fuzz" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
  -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus"
