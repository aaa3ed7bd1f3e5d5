// A Kubernetes Event recorder in the shape of client-go's tools/events (the
// events.k8s.io/v1 broadcaster, with series) and tools/record's spam filter
// (a token bucket per regarding object). The caller names the controller, the
// reasons and the actions; this file knows nothing of the product.
//
//   record(spec)   (any thread, the admission request path included)
//     -> a bounded queue under a short mutex; full: dropped and counted
//   the worker thread
//     -> dedup by (regarding object, related object, type, reason, action):
//        first occurrence   POST /apis/events.k8s.io/v1/namespaces/NS/events
//                           (name "<object name>.<16 hex>", namespace: the
//                           object's, "default" for cluster-scoped objects, as
//                           client-go's events library does)
//        repeats            merge PATCH of THAT Event: series {count,
//                           lastObservedTime} only (count counts the
//                           occurrences: 2 on the first repeat). The note
//                           stays the first occurrence's: the API server holds
//                           every other field of an events.k8s.io/v1 Event
//                           immutable (ValidateEventUpdate), as client-go's
//                           series patch knows.
//        PATCH 404          the Event was garbage collected or deleted: a new
//                           Event is created (new name, the latest note),
//                           carrying the series so far
//        idle past the window, or evicted by the LRU cap: forgotten; a later
//                           occurrence starts a new Event
//     -> rate limits: each write needs a token from the regarding object's
//        bucket (client-go's spam filter: burst 25, one token per 5 minutes)
//        and from a global bucket (default 10/s, burst 10). An occurrence
//        without a token is not a drop: it is folded into the key's pending
//        count and written with the next series update, once a token is there.
//     -> failures: retriable (ApiError::retriable()) retried with backoff a
//        few times, then dropped; others dropped at once; both counted in
//        send_errors and logged once per distinct error. A create's retry
//        keeps the Event's name, and a create answered 409 AlreadyExists is a
//        success (the earlier attempt landed though its answer was lost, e.g.
//        a timeout): counted once in `created`, no second Event, no error
//        (client-go's tools/record and tools/events recordEvent).
//
// Contract:
//  - record() never blocks on I/O and never waits for the worker: it copies the
//    spec, takes the queue mutex for a push (the queue's storage is reserved up
//    front, so the push does not allocate) and returns. false: not queued (the
//    queue was full, the spec cannot be an Event, or the recorder is stopped);
//    each case is counted in stats(). It is noexcept.
//  - start() runs the worker on a thread of its own (the only thread that calls
//    the Client). stop() is noexcept: it lets the worker write what is pending
//    (per-object buckets ignored, the global bucket still applies, backoffs cut
//    short) for at most options.stop_flush, then joins. A Client call in
//    flight is not interrupted: give the Client a short request timeout.
//    Occurrences still unwritten then are counted in dropped_rate_limited.
//    Records made before start() are queued and written once it runs.
//  - Memory is bounded: the queue (queue_capacity), the dedup cache and the
//    per-object buckets (max_series each, least recently used evicted first).
//  - Time: the injectable EventClock gives the monotonic time of the buckets
//    and windows and the wall time written into eventTime/lastObservedTime
//    (MicroTime, RFC 3339 with microseconds, UTC). The worker's waits are
//    condition-variable waits, at most wait_cap each; after moving a fake
//    clock, a test calls wake().
//  - Thread-safe: record(), flush(), wake(), stats() from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

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
  // Event.related: a second object the Event is about (a pod, for an Event
  // regarding its Namespace); name empty: none. Part of the dedup key, as in
  // client-go's tools/events: the same reason about two related objects is
  // two Events (the per-object rate limit is still the regarding object's).
  ObjectReference related;
  std::string type;    // "Normal" or "Warning" (anything else is refused)
  std::string reason;  // CamelCase, at most 128 bytes (the API server's limit); required
  std::string action;  // "Admit", "Evict"; at most 128 bytes; required
  // The message; cut at 1 KiB on a UTF-8 boundary. Repeats do not change the
  // Event's note (immutable); an Event created anew takes the latest.
  std::string note;
};

inline constexpr std::size_t kMaxEventNote = 1024;
inline constexpr std::size_t kMaxEventField = 128;  // reason, action, reportingInstance

