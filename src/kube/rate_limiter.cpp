#include "kube/rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>

namespace ig::kube {
namespace {

class SteadyClock final : public RateClock {
 public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  void sleep_until(time_point t) override { std::this_thread::sleep_until(t); }
};

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::shared_ptr<RateClock> RateClock::steady() {
  static const std::shared_ptr<RateClock> kClock = std::make_shared<SteadyClock>();
  return kClock;
}

RateLimiter::RateLimiter(double qps, int burst, std::shared_ptr<RateClock> clock)
    : qps_(qps),
      burst_(std::max(1, burst)),
      clock_(clock ? std::move(clock) : RateClock::steady()),
      tokens_(static_cast<double>(burst_)),
      last_(clock_->now()) {}

void RateLimiter::refill_locked(RateClock::time_point now) {
  if (now <= last_) return;
  const double elapsed = std::chrono::duration<double>(now - last_).count();
  tokens_ = std::min(static_cast<double>(burst_), tokens_ + elapsed * qps_);
  last_ = now;
}

bool RateLimiter::try_acquire() {
  if (qps_ <= 0) return true;
  std::lock_guard lock(mu_);
  refill_locked(clock_->now());
  if (tokens_ < 1.0) return false;
  tokens_ -= 1.0;
  return true;
}

Result<void> RateLimiter::acquire(RateClock::time_point deadline) {
  if (qps_ <= 0) return {};
  RateClock::time_point ready;
  {
    std::lock_guard lock(mu_);
    const RateClock::time_point now = clock_->now();
    refill_locked(now);
    if (tokens_ >= 1.0) {
      tokens_ -= 1.0;
      return {};
    }
    const double wait_s = (1.0 - tokens_) / qps_;
    const auto wait = std::chrono::duration_cast<RateClock::time_point::duration>(
        std::chrono::duration<double>(wait_s));
    ready = now + wait;
    if (ready > deadline) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(wait).count();
      return fail("client rate limit (" + number(qps_) + " QPS, burst " +
                  std::to_string(burst_) + "): the next slot is in " + std::to_string(ms) +
                  " ms, after the deadline");
    }
    tokens_ -= 1.0;  // reserved; paid for by the time we wait
  }
  clock_->sleep_until(ready);
  return {};
}

}  // namespace ig::kube
