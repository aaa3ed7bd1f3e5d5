// The cluster view (src/controller/cluster.h) over an in-memory API: caches
// sync, the sandbox follows RuntimeClass and Node events, and a cache miss
// makes one live GET whose outcome maps to Found / NotFound / Error. The
// real HTTP client against the test API server is covered by the e2e tests.
#include "controller/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <thread>
#include <deque>
#include <map>
#include <mutex>
#include <set>

#include "kube/resources.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Status = admission::LookupResult::Status;

// A watch that delivers pushed events until stopped.
class PushStream final : public kube::WatchStream {
 public:
  kube::ApiResult<std::optional<kube::WatchEvent>> next() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return stopped_ || !events_.empty(); });
    if (stopped_) return std::optional<kube::WatchEvent>{};
    auto e = events_.front();
    events_.pop_front();
    return std::optional<kube::WatchEvent>(std::move(e));
  }
  void stop() noexcept override {
    std::lock_guard lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }
  void push(kube::WatchEvent e) {
    std::lock_guard lock(mu_);
    events_.push_back(std::move(e));
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<kube::WatchEvent> events_;
  bool stopped_ = false;
};

class MemoryApi final : public kube::Client {
 public:
  std::map<std::string, std::vector<json>> collections;  // path -> items
  std::map<std::string, kube::ApiResult<json>> objects;   // GET answers by path
  std::vector<std::string> gets;

  kube::ApiResult<json> get(std::string_view path, std::chrono::milliseconds) override {
    std::lock_guard lock(mu_);
    gets.emplace_back(path);
    auto it = objects.find(std::string(path));
    if (it != objects.end()) return it->second;
    kube::ApiError e;
    e.code = 404;
    e.message = "GET " + std::string(path) + ": 404 NotFound";
    return e;
  }
  kube::ApiResult<kube::ListPage> list(std::string_view path, const kube::ListOptions&) override {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, 10s, [&] { return held_.count(std::string(path)) == 0; });  // bounded
    kube::ListPage page;
    for (const auto& o : collections[std::string(path)]) page.items.push_back(o);
    page.resource_version = "1";
    return page;
  }
  kube::ApiResult<std::unique_ptr<kube::WatchStream>> watch(std::string_view path,
                                                            const kube::WatchOptions&) override {
    auto stream = std::make_unique<PushStream>();
    std::lock_guard lock(mu_);
    streams_[std::string(path)] = stream.get();
    cv_.notify_all();
    return std::unique_ptr<kube::WatchStream>(std::move(stream));
  }
  kube::ApiResult<json> create(std::string_view, const json&) override { return kube::ApiError{}; }
  kube::ApiResult<json> patch(std::string_view, kube::PatchType, const json&) override {
    return kube::ApiError{};
  }
  kube::ApiResult<json> update(std::string_view, const json&, std::chrono::milliseconds) override {
    return kube::ApiError{};
  }
  // Lists of `path` wait (up to 10 s) until released.
  void hold_lists(const std::string& path) {
    std::lock_guard lock(mu_);
    held_.insert(path);
  }
  void release_lists(const std::string& path) {
    {
      std::lock_guard lock(mu_);
      held_.erase(path);
    }
    cv_.notify_all();
  }
  // Waits (bounded) for the watch on `path`, then pushes an event into it.
  bool push(const std::string& path, kube::WatchEvent e) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, 10s, [&] { return streams_.count(path) != 0; })) return false;
    streams_[path]->push(std::move(e));
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, PushStream*> streams_;
  std::set<std::string> held_;
};

json node(const std::string& name, bool ready) {
  return {{"metadata", {{"name", name}, {"resourceVersion", "2"},
                        {"labels", {{"setec.zeroroot.ai/runtime.firecracker", "true"}}}}},
          {"status", {{"conditions", {{{"type", "Ready"}, {"status", ready ? "True" : "False"}}}}}}};
}

json runtime_class(bool labelled) {
  json rc = {{"metadata", {{"name", "kata-fc"}, {"resourceVersion", "2"}}},
             {"handler", "kata-fc"},
             {"scheduling", {{"nodeSelector", {{"setec.zeroroot.ai/runtime.firecracker", "true"}}}}}};
  if (labelled) rc["metadata"]["labels"] = {{"setec.zeroroot.ai/runtime", "firecracker"}};
  return rc;
}

