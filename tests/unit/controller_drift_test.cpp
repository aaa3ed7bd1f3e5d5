// The drift audit (src/controller/drift.h), a reconciler on the engine,
// driven through reconcile() on a FakeClock against an in-memory API: a
// drifted pod is not evicted before the settle time and is after it, a pod
// that stops drifting is not evicted, a failed eviction is retried with the
// engine's per-key backoff, and a stopped CancelToken sends no eviction (and
// abandons one in flight).
#include "controller/drift.h"

#include <gtest/gtest.h>

#include <chrono>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "admission/context.h"
#include "base/clock.h"
#include "fake_kube_client.h"
#include "runtime/manager.h"

namespace ig::controller {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

constexpr std::string_view kPodsPath = "/api/v1/pods";
constexpr std::string_view kEvictionPath = "/api/v1/namespaces/team-a/pods/p0/eviction";

class DriftSandbox final : public admission::SandboxView {
 public:
  policy::SandboxAvailability availability() const noexcept override { return policy::SandboxAvailability::Available; }
  std::string describe() const override { return "test"; }
};

// An untrusted Component: with the sandbox there, RequireSetec.
json untrusted_component() {
  return {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
          {"kind", "Component"},
          {"metadata", {{"name", "report-parser"}, {"namespace", "team-a"}, {"uid", "u-c"}, {"generation", 1}}},
          {"spec", {{"kind", "tool"}, {"policy", {{"content_trust", "untrusted"}}}}}};
}

// The same, bound to the pods' image and declaring no command, args or exec.
json bound_component() {
  json c = untrusted_component();
  c["spec"]["image"] = "registry.example/x:1";
  return c;
}

json component_pod(const std::string& name, const std::string& runtime_class = "") {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", "team-a"},
                {"uid", "uid-" + name},
                {"labels", {{std::string(model::kComponentLabel), "report-parser"}}}}},
              {"spec", {{"containers", {{{"name", "main"}, {"image", "registry.example/x:1"}}}}}},
              {"status", {{"phase", "Running"}}}};
  if (!runtime_class.empty()) pod["spec"]["runtimeClassName"] = runtime_class;
  return pod;
}

// Pods are listed and watched; evictions are answered from a script
// (default: 201), each stamped with the fake time, and held in flight until
// cancelled while `hold` is set.
struct DriftFixture {
  std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
  kube::fake::FakeClient api;
  std::mutex mu;
  std::vector<Clock::time_point> at;  // when each eviction was sent, on the fake clock
  std::deque<int> answers;
  bool hold = false;
  DriftSandbox sandbox;
  kube::Store<ComponentRecord> components{decode_component_record};
  std::unique_ptr<DriftAudit> audit;
  runtime::CancelToken live;  // never stopped
  std::vector<std::string> count_changes;  // on_count_change, under mu

  explicit DriftFixture(std::chrono::milliseconds settle, std::vector<json> pods = {component_pod("p0")},
                        json component = untrusted_component()) {
    components.begin_replace();
    components.add_listed(std::move(component));
    components.end_replace("1");
    for (auto& p : pods) api.put(kPodsPath, std::move(p));
    api.prepend_reactor("create", "/eviction", [this](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
      {
        std::lock_guard lock(mu);
        at.push_back(clock->now());
      }
      if (hold) {  // in flight until cancelled (bounded)
        kube::fake::Gate().wait(a.cancel);
        if (a.cancel.stop_requested()) return kube::ApiError{"CREATE: cancelled", 0, "Cancelled", {}};
      }
      int code = 201;
      std::lock_guard lock(mu);
      if (!answers.empty()) {
        code = answers.front();
        answers.pop_front();
      }
      if (code != 201) return kube::ApiError{"CREATE " + a.path + ": " + std::to_string(code), code, {}, {}};
      return json{{"kind", "Status"}, {"status", "Success"}};
    });
    DriftOptions o;
    o.gate.runtime_class = "kata-fc";
    o.evict = true;
    o.evict_per_minute = 6000;
    o.evict_settle = settle;
    o.clock = clock;
    o.on_count_change = [this](std::string_view key) {
      std::lock_guard lock(mu);
      count_changes.emplace_back(key);
    };
    audit = std::make_unique<DriftAudit>(api, components, sandbox, nullptr, std::move(o));
    audit->start();
  }
  ~DriftFixture() { audit->stop(); }
  std::size_t count() const { return api.count("create", "/eviction"); }
  // isolation_gate_evictions_total{result=...} as written.
  std::uint64_t evictions(const std::string& result) const {
    std::string text;
    prometheus::TextWriter out(text);
    audit->write_metrics(out);
    const std::string line = "isolation_gate_evictions_total{result=\"" + result + "\"} ";
    const auto at = text.find(line);
    return at == std::string::npos ? ~0ull : std::stoull(text.substr(at + line.size()));
  }
  kube::fake::Action eviction(std::size_t i) const { return api.actions("create", "/eviction").at(i); }

