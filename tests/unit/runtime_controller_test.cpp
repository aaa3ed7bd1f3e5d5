// runtime::Controller (runtime/controller.h): reconcile results turned into
// queue actions as controller-runtime's reconcileHandler does, workers, and
// the metrics' names (promtool's rules are checked by the e2e metrics test).
#include "runtime/controller.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "runtime_test_support.h"

namespace ig::runtime {
namespace {

using namespace std::chrono_literals;
using test::eventually;
using Ctl = Controller<std::string>;

// A reconciler whose answer per key is scripted and that counts its calls.
struct Script {
  std::mutex mu;
  std::map<std::string, std::vector<Result<Requeue>>> answers;  // consumed front first; then success
  std::map<std::string, int> calls;
  Result<Requeue> next(const std::string& key) {
    std::lock_guard lock(mu);
    ++calls[key];
    auto& a = answers[key];
    if (a.empty()) return Requeue{};
    Result<Requeue> r = a.front();
    a.erase(a.begin());
    return r;
  }
  int count(const std::string& key) {
    std::lock_guard lock(mu);
    return calls[key];
  }
};

struct Running {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  Script script;
  std::unique_ptr<Ctl> ctl;
  std::stop_source stop;
  std::thread thread;

  explicit Running(std::vector<std::string> initial = {}, std::size_t workers = 1) {
    Ctl::Options o;
    o.name = "test";
    o.workers = workers;
    o.clock = clock;
    o.reconcile = [this](const std::string& k, const CancelToken&) { return script.next(k); };
    o.initial_keys = [initial] { return initial; };
    ctl = std::make_unique<Ctl>(std::move(o));
  }
  void start() {
    thread = std::thread([this] { ctl->run(stop.get_token()); });
    ASSERT_TRUE(eventually([&] { return ctl->queue() != nullptr; }));
  }
  ~Running() {
    stop.request_stop();
    if (thread.joinable()) thread.join();
  }
  std::uint64_t outcome(ReconcileOutcome o) { return ctl->metrics()->reconciled(o); }
  std::uint64_t settled() {
    std::uint64_t n = 0;
    for (auto o : {ReconcileOutcome::Success, ReconcileOutcome::Error, ReconcileOutcome::Requeue,
                   ReconcileOutcome::RequeueAfter})
      n += outcome(o);
    return n;
  }
};

TEST(RuntimeController, InitialKeysAreReconciledAndSuccessForgets) {
  Running r({"a", "b"});
  r.start();
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Success) == 2; }));
  EXPECT_EQ(r.script.count("a"), 1);
  EXPECT_EQ(r.script.count("b"), 1);
  r.ctl->enqueue("a");
  ASSERT_TRUE(eventually([&] { return r.script.count("a") == 2; }));
}

TEST(RuntimeController, AnErrorIsRetriedWithGrowingBackoffThenForgotten) {
  Running r;
  r.script.answers["k"] = {fail("boom"), fail("boom"), Requeue{}};
  r.start();
  r.ctl->enqueue("k");
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Error) == 1; }));
  auto q = r.ctl->queue();
  auto retries = [&] { return r.ctl->metrics()->queue.retries.load(); };  // a retry is scheduled
  ASSERT_TRUE(eventually([&] { return retries() == 1; }));
  EXPECT_EQ(q->num_requeues("k"), 1u);
  r.clock->advance(5ms);  // the first retry: 5 ms
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Error) == 2; }));
  ASSERT_TRUE(eventually([&] { return retries() == 2; }));
  r.clock->advance(5ms);  // the second waits 10 ms
  EXPECT_EQ(r.script.count("k"), 2);
  EXPECT_EQ(q->len(), 0u);
  r.clock->advance(5ms);
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Success) == 1; }));
  EXPECT_EQ(r.script.count("k"), 3);
  EXPECT_EQ(q->num_requeues("k"), 0u);  // success forgets
  EXPECT_EQ(r.ctl->metrics()->reconciled(ReconcileOutcome::Error), 2u);
}

TEST(RuntimeController, RequeueAfterForgetsAndWaitsExactlyThatLong) {
  Running r;
  r.script.answers["k"] = {fail("once"), Requeue{false, 30s}};
  r.start();
  r.ctl->enqueue("k");
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Error) == 1; }));
  auto q = r.ctl->queue();
  auto retries = [&] { return r.ctl->metrics()->queue.retries.load(); };  // a retry is scheduled
  ASSERT_TRUE(eventually([&] { return retries() == 1; }));
  r.clock->advance(5ms);
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::RequeueAfter) == 1; }));
  EXPECT_EQ(q->num_requeues("k"), 0u);
  ASSERT_TRUE(eventually([&] { return retries() == 2; }));
  r.clock->advance(29s);
  EXPECT_EQ(r.script.count("k"), 2);
  r.clock->advance(1s);
  ASSERT_TRUE(eventually([&] { return r.script.count("k") == 3; }));
}