json component(const std::string& ns, const std::string& name, const std::string& trust) {
  return {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
          {"kind", "Component"},
          {"metadata", {{"name", name}, {"namespace", ns}, {"resourceVersion", "3"}}},
          {"spec", {{"kind", "tool"}, {"policy", {{"content_trust", trust}}}}}};
}

// Polls `pred` until true or a bounded deadline: no timing is asserted.
template <typename F>
bool eventually(F pred) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return pred();
}

struct ClusterFixture {
  MemoryApi api;
  std::vector<std::string> logs;
  std::mutex log_mu;
  std::unique_ptr<Cluster> cluster;
  const std::string nodes_path = kube::collection_path(kube::kNodes);
  const std::string rc_path = kube::collection_path(kube::kRuntimeClasses);
  std::chrono::milliseconds lookup_error_log_interval{10'000};

  void start(policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly) {
    ClusterOptions o;
    o.runtime_class = "kata-fc";
    o.shape = shape;
    o.lookup_error_log_interval = lookup_error_log_interval;
    o.log = [this](std::string_view, std::string_view m) {
      std::lock_guard lock(log_mu);
      logs.emplace_back(m);
    };
    cluster = std::make_unique<Cluster>(api, o);
    cluster->start();
  }
  ~ClusterFixture() {
    if (cluster) cluster->stop();
  }
};

TEST(Cluster, SyncsThenTheSandboxFollowsNodeAndRuntimeClassEvents) {
  ClusterFixture f;
  f.api.collections[f.nodes_path] = {node("n1", true)};
  f.api.collections[f.rc_path] = {runtime_class(true)};
  f.api.collections[kube::collection_path(kComponents)] = {component("team-a", "c1", "untrusted")};
  EXPECT_FALSE(policy::is_available(ClusterSandbox().availability()));  // before sync: unavailable
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  EXPECT_TRUE(policy::is_available(f.cluster->sandbox().availability()));  // synced: assessed
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("available: 1 of 1 nodes"));

  ASSERT_TRUE(f.api.push(f.nodes_path, {kube::WatchEvent::Type::Modified, node("n1", false)}));
  ASSERT_TRUE(eventually([&] { return !policy::is_available(f.cluster->sandbox().availability()); }));
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("0 Ready"));

  ASSERT_TRUE(f.api.push(f.nodes_path, {kube::WatchEvent::Type::Added, node("n2", true)}));
  ASSERT_TRUE(eventually([&] { return policy::is_available(f.cluster->sandbox().availability()); }));

  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, runtime_class(false)}));
  ASSERT_TRUE(eventually([&] { return !policy::is_available(f.cluster->sandbox().availability()); }));
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("has no label setec.zeroroot.ai/runtime"));

  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Deleted, runtime_class(false)}));
  ASSERT_TRUE(eventually([&] { return f.cluster->sandbox().describe().find("not found") != std::string::npos; }));

  std::lock_guard lock(f.log_mu);
  EXPECT_THAT(f.logs, ::testing::Contains(HasSubstr("sandbox unavailable: no node can run")));
}

