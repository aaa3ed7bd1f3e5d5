// The Component status loop (src/controller/status_writer.h), a reconciler on
// the engine's manager, against an in-memory API: one write per change, none
// when the cache already holds the status, a status overwritten elsewhere
// corrected, retries, no write while not ready or after leadership is lost
// (the write in flight cancelled), and sweeps debounced (on the fake clock).
#include "controller/status_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <set>
#include <mutex>
#include <thread>

#include "admission/context.h"
#include "controller/cluster.h"
#include "fake_kube_client.h"
#include "runtime/manager.h"
#include "runtime_test_support.h"

namespace ig::controller {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

kube::ApiError refused() { return kube::ApiError{"not in this test", 501, {}, {}}; }

// Status writes (server-side apply) as reactors on the one fake client,
// which records them: answered from a script (default: success, the body
// and the `co_owned` fields), held in flight while `hold` is set.
struct PatchRecorder {
  kube::fake::FakeClient client;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> answers;
  bool hold = false;
  std::map<std::string, int> in_flight;  // by path
  int in_flight_total = 0, max_in_flight = 0;
  bool overlapped = false;  // two writes of one Component at once
  json co_owned = json::object();  // status fields the apply's answer keeps

  PatchRecorder() {
    client.prepend_reactor("patch", "", [this](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      std::lock_guard lock(mu_);
      if (co_owned.empty() || a.patch_type != kube::PatchType::Merge) {
        ADD_FAILURE() << "status is written with server-side apply, not a patch: " << a.path;
        return refused();
      }
      return a.body;
    });
    client.prepend_reactor("apply", "", [this](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      std::unique_lock lock(mu_);
      EXPECT_EQ(a.field_manager, "isolation-gate");
      EXPECT_TRUE(a.force);
      EXPECT_EQ(a.body["apiVersion"], "gibson.zeroroot.ai/v1alpha1");
      EXPECT_EQ(a.body["kind"], "Component");
      EXPECT_EQ(a.body["metadata"].size(), 2u);  // name and namespace only
      if (++in_flight[a.path] > 1) overlapped = true;
      ++in_flight_total;
      max_in_flight = std::max(max_in_flight, in_flight_total);
      cv_.notify_all();
      // Held writes stay in flight until release() (bounded).
      cv_.wait_for(lock, 10s, [&] { return !hold; });
      --in_flight[a.path];
      --in_flight_total;
      if (!answers.empty()) {
        int code = answers.front();
        answers.pop_front();
        if (code != 200) return kube::ApiError{"PATCH " + a.path + ": " + std::to_string(code), code, {}, {}};
      }
      json answer = a.body;
      for (const auto& [k, v] : co_owned.items())  // an earlier version's merge patches co-own these
        if (!answer["status"].contains(k)) answer["status"][k] = v;
      return answer;
    });
  }
  std::size_t count() const { return client.count("apply"); }
  bool wait_for(std::size_t n) { return client.wait_actions(n, "apply"); }
  // Waits (bounded) until `n` writes are in flight at once.
  bool wait_in_flight(int n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return in_flight_total >= n; });
  }
  void release() {
    std::lock_guard lock(mu_);
    hold = false;
    cv_.notify_all();
  }
  json last_status() const { return client.actions("apply").back().body["status"]; }
  std::vector<kube::fake::Action> patches() const { return client.actions("apply"); }
  std::vector<json> merges() const {  // the leftover merge patches
    std::vector<json> out;
    for (const auto& a : client.actions("patch")) out.push_back(a.body);
    return out;
  }
};

class Sandbox final : public admission::SandboxView {
 public:
  policy::SandboxAvailability availability() const noexcept override { return a.load(); }
  std::string describe() const override { return "test"; }
  std::atomic<policy::SandboxAvailability> a{policy::SandboxAvailability::Available};
};

json component(const std::string& name, const std::string& trust, json status = nullptr) {
  json c = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
            {"kind", "Component"},
            {"metadata", {{"name", name}, {"namespace", "team-a"}, {"uid", "u-" + name}, {"generation", 1}}},
            {"spec", {{"kind", "tool"}, {"policy", {{"content_trust", trust}}}}}};
  if (!status.is_null()) c["status"] = status;
  return c;
}

