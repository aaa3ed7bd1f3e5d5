// base/clock.h, base/backoff.h, base/token_bucket.h: the engine's time (and the wall time), its
// per-key backoff and its token bucket, on the fake clock (no test sleeps on
// the clock it tests).
#include "base/backoff.h"
#include "base/clock.h"
#include "base/token_bucket.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>

namespace ig {
namespace {

using namespace std::chrono_literals;

TEST(BaseClock, FakeMovesOnlyWhenTold) {
  FakeClock clock;
  const auto t0 = clock.now();
  EXPECT_EQ(clock.now(), t0);
  clock.advance(5s);
  EXPECT_EQ(clock.now(), t0 + 5s);
  clock.sleep_until(t0 + 7s);
  EXPECT_EQ(clock.now(), t0 + 7s);
  clock.set(t0);  // never backwards
  EXPECT_EQ(clock.now(), t0 + 7s);
}

TEST(BaseClock, FakeWallMovesWithItsTimeAndAJumpingFakeRecordsItsWaits) {
  const std::chrono::system_clock::time_point w0{std::chrono::seconds(1'796'467'000)};
  FakeClock clock(FakeClock::kStart, w0);
  EXPECT_EQ(clock.wall(), w0);
  clock.advance(90s);
  EXPECT_EQ(clock.wall(), w0 + 90s);
  EXPECT_EQ(FakeClock().wall(), FakeClock::kWallStart);

  auto jumping = FakeClock::make_jumping();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  const auto t0 = jumping->now();
  jumping->wait_until(lock, cv, t0 + 3s);  // returns at once, the time moved to the deadline
  EXPECT_EQ(jumping->now(), t0 + 3s);
  jumping->sleep_until(t0 + 5s);
  jumping->wait_until(lock, cv, t0 + 1s);  // past: asks for -4 s, moves nothing
  EXPECT_EQ(jumping->now(), t0 + 5s);
  EXPECT_EQ(jumping->waits(), (std::vector<Clock::duration>{3s, 2s, -4s}));
  EXPECT_EQ(jumping->wall(), FakeClock::kWallStart + 5s);
}

TEST(BaseClock, FakeWakesAWaiterWhenItsDeadlinePasses) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  const auto deadline = clock.now() + 1h;
  bool woke = false;
  std::thread waiter([&] {
    std::unique_lock lock(mu);
    while (clock.now() < deadline) clock.wait_until(lock, cv, deadline);
    woke = true;
  });
  for (int i = 0; i < 5000 && clock.waiters() == 0; ++i) std::this_thread::sleep_for(1ms);
  EXPECT_GT(clock.waiters(), 0u);
  clock.advance(1h);
  waiter.join();
  EXPECT_TRUE(woke);
  EXPECT_EQ(clock.waiters(), 0u);
}

TEST(BaseClock, SteadyWaitReturnsAtItsDeadline) {
  auto clock = Clock::steady();
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock lock(mu);
  const auto deadline = clock->now() + 2ms;
  while (clock->now() < deadline) clock->wait_until(lock, cv, deadline);
  EXPECT_GE(clock->now(), deadline);
}

TEST(BaseBackoff, DoublesPerFailureUpToTheMaxAndForgetStartsOver) {
  ItemBackoff<std::string> b;  // client-go's defaults: 5 ms .. 1000 s
  EXPECT_EQ(b.next("a"), 5ms);
  EXPECT_EQ(b.next("a"), 10ms);
  EXPECT_EQ(b.next("a"), 20ms);
  EXPECT_EQ(b.next("b"), 5ms);  // per key
  EXPECT_EQ(b.failures("a"), 3u);
  for (int i = 0; i < 100; ++i) (void)b.next("a");
  EXPECT_EQ(b.next("a"), 1000s);  // capped, no overflow after many failures
  b.forget("a");
  EXPECT_EQ(b.failures("a"), 0u);
  EXPECT_EQ(b.next("a"), 5ms);

  ItemBackoff<std::string> custom(BackoffOptions{500ms, 30s});
  EXPECT_EQ(custom.next("k"), 500ms);
  for (int i = 0; i < 10; ++i) (void)custom.next("k");
  EXPECT_EQ(custom.next("k"), 30s);
}

TEST(BaseTokenBucket, BurstThenPacedReservationsInOrder) {
  const TokenBucket::time_point t0{1h};
  TokenBucket bucket(10, 2, t0);
  EXPECT_EQ(bucket.reserve(t0), 0ns);
  EXPECT_EQ(bucket.reserve(t0), 0ns);
  EXPECT_EQ(bucket.reserve(t0), 100ms);  // below zero: reserved in order
  EXPECT_EQ(bucket.reserve(t0), 200ms);
  EXPECT_FALSE(bucket.try_take(t0 + 150ms));
  EXPECT_TRUE(bucket.try_take(t0 + 300ms));
  bucket.cancel_reservation();
  EXPECT_TRUE(bucket.try_take(t0 + 300ms));
  TokenBucket unlimited(0, 0, t0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(unlimited.reserve(t0), 0ns);
}

}  // namespace
}  // namespace ig
