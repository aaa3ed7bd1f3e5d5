#include "controller/event_writer.h"

#include <algorithm>
#include <exception>
#include <utility>

namespace ig::controller {

using nlohmann::json;

EventWriter::EventWriter(kube::Client& client, kube::EventRecorderOptions options)
    : client_(client),
      options_(std::move(options)),
      correlator_(options_, options_.clock->now()) {
  options_.queue_capacity = std::max<std::size_t>(1, options_.queue_capacity);
  options_.max_attempts = std::max(1, options_.max_attempts);
  runtime::Controller<std::string>::Options c;
  c.name = "events";
  c.rate_limit.backoff = BackoffOptions{options_.retry_initial, options_.retry_max};
  c.reconcile = [this](const std::string& key, const runtime::CancelToken& cancel) { return reconcile(key, cancel); };
  c.initial_keys = [] { return std::vector<std::string>{std::string(kSweep)}; };
  c.log = options_.log;
  controller_ = std::make_shared<runtime::Controller<std::string>>(std::move(c));
}

EventWriter::~EventWriter() { stop(); }

bool EventWriter::record(kube::EventSpec spec) noexcept {
  try {
    std::string key;
    {
      std::lock_guard lock(mu_);
      std::uint64_t* refused = !kube::valid_event(spec)                        ? &stats_.dropped_invalid
                               : stopped_                                       ? &stats_.dropped_stopped
                               : correlator_.queued() >= options_.queue_capacity ? &stats_.dropped_queue_full
                                                                                 : nullptr;
      if (refused != nullptr) {
        ++*refused;
        return false;
      }
      key = correlator_.observe(std::move(spec), options_.clock->now(), options_.clock->wall());
      ++stats_.recorded;
    }
    controller_->enqueue(key);
    return true;
  } catch (...) {
    try {
      std::lock_guard lock(mu_);
      ++stats_.dropped_queue_full;
    } catch (...) {
    }
    return false;
  }
}

void EventWriter::stop() noexcept {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  const bool running = controller_->queue() != nullptr;  // the manager runs runnable()
  if (running) {
    try {
      drain(options_.stop_flush);
    } catch (...) {
    }
  }
  std::lock_guard lock(mu_);
  (running ? stats_.dropped_rate_limited : stats_.dropped_stopped) += correlator_.drop_pending();
}

bool EventWriter::flush(std::chrono::milliseconds timeout) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;
  }
  if (controller_->queue() == nullptr) return false;  // runnable() is not running
  return drain(timeout);
}

bool EventWriter::drain(std::chrono::milliseconds timeout) {
  const auto real = Clock::steady();
  const auto deadline = real->now() + timeout;
  std::unique_lock lock(mu_);
  ++flushing_;
  lock.unlock();
  wake();
  for (;;) {
    lock.lock();
    const bool idle = correlator_.pending() == 0;
    if (idle || real->now() >= deadline) {
      --flushing_;
      return idle;
    }
    lock.unlock();
    real->sleep_until(real->now() + std::chrono::milliseconds(1));
  }
}

void EventWriter::wake() noexcept {
  try {
    controller_->enqueue(std::string(kSweep));
  } catch (...) {
  }
}

kube::EventRecorderStats EventWriter::stats() const {
  std::lock_guard lock(mu_);
  kube::EventRecorderStats s = stats_;
  correlator_.add_stats(s);
  return s;
}

void EventWriter::write_metrics(prometheus::TextWriter& out) const {
  using prometheus::Type;
  const kube::EventRecorderStats s = stats();
  out.family("isolation_gate_events_total", Type::Counter,
             "Event occurrences by what became of them: created (a new Event), series (a repeat "
             "written into its Event's series), dropped_queue_full, dropped_rate_limited, failed.");
  const std::pair<std::string_view, std::uint64_t> rows[] = {
      {"recorded", s.recorded},
      {"created", s.created},
      {"series", s.series_updates},
      {"dropped_queue_full", s.dropped_queue_full},
      {"dropped_rate_limited", s.dropped_rate_limited},
      {"dropped_invalid", s.dropped_invalid},
      {"failed", s.send_errors},
  };
  for (const auto& [result, n] : rows) out.sample("isolation_gate_events_total", {{"result", result}}, n);
  runtime::write_single(out, "isolation_gate_events_pending", Type::Gauge,
                        "Repeats waiting for a rate-limit token (they are written into the series later).", s.pending);
}