struct Fixture {
  PatchRecorder api;
  Sandbox sandbox;
  kube::Store<ComponentRecord> store{decode_component_record};
  std::atomic<bool> ready{true};
  std::unique_ptr<StatusWriter> writer;
  runtime::Manager manager;

  explicit Fixture(const std::vector<json>& components, std::size_t workers = 1) {
    store.begin_replace();
    for (const auto& c : components) store.add_listed(c);
    store.end_replace("1");
    StatusWriterOptions o;
    o.runtime_class = "kata-fc";
    o.ready = [this] { return ready.load(); };
    o.retry_initial = 1ms;
    o.retry_max = 5ms;
    o.workers = workers;
    o.sweep_interval = 0ms;  // not debounced here (see SweepsAreDebounced)
    writer = std::make_unique<StatusWriter>(api.client, store, sandbox, std::move(o));
    manager.add(writer->runnable(), /*needs_leader=*/true);
    EXPECT_TRUE(manager.start());
  }
  ~Fixture() { manager.stop(); }
  // A term of leadership, as the elector starts and ends it.
  void start() { manager.start_leading(); }
  void stop() { manager.stop_leading(); }
  // Waits (bounded) until the writer has looked at `n` keys in all.
  bool processed(std::uint64_t n) {
    for (int i = 0; i < 1000; ++i) {
      auto s = writer->stats();
      if (s.writes + s.unchanged + s.errors >= n && s.queued == 0) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  // What the watch would bring back after our write.
  void echo_last_write(const std::string& name, const std::string& trust) {
    store.apply(kube::WatchEvent::Type::Modified, component(name, trust, api.last_status()));
  }
  // The same for the last write of `name` (whatever was written after it).
  void echo_write_of(const std::string& name, const std::string& trust) {
    json status;
    for (const auto& a : api.patches())
      if (a.path.find("/components/" + name + "/") != std::string::npos) status = a.body["status"];
    store.apply(kube::WatchEvent::Type::Modified, component(name, trust, status));
  }
};

TEST(StatusWriter, WritesEachComponentOnceThenNothingWhenNothingChanged) {
  Fixture f(std::vector<json>{component("a", "untrusted"), component("b", "trusted")});
  f.start();
  ASSERT_TRUE(f.api.wait_for(2));
  ASSERT_TRUE(f.processed(2));
  EXPECT_EQ(f.api.patches()[0].path.find("/apis/gibson.zeroroot.ai/v1alpha1/namespaces/team-a/components/"), 0u);
  EXPECT_NE(f.api.patches()[0].path.find("/status"), std::string::npos);
  // Enqueued again before the watch shows the write: nothing new.
  f.writer->enqueue("team-a/a");
  f.writer->enqueue_all();  // "a" may be merged with the one queued above
  ASSERT_TRUE(f.processed(4));
  EXPECT_EQ(f.api.count(), 2u);
  // The watch shows it; still nothing.
  const auto s = f.writer->stats();
  f.echo_write_of("b", "trusted");  // (not necessarily the last write: the sweep's order is the store's)
  f.writer->enqueue("team-a/b");
  ASSERT_TRUE(f.processed(s.writes + s.unchanged + s.errors + 1));
  EXPECT_EQ(f.api.count(), 2u);
  EXPECT_EQ(f.writer->stats().writes, 2u);
}

// Issue 27, item 5a: compared with the cache, not with what was sent. A
// status another writer overwrote, or one a relist shows without ours, is
// written again; reconcile() is called directly (no thread).
TEST(StatusWriter, AStatusOverwrittenElsewhereOrLostInARelistIsWrittenAgain) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  runtime::CancelToken none;
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  ASSERT_EQ(f.api.count(), 1u);
  const json ours = f.api.last_status();
  EXPECT_EQ(ours["isolation"], "RequireSetec");
  f.echo_last_write("a", "untrusted");
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  EXPECT_EQ(f.api.count(), 1u);  // the cache holds it: nothing to write

  json theirs = ours;
  theirs["isolation"] = "AllowInProcess";
  theirs.erase("runtimeClassName");
  f.store.apply(kube::WatchEvent::Type::Modified, component("a", "untrusted", theirs));
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  ASSERT_EQ(f.api.count(), 2u);
  EXPECT_EQ(f.api.last_status()["isolation"], "RequireSetec");
  EXPECT_EQ(f.api.last_status()["runtimeClassName"], "kata-fc");

  f.echo_last_write("a", "untrusted");
  f.store.begin_replace();  // a relist: the object without a status
  f.store.add_listed(component("a", "untrusted"));
  f.store.end_replace("2");
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  EXPECT_EQ(f.api.count(), 3u);
  EXPECT_EQ(f.api.last_status()["isolation"], "RequireSetec");
}

// The one use of what was sent, bounded: a write the cache never shows (the
// watch lost it, a relist brought back the old object) is not repeated at
// once, but is once the echo wait (10 s) has passed on the clock.
TEST(StatusWriter, AWriteTheCacheNeverShowsIsRepeatedAfterTheEchoWait) {
  PatchRecorder api;
  Sandbox sandbox;
  kube::Store<ComponentRecord> store{decode_component_record};
  store.begin_replace();
  store.add_listed(component("a", "untrusted"));
  store.end_replace("1");
  auto clock = std::make_shared<ig::FakeClock>();
  StatusWriterOptions o;
  o.runtime_class = "kata-fc";
  o.clock = clock;
  StatusWriter writer(api.client, store, sandbox, std::move(o));
  runtime::CancelToken none;
  ASSERT_TRUE(writer.reconcile("team-a/a", none));
  ASSERT_EQ(api.count(), 1u);
  auto again = writer.reconcile("team-a/a", none);  // the cache has not moved
  ASSERT_TRUE(again);
  EXPECT_EQ(api.count(), 1u);
  EXPECT_EQ(again->after, std::chrono::duration_cast<Clock::duration>(10s));  // checked again then
  clock->advance(10s);
  ASSERT_TRUE(writer.reconcile("team-a/a", none));
  EXPECT_EQ(api.count(), 2u);
}

TEST(StatusWriter, AFlipRewritesWhatChangedAndLeavesTheRuntimeClassOut) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.start();
  ASSERT_TRUE(f.api.wait_for(1));
  EXPECT_EQ(f.api.last_status()["isolation"], "RequireSetec");
  f.echo_last_write("a", "untrusted");
  f.sandbox.a = policy::SandboxAvailability::Unavailable;
  f.writer->enqueue_all();
  ASSERT_TRUE(f.api.wait_for(2));
  EXPECT_EQ(f.api.last_status()["isolation"], "Deny");
  EXPECT_FALSE(f.api.last_status().contains("runtimeClassName"));  // server-side apply removes it
}

