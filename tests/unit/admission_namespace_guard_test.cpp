// The enforcement guard (src/admission/namespace_guard.h) through the webhook
// (webhook.h): Namespace UPDATEs that switch enforcement off are refused
// unless the requester is an enforcement admin; the observer sees every
// change; undecidable requests are denied; metrics count by reason.
#include "admission/namespace_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "admission/webhook.h"

namespace ig::admission {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

class NoComponents final : public ComponentLookup {
 public:
  LookupResult find(std::string_view, std::string_view) const override {
    return {LookupResult::Status::NotFound, nullptr, ""};
  }
};

json ns_object(const std::string& name, const std::optional<json>& label) {
  json md = {{"name", name}, {"labels", {{"kubernetes.io/metadata.name", name}}}};
  if (label) md["labels"][std::string(kEnforcementLabel)] = *label;
  return {{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", md}};
}

json review(const json& old_object, const json& object, const std::vector<std::string>& groups,
            const std::string& operation = "UPDATE", bool dry_run = false) {
  json req = {{"uid", "u-1"},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Namespace"}}},
              {"resource", {{"group", ""}, {"version", "v1"}, {"resource", "namespaces"}}},
              {"name", "team-a"},
              {"namespace", "team-a"},
              {"operation", operation},
              {"userInfo", {{"username", "mallory"}, {"groups", groups}}},
              {"dryRun", dry_run}};
  if (!object.is_null()) req["object"] = object;
  if (!old_object.is_null()) req["oldObject"] = old_object;
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}};
}

class NamespaceGuardTest : public ::testing::Test {
 protected:
  NamespaceGuardTest()
      : sandbox_(policy::SandboxAvailability::Available),
        webhook_(AdmissionContext{settings(), components_, sandbox_},
                 WebhookOptions{[this](const DenialNotice&) { ++denials_; },
                                [this](const GuardedChangeNotice& n) {
                                  notices_.push_back(n.change);
                                  reasons_.push_back(n.reason);
                                }}) {}

  static GateSettings settings() {
    GateSettings s;
    s.runtime_class = "kata-fc";
    s.own_namespace = "isolation-gate-system";
    s.enforcement_admins = {"system:masters", "platform-admins"};
    return s;
  }

  json answer(const json& body) {
    http::Response r = webhook_.serve({"POST", "/validate/namespaces", "application/json", body.dump()});
    EXPECT_EQ(r.status, 200u) << r.body;
    return json::parse(r.body).at("response");
  }

