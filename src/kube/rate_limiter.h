// The client-side rate limit of the Kubernetes API client: a token bucket of
// `qps` tokens a second holding at most `burst` (client-go's defaults: 5 and
// 10), taken once before every request, watch starts included.
//
// Contract:
//  - acquire(deadline) takes a token, waiting for one if none is left, and
//    never waits past `deadline`: when the token would come later, it returns
//    an error at once without taking anything (so a webhook request with 2 s
//    left never sleeps 3 s). Waiters are served in the order they reserved
//    (a reservation may take the bucket below zero, as golang.org/x/time/rate
//    does), so no caller starves.
//  - qps <= 0 means no limit; burst < 1 is taken as 1.
//  - Thread-safe. The clock is injectable: tests pass a fake whose
//    sleep_until() advances its time, so no test sleeps.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>

#include "base/result.h"

namespace ig::kube {

class RateClock {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  virtual ~RateClock() = default;
  virtual time_point now() = 0;
  virtual void sleep_until(time_point t) = 0;
  // steady_clock and std::this_thread::sleep_until.
  static std::shared_ptr<RateClock> steady();
};

class RateLimiter {
 public:
  static constexpr double kDefaultQps = 5.0;
  static constexpr int kDefaultBurst = 10;

  explicit RateLimiter(double qps = kDefaultQps, int burst = kDefaultBurst,
                       std::shared_ptr<RateClock> clock = RateClock::steady());

  // Takes a token, waiting until at most `deadline`.
  Result<void> acquire(RateClock::time_point deadline);

  // Takes a token only if one is there now.
  bool try_acquire();

  double qps() const noexcept { return qps_; }
  int burst() const noexcept { return burst_; }

 private:
  void refill_locked(RateClock::time_point now);

  const double qps_;
  const int burst_;
  std::shared_ptr<RateClock> clock_;
  std::mutex mu_;
  double tokens_;                // may go below zero: reserved by waiters
  RateClock::time_point last_;   // when tokens_ was last brought up to date
};

}  // namespace ig::kube
