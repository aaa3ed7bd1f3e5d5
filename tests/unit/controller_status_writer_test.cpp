// The Component status loop (src/controller/status_writer.h) against an
// in-memory API: one write per change, none when nothing changed, retries,
// and no write while not ready or after stop().
#include "controller/status_writer.h"

#include <gtest/gtest.h>

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

namespace ig::controller {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

kube::ApiError refused() { return kube::ApiError{"not in this test", 501, {}, {}}; }

// Records status patches; answers them from a script (default: success).
class PatchRecorder final : public kube::Client {
 public:
  kube::ApiResult<json> get(std::string_view, std::chrono::milliseconds) override { return refused(); }
  kube::ApiResult<kube::ListPage> list(std::string_view, const kube::ListOptions&) override {
    return refused();
  }
  kube::ApiResult<std::unique_ptr<kube::WatchStream>> watch(std::string_view, const kube::WatchOptions&) override {
    return refused();
  }
  kube::ApiResult<json> create(std::string_view, const json&) override { return refused(); }
  kube::ApiResult<json> update(std::string_view, const json&, std::chrono::milliseconds) override {
    return refused();
  }
  kube::ApiResult<json> patch(std::string_view path, kube::PatchType, const json&) override {
    ADD_FAILURE() << "status is written with server-side apply, not a patch: " << path;
    return refused();
  }
  kube::ApiResult<json> apply(std::string_view path, const json& body, std::string_view field_manager, bool force,
                              std::chrono::milliseconds) override {
    std::unique_lock lock(mu_);
    EXPECT_EQ(field_manager, "isolation-gate");
    EXPECT_TRUE(force);
    EXPECT_EQ(body["apiVersion"], "gibson.zeroroot.ai/v1alpha1");
    EXPECT_EQ(body["kind"], "Component");
    EXPECT_EQ(body["metadata"].size(), 2u);  // name and namespace only
    patches.push_back({std::string(path), body});
    if (++in_flight[std::string(path)] > 1) overlapped = true;
    ++in_flight_total;
    max_in_flight = std::max(max_in_flight, in_flight_total);
    cv_.notify_all();
    // Held writes stay in flight until release() (bounded).
    cv_.wait_for(lock, 10s, [&] { return !hold; });
    --in_flight[std::string(path)];
    --in_flight_total;
    if (!answers.empty()) {
      int code = answers.front();
      answers.pop_front();
      if (code != 200) return kube::ApiError{"PATCH " + std::string(path) + ": " + std::to_string(code), code, {}, {}};
    }
    return body;
  }
  std::size_t count() {
    std::lock_guard lock(mu_);
    return patches.size();
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, 10s, [&] { return patches.size() >= n; });
  }
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
  json last_status() {
    std::lock_guard lock(mu_);
    return patches.back().second["status"];
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, json>> patches;
  std::deque<int> answers;
  bool hold = false;
  std::map<std::string, int> in_flight;  // by path
  int in_flight_total = 0, max_in_flight = 0;
  bool overlapped = false;  // two writes of one Component at once
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

  explicit Fixture(const std::vector<json>& components, std::size_t workers = 1) {
    store.begin_replace();
    for (const auto& c : components) store.add_listed(c);
    store.end_replace("1");
    StatusWriterOptions o;
    o.runtime_class = "kata-fc";
    o.ready = [this] { return ready.load(); };
    o.now = [] { return std::time_t{1'790'000'000}; };
    o.retry_initial = 1ms;
    o.retry_max = 5ms;
    o.workers = workers;
    writer = std::make_unique<StatusWriter>(api, store, sandbox, std::move(o));
  }
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
};

TEST(StatusWriter, WritesEachComponentOnceThenNothingWhenNothingChanged) {
  Fixture f(std::vector<json>{component("a", "untrusted"), component("b", "trusted")});
  f.writer->start();
  ASSERT_TRUE(f.api.wait_for(2));
  ASSERT_TRUE(f.processed(2));
  EXPECT_EQ(f.api.patches[0].first.find("/apis/gibson.zeroroot.ai/v1alpha1/namespaces/team-a/components/"), 0u);
  EXPECT_NE(f.api.patches[0].first.find("/status"), std::string::npos);
  // Enqueued again before the watch shows the write: nothing new.
  f.writer->enqueue("team-a/a");
  f.writer->enqueue_all();  // "a" may be merged with the one queued above
  ASSERT_TRUE(f.processed(4));
  EXPECT_EQ(f.api.count(), 2u);
  // The watch shows it; still nothing.
  const auto s = f.writer->stats();
  f.echo_last_write("b", "trusted");
  f.writer->enqueue("team-a/b");
  ASSERT_TRUE(f.processed(s.writes + s.unchanged + s.errors + 1));
  EXPECT_EQ(f.api.count(), 2u);
  EXPECT_EQ(f.writer->stats().writes, 2u);
}

TEST(StatusWriter, AFlipRewritesWhatChangedAndLeavesTheRuntimeClassOut) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.writer->start();
  ASSERT_TRUE(f.api.wait_for(1));
  EXPECT_EQ(f.api.last_status()["isolation"], "RequireSetec");
  f.echo_last_write("a", "untrusted");
  f.sandbox.a = policy::SandboxAvailability::Unavailable;
  f.writer->enqueue_all();
  ASSERT_TRUE(f.api.wait_for(2));
  EXPECT_EQ(f.api.last_status()["isolation"], "Deny");
  EXPECT_FALSE(f.api.last_status().contains("runtimeClassName"));  // server-side apply removes it
}

// Another manager's condition (and field) in the status: no write, neither
// now nor in a new term (which forgets what this writer wrote).
TEST(StatusWriter, AnotherManagersConditionCausesNoWrite) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.writer->start();
  ASSERT_TRUE(f.api.wait_for(1));
  json held = f.api.last_status();
  held["conditions"].insert(held["conditions"].begin(),
                            json{{"type", "Ready"}, {"status", "False"}, {"reason", "Theirs"}, {"message", "m"},
                                 {"lastTransitionTime", "2026-01-01T00:00:00Z"}});
  held["theirs"] = 1;
  f.store.apply(kube::WatchEvent::Type::Modified, component("a", "untrusted", held));
  f.writer->enqueue("team-a/a");
  ASSERT_TRUE(f.processed(2));
  f.writer->stop();
  f.writer->start();
  ASSERT_TRUE(f.processed(3));
  EXPECT_EQ(f.api.count(), 1u);
  EXPECT_EQ(f.writer->stats().writes, 1u);
}

TEST(StatusWriter, NothingIsWrittenBeforeReadyOrAfterStop) {
  Fixture f(std::vector<json>{component("a", "untrusted")});
  f.ready = false;
  f.writer->start();
  f.writer->enqueue("team-a/a");
  // Not ready: the writer waits; stop it and start again with ready.
  f.writer->stop();
  EXPECT_EQ(f.api.count(), 0u);
  f.writer->enqueue("team-a/a");  // after stop: ignored
  EXPECT_EQ(f.writer->stats().queued, 0u);
  f.ready = true;
  f.writer->start();
  ASSERT_TRUE(f.api.wait_for(1));
  f.writer->stop();
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
  f.writer->start();
  ASSERT_TRUE(f.api.wait_in_flight(1));  // the only worker is in a (held) write
  auto stopped = std::async(std::launch::async, [&] { f.writer->stop(); });
  // stop() has begun once an enqueue is ignored (the busy worker takes none).
  bool stopping = false;
  for (int i = 0; i < 1000 && !stopping; ++i) {
    const std::size_t before = f.writer->stats().queued;
    f.writer->enqueue("team-a/probe-" + std::to_string(i));
    stopping = f.writer->stats().queued == before;
    if (!stopping) std::this_thread::sleep_for(5ms);
  }
  ASSERT_TRUE(stopping);
  auto started = std::async(std::launch::async, [&] { f.writer->start(); });
  f.api.release();
  ASSERT_EQ(stopped.wait_for(10s), std::future_status::ready);
  ASSERT_EQ(started.wait_for(10s), std::future_status::ready);
  // The new term checks every Component once: "a" is written again.
  EXPECT_TRUE(f.api.wait_for(2));
  f.writer->stop();
  EXPECT_FALSE(f.api.overlapped);
}

TEST(StatusWriter, FailuresAreRetriedAndAVanishedComponentIsDropped) {
  Fixture f(std::vector<json>{component("a", "untrusted"), component("gone", "trusted")});
  f.api.answers = {500, 503};  // "a" (or "gone") fails twice, then succeeds
  f.writer->start();
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

TEST(StatusWriter, WorkersWriteInParallelButNeverOneComponentTwiceAtOnce) {
  std::vector<json> components;
  for (int i = 0; i < 40; ++i) components.push_back(component("c" + std::to_string(i), "untrusted"));
  Fixture f(components, 4);
  f.api.hold = true;
  f.writer->start();
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
  // again (unchanged: its write is remembered).
  ASSERT_TRUE(f.processed(41));
  EXPECT_EQ(f.api.count(), 40u);
  EXPECT_FALSE(f.api.overlapped);
  EXPECT_EQ(f.api.max_in_flight, 4);
  std::set<std::string> paths;
  for (const auto& [path, body] : f.api.patches) paths.insert(path);
  EXPECT_EQ(paths.size(), 40u);
  f.writer->stop();
}

}  // namespace
}  // namespace ig::controller
