// The process's memory allocator, chosen when the binary is linked, and the
// little serve does to it.
//
// The optimised build links mimalloc (CMake option IG_MIMALLOC, on by
// default; off in the sanitizer and fuzz builds, whose runtimes replace
// malloc themselves). A review makes about 180 small allocations, mostly
// nlohmann nodes and strings that die with the request; mimalloc serves them
// from per-thread free lists, without an arena lock and in about a fifth of
// glibc's instructions (docs/benchmarks-changes.md §10), and returns freed
// pages to the kernel by itself after a short delay. Built without it, the
// process runs on glibc's malloc, tuned as before (tune()).
//
// Contract:
//  - name() says which allocator serves this process: "mimalloc <version>"
//    or "glibc malloc". `isolation-gate version` prints it.
//  - tune(io_threads) is called once at start, before any thread starts.
//    glibc: arenas capped at io_threads + 2 (0: the cores), mmap and trim
//    thresholds at 4 MiB; MALLOC_ARENA_MAX, MALLOC_MMAP_THRESHOLD_ and
//    MALLOC_TRIM_THRESHOLD_ win when set. mimalloc: nothing to tune.
//  - release_free_memory() hands what the allocator holds free back to the
//    kernel (glibc: malloc_trim; mimalloc: mi_collect, forced). Any thread;
//    milliseconds at most; called after a cache's full list and once a
//    minute by serve.
#pragma once

#include <string>

namespace ig::config {

std::string allocator_name();
void tune_allocator(unsigned io_threads);
void release_free_memory();

}  // namespace ig::config
