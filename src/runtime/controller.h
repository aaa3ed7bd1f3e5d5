// runtime::Controller: `workers` threads take keys from a WorkQueue and call
// reconcile(key, cancel); reconcilers never own threads.
//  - run(stop) (once per term for a leader-only controller) makes a fresh
//    queue seeded with initial_keys(), runs until `stop`, then joins; keys
//    queued at `stop` are not reconciled. enqueue*() reach the running
//    term's queue, are dropped between terms and never block.
//  - reconcile()'s result: an error (or exception) -> rate-limited retry,
//    logged once per distinct message; Requeue{after} -> forget, add_after;
//    Requeue{true} -> rate-limited; Requeue{} -> forget. A key is never
//    reconciled by two workers at once. Metrics: runtime/metrics.h.
#pragma once

#include <exception>
#include <optional>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/log_once.h"
#include "base/result.h"
#include "runtime/runnable.h"
#include "runtime/work_queue.h"

namespace ig::runtime {

// controller-runtime's reconcile.Result.
struct Requeue {
  bool requeue = false;
  Clock::duration after{};
};

template <typename Key, typename Hash = std::hash<Key>>
class Controller final : public Runnable {
 public:
  using Queue = WorkQueue<Key, Hash>;

  struct Options {
    std::string name;
    std::size_t workers = 1;
    std::shared_ptr<Clock> clock;  // empty: steady
    RateLimitOptions rate_limit;
    std::function<Result<Requeue>(const Key&, const CancelToken&)> reconcile;
    std::function<std::vector<Key>()> initial_keys;  // each term starts with these; may be empty
    std::function<void(std::string_view level, std::string_view message)> log;
    std::function<std::string(const Key&)> describe;  // for logs; empty: no key in the message
  };

  explicit Controller(Options options)
      : options_(std::move(options)), metrics_(options_.name) {
    if (!options_.clock) options_.clock = Clock::steady();
    metrics_.depth = [this] {
      auto q = queue();
      return q ? q->len() : std::size_t{0};
    };
  }
  ~Controller() override { metrics_.depth = nullptr; }

  std::string_view name() const override { return options_.name; }
  // Once run() has made its queue: it takes work.
  bool synced() const override { return queue() != nullptr; }
  const ControllerMetrics* metrics() const override { return &metrics_; }

  void enqueue(const Key& key) {
    if (auto q = queue()) q->add(key);
  }
  void enqueue_after(const Key& key, Clock::duration d) {
    if (auto q = queue()) q->add_after(key, d);
  }
  // The running term's queue (null between terms).
  std::shared_ptr<Queue> queue() const {
    std::lock_guard lock(mu_);
    return queue_;
  }

  void run(CancelToken stop) override {
    auto q = std::make_shared<Queue>(options_.clock, options_.rate_limit, &metrics_.queue);
    if (options_.initial_keys)
      for (const Key& k : options_.initial_keys()) q->add(k);
    {
      std::lock_guard lock(mu_);
      queue_ = q;
    }
    {
      std::stop_callback shut(stop, [q] { q->shut_down(); });
      std::vector<std::jthread> workers;  // joined before `shut` goes
      for (std::size_t i = 0; i < std::max<std::size_t>(options_.workers, 1); ++i)
        workers.emplace_back([this, q, stop] { work(*q, stop); });
    }
    std::lock_guard lock(mu_);
    if (queue_ == q) queue_.reset();
  }

 private:
  void work(Queue& q, const CancelToken& stop) {
    while (auto key = q.get()) {
      if (!stop.stop_requested()) handle(q, *key, stop);
      q.done(*key);
    }
  }

  void count(ReconcileOutcome o) { metrics_.reconciles[static_cast<std::size_t>(o)].fetch_add(1); }

  void handle(Queue& q, const Key& key, const CancelToken& stop) {
    const auto start = options_.clock->now();
    std::optional<Result<Requeue>> r;
    try {
      r.emplace(options_.reconcile(key, stop));
    } catch (const std::exception& e) {
      r.emplace(fail(std::string("exception: ") + e.what()));
    } catch (...) {
      r.emplace(fail("unknown exception"));
    }
    metrics_.reconcile_time.observe(std::chrono::duration<double>(options_.clock->now() - start).count());
    if (!*r) {
      count(ReconcileOutcome::Error);
      q.add_rate_limited(key);
      bool fresh = false;  // logged once per distinct message, not every retry
      {
        std::lock_guard lock(mu_);
        fresh = errors_logged_.first(r->error());
      }
      if (fresh && options_.log)
        options_.log("warn", options_.name + (options_.describe ? " " + options_.describe(key) : std::string()) +
                                 ": " + r->error());
    } else if ((*r)->after > Clock::duration::zero()) {
      count(ReconcileOutcome::RequeueAfter);
      q.forget(key);
      q.add_after(key, (*r)->after);
    } else if ((*r)->requeue) {
      count(ReconcileOutcome::Requeue);
      q.add_rate_limited(key);
    } else {
      count(ReconcileOutcome::Success);
      q.forget(key);
    }
  }

  Options options_;
  ControllerMetrics metrics_;
  mutable std::mutex mu_;
  std::shared_ptr<Queue> queue_;
  LogOnce errors_logged_;
};

}  // namespace ig::runtime
