// The one injectable time source: every interval and every wait with a
// deadline goes through a Clock, so tests run on a FakeClock and never sleep.
//
// Contract:
//  - now() is monotonic; wall() is the calendar (Lease and Event timestamps,
//    certificate validity, credential expiry) and may jump.
//  - sleep_until(t) returns at t or later (the fake: at once, its time moved
//    to t).
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
  using wall_time = std::chrono::system_clock::time_point;

  virtual ~Clock() = default;
  virtual time_point now() = 0;
  virtual wall_time wall() = 0;
  virtual void sleep_until(time_point t) = 0;
  virtual void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          time_point deadline) = 0;

  // steady_clock, system_clock, std::this_thread::sleep_until,
  // condition_variable::wait_until.
  static std::shared_ptr<Clock> steady();
};

// A clock whose time moves only when told (advance, set, sleep_until), and
// whose wall() moves with it from `wall_start`. A jumping clock's
// wait_until() moves the time to its deadline at once, without waking other
// waiters: for a test that drives one loop on its own thread.
class FakeClock final : public Clock {
 public:
  static constexpr std::chrono::milliseconds kFakeRealWait{20};
  static constexpr time_point kStart{std::chrono::hours(1000)};
  static constexpr wall_time kWallStart{std::chrono::seconds(1'790'000'000)};  // 2026-09-21T14:13:20Z

  explicit FakeClock(time_point start = kStart, wall_time wall_start = kWallStart, bool jumping = false)
      : start_(start), wall_start_(wall_start), jumping_(jumping), now_(start) {}
  static std::shared_ptr<FakeClock> make_jumping(time_point start = kStart) {
    return std::make_shared<FakeClock>(start, kWallStart, true);
  }

  time_point now() override;
  wall_time wall() override;
  void sleep_until(time_point t) override;
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override;

  void advance(duration d);
  void set(time_point t);  // never backwards
  // Threads inside wait_until() now.
  std::size_t waiters();
  // What each sleep_until(), and each wait_until() of a jumping clock, asked
  // for (its deadline less the time then), in order.
  std::vector<duration> waits();

 private:
  struct Waiter {
    std::mutex* mu;
    std::condition_variable* cv;
  };
  void move(duration by, time_point at_least);  // wakes every waiter
  void wake(std::vector<Waiter> waiters);

  const time_point start_;
  const wall_time wall_start_;
  const bool jumping_;
  std::mutex mu_;
  time_point now_;
  std::vector<Waiter> waiters_;
  std::vector<duration> waits_;
};

}  // namespace ig
