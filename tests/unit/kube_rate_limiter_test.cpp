// The client-side token bucket (kube/rate_limiter.h) on a fake clock: no test
// sleeps; the fake's sleep_until() moves its time. acquire(now) takes a token
// only if one is there now.
#include "kube/rate_limiter.h"

#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <thread>
#include <vector>

namespace ig::kube {
namespace {

using namespace std::chrono_literals;

TEST(KubeRateLimiter, DefaultsAreClientGos) {
  RateLimiter limiter;
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(limiter.acquire(Clock::steady()->now()));
  auto r = limiter.acquire(Clock::steady()->now());  // the 11th: 200 ms away
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("client rate limit (5 QPS, burst 10)"), std::string::npos) << r.error();
}

TEST(KubeRateLimiter, BurstIsFreeThenQpsPaces) {
  auto clock = FakeClock::make_jumping();
  RateLimiter limiter(5, 10, clock);
  const auto far = clock->now() + 1h;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(limiter.acquire(far));
  EXPECT_TRUE(clock->waits().empty());
  // The 11th waits one token's time: 200 ms at 5 QPS; then 200 ms each.
  ASSERT_TRUE(limiter.acquire(far));
  ASSERT_TRUE(limiter.acquire(far));
  const auto sleeps = clock->waits();
  ASSERT_EQ(sleeps.size(), 2u);
  EXPECT_NEAR(std::chrono::duration<double>(sleeps[0]).count(), 0.2, 1e-6);
  EXPECT_NEAR(std::chrono::duration<double>(sleeps[1]).count(), 0.2, 1e-6);
}

TEST(KubeRateLimiter, RefillsUpToBurstOnly) {
  auto clock = FakeClock::make_jumping();
  RateLimiter limiter(5, 3, clock);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.acquire(clock->now()));
  EXPECT_FALSE(limiter.acquire(clock->now()));
  clock->advance(200ms);
  EXPECT_TRUE(limiter.acquire(clock->now()));
  EXPECT_FALSE(limiter.acquire(clock->now()));
  clock->advance(1h);  // a long idle time refills to the burst, not beyond
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.acquire(clock->now()));
  EXPECT_FALSE(limiter.acquire(clock->now()));
}

TEST(KubeRateLimiter, NeverWaitsPastTheDeadline) {
  auto clock = FakeClock::make_jumping();
  RateLimiter limiter(1, 1, clock);
  ASSERT_TRUE(limiter.acquire(clock->now()));
  // The next token is 1 s away; a 500 ms deadline fails at once, takes nothing.
  auto r = limiter.acquire(clock->now() + 500ms);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().find("client rate limit (1 QPS, burst 1)"), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("1000 ms"), std::string::npos) << r.error();
  EXPECT_TRUE(clock->waits().empty());
  // A refused call reserved nothing: after 1 s a token is there without waiting.
  clock->advance(1s);
  EXPECT_TRUE(limiter.acquire(clock->now()));
}

TEST(KubeRateLimiter, ReservationsQueueInOrder) {
  auto clock = FakeClock::make_jumping();
  RateLimiter limiter(10, 1, clock);
  ASSERT_TRUE(limiter.acquire(clock->now()));
  // Three callers in a row reserve 100, 200, 300 ms from "now" (the fake
  // clock moves to each slot as it sleeps, so the waits are 100 ms apart).
  const auto start = clock->now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(limiter.acquire(start + 1h));
  EXPECT_NEAR(std::chrono::duration<double>(clock->now() - start).count(), 0.3, 1e-6);
}

TEST(KubeRateLimiter, ZeroQpsIsUnlimitedAndBurstAtLeastOne) {
  auto clock = FakeClock::make_jumping();
  RateLimiter unlimited(0, 0, clock);
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(unlimited.acquire(clock->now()));
  EXPECT_TRUE(clock->waits().empty());
  RateLimiter one(5, 0, clock);
  EXPECT_TRUE(one.acquire(clock->now()));
  EXPECT_FALSE(one.acquire(clock->now()));
  EXPECT_NE(one.acquire(clock->now()).error().find("(5 QPS, burst 1)"), std::string::npos);
}

// A wait with a cancel token runs on the clock's wait_until (ig::FakeClock
// here): stopping the token ends it with an error and gives the reserved
// token back; otherwise it ends when the clock reaches the slot.
TEST(KubeRateLimiter, CancelEndsTheWaitAndGivesTheTokenBack) {
  auto clock = std::make_shared<ig::FakeClock>();
  RateLimiter limiter(1, 1, clock);
  ASSERT_TRUE(limiter.acquire(clock->now()));
  auto wait_for_waiter = [&] {
    for (int i = 0; i < 5000 && clock->waiters() == 0; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_GT(clock->waiters(), 0u);
  };

  std::stop_source stop;
  std::optional<Result<void>> got;
  std::thread waiter([&] { got.emplace(limiter.acquire(clock->now() + 1h, stop.get_token())); });
  wait_for_waiter();
  stop.request_stop();
  waiter.join();
  ASSERT_TRUE(got && !*got);
  EXPECT_NE(got->error().find("cancelled"), std::string::npos) << got->error();
  EXPECT_FALSE(limiter.acquire(clock->now(), std::stop_token{}));  // still empty now
  clock->advance(1s);
  EXPECT_TRUE(limiter.acquire(clock->now()));  // the cancelled reservation was given back

  std::stop_source keep;
  got.reset();
  std::thread slot([&] { got.emplace(limiter.acquire(clock->now() + 1h, keep.get_token())); });
  wait_for_waiter();
  clock->advance(1s);
  slot.join();
  ASSERT_TRUE(got);
  EXPECT_TRUE(*got);
}

TEST(KubeRateLimiter, RealClockShortWaitIsBounded) {
  // The steady clock: a 1000 QPS limiter with burst 1 waits ~1 ms; the call
  // must return (bounded by its deadline), whatever the machine's load.
  RateLimiter limiter(1000, 1);
  ASSERT_TRUE(limiter.acquire(std::chrono::steady_clock::now() + 5s));
  EXPECT_TRUE(limiter.acquire(std::chrono::steady_clock::now() + 5s));
}

}  // namespace
}  // namespace ig::kube
