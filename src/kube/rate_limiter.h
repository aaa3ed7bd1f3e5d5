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
//  - acquire(deadline, cancel): a wait that `cancel` interrupts returns an
//    error ("cancelled") and gives the reserved token back.
//  - Thread-safe. The clock is the injectable ig::Clock (base/clock.h): tests
//    pass a fake, so no test sleeps. The bucket is base/token_bucket.h's.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <stop_token>

#include "base/clock.h"
#include "base/result.h"
#include "base/token_bucket.h"

namespace ig::kube {

class RateLimiter {
 public:
  static constexpr double kDefaultQps = 5.0;
  static constexpr int kDefaultBurst = 10;

  explicit RateLimiter(double qps = kDefaultQps, int burst = kDefaultBurst,
                       std::shared_ptr<Clock> clock = Clock::steady());

  // Takes a token, waiting until at most `deadline` (and not once `cancel`
  // is stopped).
  Result<void> acquire(Clock::time_point deadline, std::stop_token cancel = {});

  // Takes a token only if one is there now.
  bool try_acquire();

  double qps() const noexcept { return bucket_.qps(); }
  int burst() const noexcept { return bucket_.burst(); }

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  std::condition_variable cancelled_;  // woken by a cancel token's stop
  TokenBucket bucket_;
};

}  // namespace ig::kube