  NoComponents components_;
  FixedSandbox sandbox_;
  std::vector<GuardedChange> notices_;
  std::vector<Reason> reasons_;
  int denials_ = 0;  // on_denial calls: none, the refusal is an enforcement notice
  Webhook webhook_;
};

const json kEnforced = ns_object("team-a", json("enforced"));
const json kUnlabelled = ns_object("team-a", std::nullopt);

// Audit mode (gibson.zeroroot.ai/isolation=audit): audit -> enforced tightens
// (anyone who may label), enforced -> audit loosens (enforcement admins only).
TEST_F(NamespaceGuardTest, AuditToEnforcedIsATighteningEnforcedToAuditALoosening) {
  const json audit = ns_object("team-a", json("audit"));
  json r = answer(review(audit, kEnforced, {"system:authenticated"}));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  ASSERT_EQ(reasons_.size(), 1u);
  EXPECT_EQ(reasons_[0], Reason::EnforcementAdded);
  r = answer(review(kEnforced, audit, {"system:authenticated"}));
  EXPECT_FALSE(r.at("allowed").get<bool>());
  EXPECT_THAT(r["status"]["message"].get<std::string>(),
              HasSubstr("changing label gibson.zeroroot.ai/isolation of namespace \"team-a\" from \"enforced\" to \"audit\""));
  r = answer(review(kEnforced, audit, {"platform-admins"}));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  ASSERT_EQ(reasons_.size(), 3u);
  EXPECT_EQ(reasons_[2], Reason::EnforcementRemovedByAdmin);
  // audit -> absent switches nothing off.
  r = answer(review(audit, kUnlabelled, {"system:authenticated"}));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  EXPECT_EQ(reasons_.size(), 3u);
}

TEST_F(NamespaceGuardTest, RemovingTheLabelIsRefusedForOrdinaryUsers) {
  const json r = answer(review(kEnforced, kUnlabelled, {"system:authenticated", "developers"}));
  EXPECT_FALSE(r.at("allowed").get<bool>());
  EXPECT_EQ(r["status"]["code"], 403);
  const std::string message = r["status"]["message"];
  EXPECT_THAT(message, HasSubstr("removing label gibson.zeroroot.ai/isolation=enforced from namespace \"team-a\""));
  EXPECT_THAT(message, HasSubstr("user \"mallory\" is not in an enforcement-admin group"));
  EXPECT_THAT(message, HasSubstr("system:masters, platform-admins"));
  EXPECT_EQ(r["auditAnnotations"]["enforcement-before"], "enforced");
  EXPECT_EQ(r["auditAnnotations"]["enforcement-after"], "");
  ASSERT_EQ(notices_.size(), 1u);
  EXPECT_EQ(reasons_[0], Reason::EnforcementChangeRefused);
  EXPECT_TRUE(notices_[0].removed);
  EXPECT_EQ(notices_[0].name, "team-a");
  EXPECT_EQ(notices_[0].username, "mallory");
  EXPECT_EQ(denials_, 0);
}

TEST_F(NamespaceGuardTest, ChangingTheValueIsAChangeToo) {
  for (const char* value : {"Enforced", "enforced ", "off", ""}) {
    const json r = answer(review(kEnforced, ns_object("team-a", json(value)), {"developers"}));
    EXPECT_FALSE(r.at("allowed").get<bool>()) << value;
    EXPECT_THAT(r["status"]["message"].get<std::string>(), HasSubstr("changing label")) << value;
  }
  ASSERT_EQ(notices_.size(), 4u);
  EXPECT_FALSE(notices_[0].removed);
  EXPECT_EQ(notices_[0].after, "Enforced");
}

TEST_F(NamespaceGuardTest, AnEnforcementAdminMayRemoveItAndIsRecorded) {
  const json r = answer(review(kEnforced, kUnlabelled, {"system:authenticated", "platform-admins"}));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  EXPECT_EQ(r["auditAnnotations"]["enforcement-changed-by"], "mallory");
  EXPECT_EQ(r["auditAnnotations"]["enforcement-admin-group"], "platform-admins");
  ASSERT_TRUE(r.contains("warnings"));
  EXPECT_THAT(r["warnings"][0].get<std::string>(), HasSubstr("no longer enforces namespace \"team-a\""));
  ASSERT_EQ(notices_.size(), 1u);
  EXPECT_EQ(reasons_[0], Reason::EnforcementRemovedByAdmin);
  EXPECT_EQ(notices_[0].admin_group, "platform-admins");
  EXPECT_THAT(webhook_.metrics().render(),
              HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/validate/namespaces\",outcome=\"Allowed\","
                        "reason=\"EnforcementRemovedByAdmin\",allowed=\"true\"} 1"));
}

TEST_F(NamespaceGuardTest, GroupsAreComparedExactly) {
  for (const char* group : {"System:Masters", "system:masters ", "platform-admin"}) {
    const json r = answer(review(kEnforced, kUnlabelled, {group}));
    EXPECT_FALSE(r.at("allowed").get<bool>()) << group;
  }
}

TEST_F(NamespaceGuardTest, SwitchingOnIsAllowedAndRecorded) {
  const json r = answer(review(kUnlabelled, kEnforced, {}));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  ASSERT_EQ(reasons_.size(), 1u);
  EXPECT_EQ(reasons_[0], Reason::EnforcementAdded);
}