// An upgraded cluster: the apply's answer still holds runtimeClassName (an
// earlier version's merge patches co-own it), so a merge patch removes it.
// The watch may show the apply's answer before the merge patch's: that
// interim state is ours, not a change, and causes no second write.
TEST(StatusWriter, TheInterimStateOfAWriteAndItsLeftoverPatchCausesNoWrite) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.api.co_owned = {{"runtimeClassName", "kata-fc"}};
  f.sandbox.a = policy::SandboxAvailability::Unavailable;
  runtime::CancelToken none;
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  ASSERT_EQ(f.api.count(), 1u);
  ASSERT_EQ(f.api.merges().size(), 1u);
  EXPECT_EQ(f.api.merges()[0], (json{{"status", {{"runtimeClassName", nullptr}}}}));
  json interim = f.api.last_status();
  EXPECT_EQ(interim["isolation"], "Deny");
  interim["runtimeClassName"] = "kata-fc";
  f.store.apply(kube::WatchEvent::Type::Modified, component("a", "untrusted", interim));
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  EXPECT_EQ(f.api.count(), 1u);  // our own interim state: not written again
  f.echo_last_write("a", "untrusted");  // the merge patch's answer
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  EXPECT_EQ(f.api.count(), 1u);
  EXPECT_EQ(f.api.merges().size(), 1u);
}

