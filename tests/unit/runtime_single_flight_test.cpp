// runtime::SingleFlight (src/runtime/single_flight.h): concurrent calls of one
// key make one call; a kept answer is served until `remember` has passed on
// the injected clock, an answer not kept never is; a waiter past its bound
// gets no answer (nullopt) rather than waiting on.
#include "runtime/single_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>
#include <vector>

#include "runtime_test_support.h"

namespace ig::runtime {
namespace {

using namespace std::chrono_literals;
TEST(SingleFlight, ConcurrentCallsOfOneKeyShareOneCall) {
  SingleFlight<int> flights(0ms, 16, std::make_shared<FakeClock>());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  auto slow = [&] {
    ++calls;
    released.wait_for(10s);  // bounded
    return 42;
  };
  auto keep = [](const int&) { return true; };
  std::vector<std::future<std::optional<int>>> answers;
  answers.push_back(std::async(std::launch::async, [&] { return flights.run("a", 10s, slow, keep); }));
  ASSERT_TRUE(test::eventually([&] { return calls.load() == 1; }));
  for (int i = 0; i < 7; ++i)
    answers.push_back(std::async(std::launch::async, [&] { return flights.run("a", 10s, slow, keep); }));
  ASSERT_TRUE(test::eventually([&] { return flights.shared() == 7; }));
  release.set_value();
  for (auto& a : answers) EXPECT_EQ(a.get(), std::optional<int>(42));
  EXPECT_EQ(calls.load(), 1);
  // remember == 0: the next call makes its own
  EXPECT_EQ(flights.run("a", 1s, [&] { ++calls; return 7; }, keep), std::optional<int>(7));
  EXPECT_EQ(calls.load(), 2);
}

TEST(SingleFlight, AKeptAnswerIsServedForRememberAndAnUnkeptOneNever) {
  auto clock = std::make_shared<FakeClock>();
  SingleFlight<int> flights(1000ms, 16, clock);
  int calls = 0;
  auto fn = [&] { return ++calls; };
  auto keep_odd = [](const int& v) { return v % 2 == 1; };
  EXPECT_EQ(flights.run("k", 1s, fn, keep_odd), std::optional<int>(1));  // kept
  clock->advance(999ms);
  EXPECT_EQ(flights.run("k", 1s, fn, keep_odd), std::optional<int>(1));  // served, no call
  EXPECT_EQ(calls, 1);
  clock->advance(1ms);
  EXPECT_EQ(flights.run("k", 1s, fn, keep_odd), std::optional<int>(2));  // expired: called; 2 not kept
  EXPECT_EQ(flights.run("k", 1s, fn, keep_odd), std::optional<int>(3));
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(flights.run("other", 1s, fn, keep_odd), std::optional<int>(4));  // keys are apart
}

TEST(SingleFlight, AWaiterPastItsBoundGetsNoAnswer) {
  // Jumping: the waiter's bound has passed as soon as it waits.
  SingleFlight<int> flights(0ms, 16, FakeClock::make_jumping());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> started{false};
  auto first = std::async(std::launch::async, [&] {
    return flights.run("a", 10s, [&] { started = true; released.wait_for(10s); return 1; },
                       [](const int&) { return true; });
  });
  ASSERT_TRUE(test::eventually([&] { return started.load(); }));
  EXPECT_EQ(flights.run("a", 1ms, [] { return 2; }, [](const int&) { return true; }), std::nullopt);
  release.set_value();
  EXPECT_EQ(first.get(), std::optional<int>(1));
}

}  // namespace
}  // namespace ig::runtime