// Monotonic time for buckets and windows, wall time for the Event's fields.
class EventClock {
 public:
  virtual ~EventClock() = default;
  virtual std::chrono::steady_clock::time_point now() = 0;
  virtual std::chrono::system_clock::time_point wall() = 0;
  // steady_clock and system_clock.
  static std::shared_ptr<EventClock> real();
};

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
  // A key's Event is forgotten after this long without an occurrence.
  std::chrono::milliseconds series_window{30 * 60'000};
  std::size_t max_series = 4096;      // dedup cache and per-object buckets (LRU)
  // Retriable failures: attempts in all (first included), and the backoff.
  int max_attempts = 4;
  std::chrono::milliseconds retry_initial{500};
  std::chrono::milliseconds retry_max{8000};
  std::chrono::milliseconds stop_flush{2000};  // how long stop() may keep writing
  std::chrono::milliseconds wait_cap{30'000};  // the longest single wait of the worker
  // level ("debug","info","warn","error"), message; may be empty.
  std::function<void(std::string_view, std::string_view)> log;
  std::shared_ptr<EventClock> clock;  // empty: EventClock::real()
};

struct EventRecorderStats {
  std::uint64_t recorded = 0;              // occurrences accepted by record()
  std::uint64_t created = 0;               // Events created (recreations included)
  std::uint64_t recreated = 0;             // of which: after a series PATCH answered 404
  std::uint64_t series_updates = 0;        // series PATCHes that succeeded
  std::uint64_t dropped_queue_full = 0;    // record() refused: the queue was full
  std::uint64_t dropped_invalid = 0;       // record() refused: no name/reason/action, reason or
                                           // action over 128 bytes, type not Normal/Warning
  std::uint64_t dropped_stopped = 0;       // record() after stop()
  std::uint64_t dropped_rate_limited = 0;  // occurrences never written: evicted while
                                           // pending, or still pending when stop() ended
  std::uint64_t send_errors = 0;           // writes given up (not retriable, or retries spent)
  std::uint64_t retries = 0;               // retried attempts
  std::uint64_t pending = 0;               // occurrences waiting for a token now (gauge)
  std::uint64_t series = 0;                // keys in the dedup cache now (gauge)
};


// The Resource of events.k8s.io/v1 Events.
inline constexpr Resource kEventsV1{"events.k8s.io", "v1", "events", "Event", true};

class EventRecorder {
 public:
  EventRecorder(Client& client, EventRecorderOptions options);
  ~EventRecorder();  // stop()
  EventRecorder(const EventRecorder&) = delete;
  EventRecorder& operator=(const EventRecorder&) = delete;

  // Queues one occurrence; never blocks. See the contract above.
  bool record(EventSpec spec) noexcept;

  void start();
  void stop() noexcept;

  // Writes everything pending now, ignoring the per-object buckets (the global
  // bucket still applies), and returns true once the queue is empty and
  // nothing is pending, false after `timeout` (or when the worker does not
  // run). For stop() and tests.
  bool flush(std::chrono::milliseconds timeout);

  // Makes the worker look again at what is due (after a fake clock moved).
  void wake() noexcept;

  EventRecorderStats stats() const;

 private:
  struct Occurrence {
    EventSpec spec;
    std::chrono::steady_clock::time_point at;
    std::chrono::system_clock::time_point wall;
  };
  struct State;  // the worker's: dedup cache, buckets (worker thread only)

  void run();
  void log(std::string_view level, const std::string& message);
  // Waits on cv_ until signal_, for at most `d` (1 ms .. wait_cap), never
  // past the stop deadline when stopping.
  void wait_locked(std::unique_lock<std::mutex>& lock, std::chrono::nanoseconds d);

  Client& client_;
  EventRecorderOptions options_;
  std::shared_ptr<EventClock> clock_;
  std::unique_ptr<State> state_;

  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;       // the worker waits here
  std::condition_variable idle_cv_;  // flush() waits here
  std::vector<Occurrence> queue_;    // capacity reserved: queue_capacity
  EventRecorderStats stats_;
  bool signal_ = false;     // something for the worker to look at
  bool running_ = false;    // the worker thread runs
  bool stopping_ = false;
  bool stopped_ = false;    // record() refuses
  std::chrono::steady_clock::time_point stop_deadline_{};  // real time
  int flush_waiters_ = 0;
  std::uint64_t idle_seq_ = 0;  // bumped each time the worker finds nothing to do
  std::thread thread_;
};

}  // namespace ig::kube
