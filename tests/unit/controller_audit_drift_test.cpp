// The drift audit's report on audit namespaces (src/controller/drift.h,
// "Audit namespaces"): which running pods enforcement would deny, judged by
// admission's own rules, the gauge made of them, and the pod cache that keeps
// only the pods of audit namespaces.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "admission/catalog.h"
#include "config/defaults.h"
#include "controller/drift.h"
#include "kube/store.h"
#include "model/component.h"

namespace ig::controller {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using json = nlohmann::json;
using admission::Reason;
using policy::DeploymentShape;
using policy::SandboxAvailability;

const std::string kLabel(model::kComponentLabel);
constexpr const char* kAudit = "team-c";
constexpr const char* kImage = "registry.example.com/x:1";

model::Component make_component(const std::string& name, const std::string& trust) {
  model::Component c;
  c.name = name;
  c.namespace_ = kAudit;
  c.kind = "tool";
  c.image = kImage;
  c.set_trust_raw(trust);
  return c;
}

admission::StaticCatalog catalog() {
  admission::StaticCatalog c;
  EXPECT_TRUE(c.add(make_component("report-parser", "untrusted"), kAudit));
  EXPECT_TRUE(c.add(make_component("docs-indexer", "trusted"), kAudit));
  return c;
}

admission::GateSettings hosted() {
  admission::GateSettings s;
  s.runtime_class = std::string(config::kDefaultRuntimeClass);
  s.own_namespace = std::string(config::kDefaultNamespace);
  s.shape = {DeploymentShape::SetecOnly, false};
  return s;
}

// A pod as the API lists it: no kind or apiVersion.
json listed_pod(const std::string& name, const std::string& component, const std::string& ns = kAudit) {
  json p = {{"metadata", {{"name", name}, {"namespace", ns}, {"uid", "uid-" + name}}},
            {"spec", {{"containers", json::array({{{"name", "main"}, {"image", kImage}}})}}},
            {"status", {{"phase", "Running"}}}};
  if (!component.empty()) p["metadata"]["labels"] = {{kLabel, component}};
  return p;
}

std::shared_ptr<const AuditPod> audit_pod(const json& pod) {
  auto p = decode_audit_pod(pod);
  EXPECT_TRUE(p.ok()) << p.error();
  return std::make_shared<const AuditPod>(std::move(p).value());
}

std::vector<WouldDeny> judge(const std::vector<json>& pods, SandboxAvailability sandbox,
                             std::set<std::string, std::less<>> audit = {kAudit},
                             admission::GateSettings settings = hosted()) {
  std::vector<std::shared_ptr<const AuditPod>> decoded;
  for (const auto& p : pods) decoded.push_back(audit_pod(p));
  const auto components = catalog();
  admission::FixedSandbox fixed(sandbox);
  return audit_would_deny(decoded, audit, admission::AdmissionContext{settings, components, fixed});
}

std::vector<std::string> names(const std::vector<WouldDeny>& found) {
  std::vector<std::string> out;
  for (const auto& f : found) out.push_back(f.namespace_ + "/" + f.name + " " + std::string(admission::to_string(f.reason)));
  return out;
}

TEST(AuditWouldDeny, ReportsWhatMutatePodsWouldDenyUnlabelledPodsIncluded) {
  const auto found = judge({listed_pod("fine", "docs-indexer"), listed_pod("untrusted", "report-parser"),
                            listed_pod("unlabelled", ""), listed_pod("ghost", "no-such-component")},
                           SandboxAvailability::Unavailable);
  EXPECT_THAT(names(found), ElementsAre("team-c/ghost UnknownComponent", "team-c/unlabelled MissingComponentLabel",
                                        "team-c/untrusted SandboxUnavailable"));
  EXPECT_EQ(found[2].uid, "uid-untrusted");
  // The message is the one /mutate/pods would give the pod.
  EXPECT_THAT(found[1].message, HasSubstr("it has no label " + kLabel));
  EXPECT_THAT(found[2].message, HasSubstr("report-parser"));
}

TEST(AuditWouldDeny, APodTheSandboxWouldTakeIsNotDenied) {
  // With the sandbox available the untrusted pod would be patched onto it
  // (RequireSetec), not denied: no runtimeClassName yet is no denial.
  const auto found = judge({listed_pod("untrusted", "report-parser"), listed_pod("unlabelled", "")},
                           SandboxAvailability::Available);
  EXPECT_THAT(names(found), ElementsAre("team-c/unlabelled MissingComponentLabel"));
}

TEST(AuditWouldDeny, OnlyNamespacesInAuditModeAndNeverTheGatesOwn) {
  const std::string own(config::kDefaultNamespace);
  const auto found = judge({listed_pod("a", "", "team-a"), listed_pod("b", "", kAudit), listed_pod("c", "", own)},
                           SandboxAvailability::Unavailable, {kAudit, own});
  EXPECT_THAT(names(found), ElementsAre("team-c/b MissingComponentLabel"));
  EXPECT_THAT(judge({listed_pod("b", "", kAudit)}, SandboxAvailability::Unavailable, {}), IsEmpty());
}

TEST(AuditWouldDeny, TheGaugeCountsByNamespaceAndReason) {
  auto found = judge({listed_pod("u1", ""), listed_pod("u2", ""), listed_pod("x", "report-parser"),
                      listed_pod("d", "", "team-d")},
                     SandboxAvailability::Unavailable, {kAudit, "team-d"});
  const WouldDenyCounts counts = count_would_deny(found);
  const WouldDenyCounts expected = {{{"team-c", "MissingComponentLabel"}, 2},
                                    {{"team-c", "SandboxUnavailable"}, 1},
                                    {{"team-d", "MissingComponentLabel"}, 1}};
  EXPECT_EQ(counts, expected);
  EXPECT_THAT(count_would_deny({}), IsEmpty());  // no series at zero
}

TEST(AuditPodDecode, KeepsWhatAdmissionReadsOnCreateWithoutEphemeralContainers) {
  json pod = listed_pod("p", "report-parser");
  pod["spec"]["ephemeralContainers"] = json::array(
      {{{"name", "debugger"}, {"image", "busybox"}, {"securityContext", {{"privileged", true}}}}});
  auto p = decode_audit_pod(pod);
  ASSERT_TRUE(p.ok()) << p.error();
  EXPECT_EQ(p->uid, "uid-p");
  EXPECT_EQ(p->facts.namespace_, kAudit);
  EXPECT_EQ(p->facts.object_name, "p");
  EXPECT_EQ(p->facts.component, "report-parser");
  ASSERT_EQ(p->facts.containers.size(), 1u);
  EXPECT_EQ(p->facts.containers[0].name, "main");
  EXPECT_THAT(p->facts.privileged_containers, IsEmpty());
  EXPECT_FALSE(decode_audit_pod(json::array()).ok());
  EXPECT_FALSE(decode_audit_pod(json{{"metadata", {{"name", "p"}}}}).ok());  // no spec
}

TEST(AuditPodDecode, RunningMeansNotFinishedAndNotBeingDeleted) {
  json pod = listed_pod("p", "");
  EXPECT_TRUE(pod_is_running(pod));
  pod["status"]["phase"] = "Failed";
  EXPECT_FALSE(pod_is_running(pod));
  pod["status"]["phase"] = "Pending";
  EXPECT_TRUE(pod_is_running(pod));
  pod["metadata"]["deletionTimestamp"] = "2026-12-05T10:00:00Z";
  EXPECT_FALSE(pod_is_running(pod));
}

TEST(AuditNamespaceDecode, NameAndUid) {
  auto n = decode_audit_namespace({{"metadata", {{"name", "team-c"}, {"uid", "u-1"}}}});
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_EQ(n->name, "team-c");
  EXPECT_EQ(n->uid, "u-1");
  EXPECT_FALSE(decode_audit_namespace(json{{"metadata", json::object()}}).ok());
}

// The Store's `keep`: the audit pod cache holds only running pods of audit
// namespaces; an event that makes a held pod refused removes it.
TEST(AuditPodCache, KeepsOnlyWhatKeepAcceptsAndDropsAPodThatStopsBeingKept) {
  std::set<std::string> audit = {kAudit};
  std::vector<std::string> changes;
  kube::Store<AuditPod> store(
      decode_audit_pod, [&](std::string_view key) { changes.emplace_back(key); },
      [&](const json& pod) { return pod_is_running(pod) && audit.count(pod["metadata"]["namespace"].get<std::string>()) > 0; });
  store.begin_replace();
  store.add_listed(listed_pod("a", ""));
  store.add_listed(listed_pod("b", "", "team-a"));
  store.end_replace("1");
  EXPECT_EQ(store.size(), 1u);
  EXPECT_TRUE(store.find("team-c/a"));
  EXPECT_EQ(store.decode_errors(), 0u);  // left out, not an error
  json finished = listed_pod("a", "");
  finished["status"]["phase"] = "Succeeded";
  store.apply(kube::WatchEvent::Type::Modified, finished);
  EXPECT_FALSE(store.find("team-c/a"));
  store.apply(kube::WatchEvent::Type::Added, listed_pod("c", "", "team-a"));
  EXPECT_EQ(store.size(), 0u);
  store.apply(kube::WatchEvent::Type::Added, listed_pod("d", ""));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.decode_errors(), 0u);
}

}  // namespace
}  // namespace ig::controller
