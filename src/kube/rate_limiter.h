// The Kubernetes API client's rate limit: base/token_bucket.h's bucket
// (client-go's defaults, 5 QPS, burst 10), taken before every request.
//
// Contract:
//  - acquire(deadline) never waits past `deadline`: when the token would
//    come later it fails at once, taking nothing. Waiters are served in
//    order. A wait that `cancel` interrupts fails ("cancelled") and gives
//    the token back.
//  - qps <= 0: no limit. Thread-safe; the clock is injectable (base/clock.h).
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

  Result<void> acquire(Clock::time_point deadline, std::stop_token cancel = {});

 private:
  std::shared_ptr<Clock> clock_;
  std::mutex mu_;
  std::condition_variable cancelled_;  // woken by a cancel token's stop
  TokenBucket bucket_;
};

}  // namespace ig::kube
