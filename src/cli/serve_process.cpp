#include "cli/serve_process.h"

#include <malloc.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

#include "config/log.h"

namespace ig::cli {
namespace {

// How often wait_for_stop() returns malloc's free pages (tune_malloc).
constexpr time_t kMallocTrimSeconds = 60;

}  // namespace

// Signals are taken by serve_webhook's thread only: every mode blocks them
// first thing, before any thread starts (caches, certificate watchers); a
// signal during start-up waits.
sigset_t block_stop_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);  // logged and ignored: it must not kill the webhook silently
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

int wait_for_stop(const sigset_t& signals) {
  for (;;) {
    // Between signals, once a minute, hand the pages malloc holds free back
    // to the kernel (see tune_malloc below).
    timespec trim_interval{};
    trim_interval.tv_sec = kMallocTrimSeconds;
    siginfo_t info{};
    const int signal_number = sigtimedwait(&signals, &info, &trim_interval);
    if (signal_number < 0) {
      if (errno == EAGAIN) malloc_trim(0);
      continue;  // the interval passed (EAGAIN), or EINTR
    }
    if (signal_number != SIGHUP) return signal_number;
    // Certificates reload on their own (files watched, the Secret watched);
    // there is nothing else to reload.
    config::log_info("SIGHUP ignored: certificates reload by themselves when they change");
  }
}

void wait_drain_delay(const sigset_t& signals, std::chrono::milliseconds delay) {
  const auto drain_until = std::chrono::steady_clock::now() + delay;
  for (auto left = delay; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - std::chrono::steady_clock::now())) {
    timespec wait{};
    wait.tv_sec = static_cast<time_t>(left.count() / 1000);
    wait.tv_nsec = static_cast<long>((left.count() % 1000) * 1'000'000);
    siginfo_t info{};
    const int got = sigtimedwait(&signals, &info, &wait);
    if (got < 0 && errno == EINTR) continue;
    if (got == SIGHUP) continue;
    break;  // the delay is over, or SIGTERM/SIGINT again
  }
}

// Every accepted connection is a descriptor: at the soft RLIMIT_NOFILE accept()
// fails (EMFILE) and nobody is served, so raise the soft limit to the hard one
// (as the Go runtime does) and say so when even that is below what the
// connection caps allow.
void raise_open_files_limit(std::size_t wanted) {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  const rlim_t before = lim.rlim_cur;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &lim) != 0) lim.rlim_cur = before;
  }
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < wanted) {
    config::log_warn("the open files limit is below what --max-connections allows; beyond it accept() fails",
                     {{"limit", std::to_string(lim.rlim_cur)}, {"wanted", std::to_string(wanted)}});
  } else if (before != lim.rlim_cur) {
    config::log_debug("raised the open files limit",
                      {{"from", std::to_string(before)}, {"to", std::to_string(lim.rlim_cur)}});
  }
}

// glibc gives each thread that allocates an arena of its own (up to 8 per
// core) and keeps what is freed there: under the soak (docs/security.md,
// "Soak") RSS grew 8-12 % over 25 minutes with a flat live heap. So serve
// caps the arenas, but at the I/O threads plus two (the main thread's arena
// and one for the rest), not lower: with two arenas the I/O threads shared
// one and contended on its lock, which cost 2.4x the CPU per review
// (docs/decisions/0002-malloc-arenas.md). What the arenas keep free goes back
// to the kernel once a minute (malloc_trim, from wait_for_stop()). MALLOC_ARENA_MAX, when set, wins.
//
// And the mmap and trim thresholds are fixed at 4 MiB (above the 3 MiB body
// limit): by default a body over 128 KiB was mmapped and unmapped per request,
// and an arena's top was trimmed back (madvise) after each large review, so
// a 200 KB pod took 10-26 page faults per request and its CPU was bimodal,
// 470-720 us, against about 335 us with the thresholds fixed
// (docs/decisions/0003-malloc-thresholds.md). The minute's malloc_trim still returns
// what is free. MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_, when set, win.
constexpr int kMallocThresholdBytes = 4 << 20;

void tune_malloc(unsigned io_threads) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  if (io_threads == 0) io_threads = std::max(1u, std::thread::hardware_concurrency());
  mallopt(M_ARENA_MAX, static_cast<int>(io_threads + 2));
}

}  // namespace ig::cli
