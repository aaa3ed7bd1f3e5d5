// runtime::WorkQueue (runtime/work_queue.h): client-go's work queue semantics
// on the fake clock.
#include "runtime/work_queue.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime_test_support.h"

namespace ig::runtime {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using Queue = WorkQueue<std::string>;

struct QueueFixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  QueueMetrics metrics;
  Queue q{clock, {}, &metrics};
};

TEST(RuntimeWorkQueue, AKeyAddedTwiceIsQueuedOnce) {
  QueueFixture f;
  f.q.add("a");
  f.q.add("b");
  f.q.add("a");
  EXPECT_EQ(f.q.len(), 2u);
  EXPECT_EQ(f.metrics.adds.load(), 2u);
  EXPECT_EQ(f.q.get(), "a");
  EXPECT_EQ(f.q.get(), "b");
  EXPECT_EQ(f.q.len(), 0u);
}

TEST(RuntimeWorkQueue, AKeyInFlightIsNotHandedOutTwiceAndIsRequeuedOnceAfterDone) {
  QueueFixture f;
  f.q.add("a");
  ASSERT_EQ(f.q.get(), "a");
  f.q.add("a");  // while processing: marked, not queued
  f.q.add("a");
  EXPECT_EQ(f.q.len(), 0u);
  f.q.add("b");
  EXPECT_EQ(f.q.get(), "b");  // not "a" a second time
  f.q.done("a");
  EXPECT_EQ(f.q.len(), 1u);  // once, though added twice
  EXPECT_EQ(f.q.get(), "a");
  f.q.done("a");
  f.q.done("b");
  EXPECT_EQ(f.q.len(), 0u);
}

TEST(RuntimeWorkQueue, AddAfterReleasesInTimeOrderKeepingTheEarlierTime) {
  QueueFixture f;
  f.q.add_after("late", 3s);
  f.q.add_after("early", 1s);
  f.q.add_after("late", 5s);  // already due at 3 s: stays
  f.q.add_after("mid", 4s);
  f.q.add_after("mid", 2s);   // earlier: moves up
  EXPECT_EQ(f.q.len(), 0u);
  EXPECT_EQ(f.metrics.retries.load(), 5u);
  f.clock->advance(1s);
  EXPECT_EQ(f.q.len(), 1u);
  f.clock->advance(1s);
  EXPECT_EQ(f.q.len(), 2u);
  f.clock->advance(1s);
  EXPECT_EQ(f.q.len(), 3u);
  EXPECT_EQ(f.q.get(), "early");
  EXPECT_EQ(f.q.get(), "mid");
  EXPECT_EQ(f.q.get(), "late");
  f.q.add_after("now", 0s);  // no delay: add()
  EXPECT_EQ(f.q.len(), 1u);
}

TEST(RuntimeWorkQueue, AGetterWaitsForADelayedKeyOnTheClock) {
  QueueFixture f;
  f.q.add_after("a", 10s);
  std::optional<std::string> got;
  std::thread getter([&] { got = f.q.get(); });
  ASSERT_TRUE(eventually([&] { return f.clock->waiters() > 0; }));
  EXPECT_FALSE(got);
  f.clock->advance(10s);
  getter.join();
  EXPECT_EQ(got, "a");
  // The time it spent queued (released at once when due) is observed.
  std::string text;
  prometheus::TextWriter out(text);
  f.metrics.queue_duration.write(out, "d", {});
  EXPECT_NE(text.find("\nd_count 1\n"), std::string::npos) << text;
}

TEST(RuntimeWorkQueue, RateLimitedBackoffGrowsPerKeyAndForgetResetsIt) {
  QueueFixture f;
  const auto t0 = f.clock->now();
  f.q.add_rate_limited("a");  // 5 ms
  f.q.add_rate_limited("b");  // 5 ms (its own backoff)
  EXPECT_EQ(f.q.num_requeues("a"), 1u);
  f.clock->set(t0 + 5ms);
  EXPECT_EQ(f.q.len(), 2u);
  ASSERT_EQ(f.q.get(), "a");
  f.q.done("a");
  f.q.add_rate_limited("a");  // 10 ms
  f.clock->set(t0 + 14ms);
  EXPECT_EQ(f.q.len(), 1u);  // "b" only
  f.clock->set(t0 + 15ms);
  EXPECT_EQ(f.q.len(), 2u);
  EXPECT_EQ(f.q.num_requeues("a"), 2u);
  f.q.forget("a");
  EXPECT_EQ(f.q.num_requeues("a"), 0u);
  ASSERT_EQ(f.q.get(), "b");
  ASSERT_EQ(f.q.get(), "a");
  f.q.done("a");
  f.q.add_rate_limited("a");  // 5 ms again
  f.clock->advance(5ms);
  EXPECT_EQ(f.q.len(), 1u);
}

TEST(RuntimeWorkQueue, TheOverallBucketPacesRetriesOfManyKeys) {
  auto clock = std::make_shared<FakeClock>();
  RateLimitOptions limits;
  limits.qps = 1;
  limits.burst = 2;
  Queue q(clock, limits, nullptr);
  q.add_rate_limited("a");
  q.add_rate_limited("b");
  q.add_rate_limited("c");  // the bucket is empty: 1 s, more than c's 5 ms backoff
  clock->advance(5ms);
  EXPECT_EQ(q.len(), 2u);
  clock->advance(995ms);
  EXPECT_EQ(q.len(), 3u);
}

TEST(RuntimeWorkQueue, ShutDownWakesEveryGetterAndRefusesNewKeys) {
  QueueFixture f;
  std::vector<std::thread> getters;
  std::atomic<int> ended{0};
  for (int i = 0; i < 3; ++i)
    getters.emplace_back([&] {
      EXPECT_EQ(f.q.get(), std::nullopt);
      ++ended;
    });
  // Nothing is delayed: they wait on the queue's condition, not the clock;
  // shut_down() ends every get(), waiting already or not.
  std::this_thread::yield();
  f.q.shut_down();
  for (auto& t : getters) t.join();
  EXPECT_EQ(ended.load(), 3);
  f.q.add("late");
  f.q.add_after("later", 1s);
  EXPECT_EQ(f.q.len(), 0u);
  EXPECT_EQ(f.q.get(), std::nullopt);
}

TEST(RuntimeWorkQueue, KeysQueuedBeforeShutDownAreStillHandedOut) {
  QueueFixture f;
  f.q.add("a");
  f.q.add_after("delayed", 1s);
  f.q.shut_down();
  EXPECT_EQ(f.q.get(), "a");
  f.clock->advance(1s);
  EXPECT_EQ(f.q.get(), std::nullopt);  // delayed keys are dropped
}

}  // namespace
}  // namespace ig::runtime
