// runtime::Manager (runtime/manager.h): caches first and synced before the
// leader's runnables, leader runnables only while leading, cancelled (with
// the API calls they have in flight) when leadership is lost, everything
// stopped in reverse order.
#include "runtime/manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <thread>
#include <mutex>
#include <string>
#include <vector>

#include "fake_kube_client.h"
#include "runtime_test_support.h"

namespace ig::runtime {
namespace {

using namespace std::chrono_literals;
using test::eventually;

// Records "start NAME" / "stop NAME" in one shared log.
class Journal {
 public:
  void add(std::string line) {
    std::lock_guard lock(mu_);
    lines_.push_back(std::move(line));
  }
  std::vector<std::string> lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

class Loop final : public Runnable {
 public:
  Loop(std::string name, Journal& journal, bool synced = true) : name_(std::move(name)), journal_(journal), synced_(synced) {}
  std::string_view name() const override { return name_; }
  bool synced() const override { return synced_; }
  void set_synced() { synced_ = true; }
  int runs() const { return runs_; }
  void run(CancelToken stop) override {
    ++runs_;
    journal_.add("start " + name_);
    eventually([&] { return stop.stop_requested(); });
    journal_.add("stop " + name_);
  }

 private:
  std::string name_;
  Journal& journal_;
  std::atomic<bool> synced_;
  std::atomic<int> runs_{0};
};

TEST(RuntimeManager, CachesSyncFirstLeaderLoopsRunWhileLeadingAndAllStopInReverse) {
  Journal j;
  auto cache = std::make_shared<Loop>("cache", j, /*synced=*/false);
  auto other = std::make_shared<Loop>("webhook-certs", j);
  auto status = std::make_shared<Loop>("status", j);
  auto drift = std::make_shared<Loop>("drift", j);
  auto clock = std::make_shared<FakeClock>();
  Manager m(ManagerOptions{clock, {}});
  m.add(cache, false);
  m.add(other, false);
  m.add(status, true);
  m.add(drift, true);

  m.start_leading();  // before start(): nothing
  EXPECT_FALSE(m.leading());

  std::optional<Result<void>> started;
  std::thread starter([&] { started.emplace(m.start()); });
  ASSERT_TRUE(eventually([&] { return j.lines().size() == 2; }));
  EXPECT_FALSE(started);  // waits for the cache
  cache->set_synced();
  starter.join();
  ASSERT_TRUE(started && *started);

  m.start_leading();
  ASSERT_TRUE(eventually([&] { return j.lines().size() == 4; }));
  EXPECT_TRUE(m.leading());
  m.stop_leading();  // returns when both leader loops ended
  EXPECT_EQ(j.lines().size(), 6u);
  EXPECT_FALSE(m.leading());
  EXPECT_EQ(cache->runs(), 1);

  m.start_leading();  // a second term: run() again
  ASSERT_TRUE(eventually([&] { return status->runs() == 2 && drift->runs() == 2; }));
  m.stop();
  // Within a group the loops run on threads of their own, so the lines of
  // one step (the starts of a term, its stops: all are cancelled at once)
  // may interleave; the steps follow one another, and the other runnables
  // stop one by one, the last added first.
  std::vector<std::string> want = {"start cache",  "start webhook-certs", "start drift", "start status",
                                   "stop drift",   "stop status",        "start drift", "start status",
                                   "stop drift",   "stop status",        "stop webhook-certs", "stop cache"};
  auto got = j.lines();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t at : {0u, 2u, 4u, 6u, 8u}) {
    std::sort(got.begin() + static_cast<long>(at), got.begin() + static_cast<long>(at) + 2);
    std::sort(want.begin() + static_cast<long>(at), want.begin() + static_cast<long>(at) + 2);
  }
  EXPECT_EQ(got, want);
  m.start_leading();  // after stop(): nothing
  EXPECT_FALSE(m.leading());
}

TEST(RuntimeManager, ACacheThatNeverSyncsFailsStartAfterTheBound) {
  Journal j;
  auto cache = std::make_shared<Loop>("pods", j, /*synced=*/false);
  auto clock = std::make_shared<FakeClock>();
  Manager m(ManagerOptions{clock, {}});
  m.add(cache, false);
  std::optional<Result<void>> started;
  std::thread starter([&] { started.emplace(m.start()); });
  ASSERT_TRUE(eventually([&] { return clock->waiters() > 0; }));
  clock->advance(120s);
  starter.join();
  ASSERT_TRUE(started);
  ASSERT_FALSE(*started);
  EXPECT_NE(started->error().find("pods"), std::string::npos) << started->error();
  m.stop();
  EXPECT_EQ(j.lines().back(), "stop pods");
}

class Writer final : public Runnable {
 public:
  explicit Writer(kube::Client& c) : client_(c) {}
  std::string_view name() const override { return "writer"; }
  void run(CancelToken stop) override {
    while (!stop.stop_requested()) (void)client_.patch("/x", kube::PatchType::Merge, {}, stop);
  }

 private:
  kube::Client& client_;
};

TEST(RuntimeManager, LosingLeadershipCancelsTheRequestsInFlight) {
  // A PATCH blocks until its call is cancelled: what an API server that
  // stopped answering looks like to a leader that just lost its Lease.
  kube::fake::FakeClient client;
  std::atomic<int> patches_cancelled{0};
  client.prepend_reactor("patch", "", [&](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
    kube::fake::Gate never;
    never.wait(a.cancel);
    ++patches_cancelled;
    return kube::ApiError{"PATCH " + a.path + ": cancelled", 0, "Cancelled", {}};
  });
  auto clock = std::make_shared<FakeClock>();
  Manager m(ManagerOptions{clock, {}});
  m.add(std::make_shared<Writer>(client), true);
  ASSERT_TRUE(m.start());
  auto callbacks = m.leader_callbacks();  // as the elector calls them
  callbacks.on_started_leading();
  ASSERT_TRUE(eventually([&] { return client.count("patch") == 1; }));
  callbacks.on_stopped_leading();  // returns only once the writer has ended
  EXPECT_EQ(patches_cancelled.load(), 1);
  EXPECT_EQ(client.count("patch"), 1u);  // none sent after
  m.stop();
}

}  // namespace
}  // namespace ig::runtime
