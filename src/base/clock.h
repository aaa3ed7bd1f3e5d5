// The one injectable time source: every interval and every wait with a
// deadline goes through a Clock, so tests run on a FakeClock and never sleep.
//
// Contract:
//  - now() is monotonic; sleep_until(t) returns at t or later (the fake: at
//    once, its time moved to t).
//  - wait_until(lock, cv, deadline) waits on `cv` (whose mutex `lock` holds)
//    until notified or `deadline`; it may wake early, so callers loop. A
//    FakeClock wakes every waiter whenever its time moves, and its real
//    waits are bounded (kFakeRealWait).
//  - Thread-safe. The one file of base/ with <mutex> and
//    <condition_variable> (tests/unit/layering_test.cpp).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <vector>

namespace ig {

class Clock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = time_point::duration;

  virtual ~Clock() = default;
  virtual time_point now() = 0;
  virtual void sleep_until(time_point t) = 0;
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          time_point deadline) = 0;

  // steady_clock, std::this_thread::sleep_until, condition_variable::wait_until.
  static std::shared_ptr<Clock> steady();
};

// A clock whose time moves only when told (advance, set, sleep_until).
class FakeClock final : public Clock {
 public:
  static constexpr std::chrono::milliseconds kFakeRealWait{20};

  explicit FakeClock(time_point start = time_point(std::chrono::hours(1000))) : now_(start) {}

  time_point now() override;
  void sleep_until(time_point t) override;
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override;

  void advance(duration d);
  void set(time_point t);  // never backwards
  // Threads inside wait_until() now.
  std::size_t waiters();

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };
  void move(duration by, time_point at_least);  // wakes every waiter
  void wake(std::vector<Waiter> waiters);

  std::mutex mu_;
  time_point now_;
  std::vector<Waiter> waiters_;
};

}  // namespace ig