// The Node cache keeps fits made under the RuntimeClass's scheduling, not
// labels: a nodeSelector naming a label no fit was made for lists the Nodes
// again, and the decision follows the new selector (never one made from
// fits of the old one).
TEST(Cluster, ANewNodeSelectorOnALabelNotKeptBeforeStillDecidesRight) {
  ClusterFixture f;
  auto labelled = [](const std::string& name, json labels) {
    json n = node(name, true);
    n["metadata"]["labels"] = std::move(labels);
    return n;
  };
  const json fc = {{"setec.zeroroot.ai/runtime.firecracker", "true"}};
  f.api.collections[f.nodes_path] = {
      labelled("n1", fc), labelled("n2", {{"pool", "setec"}}),
      labelled("n3", {{"pool", "setec"}, {"setec.zeroroot.ai/runtime.firecracker", "true"}}),
      labelled("n4", {{"pool", "setec"}})};
  f.api.collections[f.rc_path] = {runtime_class(true)};
  auto describe = [&] { return f.cluster->sandbox().describe(); };
  auto node_lists = [&](int n) {
    std::string text;
    prometheus::TextWriter out(text);
    f.cluster->write_metrics(out);
    return text.find("isolation_gate_reflector_lists_total{resource=\"nodes\"} " + std::to_string(n) + "\n") !=
           std::string::npos;
  };
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 2 of 4 nodes") == 0; })) << describe();  // n1, n3
  EXPECT_TRUE(node_lists(1));  // listed once, after the RuntimeClass

  json rc = runtime_class(true);
  rc["scheduling"]["nodeSelector"] = {{"pool", "setec"}};  // "pool" was in no fit
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, rc}));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 3 of 4 nodes") == 0; })) << describe();  // n2-n4
  EXPECT_TRUE(node_lists(2));

  rc["scheduling"]["nodeSelector"] = {{"pool", "setec"}, {"zone", "a"}};  // no Node has a zone
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, rc}));
  // Unavailable at once (no Node is fitted under it yet), then the relist's own answer.
  ASSERT_TRUE(eventually([&] { return describe().find("4 Ready, 4 schedulable, 0 matching its nodeSelector") !=
                                      std::string::npos; }))
      << describe();
  EXPECT_FALSE(policy::is_available(f.cluster->sandbox().availability()));

  rc["scheduling"]["nodeSelector"] = fc;
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, rc}));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 2 of 4 nodes") == 0; })) << describe();

  // A Node event after the relist is fitted under the current scheduling.
  ASSERT_TRUE(f.api.push(f.nodes_path, {kube::WatchEvent::Type::Modified, labelled("n2", fc)}));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 3 of 4 nodes") == 0; })) << describe();
  // A change that keeps the scheduling (a label of the RuntimeClass) lists nothing again.
  json relabelled = rc;
  relabelled["metadata"]["labels"]["team"] = "platform";
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, relabelled}));
  ASSERT_TRUE(f.api.push(f.nodes_path, {kube::WatchEvent::Type::Modified, node("n2", false)}));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 2 of 4 nodes") == 0; })) << describe();
  EXPECT_TRUE(node_lists(4));

  // The RuntimeClass deleted: unavailable at once, with no list; back with the
  // same scheduling: the fits still hold, still no list.
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Deleted, relabelled}));
  ASSERT_TRUE(eventually([&] { return describe().find("not found") != std::string::npos; })) << describe();
  EXPECT_FALSE(policy::is_available(f.cluster->sandbox().availability()));
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Added, relabelled}));
  ASSERT_TRUE(eventually([&] { return describe().find("available: 2 of 4 nodes") == 0; })) << describe();
  EXPECT_TRUE(node_lists(4));
}

// synced() is what readiness and the operator's loops wait for: once it is
// true, the sandbox has been assessed (never the initial "unavailable" nor
// the interim one while the Nodes are listed under a new scheduling).
TEST(Cluster, SyncedOnlyOnceTheSandboxIsAssessed) {
  ClusterFixture f;
  json labelled = node("n1", true);
  labelled["metadata"]["labels"] = {{"pool", "setec"}};
  f.api.collections[f.nodes_path] = {labelled};
  json rc = runtime_class(true);
  rc["scheduling"]["nodeSelector"] = {{"pool", "setec"}};  // the Nodes are listed under it
  f.api.collections[f.rc_path] = {rc};
  f.start();
  bool seen_unassessed = false;
  ASSERT_TRUE(eventually([&] {
    if (!f.cluster->synced()) return false;
    seen_unassessed = !policy::is_available(f.cluster->sandbox().availability());
    return true;
  }));
  EXPECT_FALSE(seen_unassessed) << f.cluster->sandbox().describe();
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("available: 1 of 1 nodes"));
}