  // Passes (bounded, real time: the pod cache is a reflector) until the
  // Component has `n` drifted pods.
  bool pass_until_drifted(std::size_t n) {
    return pass_until([&] { return audit->drifted("team-a/report-parser") == n; });
  }
  template <typename Pred>
  bool pass_until(Pred done) {
    for (int i = 0; i < 1000; ++i) {
      auto r = audit->reconcile(std::string(DriftAudit::kPass), live);
      if (!r) return false;
      if (audit->synced() && done()) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }
  std::size_t changes() {
    std::lock_guard lock(mu);
    return count_changes.size();
  }
  Result<runtime::Requeue> evict_p0(const runtime::CancelToken& cancel) {
    return audit->reconcile("team-a/p0", cancel);
  }
};

TEST(DriftAudit, ADriftedPodIsEvictedOnlyOnceTheSettleTimeHasPassed) {
  DriftFixture f(60s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  auto r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(60s));  // requeued after the settle time
  EXPECT_EQ(f.count(), 0u);
  f.clock->advance(59s);
  ASSERT_TRUE(f.pass_until_drifted(1));  // still drifted: the settle time runs on
  r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(1s));
  EXPECT_EQ(f.count(), 0u);
  f.clock->advance(1s);
  r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_FALSE(r->requeue);
  EXPECT_EQ(r->after, Clock::duration::zero());
  ASSERT_EQ(f.count(), 1u);
  EXPECT_EQ(f.eviction(0).path, kEvictionPath);
  const json body = f.eviction(0).body;
  EXPECT_EQ(body["apiVersion"], "policy/v1");
  EXPECT_EQ(body["kind"], "Eviction");
  EXPECT_EQ(body["metadata"]["name"], "p0");
  EXPECT_EQ(body["deleteOptions"]["preconditions"]["uid"], "uid-p0");
  EXPECT_EQ(f.evictions("evicted"), 1u);
  // Done with it: reconciled again, nothing more is sent.
  r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(f.count(), 1u);
}

// The settle time runs per pod from the first pass that saw it drift (one
// that stops drifting starts over: APodThatStopsDriftingIsNotEvicted).
TEST(DriftAudit, EachDriftedPodSettlesFromThePassThatFirstSawIt) {
  DriftFixture f(60s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  f.clock->advance(30s);
  ASSERT_TRUE(f.api.push(kPodsPath, {kube::WatchEvent::Type::Added, component_pod("p1")}));
  ASSERT_TRUE(f.pass_until_drifted(2));  // p0 seen again: its first sighting stands
  auto r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(30s));
  r = f.audit->reconcile("team-a/p1", f.live);  // another pod starts its own
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(60s));
  EXPECT_EQ(f.count(), 0u);
}

TEST(DriftAudit, ANewTermPassesOnlyOnceItsOwnPodListCame) {
  DriftFixture f(60s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  f.audit->stop();
  // The next term's list fails: its pod cache still holds the last term's pods.
  f.api.prepend_reactor("list", std::string(kPodsPath), [](const kube::fake::Action& a) -> std::optional<kube::fake::Reply> {
    return kube::ApiError{"LIST " + a.path + ": 500", 500, "InternalError", {}};
  });
  f.audit->start();
  for (int i = 0; i < 3; ++i) {
    auto r = f.audit->reconcile(std::string(DriftAudit::kPass), f.live);
    ASSERT_TRUE(r) << r.error();
    EXPECT_GT(r->after, Clock::duration::zero());  // not ready: polled again
  }
  EXPECT_FALSE(f.audit->synced());  // no pass ran on the last term's pods
}

TEST(DriftAudit, APodThatStopsDriftingIsNotEvicted) {
  DriftFixture f(60s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  // Recreated on the sandbox (same name, same uid here: only its placement changed).
  ASSERT_TRUE(f.api.push(kPodsPath, {kube::WatchEvent::Type::Modified, component_pod("p0", "kata-fc")}));
  ASSERT_TRUE(f.pass_until_drifted(0));
  f.clock->advance(61s);
  auto r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration::zero());  // forgotten, not requeued
  EXPECT_EQ(f.count(), 0u);
  // Drifted again: the settle time starts over.
  ASSERT_TRUE(f.api.push(kPodsPath, {kube::WatchEvent::Type::Modified, component_pod("p0")}));
  ASSERT_TRUE(f.pass_until_drifted(1));
  r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(60s));
  EXPECT_EQ(f.count(), 0u);
}

TEST(DriftAudit, AStoppedCancelTokenSendsNoEvictionAndAbandonsOneInFlight) {
  DriftFixture f(0s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  std::stop_source lost;
  lost.request_stop();
  auto r = f.evict_p0(lost.get_token());
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(f.count(), 0u);
  // One in flight when leadership is lost: abandoned, neither evicted nor failed.
  f.hold = true;
  std::stop_source term;
  auto pending = std::async(std::launch::async, [&] { return f.evict_p0(term.get_token()); });
  ASSERT_TRUE(f.api.wait_actions(1, "create", "/eviction"));
  term.request_stop();
  ASSERT_EQ(pending.wait_for(10s), std::future_status::ready);
  r = pending.get();
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration::zero());
  EXPECT_EQ(f.evictions("evicted"), 0u);
  EXPECT_EQ(f.evictions("failed"), 0u);
  EXPECT_EQ(f.count(), 1u);
}