// Another manager's condition (and field) in the status: no write, neither
// now nor in a new term (which forgets what this writer sent).
TEST(StatusWriter, AnotherManagersConditionCausesNoWrite) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  runtime::CancelToken none;
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  ASSERT_EQ(f.api.count(), 1u);
  json held = f.api.last_status();
  held["conditions"].insert(held["conditions"].begin(),
                            json{{"type", "Ready"}, {"status", "False"}, {"reason", "Theirs"}, {"message", "m"},
                                 {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
  held["theirs"] = 1;
  f.store.apply(kube::WatchEvent::Type::Modified, component("a", "untrusted", held));
  ASSERT_TRUE(f.writer->reconcile("team-a/a", none));
  f.start();
  f.writer->enqueue("team-a/a");
  ASSERT_TRUE(runtime::test::eventually([&] { return f.writer->stats().unchanged >= 2; }));
  EXPECT_EQ(f.api.count(), 1u);
  EXPECT_EQ(f.writer->stats().writes, 1u);
}

TEST(StatusWriter, NothingIsWrittenBeforeReadyOrAfterStop) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.ready = false;
  f.start();
  f.writer->enqueue("team-a/a");
  // Not ready: the writer waits; stop it and start again with ready.
  f.stop();
  EXPECT_EQ(f.api.count(), 0u);
  f.writer->enqueue("team-a/a");  // after stop: ignored
  EXPECT_EQ(f.writer->stats().queued, 0u);
  f.ready = true;
  f.start();
  ASSERT_TRUE(f.api.wait_for(1));
  f.stop();
  EXPECT_EQ(f.api.count(), 1u);
}

// A start() that meets a stop() still joining the last term's workers (a
// term lost and won again at once) waits for it: the old workers exit, the
// new term's run. Before the fix the start found no threads (stop had taken
// them to join), started new ones and cleared the stop flag, so the old
// worker never ended and stop() joined it forever.
TEST(StatusWriter, AStartDuringAStopWaitsForTheLastTermsWorkers) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.api.hold = true;
  f.start();
  ASSERT_TRUE(f.api.wait_in_flight(1));  // the only worker is in a (held) write
  auto stopped = std::async(std::launch::async, [&] { f.stop(); });
  // stop() has begun once an enqueue is ignored (the busy worker takes none).
  bool stopping = false;
  for (int i = 0; i < 1000 && !stopping; ++i) {
    const std::size_t before = f.writer->stats().queued;
    f.writer->enqueue("team-a/probe-" + std::to_string(i));
    stopping = f.writer->stats().queued == before;
    if (!stopping) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(stopping);
  auto started = std::async(std::launch::async, [&] { f.start(); });
  f.api.release();
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(started.wait_for(10s), std::future_status::ready);
  // The new term checks every Component once: "a" is written again.
  EXPECT_TRUE(f.api.wait_for(2));
  f.stop();
  EXPECT_FALSE(f.api.overlapped);
}

TEST(StatusWriter, FailuresAreRetriedAndAVanishedComponentIsDropped) {
  Fixture f(std::vector<json>{component("a", "untrusted"), component("gone", "trusted")});
  f.api.answers = {500, 503};  // "a" (or "gone") fails twice, then succeeds
  f.start();
  ASSERT_TRUE(f.api.wait_for(4));
  ASSERT_TRUE(f.processed(4));
  EXPECT_EQ(f.writer->stats().errors, 2u);
  EXPECT_EQ(f.writer->stats().writes, 2u);
  // 404: not retried.
  f.api.answers = {404};
  f.sandbox.a = policy::SandboxAvailability::Unavailable;
  f.writer->enqueue("team-a/a");
  ASSERT_TRUE(f.api.wait_for(5));
  ASSERT_TRUE(f.processed(5));
  EXPECT_EQ(f.api.count(), 5u);
}

}  // namespace
}  // namespace ig::controller

