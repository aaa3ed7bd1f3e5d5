#include "controller/status_writer.h"

#include <algorithm>

#include "controller/cluster.h"

namespace ig::controller {

using nlohmann::json;

// Not ready: again after kNotReadyWait. One apply, its rate-limit wait included: at most kApplyTimeout.
constexpr std::chrono::milliseconds kNotReadyWait{200}, kApplyTimeout{30'000}, kEchoWait{10'000};

StatusWriter::StatusWriter(kube::Client& client, const kube::Store<ComponentRecord>& components,
                           const admission::SandboxView& sandbox, StatusWriterOptions options)
    : client_(client), components_(components), sandbox_(sandbox), options_(std::move(options)) {
  runtime::Controller<std::string>::Options c;
  c.name = "component-status";
  c.workers = std::max<std::size_t>(options_.workers, 1);
  c.clock = options_.clock;
  c.rate_limit.backoff = BackoffOptions{options_.retry_initial, options_.retry_max};
  c.reconcile = [this](const std::string& key, const runtime::CancelToken& cancel) { return reconcile(key, cancel); };
  c.initial_keys = [this] {  // a new term checks every key, against the cache only
    std::lock_guard lock(mu_);
    sent_.clear();
    return std::vector<std::string>{std::string(kSweep)};
  };
  c.log = options_.log;
  c.describe = [](const std::string& key) {
    return key == kSweep || key == kSweepMore ? std::string("sweep") : "Component " + key;
  };
  controller_ = std::make_shared<runtime::Controller<std::string>>(std::move(c));
}

void StatusWriter::enqueue(std::string_view key) {
  if (key == kSweep) return enqueue_all();
  controller_->enqueue(std::string(key));
}

void StatusWriter::enqueue_all() {
  const Clock::time_point now = options_.clock->now();
  Clock::duration wait{};
  {
    std::lock_guard lock(mu_);
    if (last_sweep_) wait = std::max(Clock::duration::zero(), *last_sweep_ + options_.sweep_interval - now);
  }
  controller_->enqueue_after(std::string(kSweep), wait);
}

StatusWriterStats StatusWriter::stats() const {
  std::unique_lock lock(mu_);
  StatusWriterStats s = stats_;
  lock.unlock();
  if (auto q = controller_->queue()) s.queued = q->len();
  return s;
}

Result<runtime::Requeue> StatusWriter::sweep(bool fresh) {
  std::string keys;
  std::vector<std::uint32_t> ends;
  if (fresh) {
    const auto records = components_.snapshot();
    ends.reserve(records.size());
    for (const auto& r : records) {
      keys += kube::object_key(r->component.namespace_, r->component.name);
      ends.push_back(static_cast<std::uint32_t>(keys.size()));
    }
  }
  std::vector<std::string> batch;
  bool more = false;
  {
    std::lock_guard lock(mu_);
    if (fresh) {
      last_sweep_ = options_.clock->now();
      ++stats_.sweeps;
      sweep_keys_.swap(keys);
      sweep_ends_.swap(ends);
      sweep_next_ = 0;
    }
    for (; sweep_next_ < sweep_ends_.size() && batch.size() < kSweepBatch; ++sweep_next_) {
      const std::size_t begin = sweep_next_ == 0 ? 0 : sweep_ends_[sweep_next_ - 1];
      batch.emplace_back(sweep_keys_, begin, sweep_ends_[sweep_next_] - begin);
    }
    more = sweep_next_ < sweep_ends_.size();
    if (!more) {  // done: its memory goes
      std::string().swap(sweep_keys_);
      std::vector<std::uint32_t>().swap(sweep_ends_);
      sweep_next_ = 0;
    }
  }
  for (const auto& key : batch) controller_->enqueue(key);
  // Behind this batch: the next one is queued once this one is handed out.
  if (more) controller_->enqueue(std::string(kSweepMore));
  return runtime::Requeue{};
}

Result<runtime::Requeue> StatusWriter::reconcile(const std::string& key, const runtime::CancelToken& cancel) {
  // Not ready: nothing is read yet (a sweep would miss keys).
  if (options_.ready && !options_.ready()) return runtime::Requeue{false, kNotReadyWait};
  if (key == kSweep || key == kSweepMore) return sweep(key == kSweep);
  auto record = components_.find(key);
  if (!record) {
    std::lock_guard lock(mu_);
    sent_.erase(key);
    return runtime::Requeue{};  // gone: its deletion needs no status
  }
  const StatusInputs in{.sandbox = sandbox_.availability(),
                        .shape = options_.shape,
                        .runtime_class = options_.runtime_class,
                        .drifted_pods = options_.drifted_pods ? options_.drifted_pods(key) : 0,
                        .unbound = options_.unbound_pods ? options_.unbound_pods(key) : UnboundPods{},
                        .now = std::chrono::system_clock::to_time_t(options_.clock->wall())};
  const json status = desired_status(*record, in);
  const std::uint64_t want = status_fingerprint(status);
  const std::uint64_t cached = record->status_fingerprint;
  {
    std::lock_guard lock(mu_);
    auto sent = sent_.find(key);
    if (want == cached) {  // the cache shows what we want (other managers' fields aside)
      if (sent != sent_.end()) sent_.erase(sent);
      ++stats_.unchanged;
      return runtime::Requeue{};
    }
    if (sent != sent_.end()) {
      // Our write, not in the cache yet: the cache has not moved since.
      const Clock::duration waited = options_.clock->now() - sent->second.at;
      const bool moved = cached != sent->second.before && (sent->second.interim == 0 || cached != sent->second.interim);
      if (!moved && sent->second.sent == want && waited < kEchoWait) {
        ++stats_.unchanged;
        return runtime::Requeue{false, kEchoWait - waited};
      }
      sent_.erase(sent);
    }
  }
  // The inputs may have changed meanwhile (a relist began): again once ready.
  if (options_.ready && !options_.ready()) return runtime::Requeue{false, kNotReadyWait};
  if (cancel.stop_requested()) return runtime::Requeue{};  // the fence: no write after leadership is lost
  const auto& c = record->component;
  const std::string path = kube::object_path(kComponents, c.namespace_, c.name, "status");
  auto written = client_.apply(path, apply_configuration(*record, status), kFieldManager, /*force=*/true,
                               kApplyTimeout, cancel);
  std::uint64_t interim = 0;  // the apply's answer's fingerprint when a merge patch followed it
  if (written) {
    // Leftover fields: removed once; a failure is retried with the next write.
    const json held = written->value("status", json::object());
    if (json leftover = leftover_fields_patch(status, held); !leftover.is_null()) {
      interim = status_fingerprint(held);
      (void)client_.patch(path, kube::PatchType::Merge, leftover, cancel);
    }
  }
  std::lock_guard lock(mu_);
  if (written) {
    ++stats_.writes;
    sent_[key] = Sent{cached, interim, want, options_.clock->now()};
    return runtime::Requeue{};
  }
  const kube::ApiError& e = written.failure();
  if (cancel.stop_requested()) return runtime::Requeue{};  // abandoned: the next leader checks it
  ++stats_.errors;
  if (e.not_found()) return runtime::Requeue{};
  if (e.retry_after.count() > 0) {
    if (options_.log) options_.log("warn", "cannot write the status of Component " + key + ": " + e.message);
    return runtime::Requeue{false, std::max<Clock::duration>(e.retry_after, options_.retry_initial)};
  }
  return fail("cannot write its status: " + e.message);
}

}  // namespace ig::controller
