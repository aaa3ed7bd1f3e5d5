// A reflector (client-go's Reflector.ListAndWatch): keeps a ReflectorSink
// equal to one collection of the API server. It lists (items go into the
// sink one at a time as decoded), then watches from the list's
// resourceVersion; a clean end or a dropped stream watches again, a 410 lists
// again at once, other failures back off (jittered, capped, Retry-After
// honoured) and list again, as client-go does. A list after a 410, a "Too
// large resource version" or a failed list is a quorum read ("").
//
// Contract: start() runs the loop on a thread of its own; stop() ends it
// promptly (an open watch stopped, a wait cut short) and joins. relist(), from
// any thread, asks for a fresh list (one more if a list is running).
// since_progress() is the time since the last list, event or bookmark.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>

#include "base/clock.h"
#include "kube/api.h"
#include "kube/store.h"

namespace ig::kube {

struct BackoffPolicy {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30'000};
  double jitter = 0.5;  // each wait doubles, then is d * (1 + jitter * U[0,1))
};

struct ReflectorOptions {
  std::string name;          // for logs and metrics: "nodes"
  std::string path;          // the collection: kube::collection_path(...)
  std::string label_selector;  // on every list and watch; "" for none
  std::string field_selector;  // "metadata.name=x" for one object
  std::size_t page_size = 500;
  // Each watch's timeoutSeconds is drawn in [watch_timeout, 2 * watch_timeout).
  std::chrono::seconds watch_timeout{300};
  // A watch silent this long is closed and reopened (0: never).
  std::chrono::milliseconds watch_silence{150'000};
  BackoffPolicy backoff;
  // level, message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  std::shared_ptr<Clock> clock = Clock::steady();  // backoff waits and since_progress()
};

// Why a list was made again (after the first): one counter each.
enum class RelistCause : std::uint8_t {
  Expired,          // 410: the resourceVersion was compacted
  TooLarge,         // 504 Too large resource version (a rewind)
  WatchFailed,      // a watch could not be opened (403, 500, ...)
  ErrorEvent,       // an ERROR event other than 410 and 429
  ContinueExpired,  // a continue token expired mid-list
  Requested,        // relist()
};
inline constexpr std::size_t kRelistCauses = static_cast<std::size_t>(RelistCause::Requested) + 1;
// "expired", "too_large", "watch_failed", "error_event", "continue_expired", "requested".
std::string_view relist_cause_label(RelistCause c) noexcept;

struct ReflectorStats {
  std::uint64_t lists = 0;        // complete lists
  std::uint64_t relists[kRelistCauses] = {};  // by RelistCause
  std::uint64_t watches = 0;      // watch streams opened
  std::uint64_t events = 0;       // ADDED/MODIFIED/DELETED applied
  std::uint64_t bookmarks = 0;
  std::uint64_t errors = 0;       // failed calls and broken streams
  std::uint64_t silent_watches = 0;  // watches closed for silence
};

class Reflector {
 public:
  Reflector(Client& client, ReflectorSink& sink, ReflectorOptions options);
  ~Reflector();
  Reflector(const Reflector&) = delete;
  Reflector& operator=(const Reflector&) = delete;

  void start();
  void stop() noexcept;
  void relist();
  // Runs the loop on the calling thread until stop() (for tests).
  void run();

  ReflectorStats stats() const;
  const std::string& name() const noexcept { return options_.name; }
  Clock::duration since_progress() const noexcept;

 private:
  enum class Next { Relist, Rewatch, Stop };
  bool list_all();                // true when the sink was replaced
  Next watch_once();
  bool wait(std::chrono::milliseconds d);
  // Sets `flag` (stopping_ or relist_), stops the open watch, wakes a wait.
  void interrupt(std::atomic<bool>& flag) noexcept;
  std::chrono::milliseconds next_backoff(const ApiError* error);
  void count_relist(RelistCause cause);
  void count(std::uint64_t ReflectorStats::*counter);
  void progressed() noexcept;
  void log(std::string_view level, const std::string& message) const;
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  bool relist_requested() const noexcept { return relist_.load(std::memory_order_acquire); }

  Client& client_;
  ReflectorSink& sink_;
  ReflectorOptions options_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};  // set under mu_
  std::atomic<bool> relist_{false};    // set under mu_
  mutable std::mutex mu_;  // stats_, stream_
  std::condition_variable cv_;
  std::string resource_version_;  // loop thread only
  ReflectorStats stats_;
  WatchStream* stream_ = nullptr;  // the open watch, for stop()
  std::chrono::milliseconds backoff_{0};
  // The next list is a quorum read (""). Loop thread only.
  bool rv_unavailable_ = false;
  std::atomic<Clock::duration::rep> last_progress_{0};
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ig::kube
