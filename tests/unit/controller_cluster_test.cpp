// The cluster view (src/controller/cluster.h) over an in-memory API: caches
// sync, the sandbox follows RuntimeClass and Node events, and a cache miss
// makes one live GET whose outcome maps to Found / NotFound / Error. The
// real HTTP client against the test API server is covered by the e2e tests.
#include "controller/cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <mutex>

#include "fake_kube_client.h"

#include "kube/resources.h"

namespace ig::controller {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using namespace std::chrono_literals;
using Status = admission::LookupResult::Status;

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
  kube::fake::FakeClient api;
  std::vector<std::string> logs;
  std::mutex log_mu;
  std::unique_ptr<Cluster> cluster;
  const std::string nodes_path = kube::collection_path(kube::kNodes);
  const std::string rc_path = kube::collection_path(kube::kRuntimeClasses);

  void start(policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly) {
    ClusterOptions o;
    o.runtime_class = "kata-fc";
    o.shape = shape;
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
  // The objects of a collection, as listed (their resourceVersions kept).
  void seed(const std::string& path, const std::vector<json>& items) {
    for (const auto& o : items) api.put(path, o, /*keep_version=*/true);
  }
  // A GET of `path` answers `answer` (the object is in no list).
  void answer_get(const std::string& path, kube::ApiResult<json> answer) {
    api.prepend_reactor("get", path, [answer](const kube::fake::Action&) -> std::optional<kube::fake::Reply> {
      return answer;
    });
  }
  std::size_t gets() const { return api.count("get"); }
};

TEST(Cluster, SyncsThenTheSandboxFollowsNodeAndRuntimeClassEvents) {
  ClusterFixture f;
  f.seed(f.nodes_path, {node("n1", true)});
  f.seed(f.rc_path, {runtime_class(true)});
  f.seed(kube::collection_path(kComponents), {component("team-a", "c1", "untrusted")});
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
  f.seed(f.nodes_path, {
      labelled("n1", fc), labelled("n2", {{"pool", "setec"}}),
      labelled("n3", {{"pool", "setec"}, {"setec.zeroroot.ai/runtime.firecracker", "true"}}),
      labelled("n4", {{"pool", "setec"}})});
  f.seed(f.rc_path, {runtime_class(true)});
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
  f.seed(f.nodes_path, {labelled});
  json rc = runtime_class(true);
  rc["scheduling"]["nodeSelector"] = {{"pool", "setec"}};  // the Nodes are listed under it
  f.seed(f.rc_path, {rc});
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
  kube::fake::Gate nodes_listed{true};  // once closed, lists of the Nodes wait (up to 10 s) until it opens
  ClusterFixture f;
  f.api.prepend_reactor("list", f.nodes_path, [&](const kube::fake::Action&) -> std::optional<kube::fake::Reply> {
    nodes_listed.wait();
    return std::nullopt;
  });
  json labelled = node("n1", true);
  labelled["metadata"]["labels"]["pool"] = "setec";
  f.seed(f.nodes_path, {labelled});
  f.seed(f.rc_path, {runtime_class(true)});
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  EXPECT_TRUE(f.cluster->settled());
  EXPECT_TRUE(policy::is_available(f.cluster->sandbox().availability()));

  nodes_listed.close();
  json rc = runtime_class(true);
  rc["scheduling"]["nodeSelector"]["pool"] = "setec";
  ASSERT_TRUE(f.api.push(f.rc_path, {kube::WatchEvent::Type::Modified, rc}));
  ASSERT_TRUE(eventually([&] { return !f.cluster->settled(); }));
  EXPECT_TRUE(f.cluster->synced());
  EXPECT_FALSE(policy::is_available(f.cluster->sandbox().availability()));

  nodes_listed.open();
  ASSERT_TRUE(eventually([&] { return f.cluster->settled(); }));
  EXPECT_TRUE(policy::is_available(f.cluster->sandbox().availability()));
  EXPECT_THAT(f.cluster->sandbox().describe(), HasSubstr("available: 1 of 1 nodes"));
}

TEST(Cluster, TheCustomerIsolationShapeAcceptsAnUnlabelledRuntimeClass) {
  ClusterFixture f;
  f.seed(f.nodes_path, {node("n1", true)});
  f.seed(f.rc_path, {runtime_class(false)});
  f.start(policy::DeploymentShape::CustomerIsolation);
  ASSERT_TRUE(eventually([&] { return policy::is_available(f.cluster->sandbox().availability()); }));
}

TEST(Cluster, CachedComponentsAreFoundWithoutAnApiCall) {
  ClusterFixture f;
  f.seed(kube::collection_path(kComponents), {component("team-a", "c1", "untrusted")});
  f.start();
  ASSERT_TRUE(eventually([&] { return f.cluster->synced(); }));
  auto r = f.cluster->components().find("team-a", "c1");
  ASSERT_EQ(r.status, Status::Found);
  EXPECT_EQ(r.component->name, "c1");
  EXPECT_EQ(r.component->trust_raw(), "untrusted");
  EXPECT_EQ(f.gets(), 0u);
  EXPECT_EQ(f.cluster->component_count(), 1u);
}

TEST(Cluster, ACacheMissMakesOneLiveGetAndMapsItsOutcome) {
  ClusterFixture f;
  const std::string path = kube::object_path(kComponents, "team-a", "fresh");
  f.answer_get(path, kube::ApiResult<json>(component("team-a", "fresh", "trusted")));
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
  f.answer_get(kube::object_path(kComponents, "team-a", "x"), kube::ApiResult<json>(down));
  auto error = f.cluster->components().find("team-a", "x");
  EXPECT_EQ(error.status, Status::Error);
  EXPECT_THAT(error.error, HasSubstr("connection refused"));

  f.answer_get(kube::object_path(kComponents, "team-a", "bad"),
                        kube::ApiResult<json>(json{{"kind", "Component"}, {"spec", 1}}));
  EXPECT_EQ(f.cluster->components().find("team-a", "bad").status, Status::Error);
  EXPECT_EQ(f.gets(), 4u);  // one GET per miss
}

TEST(Cluster, FailedLiveGetsAreCountedAndLoggedAtMostOncePerInterval) {
  ClusterFixture f;
  kube::ApiError down;
  down.code = 503;
  down.message = "GET ...: 503 ServiceUnavailable";
  f.answer_get(kube::object_path(kComponents, "team-a", "x"), kube::ApiResult<json>(down));
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
  f.seed(f.nodes_path, {node("n1", true)});
  f.seed(f.rc_path, {runtime_class(true)});
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
  kube::fake::FakeClient api;
  auto clock = std::make_shared<FakeClock>();
  kube::Store<std::string> rc_store{[](const json&) -> Result<std::string> { return std::string("x"); }, {}};
  kube::Store<std::string> node_store{[](const json&) -> Result<std::string> { return std::string("x"); }, {}};
  auto reflector = [&](std::string name, kube::Store<std::string>& sink) {
    kube::ReflectorOptions o;
    o.name = std::move(name);
    o.path = "/x";
    o.clock = clock;
    return std::make_unique<kube::Reflector>(api, sink, o);
  };
  auto rcs = reflector("runtimeclasses", rc_store);
  clock->advance(200s);
  auto nodes = reflector("nodes", node_store);
  ClusterSandbox sandbox;
  sandbox.update({policy::SandboxAvailability::Available, 1, "available: 1 of 1 nodes"});
  FreshSandbox fresh(sandbox, 300s, rcs.get(), nodes.get());
  EXPECT_TRUE(policy::is_available(fresh.availability()));
  EXPECT_EQ(fresh.describe(), "available: 1 of 1 nodes");
  clock->advance(101s);  // the RuntimeClass cache: 301 s without progress
  EXPECT_FALSE(policy::is_available(fresh.availability()));
  EXPECT_THAT(fresh.describe(), HasSubstr("unknown (treated as unavailable): the runtimeclasses cache"));
  EXPECT_TRUE(policy::is_available(sandbox.availability()));  // the operator's view keeps the assessment
  FreshSandbox never(sandbox, 0s, rcs.get(), nodes.get());
  EXPECT_TRUE(policy::is_available(never.availability()));
}


// GETs block until released (bounded): concurrent misses must collapse into one GET.
struct LookupFixture {
  kube::fake::Gate released;
  kube::ApiResult<json> answer = kube::ApiResult<json>(component("team-a", "fresh", "untrusted"));
  kube::fake::FakeClient api;
  kube::Store<ComponentRecord> store{decode_component_record};
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  ClusterComponents lookup{store, api, 10s, {}, clock};

