// Kubernetes Events (events.k8s.io/v1, with series), client-go's shape: the
// EventRecorder callers record through, and EventCorrelator, the pure
// bookkeeping of each Event's next write (controller/event_writer.h sends).
//
// EventCorrelator contract (no I/O, no threads, time passed in; its owner
// locks it):
//  - observe() counts one occurrence of a valid_event() under its key. A key
//    idle for 30 minutes whose Event shows every occurrence starts a new
//    Event; a new key beyond max_series evicts the least recently used
//    (its unwritten occurrences count in dropped_rate_limited).
//  - next(): None (every occurrence shown), Wait (no token: the regarding
//    object's bucket, unless `flushing`, or the global one), Create (a new
//    Event, with the series from count 2), or Patch (the series only).
//    Occurrences held back are not dropped: the next write carries them.
//  - done(): Written (a create answered AlreadyExists too); Gone (PATCH 404:
//    the next write creates anew); Retry (the same write); Failed (a failed
//    create forgets the key, a failed patch counts the occurrences written).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/clock.h"
#include "kube/api.h"

namespace ig::kube {

// The object an Event is about (events.k8s.io/v1 Event.regarding). Empty
// fields are left out of the Event. namespace_ empty: a cluster-scoped object.
struct ObjectReference {
  std::string kind;         // "Pod", "ReplicaSet", "Namespace"
  std::string api_version;  // "v1", "apps/v1"
  std::string namespace_;
  std::string name;         // required
  std::string uid;          // empty for an object not yet created (a denied CREATE)
};

struct EventSpec {
  ObjectReference regarding;
  // Event.related (name empty: none); part of the key.
  ObjectReference related;
  std::string type;    // "Normal" or "Warning"
  std::string reason;  // CamelCase, at most kMaxEventField bytes; required
  std::string action;  // "Admit", "Evict"; at most kMaxEventField bytes; required
  std::string note;    // cut at kMaxEventNote on a UTF-8 boundary
};

inline constexpr std::size_t kMaxEventNote = 1024;
inline constexpr std::size_t kMaxEventField = 128;  // reason, action, reportingInstance

// Whether `spec` can be an Event (name, reason, action, their lengths, type).
bool valid_event(const EventSpec& spec);
// The correlator's key: (regarding, related, type, reason, action).
std::string event_key(const EventSpec& spec);

struct EventRecorderOptions {
  std::string reporting_controller;  // "isolation-gate"
  std::string reporting_instance;    // the caller's identity (pod name); cut at 128 bytes
  std::size_t queue_capacity = 1000; // client-go's maxQueuedEvents
  // Per regarding object (client-go's spam filter defaults).
  int object_burst = 25;
  std::chrono::milliseconds object_refill{300'000};  // one token per 5 minutes
  // All writes together (<= 0 qps: no global limit).
  double global_qps = 10.0;
  int global_burst = 10;
  std::size_t max_series = 4096;      // keys and per-object buckets (LRU)
  // Retriable failures: attempts in all, backoff from retry_initial to retry_max.
  int max_attempts = 4;
  std::chrono::milliseconds retry_initial{500};
  std::chrono::milliseconds retry_max{8000};
  std::chrono::milliseconds stop_flush{2000};  // how long stop() may keep writing
  // level ("debug","info","warn","error"), message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  std::shared_ptr<Clock> clock = Clock::steady();  // buckets, windows; eventTime from wall()
};

struct EventRecorderStats {
  std::uint64_t recorded = 0;              // occurrences accepted by record()
  std::uint64_t created = 0;               // Events created (recreations included)
  std::uint64_t recreated = 0;             // of which: after a series PATCH answered 404
  std::uint64_t series_updates = 0;        // series PATCHes that succeeded
  std::uint64_t dropped_queue_full = 0;    // record() refused: the queue was full
  std::uint64_t dropped_invalid = 0;       // record() refused: not valid_event()
  std::uint64_t dropped_stopped = 0;       // record() after stop(), or queued and never started
  std::uint64_t dropped_rate_limited = 0;  // never written: evicted, or pending at stop()
  std::uint64_t send_errors = 0;           // writes given up (not retriable, or retries spent)
  std::uint64_t retries = 0;               // retried attempts
  std::uint64_t pending = 0;               // occurrences no Event shows yet (gauge)
  std::uint64_t series = 0;                // keys known now (gauge)
};

// What callers record through: record() never blocks on I/O; false: not
// queued (counted in the implementation's stats). Thread-safe.
class EventRecorder {
 public:
  virtual ~EventRecorder() = default;
  virtual bool record(EventSpec spec) noexcept = 0;
};

struct EventWrite {
  enum class Verb { None, Wait, Create, Patch };
  Verb verb = Verb::None;
  Clock::duration wait{};     // Wait: until a token is there
  std::string path;           // Create: the collection; Patch: the Event
  nlohmann::json body;
  std::uint64_t count = 0;    // occurrences the write shows
};

class EventCorrelator {
 public:
  using time_point = Clock::time_point;
  using wall_time = std::chrono::system_clock::time_point;
  enum class Outcome { Written, Gone, Retry, Failed };

  EventCorrelator(const EventRecorderOptions& options, time_point start);
  ~EventCorrelator();
  EventCorrelator(const EventCorrelator&) = delete;
  EventCorrelator& operator=(const EventCorrelator&) = delete;

  std::string observe(EventSpec spec, time_point now, wall_time wall);  // the key
  EventWrite next(const std::string& key, time_point now, bool flushing);
  void done(const std::string& key, const EventWrite& write, Outcome outcome);
  int failed_attempts(const std::string& key) const;  // of the write under way

  std::vector<std::string> pending_keys() const;
  std::uint64_t queued() const;   // occurrences next() has not looked at
  std::uint64_t pending() const;  // occurrences no Event shows yet
  // Forgets every unwritten occurrence; returns how many.
  std::uint64_t drop_pending();
  // created, recreated, series_updates, dropped_rate_limited, pending, series.
  void add_stats(EventRecorderStats& out) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace ig::kube