// While the Nodes are listed again under a new scheduling the sandbox is
// unavailable (fail closed) and not settled(); synced() stays true.
TEST(Cluster, NotSettledWhileTheNodesAreListedUnderANewScheduling) {
  ClusterFixture f;
  json labelled = node("n1", true);
  labelled["metadata"]["labels"]["pool"] = "setec";
  f.api.collections[f.nodes_path] = {labelled};
  f.api.collections[f.rc_path] = {runtime_class(true)};
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  EXPECT_TRUE(f.cluster->settled());
  EXPECT_TRUE(policy::is_available(f.cluster->sandbox().availability()));

  f.api.hold_lists(f.nodes_path);
  json rc = runtime_class(true);
  rc["scheduling"]["nodeSelector"]["pool"] = "setec";
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, rc}));
  ASSERT_TRUE(eventually([&] { return !f.cluster->settled(); }));
  EXPECT_TRUE(f.cluster->synced());
  EXPECT_FALSE(policy::is_available(f.cluster->sandbox().availability()));

  f.api.release_lists(f.nodes_path);
  ASSERT_TRUE(eventually([&] { return f.cluster->settled(); }));
  EXPECT_TRUE(policy::is_available(f.cluster->sandbox().availability()));
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("available: 1 of 1 nodes"));
}

TEST(Cluster, TheCustomerIsolationShapeAcceptsAnUnlabelledRuntimeClass) {
  ClusterFixture f;
  f.api.collections[f.nodes_path] = {node("n1", true)};
  f.api.collections[f.rc_path] = {runtime_class(false)};
  f.start(policy::DeploymentShape::CustomerIsolation);
  ASSERT_TRUE(eventually([&] { return policy::is_available(f.cluster->sandbox().availability()); }));
}

TEST(Cluster, CachedComponentsAreFoundWithoutAnApiCall) {
  ClusterFixture f;
  f.api.collections[kube::collection_path(kComponents)] = {component("team-a", "c1", "untrusted")};
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  auto r = f.cluster->components().find("team-a", "c1");
  ASSERT_EQ(r.status, Status::Found);
  EXPECT_EQ(r.component->name, "c1");
  EXPECT_EQ(r.component->trust_raw, "untrusted");
  EXPECT_TRUE(f.api.gets.empty());
  EXPECT_EQ(f.cluster->component_count(), 1u);
}

TEST(Cluster, ACacheMissMakesOneLiveGetAndMapsItsOutcome) {
  ClusterFixture f;
  const std::string path = kube::object_path(kComponents, "team-a", "fresh");
  f.api.objects.emplace(path, kube::ApiResult<json>(component("team-a", "fresh", "trusted")));
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));

  auto found = f.cluster->components().find("team-a", "fresh");
  ASSERT_EQ(found.status, Status::Found);
  EXPECT_EQ(found.component->name, "fresh");

  auto missing = f.cluster->components().find("team-a", "nope");
  EXPECT_EQ(missing.status, Status::NotFound);

  kube::ApiError down;
  down.code = 0;
  down.message = "GET ...: connection refused";
  f.api.objects.emplace(kube::object_path(kComponents, "team-a", "x"), kube::ApiResult<json>(down));
  auto error = f.cluster->components().find("team-a", "x");
  EXPECT_EQ(error.status, Status::Error);
  EXPECT_THAT(error.error, HasSubstr("connection refused"));

  f.api.objects.emplace(kube::object_path(kComponents, "team-a", "bad"),
                        kube::ApiResult<json>(json{{"kind", "Component"}, {"spec", 1}}));
  EXPECT_EQ(f.cluster->components().find("team-a", "bad").status, Status::Error);
  EXPECT_EQ(f.api.gets.size(), 4u);  // one GET per miss
}

TEST(Cluster, FailedLiveGetsAreCountedAndLoggedAtMostOncePerInterval) {
  ClusterFixture f;
  f.lookup_error_log_interval = std::chrono::hours(1);
  kube::ApiError down;
  down.code = 503;
  down.message = "GET ...: 503 ServiceUnavailable";
  f.api.objects.emplace(kube::object_path(kComponents, "team-a", "x"), kube::ApiResult<json>(down));
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(f.cluster->components().find("team-a", "x").status, Status::Error);
  EXPECT_EQ(f.cluster->components().find("team-a", "nope").status, Status::NotFound);  // not an error

  std::string text;
  prometheus::TextWriter out(text);
  f.cluster->write_metrics(out);
  EXPECT_THAT(text, HasSubstr("isolation_gate_component_lookup_errors_total 5\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_component_live_gets_total 6\n"));
  std::lock_guard lock(f.log_mu);
  std::vector<std::string> lines;
  for (const auto& l : f.logs) {
    if (l.find("Component lookups are failing") != std::string::npos) lines.push_back(l);
  }
  ASSERT_EQ(lines.size(), 1u);  // one line for five errors within the interval
  EXPECT_THAT(lines[0], HasSubstr("1 failed since the last report, 1 in all"));
  EXPECT_THAT(lines[0], HasSubstr("503 ServiceUnavailable"));
  EXPECT_THAT(lines[0], HasSubstr("\"x\""));
}

