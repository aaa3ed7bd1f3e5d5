// The one token bucket (golang.org/x/time/rate's arithmetic): `qps` tokens a
// second, at most `burst` held (burst < 1: 1), full at the start; qps <= 0:
// no limit. Pure: the caller passes the time and holds its own lock.
// reserve(now) takes a token and returns how long until it is
// there (it may take the bucket below zero, so reservations are served in
// order); delay(now) says the same without taking; try_take(now) takes one
// only if it is there. An earlier `now` than the last refills nothing.
#pragma once

#include <algorithm>
#include <chrono>

namespace ig {

class TokenBucket {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = time_point::duration;

  TokenBucket(double qps, int burst, time_point start)
      : qps_(qps), burst_(std::max(1, burst)), tokens_(static_cast<double>(burst_)), last_(start) {}

  double qps() const noexcept { return qps_; }
  int burst() const noexcept { return burst_; }
  bool unlimited() const noexcept { return qps_ <= 0; }

  duration delay(time_point now) {
    if (unlimited()) return duration::zero();
    refill(now);
    if (tokens_ >= 1.0) return duration::zero();
    return std::chrono::duration_cast<duration>(std::chrono::duration<double>((1.0 - tokens_) / qps_));
  }

  duration reserve(time_point now) {
    const duration d = delay(now);
    if (!unlimited()) tokens_ -= 1.0;
    return d;
  }

  bool try_take(time_point now) {
    if (unlimited()) return true;
    refill(now);
    if (tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
  }

  // Gives back a reserved token that will not be used (a cancelled wait).
  void cancel_reservation() {
    if (!unlimited()) tokens_ = std::min(static_cast<double>(burst_), tokens_ + 1.0);
  }

 private:
  void refill(time_point now) {
    if (now <= last_) return;
    const double elapsed = std::chrono::duration<double>(now - last_).count();
    tokens_ = std::min(static_cast<double>(burst_), tokens_ + elapsed * qps_);
    last_ = now;
  }

  double qps_;
  int burst_;
  double tokens_;     // may go below zero: reserved by waiters
  time_point last_;   // when tokens_ was last brought up to date
};

}  // namespace ig