namespace ig::controller {
namespace {

// A sweep queues its keys a batch at a time (the rest packed): every
// Component is still checked once, and the queue never holds much more than
// one batch.
TEST(StatusWriter, ASweepQueuesItsKeysABatchAtATime) {
  const std::size_t n = 2 * StatusWriter::kSweepBatch + 500;
  std::vector<json> components;
  for (std::size_t i = 0; i < n; ++i) components.push_back(component("c" + std::to_string(i), "untrusted"));
  Fixture f(components);
  f.start();
  std::size_t most_queued = 0;
  for (int i = 0; i < 3000 && f.api.count() < n; ++i) {
    most_queued = std::max(most_queued, f.writer->stats().queued);
    std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(f.processed(n));
  EXPECT_EQ(f.api.count(), n);
  std::set<std::string> paths;
  for (const auto& a : f.api.patches()) paths.insert(a.path);
  EXPECT_EQ(paths.size(), n);
  EXPECT_EQ(f.writer->stats().sweeps, 1u);
  EXPECT_LE(most_queued, StatusWriter::kSweepBatch + 1);
  f.stop();
}

TEST(StatusWriter, WorkersWriteInParallelButNeverOneComponentTwiceAtOnce) {
  std::vector<json> components;
  for (int i = 0; i < 40; ++i) components.push_back(component("c" + std::to_string(i), "untrusted"));
  Fixture f(components, 4);
  f.api.hold = true;
  f.start();
  // Four writes in flight at once: one per worker.
  ASSERT_TRUE(f.api.wait_in_flight(4));
  // A Component being written is enqueued again: it is not written by a
  // second worker meanwhile, but checked again once its write is done.
  std::vector<std::string> held;
  {
    std::lock_guard lock(f.api.mu_);
    for (const auto& [path, n] : f.api.in_flight)
      if (n > 0) held.push_back(path);
  }
  ASSERT_EQ(held.size(), 4u);
  const std::string first = held[0].substr(held[0].find("/components/") + 12);
  const std::string name = first.substr(0, first.find('/'));
  f.writer->enqueue("team-a/" + name);
  f.api.release();
  ASSERT_TRUE(f.api.wait_for(40));
  // 40 Components, each written once; the one enqueued twice was looked at
  // again (unchanged: its write is not in the cache yet, which has not
  // moved since).
  ASSERT_TRUE(f.processed(41));
  EXPECT_EQ(f.api.count(), 40u);
  EXPECT_FALSE(f.api.overlapped);
  EXPECT_EQ(f.api.max_in_flight, 4);
  std::set<std::string> paths;
  for (const auto& a : f.api.patches()) paths.insert(a.path);
  EXPECT_EQ(paths.size(), 40u);
  f.stop();
}

}  // namespace
}  // namespace ig::controller

namespace ig::controller {
namespace {

using runtime::test::eventually;

// Status applies block until the call is cancelled (an API server that
// stopped answering as the Lease was lost), or, with `echo`, are answered at
// once and shown in the cache as the watch would.
struct StatusApi {
  kube::fake::FakeClient client;
  std::atomic<int> cancelled{0};

