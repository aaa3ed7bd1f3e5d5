// `serve`'s process: signals, the open files limit, malloc, and its waits.
// block_stop_signals() blocks SIGINT, SIGTERM and SIGHUP in the calling
// thread (call it before any thread starts) and returns them.
// wait_for_stop() returns the first SIGINT or SIGTERM (SIGHUP is logged and
// ignored; malloc's free pages go back to the kernel once a minute).
// wait_drain_delay() returns after `delay`, or at a second SIGINT/SIGTERM.
#pragma once

#include <signal.h>

#include <chrono>
#include <cstddef>

namespace ig::cli {

sigset_t block_stop_signals();
int wait_for_stop(const sigset_t& signals);
void wait_drain_delay(const sigset_t& signals, std::chrono::milliseconds delay);

// Raises the soft RLIMIT_NOFILE to the hard one; warns when it stays below
// `wanted` descriptors.
void raise_open_files_limit(std::size_t wanted);
// Caps malloc's arenas at `io_threads` (0: one per core) plus two and fixes its
// mmap and trim thresholds; the MALLOC_* environment variables, when set, win.
void tune_malloc(unsigned io_threads);

}  // namespace ig::cli
