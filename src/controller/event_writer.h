// The Event writer: a kube::EventRecorder whose writes are reconciles on the
// engine (runtime/controller.h). Events are written on every replica (the
// webhook's denials), so runnable() is added to the process's
// runtime::Manager as one that needs no leadership. What to write is
// kube::EventCorrelator's (kube/event_recorder.h); this file sends it.
//
// Contract:
//  - record(spec) (any thread, the admission path included): validates,
//    counts the occurrence into the correlator under a short mutex and
//    enqueues its key; never blocks on I/O. Refused and counted: an invalid
//    spec (dropped_invalid), a full queue (dropped_queue_full: queue_capacity
//    occurrences not yet looked at by a reconcile), after stop()
//    (dropped_stopped). Records made before the manager runs runnable() are
//    written once it does.
//  - reconcile(key, cancel): one write of the key (a 404 on its series PATCH:
//    the new Event's create too). No token yet: requeued after the wait.
//    Retriable failures (ApiError::retriable()): requeued with the engine's
//    per-key backoff (retry_initial .. retry_max; an answer's Retry-After
//    instead, at most retry_max), max_attempts in all, keeping the Event's
//    name, so a create answered 409 AlreadyExists after a lost answer is a
//    success. Other failures and spent retries: dropped, counted in
//    send_errors, logged once per distinct error.
//    Cancelled: nothing is sent (a PATCH in flight is abandoned).
//  - The key kSweep enqueues every pending key (a new run, wake(), flush()).
//  - flush(timeout): writes what is pending ignoring the per-object buckets
//    (the global one still applies); true once nothing is pending. stop()
//    (before the manager stops runnable()): record() refuses, a flush of at
//    most stop_flush; occurrences still unwritten are counted in
//    dropped_rate_limited (dropped_stopped when runnable() is not running:
//    no flush then). The destructor (after the manager stopped) is such a
//    stop() without a flush.
//  - Thread-safe; stop() is noexcept. The writer outlives the manager's run
//    of runnable().
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/clock.h"
#include "kube/api.h"
#include "kube/event_recorder.h"
#include "runtime/controller.h"

namespace ig::controller {

class EventWriter : public kube::EventRecorder {
 public:
  static constexpr std::string_view kSweep = "";

  EventWriter(kube::Client& client, kube::EventRecorderOptions options);
  ~EventWriter() override;
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  bool record(kube::EventSpec spec) noexcept override;
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }
  void stop() noexcept;
  bool flush(std::chrono::milliseconds timeout);
  void wake() noexcept;  // looks again at what is due (after a fake clock moved)
  kube::EventRecorderStats stats() const;

  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);

 private:
  using Verb = kube::EventWrite::Verb;
  using Outcome = kube::EventCorrelator::Outcome;

  kube::ApiResult<nlohmann::json> send(const kube::EventWrite& w, const runtime::CancelToken& cancel);
  bool drain(std::chrono::milliseconds timeout);
  void log(std::string_view level, const std::string& message);

  kube::Client& client_;
  kube::EventRecorderOptions options_;
  std::shared_ptr<runtime::Controller<std::string>> controller_;

  mutable std::mutex mu_;  // everything below
  kube::EventCorrelator correlator_;
  kube::EventRecorderStats stats_;  // the writer's counts; the correlator adds its own
  std::unordered_set<std::string> logged_;  // distinct errors logged
  std::uint64_t queue_full_logged_ = 0;
  Clock::time_point queue_full_logged_at_{};
  int flushing_ = 0;
  bool stopped_ = false;
};

}  // namespace ig::controller