TEST(RuntimeController, RequeueIsRateLimitedAndAnExceptionIsAnError) {
  Running r;
  r.script.answers["k"] = {Requeue{true, {}}};
  r.start();
  r.ctl->enqueue("k");
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Requeue) == 1; }));
  auto q = r.ctl->queue();
  EXPECT_EQ(q->num_requeues("k"), 1u);
  r.clock->advance(5ms);
  ASSERT_TRUE(eventually([&] { return r.outcome(ReconcileOutcome::Success) == 1; }));

  Ctl::Options o;
  o.name = "throws";
  o.clock = r.clock;
  o.reconcile = [](const std::string&, const CancelToken&) -> Result<Requeue> { throw std::runtime_error("x"); };
  o.initial_keys = [] { return std::vector<std::string>{"a"}; };
  Ctl throwing(std::move(o));
  std::stop_source stop;
  std::thread t([&] { throwing.run(stop.get_token()); });
  ASSERT_TRUE(eventually([&] { return throwing.metrics()->reconciled(ReconcileOutcome::Error) == 1; }));
  stop.request_stop();
  t.join();
}

TEST(RuntimeController, WorkersRunInParallelButNeverOneKeyTwiceAtOnce) {
  std::mutex mu;
  std::set<std::string> busy;
  std::atomic<int> overlap{0}, max_parallel{0}, calls{0};
  Ctl::Options o;
  o.name = "parallel";
  o.workers = 4;
  o.clock = std::make_shared<FakeClock>();
  o.reconcile = [&](const std::string& k, const CancelToken&) -> Result<Requeue> {
    {
      std::lock_guard lock(mu);
      if (!busy.insert(k).second) ++overlap;
      max_parallel = std::max<int>(max_parallel, static_cast<int>(busy.size()));
    }
    std::this_thread::sleep_for(1ms);
    {
      std::lock_guard lock(mu);
      busy.erase(k);
    }
    ++calls;
    return Requeue{};
  };
  Ctl ctl(std::move(o));
  std::stop_source stop;
  std::thread t([&] { ctl.run(stop.get_token()); });
  ASSERT_TRUE(eventually([&] { return ctl.queue() != nullptr; }));
  for (int round = 0; round < 50; ++round)
    for (const char* k : {"a", "b", "c", "d"}) ctl.enqueue(k);
  ASSERT_TRUE(eventually([&] { return ctl.queue()->len() == 0 && calls >= 4; }));
  stop.request_stop();
  t.join();
  EXPECT_EQ(overlap.load(), 0);
  EXPECT_GE(calls.load(), 4);
}

TEST(RuntimeController, StopEndsRunAndKeysAfterItAreDropped) {
  Running r;
  std::atomic<bool> in{false};
  std::atomic<bool> saw_cancel{false};
  Ctl::Options o;
  o.name = "blocking";
  o.clock = r.clock;
  o.reconcile = [&](const std::string&, const CancelToken& cancel) -> Result<Requeue> {
    in = true;
    // Blocks until cancelled (bounded: 10 s of real time).
    eventually([&] { return cancel.stop_requested(); });
    saw_cancel = cancel.stop_requested();
    return Requeue{};
  };
  Ctl ctl(std::move(o));
  std::stop_source stop;
  std::thread t([&] { ctl.run(stop.get_token()); });
  ASSERT_TRUE(eventually([&] { return ctl.queue() != nullptr; }));
  ctl.enqueue("a");
  ctl.enqueue("b");
  ASSERT_TRUE(eventually([&] { return in.load(); }));
  stop.request_stop();
  t.join();
  EXPECT_TRUE(saw_cancel);
  EXPECT_EQ(ctl.queue(), nullptr);
  ctl.enqueue("c");  // between terms: dropped, no crash
  EXPECT_EQ(ctl.metrics()->reconciled(ReconcileOutcome::Success), 1u);  // "b" was never reconciled
}

TEST(RuntimeController, MetricsAreWrittenOncePerFamilyForAllControllers) {
  Running a({"x"});
  a.start();
  ASSERT_TRUE(eventually([&] { return a.settled() == 1; }));
  Ctl::Options o;
  o.name = "other";
  o.reconcile = [](const std::string&, const CancelToken&) { return Result<Requeue>(Requeue{}); };
  Ctl b(std::move(o));
  std::string text;
  prometheus::TextWriter out(text);
  write_controller_metrics(out, {a.ctl->metrics(), b.metrics()});
  for (const char* family :
       {"controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
        "controller_runtime_reconcile_time_seconds", "workqueue_depth", "workqueue_adds_total",
        "workqueue_retries_total", "workqueue_queue_duration_seconds"}) {
    const std::string type = std::string("# TYPE ") + family + " ";
    const auto first = text.find(type);
    ASSERT_NE(first, std::string::npos) << family;
    EXPECT_EQ(text.find(type, first + 1), std::string::npos) << family << " twice";
  }
  EXPECT_NE(text.find("controller_runtime_reconcile_total{controller=\"test\",result=\"success\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("controller_runtime_reconcile_total{controller=\"other\",result=\"error\"} 0\n"),
            std::string::npos);
  EXPECT_NE(text.find("workqueue_adds_total{name=\"test\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("workqueue_queue_duration_seconds_count{name=\"test\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace ig::runtime