TEST(Cluster, MetricsExportTheSandboxAndEveryCache) {
  ClusterFixture f;
  f.api.collections[f.nodes_path] = {node("n1", true)};
  f.api.collections[f.rc_path] = {runtime_class(true)};
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));  // every cache listed
  ASSERT_TRUE(eventually([&] { return policy::is_available(f.cluster->sandbox().availability()); }));
  std::string text;
  prometheus::TextWriter out(text);
  f.cluster->write_metrics(out);
  EXPECT_THAT(text, HasSubstr("isolation_gate_sandbox_available 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_sandbox_capable_nodes 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_cache_synced{resource=\"nodes\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_cache_objects{resource=\"runtimeclasses\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_reflector_lists_total{resource=\"components\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_reflector_relists_total{resource=\"nodes\",cause=\"too_large\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_reflector_silent_watches_total{resource=\"nodes\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_cache_staleness_seconds{resource=\"nodes\"} "));
}

// Admission's view fails closed once the RuntimeClass or Node cache has made
// no progress for longer than the bound; the assessment itself is kept.
TEST(FreshSandbox, AStaleRuntimeClassOrNodeCacheReadsUnknownAsUnavailable) {
  MemoryApi api;
  std::chrono::steady_clock::time_point t{};
  kube::Store<std::string> rc_store{[](const json&) -> Result<std::string> { return std::string("x"); }, {}};
  kube::Store<std::string> node_store{[](const json&) -> Result<std::string> { return std::string("x"); }, {}};
  auto reflector = [&](std::string name, kube::Store<std::string>& sink) {
    kube::ReflectorOptions o;
    o.name = std::move(name);
    o.path = "/x";
    o.now = [&t] { return t; };
    return std::make_unique<kube::Reflector>(api, sink, o);
  };
  auto rcs = reflector("runtimeclasses", rc_store);
  t += 200s;
  auto nodes = reflector("nodes", node_store);
  ClusterSandbox sandbox;
  sandbox.update({policy::SandboxAvailability::Available, 1, "available: 1 of 1 nodes"});
  FreshSandbox fresh(sandbox, 300s, rcs.get(), nodes.get());
  EXPECT_TRUE(policy::is_available(fresh.availability()));
  EXPECT_EQ(fresh.describe(), "available: 1 of 1 nodes");
  t += 101s;  // the RuntimeClass cache: 301 s without progress
  EXPECT_FALSE(policy::is_available(fresh.availability()));
  EXPECT_THAT(fresh.describe(), HasSubstr("unknown (treated as unavailable): the runtimeclasses cache"));
  EXPECT_TRUE(policy::is_available(sandbox.availability()));  // the operator's view keeps the assessment
  FreshSandbox never(sandbox, 0s, rcs.get(), nodes.get());
  EXPECT_TRUE(policy::is_available(never.availability()));
}


// A client whose GETs block until released (bounded), counting them and the
// callers waiting inside: concurrent misses must collapse into one GET.
class BlockingGets final : public kube::Client {
 public:
  kube::ApiResult<json> answer = kube::ApiResult<json>(component("team-a", "fresh", "untrusted"));

