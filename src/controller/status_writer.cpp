#include "controller/status_writer.h"

#include <algorithm>

#include "controller/cluster.h"

namespace ig::controller {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr std::chrono::milliseconds kNotReadyPoll{200};
constexpr std::chrono::milliseconds kApplyTimeout{30'000};  // the client's request timeout

}  // namespace

StatusWriter::StatusWriter(kube::Client& client, const kube::Store<ComponentRecord>& components,
                           const admission::SandboxView& sandbox, StatusWriterOptions options)
    : client_(client), components_(components), sandbox_(sandbox), options_(std::move(options)) {}

StatusWriter::~StatusWriter() { stop(); }

void StatusWriter::start() {
  std::lock_guard life(lifecycle_);
  std::lock_guard lock(mu_);
  if (!threads_.empty()) return;
  stopping_ = false;
  all_pending_ = true;  // a new term: every Component is checked once
  written_.clear();
  for (std::size_t i = 0; i < std::max<std::size_t>(options_.workers, 1); ++i)
    threads_.emplace_back([this] { run(); });
}

void StatusWriter::stop() noexcept {
  std::lock_guard life(lifecycle_);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
  }
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // (not reached: the workers never call stop())
    } else if (t.joinable()) {
      t.join();
    }
  }
  std::lock_guard lock(mu_);
  processing_.clear();
  dirty_.clear();
  queue_.clear();
  queued_.clear();
  sweep_keys_ = {};
  sweep_ends_ = {};
  sweep_next_ = 0;
  retry_.clear();
  backoff_.clear();
}

void StatusWriter::enqueue(std::string_view key) {
  if (key.empty()) return enqueue_all();
  {
    std::lock_guard lock(mu_);
    if (stopping_ || !push(std::string(key))) return;
  }
  cv_.notify_one();
}

void StatusWriter::enqueue_all() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    all_pending_ = true;
  }
  cv_.notify_one();
}

StatusWriterStats StatusWriter::stats() const {
  std::lock_guard lock(mu_);
  StatusWriterStats s = stats_;
  s.queued = queue_.size() + retry_.size() + (sweep_ends_.size() - sweep_next_);
  return s;
}

bool StatusWriter::next(std::string& key) {
  std::unique_lock lock(mu_);
  for (;;) {
    if (stopping_) return false;
    if (options_.ready && !options_.ready()) {
      cv_.wait_for(lock, kNotReadyPoll);
      continue;
    }
    const auto now = Clock::now();
    while (!retry_.empty() && retry_.begin()->first <= now) {
      std::string due = std::move(retry_.begin()->second);
      retry_.erase(retry_.begin());
      push(std::move(due));
    }
    if (all_pending_) {
      all_pending_ = false;
      lock.unlock();
      std::string keys;
      std::vector<std::uint32_t> ends;
      {
        auto records = components_.snapshot();
        ends.reserve(records.size());
        for (const auto& r : records) {
          keys += kube::object_key(r->component.namespace_, r->component.name);
          ends.push_back(static_cast<std::uint32_t>(keys.size()));
        }
      }
      keys.shrink_to_fit();
      lock.lock();
      // The new sweep replaces what is left of an older one: it holds every key.
      sweep_keys_ = std::move(keys);
      sweep_ends_ = std::move(ends);
      sweep_next_ = 0;
      // Every worker may take from it (the others may be asleep in wait()).
      cv_.notify_all();
      continue;
    }
    if (!queue_.empty()) {
      key = std::move(queue_.front());
      queue_.pop_front();
      queued_.erase(key);
      if (take(key)) return true;
      continue;
    }
    if (sweep_next_ < sweep_ends_.size()) {
      const std::uint32_t begin = sweep_next_ == 0 ? 0 : sweep_ends_[sweep_next_ - 1];
      key.assign(sweep_keys_, begin, sweep_ends_[sweep_next_] - begin);
      if (++sweep_next_ == sweep_ends_.size()) {
        sweep_keys_ = {};
        sweep_ends_ = {};
        sweep_next_ = 0;
      }
      if (take(key)) return true;
      continue;
    }
    if (retry_.empty()) {
      cv_.wait(lock);
    } else {
      cv_.wait_until(lock, retry_.begin()->first);
    }
  }
}

