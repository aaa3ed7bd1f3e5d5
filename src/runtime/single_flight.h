// Collapsed calls (singleflight with a short memory): concurrent run()s of a
// key make one call of `fn`, run by the first caller; the others wait at
// most `wait` for its answer (else nullopt: the caller decides; admission
// fails closed). An answer `keep` accepts is served for `remember` (at most
// `max_remembered` of them; 0: none). `fn` must not throw. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "base/clock.h"

namespace ig::runtime {

template <typename Value>
class SingleFlight {
 public:
  SingleFlight(std::chrono::milliseconds remember, std::size_t max_remembered, std::shared_ptr<Clock> clock)
      : remember_(remember), max_remembered_(max_remembered), clock_(std::move(clock)) {}

  std::optional<Value> run(std::string_view key, std::chrono::milliseconds wait, const std::function<Value()>& fn,
                           const std::function<bool(const Value&)>& keep) {
    std::shared_ptr<Flight> flight;
    {
      std::unique_lock lock(mu_);
      if (auto r = remembered_.find(key); r != remembered_.end()) {
        if (clock_->now() < r->second.until) {
          shared_.fetch_add(1, std::memory_order_relaxed);
          return r->second.value;
        }
        remembered_.erase(r);
      }
      if (auto f = in_flight_.find(key); f != in_flight_.end()) {
        flight = f->second;
        shared_.fetch_add(1, std::memory_order_relaxed);
        const Clock::time_point deadline = clock_->now() + wait;
        while (!flight->value && clock_->now() < deadline) clock_->wait_until(lock, cv_, deadline);
        return flight->value;
      }
      flight = std::make_shared<Flight>();
      in_flight_.emplace(std::string(key), flight);
    }
    Value value = fn();
    {
      std::lock_guard lock(mu_);
      flight->value = value;
      in_flight_.erase(in_flight_.find(key));
      if (remember_.count() > 0 && keep(value)) {
        const Clock::time_point now = clock_->now();
        if (remembered_.size() >= max_remembered_) {
          std::erase_if(remembered_, [&](const auto& e) { return e.second.until <= now; });
        }
        if (remembered_.size() < max_remembered_) remembered_[std::string(key)] = {value, now + remember_};
      }
    }
    cv_.notify_all();
    return value;
  }

  std::uint64_t shared() const noexcept { return shared_.load(std::memory_order_relaxed); }

 private:
  struct Flight {
    std::optional<Value> value;  // set once, when the call returns
  };
  struct Remembered {
    Value value;
    Clock::time_point until;
  };

  const std::chrono::milliseconds remember_;
  const std::size_t max_remembered_;
  const std::shared_ptr<Clock> clock_;
  std::atomic<std::uint64_t> shared_{0};
  std::mutex mu_;  // guards the three below
  std::condition_variable cv_;
  std::map<std::string, std::shared_ptr<Flight>, std::less<>> in_flight_;
  std::map<std::string, Remembered, std::less<>> remembered_;
};

}  // namespace ig::runtime