  kube::ApiResult<json> get(std::string_view, std::chrono::milliseconds) override {
    std::unique_lock lock(mu_);
    ++gets_;
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return released_; });  // bounded
    return answer;
  }
  kube::ApiResult<kube::ListPage> list(std::string_view, const kube::ListOptions&) override { return kube::ApiError{}; }
  kube::ApiResult<std::unique_ptr<kube::WatchStream>> watch(std::string_view, const kube::WatchOptions&) override {
    return kube::ApiError{};
  }
  kube::ApiResult<json> create(std::string_view, const json&) override { return kube::ApiError{}; }
  kube::ApiResult<json> patch(std::string_view, kube::PatchType, const json&) override { return kube::ApiError{}; }
  kube::ApiResult<json> update(std::string_view, const json&, std::chrono::milliseconds) override {
    return kube::ApiError{};
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int gets() {
    std::lock_guard lock(mu_);
    return gets_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  int gets_ = 0;
};

struct LookupFixture {
  BlockingGets api;
  kube::Store<ComponentRecord> store{decode_component_record};
  std::atomic<std::int64_t> now_ms{0};
  ClusterComponents lookup{store, api, 10s, 10s, {}, 1000ms,
                           [this] { return std::chrono::steady_clock::time_point(std::chrono::milliseconds(now_ms.load())); }};
};

TEST(ClusterComponents, ConcurrentMissesOfOneComponentShareOneGetAndItsAnswer) {
  LookupFixture f;
  constexpr int kCallers = 16;
  std::vector<admission::LookupResult> results(kCallers);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCallers; ++i) {
    threads.emplace_back([&, i] { results[i] = f.lookup.find("team-a", "fresh"); });
  }
  // One caller is inside the GET, every other one waits for its answer.
  ASSERT_TRUE(eventually([&] { return f.api.gets() == 1 && f.lookup.shared() == kCallers - 1; }));
  f.api.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.api.gets(), 1);
  EXPECT_EQ(f.lookup.live_gets(), 1u);
  for (const auto& r : results) {
    ASSERT_EQ(r.status, Status::Found);
    EXPECT_EQ(r.component->name, "fresh");
    EXPECT_EQ(r.component->trust_raw, "untrusted");
  }
  // Remembered briefly: a miss within the second needs no GET; after it, one.
  f.now_ms += 999;
  EXPECT_EQ(f.lookup.find("team-a", "fresh").status, Status::Found);
  EXPECT_EQ(f.api.gets(), 1);
  f.now_ms += 1;
  EXPECT_EQ(f.lookup.find("team-a", "fresh").status, Status::Found);
  EXPECT_EQ(f.api.gets(), 2);
  // Another Component is another GET.
  f.api.answer = kube::ApiResult<json>(component("team-a", "other", "trusted"));
  EXPECT_EQ(f.lookup.find("team-a", "other").component->name, "other");
  EXPECT_EQ(f.api.gets(), 3);
}

TEST(ClusterComponents, NotFoundIsRememberedForASecondAnErrorNever) {
  LookupFixture f;
  f.api.release();
  kube::ApiError missing;
  missing.code = 404;
  missing.message = "GET ...: 404 NotFound";
  f.api.answer = missing;
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::NotFound);
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::NotFound);
  EXPECT_EQ(f.api.gets(), 1);
  // Created meanwhile: found once the remembered NotFound is a second old.
  f.api.answer = kube::ApiResult<json>(component("team-a", "late", "trusted"));
  f.now_ms += 1000;
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::Found);
  EXPECT_EQ(f.api.gets(), 2);
  // An API error is shared by the callers waiting for it, not remembered.
  kube::ApiError down;
  down.code = 503;
  down.message = "GET ...: 503 ServiceUnavailable";
  f.api.answer = down;
  EXPECT_EQ(f.lookup.find("team-a", "flaky").status, Status::Error);
  EXPECT_EQ(f.lookup.find("team-a", "flaky").status, Status::Error);
  EXPECT_EQ(f.api.gets(), 4);
  EXPECT_EQ(f.lookup.lookup_errors(), 2u);
}

TEST(ClusterComponents, TheCacheAnswersBeforeAnyRememberedLookup) {
  LookupFixture f;
  f.api.release();
  kube::ApiError missing;
  missing.code = 404;
  f.api.answer = missing;
  EXPECT_EQ(f.lookup.find("team-a", "c1").status, Status::NotFound);
  // The watch delivers it: the cache wins over the remembered NotFound at once.
  f.store.apply(kube::WatchEvent::Type::Added, component("team-a", "c1", "trusted"));
  EXPECT_EQ(f.lookup.find("team-a", "c1").status, Status::Found);
  EXPECT_EQ(f.api.gets(), 1);
}

}  // namespace
}  // namespace ig::controller
