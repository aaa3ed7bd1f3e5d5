// A reflector (the shape of client-go's tools/cache Reflector.ListAndWatch):
// keeps a ReflectorSink equal to one collection of the API server.
//
//   list (paginated, a consistent snapshot) -> sink.replace
//   watch from the list's resourceVersion   -> sink.apply, event by event
//     BOOKMARK              advances the resourceVersion, nothing applied
//     clean end (timeout)   watch again from the last resourceVersion
//     dropped / error       watch again after a backoff
//     410 Gone (HTTP or ERROR event), expired continue token -> list again
//   5xx, 429 (Retry-After honoured), no answer -> exponential backoff with
//   jitter, capped (about 30 s); a success resets it.
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
  // Server-side timeoutSeconds of each watch; client-go picks 5-10 minutes.
  std::chrono::seconds watch_timeout{300};
  BackoffPolicy backoff;
  // level, message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  // How the loop waits: returns false when it was cut short by stop().
  // Tests replace it to record the waits instead of sleeping; empty = real.
  std::function<bool(std::chrono::milliseconds)> wait;
};

struct ReflectorStats {
  std::uint64_t lists = 0;        // complete lists
  std::uint64_t relists_gone = 0; // lists caused by 410 Gone / expired continue
  std::uint64_t watches = 0;      // watch streams opened
  std::uint64_t events = 0;       // ADDED/MODIFIED/DELETED applied
  std::uint64_t bookmarks = 0;
  std::uint64_t errors = 0;       // failed calls and broken streams
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

 private:
  enum class Next { Relist, Rewatch, Stop };
  bool list_all();                // true when the sink was replaced
  Next watch_once();
  bool wait(std::chrono::milliseconds d);
  std::chrono::milliseconds next_backoff(const ApiError* error);
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
  std::mt19937_64 rng_{std::random_device{}()};
};

}  // namespace ig::kube