  StatusApi(kube::Store<ComponentRecord>& store, bool echo) {
    client.prepend_reactor("patch", "", [](const kube::fake::Action&) -> std::optional<kube::fake::Reply> {
      ADD_FAILURE() << "the status is written with server-side apply";
      return refused();
    });
    client.prepend_reactor("apply", "", [this, &store, echo](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      if (echo) {
        const std::string rest(a.path.substr(a.path.find("/components/") + 12));
        store.apply(kube::WatchEvent::Type::Modified,
                    component(rest.substr(0, rest.find('/')), "untrusted", a.body["status"]));
        return a.body;
      }
      kube::fake::Gate().wait(a.cancel);  // bounded: 10 s
      ++cancelled;
      return kube::ApiError{"PATCH " + a.path + ": cancelled while waiting for an answer", 0, {}, {}};
    });
  }
  int sent() const { return static_cast<int>(client.count("apply")); }
  json last_status() const { return client.actions("apply").back().body["status"]; }
};

// Issue 27, item 5c: once leadership is lost, no status write is sent by this
// replica: the write in flight is cancelled (stop_leading() returns only
// after it ended, instead of after the client's request timeout) and none
// starts after.
TEST(StatusWriter, LosingLeadershipCancelsTheWriteInFlightAndSendsNoneAfter) {
  kube::Store<ComponentRecord> store{decode_component_record};
  store.begin_replace();
  for (const char* name : {"a", "b", "c"}) store.add_listed(component(name, "untrusted"));
  store.end_replace("1");
  StatusApi api(store, /*echo=*/false);
  Sandbox sandbox;
  StatusWriterOptions o;
  o.runtime_class = "kata-fc";
  StatusWriter writer(api.client, store, sandbox, std::move(o));
  runtime::Manager manager;
  manager.add(writer.runnable(), true);
  ASSERT_TRUE(manager.start());
  auto elector = manager.leader_callbacks();
  elector.on_started_leading();
  ASSERT_TRUE(eventually([&] { return api.sent() == 1; }));  // one worker, blocked in its write
  elector.on_stopped_leading();
  EXPECT_EQ(api.cancelled.load(), 1);
  const int sent = api.sent();
  writer.enqueue("team-a/b");  // not leading: dropped
  writer.enqueue_all();
  EXPECT_EQ(api.sent(), sent);
  EXPECT_EQ(api.sent(), 1);  // "b" and "c", queued when leadership was lost, were never sent
  EXPECT_EQ(writer.stats().errors, 0u);  // an abandoned write is not an error
  manager.stop();
}

// Issue 27, item 5f: a sandbox flipping every 4 s for a minute (15 flips).
// Sweeps run at most once per sweep_interval (10 s), the first at once, so a
// Component is written at most 1 + ceil(60 / 10) = 7 times, not once per flip,
// and the state it settles in is written within one interval. On the fake
// clock: the test moves time only when the writer is idle.
TEST(StatusWriter, SweepsAreDebounced) {
  kube::Store<ComponentRecord> store{decode_component_record};
  store.begin_replace();
  store.add_listed(component("a", "untrusted"));
  store.end_replace("1");
  StatusApi api(store, /*echo=*/true);
  Sandbox sandbox;
  auto clock = std::make_shared<ig::FakeClock>();
  StatusWriterOptions o;
  o.runtime_class = "kata-fc";
  o.clock = clock;
  o.sweep_interval = 10s;
  StatusWriter writer(api.client, store, sandbox, std::move(o));
  runtime::Manager manager(runtime::ManagerOptions{clock, {}});
  manager.add(writer.runnable(), true);
  ASSERT_TRUE(manager.start());
  manager.start_leading();
  auto idle = [&] {
    auto q = std::static_pointer_cast<runtime::Controller<std::string>>(writer.runnable())->queue();
    return q && q->len() == 0 && q->processing() == 0;
  };
  ASSERT_TRUE(eventually([&] { return api.sent() == 1 && idle(); }));  // the term's first sweep
  for (int flip = 0; flip < 15; ++flip) {
    sandbox.a = flip % 2 == 0 ? policy::SandboxAvailability::Unavailable : policy::SandboxAvailability::Available;
    writer.enqueue_all();
    ASSERT_TRUE(eventually(idle));
    clock->advance(4s);
    ASSERT_TRUE(eventually(idle));
  }
  const int during = api.sent() - 1;
  EXPECT_LE(during, 7) << "writes during a minute of flips";
  EXPECT_GE(during, 2);  // it does write while flapping
  // The flipping stops on Available: written within one interval.
  sandbox.a = policy::SandboxAvailability::Available;
  writer.enqueue_all();
  clock->advance(10s);
  ASSERT_TRUE(eventually([&] { return idle() && writer.stats().queued == 0; }));
  EXPECT_EQ(api.last_status()["isolation"], "RequireSetec");
  EXPECT_GE(writer.stats().sweeps, 3u);
  manager.stop();
}

}  // namespace
}  // namespace ig::controller