bool StatusWriter::push(std::string key) {
  if (!queued_.insert(key).second) return false;
  queue_.push_back(std::move(key));
  return true;
}

bool StatusWriter::take(std::string& key) {
  if (processing_.count(key) != 0) {
    dirty_.insert(std::move(key));  // done() queues it again
    return false;
  }
  processing_.insert(key);
  return true;
}

void StatusWriter::done(const std::string& key) {
  {
    std::lock_guard lock(mu_);
    processing_.erase(key);
    if (dirty_.erase(key) == 0 || stopping_ || !push(key)) return;
  }
  cv_.notify_one();
}

void StatusWriter::run() {
  std::string key;
  while (next(key)) {
    try {
      process(key);
    } catch (const std::exception& e) {
      if (options_.log) options_.log("error", "component status " + key + ": " + e.what());
    }
    done(key);
  }
}

void StatusWriter::process(const std::string& key) {
  auto record = components_.find(key);
  if (!record) {
    std::lock_guard lock(mu_);
    written_.erase(key);
    return;
  }
  StatusInputs in;
  in.sandbox = sandbox_.availability();
  in.shape = options_.shape;
  in.runtime_class = options_.runtime_class;
  in.drifted_pods = options_.drifted_pods ? options_.drifted_pods(key) : 0;
  in.now = options_.now ? options_.now() : std::time(nullptr);
  json status = desired_status(*record, in);
  const std::uint64_t want = status_fingerprint(status);
  {
    std::lock_guard lock(mu_);
    bool ours = false;  // what this writer last wrote for the key is `want`
    if (auto written = written_.find(key); written != written_.end()) {
      if (written->second == record->status_fingerprint) {
        written_.erase(written);  // the cache shows our write now
      } else {
        ours = written->second == want;
      }
    }
    if (holds_status(*record, status) || ours) {
      ++stats_.unchanged;
      backoff_.erase(key);
      return;
    }
    if (stopping_) return;  // the fence: no write starts after stop()
    if (options_.ready && !options_.ready()) {
      // The inputs changed under it (a relist began): computed from what may
      // be an interim state. Again once ready.
      push(key);
      return;
    }
  }
  const auto& c = record->component;
  const std::string path = kube::object_path(kComponents, c.namespace_, c.name, "status");
  auto patched = client_.apply(path, apply_configuration(*record, status), kFieldManager, /*force=*/true,
                               kApplyTimeout);
  if (patched) {
    // Fields still there though not applied (co-owned by an earlier version's
    // merge patches): removed once; a failure is retried with the next write.
    json leftover = leftover_fields_patch(status, patched->value("status", json::object()));
    if (!leftover.is_null()) (void)client_.patch(path, kube::PatchType::Merge, leftover);
  }
  std::lock_guard lock(mu_);
  if (patched) {
    ++stats_.writes;
    backoff_.erase(key);
    written_[key] = want;
    return;
  }
  ++stats_.errors;
  const kube::ApiError& e = patched.failure();
  if (e.message != last_error_) {
    last_error_ = e.message;
    if (options_.log) options_.log("warn", "cannot write the status of Component " + key + ": " + e.message);
  }
  if (e.not_found()) {
    backoff_.erase(key);
    return;
  }
  auto& delay = backoff_[key];
  delay = delay.count() == 0 ? options_.retry_initial : std::min(delay * 2, options_.retry_max);
  if (e.retry_after.count() > 0) {
    delay = std::max<std::chrono::milliseconds>(delay, e.retry_after);
  }
  retry_.emplace(Clock::now() + delay, key);
}

}  // namespace ig::controller
