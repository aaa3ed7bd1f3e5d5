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
    const timespec trim_interval{60, 0};  // malloc's free pages go back to the kernel this often
    const int signal_number = sigtimedwait(&signals, nullptr, &trim_interval);
    if (signal_number < 0) {
      if (errno == EAGAIN) malloc_trim(0);
      continue;  // the interval passed (EAGAIN), or EINTR
    }
    if (signal_number != SIGHUP) return signal_number;
    config::log_info("SIGHUP ignored: certificates reload by themselves when they change");
  }
}

void wait_drain_delay(const sigset_t& signals, std::chrono::milliseconds delay) {
  const auto drain_until = std::chrono::steady_clock::now() + delay;
  for (auto left = delay; left.count() > 0;
       left = std::chrono::duration_cast<std::chrono::milliseconds>(drain_until - std::chrono::steady_clock::now())) {
    const timespec wait{static_cast<time_t>(left.count() / 1000), static_cast<long>(left.count() % 1000 * 1'000'000)};
    const int got = sigtimedwait(&signals, nullptr, &wait);
    if (got != SIGHUP && !(got < 0 && errno == EINTR)) break;  // the delay is over, or SIGTERM/SIGINT again
  }
}

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

// Arenas capped at the I/O threads plus two (fewer contend:
// docs/decisions/0002-malloc-arenas.md); mmap and trim thresholds fixed at
// 4 MiB, above the body limit (docs/decisions/0003-malloc-thresholds.md).
constexpr int kMallocThresholdBytes = 4 << 20;

void tune_malloc(unsigned io_threads) {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, kMallocThresholdBytes);
  if (std::getenv("MALLOC_ARENA_MAX") != nullptr) return;
  if (io_threads == 0) io_threads = std::max(1u, std::thread::hardware_concurrency());
  mallopt(M_ARENA_MAX, static_cast<int>(io_threads + 2));
}

}  // namespace ig::cli
