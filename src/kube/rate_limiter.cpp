#include "kube/rate_limiter.h"

#include <cstdio>
#include <string>

namespace ig::kube {

RateLimiter::RateLimiter(double qps, int burst, std::shared_ptr<Clock> clock)
    : clock_(clock ? std::move(clock) : Clock::steady()), bucket_(qps, burst, clock_->now()) {}

Result<void> RateLimiter::acquire(Clock::time_point deadline, std::stop_token cancel) {
  if (bucket_.unlimited()) return {};
  if (cancel.stop_requested()) return fail("cancelled before the client rate limit gave a slot");
  // Registered before the lock is taken: a token stopped meanwhile runs it at once.
  std::stop_callback wake(cancel, [this] {
    std::lock_guard lock(mu_);
    cancelled_.notify_all();
  });
  std::unique_lock lock(mu_);
  const Clock::time_point now = clock_->now();
  const Clock::duration wait = bucket_.delay(now);
  const Clock::time_point ready = now + wait;
  if (wait > Clock::duration::zero() && ready > deadline) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wait).count();
    char qps[32];
    std::snprintf(qps, sizeof qps, "%g", bucket_.qps());
    return fail("client rate limit (" + std::string(qps) + " QPS, burst " + std::to_string(bucket_.burst()) +
                "): the next slot is in " + std::to_string(ms) + " ms, after the deadline");
  }
  bucket_.reserve(now);  // paid for by the time we wait, if any
  while (clock_->now() < ready) {
    if (cancel.stop_requested()) {
      bucket_.cancel_reservation();
      return fail("cancelled while waiting for the client rate limit");
    }
    clock_->wait_until(lock, cancelled_, ready);
  }
  return {};
}

}  // namespace ig::kube