  LookupFixture() {
    api.prepend_reactor("get", "", [this](const kube::fake::Action&) -> std::optional<kube::fake::Reply> {
      released.wait();
      return answer;
    });
  }
  void release() { released.open(); }
  int gets() const { return static_cast<int>(api.count("get")); }
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
  ASSERT_TRUE(eventually([&] { return f.gets() == 1 && f.lookup.shared() == kCallers - 1; }));
  f.release();
  for (auto& t : threads) t.join();
  EXPECT_EQ(f.gets(), 1);
  EXPECT_EQ(f.lookup.live_gets(), 1u);
  for (const auto& r : results) {
    ASSERT_EQ(r.status, Status::Found);
    EXPECT_EQ(r.component->name, "fresh");
    EXPECT_EQ(r.component->trust_raw(), "untrusted");
  }
  // Remembered briefly: a miss within the second needs no GET; after it, one.
  f.clock->advance(999ms);
  EXPECT_EQ(f.lookup.find("team-a", "fresh").status, Status::Found);
  EXPECT_EQ(f.gets(), 1);
  f.clock->advance(1ms);
  EXPECT_EQ(f.lookup.find("team-a", "fresh").status, Status::Found);
  EXPECT_EQ(f.gets(), 2);
  // Another Component is another GET.
  f.answer = kube::ApiResult<json>(component("team-a", "other", "trusted"));
  EXPECT_EQ(f.lookup.find("team-a", "other").component->name, "other");
  EXPECT_EQ(f.gets(), 3);
}

TEST(ClusterComponents, NotFoundIsRememberedForASecondAnErrorNever) {
  LookupFixture f;
  f.release();
  kube::ApiError missing;
  missing.code = 404;
  missing.message = "GET ...: 404 NotFound";
  f.answer = missing;
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::NotFound);
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::NotFound);
  EXPECT_EQ(f.gets(), 1);
  // Created meanwhile: found once the remembered NotFound is a second old.
  f.answer = kube::ApiResult<json>(component("team-a", "late", "trusted"));
  f.clock->advance(1000ms);
  EXPECT_EQ(f.lookup.find("team-a", "late").status, Status::Found);
  EXPECT_EQ(f.gets(), 2);
  // An API error is shared by the callers waiting for it, not remembered.
  kube::ApiError down;
  down.code = 503;
  down.message = "GET ...: 503 ServiceUnavailable";
  f.answer = down;
  EXPECT_EQ(f.lookup.find("team-a", "flaky").status, Status::Error);
  EXPECT_EQ(f.lookup.find("team-a", "flaky").status, Status::Error);
  EXPECT_EQ(f.gets(), 4);
  EXPECT_EQ(f.lookup.lookup_errors(), 2u);
}

TEST(ClusterComponents, TheCacheAnswersBeforeAnyRememberedLookup) {
  LookupFixture f;
  f.release();
  kube::ApiError missing;
  missing.code = 404;
  f.answer = missing;
  EXPECT_EQ(f.lookup.find("team-a", "c1").status, Status::NotFound);
  // The watch delivers it: the cache wins over the remembered NotFound at once.
  f.store.apply(kube::WatchEvent::Type::Added, component("team-a", "c1", "trusted"));
  EXPECT_EQ(f.lookup.find("team-a", "c1").status, Status::Found);
  EXPECT_EQ(f.gets(), 1);
}

}  // namespace
}  // namespace ig::controller