TEST(DriftAudit, APdbRefusalIsRetriedAfterRetryAfterAndANotFoundForgetsThePod) {
  DriftFixture f(0s);
  ASSERT_TRUE(f.pass_until_drifted(1));
  f.answers = {429, 404};
  auto r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration(10s));  // no Retry-After: the eviction retry (10 s)
  EXPECT_EQ(f.evictions("blocked"), 1u);
  f.clock->advance(10s);  // the requeue's wait (the rate limit has a token again too)
  r = f.evict_p0(f.live);
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(r->after, Clock::duration::zero());
  r = f.evict_p0(f.live);  // forgotten: nothing sent
  ASSERT_TRUE(r) << r.error();
  EXPECT_EQ(f.count(), 2u);
}

// Pods on the sandbox that run what their Component does not declare are
// counted per Component (one example: the first by name, and what it runs);
// a bound pod is not, nor a pod off the sandbox (that one is drift). A change
// of the count or the example is reported to on_count_change, no change is not.
TEST(DriftAudit, SandboxedPodsUnboundOutsideAMicroVMAreCountedWithAnExample) {
  constexpr std::string_view kKey = "team-a/report-parser";
  json with_args = component_pod("web-b", "kata-fc");
  with_args["spec"]["containers"][0]["args"] = {"--x"};
  json with_env_from = component_pod("web-c", "kata-fc");
  with_env_from["spec"]["containers"][0]["envFrom"] = json::array({{{"configMapRef", {{"name", "cfg"}}}}});
  json off_sandbox = component_pod("web-d");
  off_sandbox["spec"]["containers"][0]["args"] = {"--x"};
  DriftFixture f(60s, {component_pod("web-a", "kata-fc"), with_args, with_env_from, off_sandbox},
                 bound_component());
  ASSERT_TRUE(f.pass_until([&] { return f.audit->unbound(kKey).count == 2; }));
  UnboundPods u = f.audit->unbound(kKey);
  EXPECT_EQ(u.example_pod, "web-b");
  EXPECT_EQ(u.example_phrase,
            R"(container "main" sets args ["--x"] where the Component declares spec.args none (the image's CMD))");
  EXPECT_EQ(f.audit->drifted(kKey), 1u);  // web-d: drift, not counted here
  EXPECT_EQ(f.changes(), 1u);             // one change of the Component: reported once
  // Nothing changed: a pass reports nothing.
  ASSERT_TRUE(f.audit->reconcile(std::string(DriftAudit::kPass), f.live));
  EXPECT_EQ(f.changes(), 1u);
  // The example goes: the count and the example change, reported.
  ASSERT_TRUE(f.api.push(kPodsPath, {kube::WatchEvent::Type::Deleted, with_args}));
  ASSERT_TRUE(f.pass_until([&] { return f.audit->unbound(kKey).count == 1; }));
  u = f.audit->unbound(kKey);
  EXPECT_EQ(u.example_pod, "web-c");
  EXPECT_EQ(u.example_phrase, R"(container "main" takes envFrom (its keys cannot be checked))");
  EXPECT_EQ(f.changes(), 2u);
  // The last one goes: none left, reported.
  ASSERT_TRUE(f.api.push(kPodsPath, {kube::WatchEvent::Type::Deleted, with_env_from}));
  ASSERT_TRUE(f.pass_until([&] { return f.audit->unbound(kKey).count == 0; }));
  EXPECT_EQ(f.audit->unbound(kKey), UnboundPods{});
  EXPECT_EQ(f.changes(), 3u);
}

// Through the engine (a manager on the fake clock): an eviction that fails is
// an error, retried after 10 s, then twice that (per-key backoff).
TEST(DriftAudit, AFailedEvictionIsRetriedWithTheEnginesBackoff) {
  DriftFixture f(0s);
  f.answers = {500, 500, 201};
  runtime::Manager manager(runtime::ManagerOptions{f.clock, {}});
  manager.add(f.audit->runnable(), /*needs_leader=*/true);
  ASSERT_TRUE(manager.start());
  manager.start_leading();
  // The fake time moves in steps until the third attempt (bounded).
  for (int i = 0; i < 2000 && f.evictions("evicted") == 0; ++i) {
    f.clock->advance(100ms);
    std::this_thread::sleep_for(2ms);
  }
  manager.stop();
  ASSERT_EQ(f.evictions("evicted"), 1u);
  EXPECT_EQ(f.evictions("failed"), 2u);
  std::lock_guard lock(f.mu);
  ASSERT_EQ(f.at.size(), 3u);
  EXPECT_GE(f.at[1] - f.at[0], Clock::duration(10s));
  EXPECT_GE(f.at[2] - f.at[1], Clock::duration(20s));
}

}  // namespace
}  // namespace ig::controller
