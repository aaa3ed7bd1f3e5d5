// A reflector (the shape of client-go's tools/cache Reflector.ListAndWatch):
// keeps a ReflectorSink equal to one collection of the API server.
//
//   list (a consistent snapshot) -> sink.replace
//   watch from the list's resourceVersion -> sink.apply, event by event
//     BOOKMARK              advances the resourceVersion, nothing applied
//     clean end (timeout)   watch again from the last resourceVersion
//     dropped / silent      watch again (at once if it had delivered events)
//     429, refused          watch again after the backoff (the server is busy
//                           or restarting; the cache is still current)
//     410 Expired           list again at once
//     any other failure to open a watch, any other ERROR event
//                           list again after the backoff (client-go's rule)
//
// Which resourceVersion a list asks for (client-go's relistResourceVersion):
// the first list "0" (served from the API server's watch cache, which
// ignores `limit`: one answer); later lists the last one seen, unpaginated
// (also from the watch cache, never older than what the cache holds); "" (a
// quorum read from etcd, paginated by page_size) after a 410, a "Too large
// resource version" (504, the server rewound: an etcd restore) or any failed
// list, until a list succeeds. A list whose continue token expired (410
// mid-list) is done once more unpaginated at the same resourceVersion
// (client-go's pager), not restarted at page 1. Failures back off
// exponentially with jitter, capped (about 30 s), honouring Retry-After; a
// success resets it.
//
// Watches: timeoutSeconds drawn in [watch_timeout, 2 * watch_timeout) so
// replicas do not reconnect in step; bookmarks requested, and a stream that
// delivers no byte for `watch_silence` (about two bookmark periods plus
// slack) is closed and reopened. since_progress() is the time since the last
// list, event or bookmark: how stale the cache may be.
//
// Contract: start() runs the loop on a thread of its own (never a
// cpprestsdk pool thread); stop() makes it end promptly (an open watch is
// stopped, a backoff wait is cut short) and joins. Every wait is
// interruptible; the reflector never blocks a caller of the sink.
// relist() asks for a fresh list (the open watch is stopped, a backoff wait
// cut short): for a sink whose decoding depends on something that changed
// (the Node cache's projection, controller/cluster.h). Any thread may call it;
// a request made while a list runs is honoured by one more list after it.
// A list's items go into the sink one at a time as each is decoded
// (Client::list_each), so no page of parsed objects is held while the cache
// fills; after each complete list the freed memory is handed back to the
// system (malloc_trim), so the resident size after a start is the caches',
// not the list's.
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

#include "kube/api.h"
#include "kube/store.h"

namespace ig::kube {

struct BackoffPolicy {
  std::chrono::milliseconds initial{800};
  std::chrono::milliseconds max{30'000};
  double factor = 2.0;
  double jitter = 0.5;  // each wait is d * (1 + jitter * U[0,1))
};

struct ReflectorOptions {
  std::string name;          // for logs and metrics: "nodes"
  std::string path;          // the collection: kube::collection_path(...)
  std::string label_selector;  // on every list and watch; "" for none
  std::string field_selector;  // "metadata.name=x" for one object
  std::size_t page_size = 500;
  // Server-side timeoutSeconds of each watch: drawn in [watch_timeout,
  // 2 * watch_timeout), as client-go does (5-10 minutes).
  std::chrono::seconds watch_timeout{300};
  // A watch that delivers no byte (event or bookmark) for this long is closed
  // and reopened; 0: never (only the connection's inactivity timeout). A real
  // API server sends a bookmark about every minute.
  std::chrono::milliseconds watch_silence{150'000};
  BackoffPolicy backoff;
  // level, message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  // How the loop waits: returns false when it was cut short by stop().
  // Tests replace it to record the waits instead of sleeping; empty = real.
  std::function<bool(std::chrono::milliseconds)> wait;
  // The clock of since_progress(); empty = steady_clock::now. Tests replace it.
  std::function<std::chrono::steady_clock::time_point()> now;
};

// Why a list was made again (after the first): one counter each.
#define IG_RELIST_CAUSES(X)                                                                 \
  X(Expired, "expired")                  /* 410: the resourceVersion was compacted */      \
  X(TooLarge, "too_large")               /* 504 Too large resource version (a rewind) */   \
  X(WatchFailed, "watch_failed")         /* a watch could not be opened (403, 500, ...) */ \
  X(ErrorEvent, "error_event")           /* an ERROR event other than 410 and 429 */       \
  X(ContinueExpired, "continue_expired") /* a continue token expired mid-list */           \
  X(Requested, "requested")              /* relist() */
enum class RelistCause : std::uint8_t {
#define IG_RELIST_ENUM(name, label) name,
  IG_RELIST_CAUSES(IG_RELIST_ENUM)
#undef IG_RELIST_ENUM
};
inline constexpr std::size_t kRelistCauses = 0
#define IG_RELIST_COUNT(name, label) +1
    IG_RELIST_CAUSES(IG_RELIST_COUNT)
#undef IG_RELIST_COUNT
    ;
std::string_view relist_cause_label(RelistCause c) noexcept;

struct ReflectorStats {
  std::uint64_t lists = 0;        // complete lists
  std::uint64_t relists[kRelistCauses] = {};  // by RelistCause
  std::uint64_t watches = 0;      // watch streams opened
  std::uint64_t events = 0;       // ADDED/MODIFIED/DELETED applied
  std::uint64_t bookmarks = 0;
  std::uint64_t errors = 0;       // failed calls and broken streams
  std::uint64_t silent_watches = 0;  // watches closed for silence
  std::uint64_t relists_total() const noexcept {
    std::uint64_t n = 0;
    for (auto r : relists) n += r;
    return n;
  }
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

  bool synced() const noexcept { return synced_.load(std::memory_order_acquire); }
  std::string resource_version() const;
  ReflectorStats stats() const;
  const std::string& name() const noexcept { return options_.name; }
  // Time since the last complete list, event or bookmark (since start()
  // before the first list).
  std::chrono::steady_clock::duration since_progress() const noexcept;

 private:
  enum class Next { Relist, Rewatch, Stop };
  bool list_all();                // true when the sink was replaced
  Next watch_once();
  bool wait(std::chrono::milliseconds d);
  std::chrono::milliseconds next_backoff(const ApiError* error);
  std::string list_resource_version() const;
  void count_relist(RelistCause cause);
  void progressed() noexcept;
  std::chrono::steady_clock::time_point now() const;
  void reset_backoff() noexcept { backoff_ = {}; }
  void log(std::string_view level, const std::string& message) const;
  bool stopping() const noexcept { return stopping_.load(std::memory_order_acquire); }
  bool relist_requested() const noexcept { return relist_.load(std::memory_order_acquire); }

  Client& client_;
  ReflectorSink& sink_;
  ReflectorOptions options_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> synced_{false};
  std::atomic<bool> relist_{false};  // set by relist() under mu_
  mutable std::mutex mu_;  // resource_version_, stats_, stream_
  std::condition_variable cv_;
  std::string resource_version_;
  ReflectorStats stats_;
  WatchStream* stream_ = nullptr;  // the open watch, for stop()
  std::chrono::milliseconds backoff_{0};
  // The last resourceVersion cannot be listed from (410, too large, a failed
  // list): the next list is a quorum read (""). Loop thread only.
  bool rv_unavailable_ = false;
  std::atomic<std::chrono::steady_clock::rep> last_progress_{0};
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ig::kube
