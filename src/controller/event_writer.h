// The Event writer: a kube::EventRecorder whose writes are reconciles on the
// engine, on every replica. What to write is kube::EventCorrelator's.
//  - record() (any thread) never blocks on I/O: it counts the occurrence and
//    enqueues its key; an invalid spec, a full queue or a stopped writer is
//    refused and counted.
//  - reconcile(key): the key's next write. Retriable failures back off
//    (Retry-After honoured), max_attempts in all, keeping the Event's name
//    (409 AlreadyExists counts as written); others are dropped, counted and
//    logged once per kind. kSweep enqueues every pending key.
//  - stop() (before the manager stops runnable()): record() refuses, then a
//    flush of at most stop_flush. Thread-safe; stop() is noexcept.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

#include "base/clock.h"
#include "base/prometheus.h"
#include "kube/api.h"
#include "kube/event_recorder.h"
#include "runtime/controller.h"

namespace ig::controller {

class EventWriter : public kube::EventRecorder {
 public:
  static constexpr std::string_view kSweep = "";

  EventWriter(kube::Client& client, kube::EventRecorderOptions options);
  ~EventWriter() override;

  bool record(kube::EventSpec spec) noexcept override;
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }
  void stop() noexcept;
  bool flush(std::chrono::milliseconds timeout);
  void wake() noexcept;  // looks again at what is due (after a fake clock moved)
  kube::EventRecorderStats stats() const;
  void write_metrics(prometheus::TextWriter& out) const;

  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);

 private:
  using Verb = kube::EventWrite::Verb;
  using Outcome = kube::EventCorrelator::Outcome;

  kube::ApiResult<nlohmann::json> send(const kube::EventWrite& w, const runtime::CancelToken& cancel);
  bool drain(std::chrono::milliseconds timeout);

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