TEST_F(NamespaceGuardTest, OtherEditsAreAllowedAndNotRecorded) {
  json relabelled = kEnforced;
  relabelled["metadata"]["labels"]["team"] = "payments";
  EXPECT_TRUE(answer(review(kEnforced, relabelled, {})).at("allowed").get<bool>());
  // A label that never enforced may come and go.
  EXPECT_TRUE(answer(review(ns_object("team-a", json("audit")), kUnlabelled, {})).at("allowed").get<bool>());
  EXPECT_TRUE(notices_.empty());
}

TEST_F(NamespaceGuardTest, DryRunIsJudgedTheSameButNotRecorded) {
  const json r = answer(review(kEnforced, kUnlabelled, {"developers"}, "UPDATE", true));
  EXPECT_FALSE(r.at("allowed").get<bool>());
  EXPECT_TRUE(notices_.empty());
}

TEST_F(NamespaceGuardTest, StatusAndFinalizeSubresourcesAreGuardedToo) {
  for (const char* sub : {"status", "finalize"}) {
    json body = review(kEnforced, kUnlabelled, {"developers"});
    body["request"]["subResource"] = sub;
    EXPECT_FALSE(answer(body).at("allowed").get<bool>()) << sub;
  }
}

TEST_F(NamespaceGuardTest, UndecidableRequestsAreDenied) {
  auto undecidable = [this](const json& body, const std::string& what) {
    const json r = answer(body);
    EXPECT_FALSE(r.at("allowed").get<bool>()) << what;
    EXPECT_EQ(r["status"]["code"], 400) << what;
    EXPECT_THAT(r["status"]["message"].get<std::string>(), HasSubstr(what));
  };
  undecidable(review(json(), kUnlabelled, {}), "request.oldObject is missing");
  undecidable(review(kEnforced, json(), {}), "request.object is missing");
  undecidable(review(kEnforced, ns_object("team-a", json(1)), {}), "expected a string, got a number");
  json bad_groups = review(kEnforced, kUnlabelled, {});
  bad_groups["request"]["userInfo"]["groups"] = json::array({"system:masters", 7});
  undecidable(bad_groups, "request.userInfo.groups: expected a list of strings");
  json bad_user = review(kEnforced, kUnlabelled, {});
  bad_user["request"]["userInfo"] = "root";
  undecidable(bad_user, "request.userInfo: expected a map");
  json pod = review(kEnforced, kUnlabelled, {});
  pod["request"]["kind"] = {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}};
  undecidable(pod, "this endpoint admits Namespaces, got Pod");
  json sub = review(kEnforced, kUnlabelled, {});
  sub["request"]["subResource"] = "proxy";
  undecidable(sub, "subresource proxy is not admitted here");
  undecidable(review(kEnforced, kUnlabelled, {"system:masters"}, "update"), "is not one of CREATE");
  EXPECT_TRUE(notices_.empty());
}

TEST_F(NamespaceGuardTest, CreateAndDeleteAreNotEnforced) {
  EXPECT_TRUE(answer(review(json(), kEnforced, {}, "CREATE")).at("allowed").get<bool>());
  EXPECT_TRUE(answer(review(kEnforced, json(), {}, "DELETE")).at("allowed").get<bool>());
}

TEST_F(NamespaceGuardTest, WithoutAdminGroupsNobodyMaySwitchItOff) {
  NoComponents none;
  FixedSandbox sandbox(policy::SandboxAvailability::Available);
  GateSettings s = settings();
  s.enforcement_admins.clear();
  Webhook webhook(AdmissionContext{s, none, sandbox});
  http::Response r = webhook.serve(
      {"POST", "/validate/namespaces", "application/json", review(kEnforced, kUnlabelled, {"system:masters"}).dump()});
  const json resp = json::parse(r.body).at("response");
  EXPECT_FALSE(resp.at("allowed").get<bool>());
  EXPECT_THAT(resp["status"]["message"].get<std::string>(), HasSubstr("none is configured (--enforcement-admins)"));
}

}  // namespace
}  // namespace ig::admission
