// runtime::WorkQueue: client-go's rate-limited delaying work queue.
//  - add(key): queued at most once; a key being processed (got, not done())
//    is queued again by done(): never two workers on a key, no add lost.
//  - get() blocks until a key is there, or returns nullopt once shut down
//    and empty (keys queued before shut_down() are still handed out; keys
//    added after it, and delayed keys not yet due, are not).
//  - add_after(key, d): queued after `d` (the earlier time wins; d <= 0 is
//    add()), counted as a retry. add_rate_limited(key): add_after the max of
//    the key's exponential backoff and an overall token bucket; forget(key)
//    ends it. len(): queued keys, not those waiting for their time.
//  - Thread-safe; every wait is on the injected clock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "base/backoff.h"
#include "base/clock.h"
#include "base/token_bucket.h"
#include "runtime/metrics.h"

namespace ig::runtime {

struct RateLimitOptions {
  BackoffOptions backoff;  // per key: 5 ms .. 1000 s
  double qps = 10;         // overall
  int burst = 100;
};

template <typename Key, typename Hash = std::hash<Key>>
class WorkQueue {
 public:
  using time_point = Clock::time_point;
  using duration = Clock::duration;

  // An empty clock: the steady clock. `metrics` (not owned) may be null.
  explicit WorkQueue(std::shared_ptr<Clock> clock = {}, RateLimitOptions limits = {}, QueueMetrics* metrics = nullptr)
      : clock_(clock ? std::move(clock) : Clock::steady()),
        metrics_(metrics),
        backoff_(limits.backoff),
        bucket_(limits.qps, limits.burst, clock_->now()) {}

  void add(const Key& key) {
    std::lock_guard lock(mu_);
    add_locked(key, clock_->now());
  }

  void add_after(const Key& key, duration d) {
    std::lock_guard lock(mu_);
    add_after_locked(key, d);
  }

  void add_rate_limited(const Key& key) {
    std::lock_guard lock(mu_);
    if (shutting_down_) return;
    const duration d = std::max(backoff_.next(key), bucket_.reserve(clock_->now()));
    add_after_locked(key, d);
  }

  void forget(const Key& key) {
    std::lock_guard lock(mu_);
    backoff_.forget(key);
  }

  std::uint32_t num_requeues(const Key& key) {
    std::lock_guard lock(mu_);
    return backoff_.failures(key);
  }

  std::optional<Key> get() {
    std::unique_lock lock(mu_);
    for (;;) {
      const time_point now = clock_->now();
      if (!shutting_down_) release_due_locked(now);
      if (!queue_.empty()) break;
      if (shutting_down_) return std::nullopt;
      if (waiting_.empty()) {
        cv_.wait(lock);  // an add or shut_down() wakes it
      } else {
        clock_->wait_until(lock, cv_, waiting_.begin()->first);
      }
    }
    Key key = std::move(queue_.front());
    queue_.pop_front();
    processing_.insert(key);
    const auto it = dirty_.find(key);  // a queued key is dirty
    if (metrics_) metrics_->queue_duration.observe(std::chrono::duration<double>(clock_->now() - it->second).count());
    dirty_.erase(it);
    return key;
  }

  void done(const Key& key) {
    std::lock_guard lock(mu_);
    processing_.erase(key);
    if (auto it = dirty_.find(key); it != dirty_.end()) {
      it->second = clock_->now();
      queue_.push_back(key);
      cv_.notify_one();
    }
  }

  std::size_t len() {
    std::lock_guard lock(mu_);
    if (!shutting_down_) release_due_locked(clock_->now());
    return queue_.size();
  }

  // Keys handed out by get() and not done() yet.
  std::size_t processing() {
    std::lock_guard lock(mu_);
    return processing_.size();
  }

  void shut_down() {
    std::lock_guard lock(mu_);
    shutting_down_ = true;
    waiting_.clear();
    waiting_at_.clear();
    cv_.notify_all();
  }

 private:
  void add_locked(const Key& key, time_point now) {
    if (shutting_down_ || dirty_.count(key) != 0) return;
    if (metrics_) metrics_->adds.fetch_add(1, std::memory_order_relaxed);
    dirty_.emplace(key, now);
    if (processing_.count(key) != 0) return;  // done() queues it
    queue_.push_back(key);
    cv_.notify_one();
  }

  void add_after_locked(const Key& key, duration d) {
    if (shutting_down_) return;
    if (metrics_) metrics_->retries.fetch_add(1, std::memory_order_relaxed);
    const time_point now = clock_->now();
    if (d <= duration::zero()) return add_locked(key, now);
    const time_point ready = now + d;
    if (auto [it, fresh] = waiting_at_.try_emplace(key, ready); !fresh) {
      if (it->second <= ready) return;  // already due earlier
      waiting_.erase({it->second, key});
      it->second = ready;
    }
    waiting_.emplace(ready, key);
    cv_.notify_all();  // a get() may now have an earlier time to wake at
  }

  void release_due_locked(time_point now) {
    while (!waiting_.empty() && waiting_.begin()->first <= now) {
      Key key = waiting_.begin()->second;
      waiting_.erase(waiting_.begin());
      waiting_at_.erase(key);
      add_locked(key, now);
    }
  }

  std::shared_ptr<Clock> clock_;
  QueueMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Key> queue_;
  std::unordered_map<Key, time_point, Hash> dirty_;  // queued, or to be queued by done(); since when
  std::unordered_set<Key, Hash> processing_;
  std::set<std::pair<time_point, Key>> waiting_;
  std::unordered_map<Key, time_point, Hash> waiting_at_;
  ItemBackoff<Key, Hash> backoff_;
  TokenBucket bucket_;
  bool shutting_down_ = false;
};

}  // namespace ig::runtime