kube::ApiResult<json> EventWriter::send(const kube::EventWrite& w, const runtime::CancelToken& cancel) {
  const std::string verb = w.verb == Verb::Create ? "POST" : "PATCH";
  try {
    if (w.verb == Verb::Patch) return client_.patch(w.path, kube::PatchType::Merge, w.body, cancel);
    if (cancel.stop_requested()) return kube::ApiError{"POST " + w.path + ": cancelled", 0, "Cancelled", {}};
    return client_.create(w.path, w.body);
  } catch (const std::exception& e) {
    return kube::ApiError{verb + " " + w.path + ": " + e.what(), 400, "ClientError", {}};
  }
}

Result<runtime::Requeue> EventWriter::reconcile(const std::string& key, const runtime::CancelToken& cancel) {
  if (key == kSweep) {
    std::string full;
    std::vector<std::string> keys;
    {
      std::lock_guard lock(mu_);
      const auto now = options_.clock->now();
      if (stats_.dropped_queue_full > queue_full_logged_ &&
          (queue_full_logged_ == 0 || now - queue_full_logged_at_ > std::chrono::minutes(1))) {
        full = "event recorder: the queue is full (" + std::to_string(options_.queue_capacity) +
               "): " + std::to_string(stats_.dropped_queue_full) + " occurrences dropped so far";
        queue_full_logged_ = stats_.dropped_queue_full;
        queue_full_logged_at_ = now;
      }
      keys = correlator_.pending_keys();
    }
    if (!full.empty() && options_.log) options_.log("warn", full);
    for (const auto& k : keys) controller_->enqueue(k);
    return runtime::Requeue{};
  }
  for (;;) {
    kube::EventWrite w;
    {
      std::lock_guard lock(mu_);
      if (cancel.stop_requested()) return runtime::Requeue{};
      w = correlator_.next(key, options_.clock->now(), flushing_ > 0);
    }
    if (w.verb == Verb::None) return runtime::Requeue{};
    if (w.verb == Verb::Wait) return runtime::Requeue{false, w.wait};
    const kube::ApiResult<json> r = send(w, cancel);
    if (!r && cancel.stop_requested()) return runtime::Requeue{};  // counted at stop()
    std::string warning;
    runtime::Requeue requeue;
    {
      std::lock_guard lock(mu_);
      const bool create = w.verb == Verb::Create;
      if (r || (create && r.failure().conflict() && r.failure().reason == "AlreadyExists")) {
        // AlreadyExists: our Event by its name, from an attempt whose answer was lost.
        correlator_.done(key, w, Outcome::Written);
        return requeue;
      }
      const kube::ApiError& e = r.failure();
      if (!create && e.not_found()) {  // garbage collected: a new Event carries the series
        correlator_.done(key, w, Outcome::Gone);
        continue;
      }
      const int attempt = correlator_.failed_attempts(key) + 1;
      if (e.retriable() && attempt < options_.max_attempts) {
        ++stats_.retries;
        correlator_.done(key, w, Outcome::Retry);
        if (e.retry_after > std::chrono::seconds::zero())
          return runtime::Requeue{false, std::min<Clock::duration>(e.retry_after, options_.retry_max)};
        return runtime::Requeue{true, {}};
      }
      ++stats_.send_errors;
      correlator_.done(key, w, Outcome::Failed);
      const std::string kind = std::string(create ? "POST" : "PATCH") + " " + std::to_string(e.code) + " " + e.reason +
                               (e.retriable() ? " retried" : "");
      if (logged_.size() >= 256) logged_.clear();
      if (logged_.insert(kind).second)
        warning = "event recorder: " + e.message +
                  (e.retriable() ? " (after " + std::to_string(attempt) + " attempts)" : "") +
                  " (dropped; further errors like this one are not logged)";
    }
    if (!warning.empty() && options_.log) options_.log("warn", warning);
    return requeue;
  }
}

}  // namespace ig::controller
