#include "config/allocator.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#if defined(IG_MIMALLOC)
#include <mimalloc.h>
#endif

namespace ig::config {

#if defined(IG_MIMALLOC)

std::string allocator_name() {
  const int v = mi_version();  // 209 for 2.0.9
  return "mimalloc " + std::to_string(v / 100) + "." + std::to_string(v / 10 % 10) + "." + std::to_string(v % 10);
}

void tune_allocator(unsigned /*io_threads*/) {}

void release_free_memory() { mi_collect(true); }

#else

std::string allocator_name() { return "glibc malloc"; }

namespace {
// Above the 3 MiB body limit (docs/benchmarks-changes.md §8).
constexpr int kThresholdBytes = 4 << 20;
}  // namespace

// glibc gives each thread that allocates an arena of its own (up to 8 per
// core) and keeps what is freed there: under the soak (docs/security.md,
// "Soak") RSS grew 8-12 % over 25 minutes with a flat live heap. So the
// arenas are capped, but at the I/O threads plus two (the main thread's arena
// and one for the rest), not lower: with two arenas the I/O threads shared
// one and contended on its lock, which cost 2.4x the CPU per review
// (docs/benchmarks-changes.md, section 2). What the arenas keep free goes back
// to the kernel once a minute (release_free_memory, from serve's signal loop).
//
// And the mmap and trim thresholds are fixed at 4 MiB: by default a body over
// 128 KiB was mmapped and unmapped per request, and an arena's top was
// trimmed back (madvise) after each large review, so a 200 KB pod took 10-26
// page faults per request and its CPU was bimodal, 470-720 us, against about
// 335 us with the thresholds fixed (docs/benchmarks-changes.md §8).
void tune_allocator(unsigned io_threads) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, kThresholdBytes);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kThresholdBytes);
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  if (io_threads == 0) io_threads = std::max(1u, std::thread::hardware_concurrency());
  mallopt(M_ARENA_MAX, static_cast<int>(io_threads + 2));
}

void release_free_memory() { malloc_trim(0); }

#endif

}  // namespace ig::config
