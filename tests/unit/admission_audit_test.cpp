// Audit mode (src/admission/audit.h): through the webhook, /audit/pods and
// /audit/workloads answer what enforcement would, as warnings and metrics,
// never denying or patching; undecidable requests stay denied.
#include "admission/audit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "model/component.h"

namespace ig::admission {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using json = nlohmann::json;

model::Component untrusted() {
  json doc = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
              {"kind", "Component"},
              {"metadata", {{"name", "parser"}, {"namespace", "team-c"}}},
              {"spec", {{"kind", "tool"}, {"image", "registry.example.com/p:1"}, {"policy", {{"content_trust", "untrusted"}}}}}};
  return *model::decode_component(doc, "test");
}

json review(const json& pod, const std::string& operation = "CREATE") {
  json req = {{"uid", "u-1"},
              {"kind", {{"group", ""}, {"version", "v1"}, {"kind", "Pod"}}},
              {"namespace", "team-c"},
              {"operation", operation},
              {"userInfo", {{"username", "dev"}}},
              {"object", pod}};
  return {{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", req}};
}

json pod(const std::optional<std::string>& component) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "p"}, {"namespace", "team-c"}}},
            {"spec", {{"containers", json::array({{{"name", "c"}, {"image", "registry.example.com/p:1"}}})}}}};
  if (component) p["metadata"]["labels"] = {{"gibson.zeroroot.ai/component", *component}};
  return p;
}

struct Audit {
  explicit Audit(policy::SandboxAvailability sb) : sandbox(sb) {
    EXPECT_TRUE(catalog.add(untrusted(), "team-c"));
    GateSettings s;
    s.runtime_class = "kata-fc";
    s.own_namespace = "isolation-gate-system";
    webhook = std::make_unique<Webhook>(AdmissionContext{s, catalog, sandbox});
  }
  json answer(const json& body, const std::string& path = "/audit/pods") {
    http::Response r = webhook->serve({"POST", path, "application/json", body.dump()});
    EXPECT_EQ(r.status, 200u) << r.body;
    return json::parse(r.body).at("response");
  }
  StaticCatalog catalog;
  FixedSandbox sandbox;
  std::unique_ptr<Webhook> webhook;
};

TEST(AuditMode, AWouldBeDenialIsAllowedWithWarningsAnnotationsAndAMetric) {
  Audit a(policy::SandboxAvailability::Unavailable);
  for (const auto& [p, reason] : {std::pair{pod("parser"), "SandboxUnavailable"},
                                  std::pair{pod(std::nullopt), "MissingComponentLabel"},
                                  std::pair{pod("nope"), "UnknownComponent"}}) {
    const json r = a.answer(review(p));
    EXPECT_TRUE(r.at("allowed").get<bool>()) << r;
    EXPECT_FALSE(r.contains("patch"));
    EXPECT_EQ(r["auditAnnotations"]["would-deny"], reason);
    EXPECT_THAT(r["auditAnnotations"]["would-deny-message"].get<std::string>(), HasSubstr("denied"));
    EXPECT_THAT(r["warnings"].get<std::vector<std::string>>(),
                Contains("isolation-gate audit: enforcing would deny this (" + std::string(reason) + ")"));
  }
  const std::string metrics = a.webhook->metrics().render();
  EXPECT_THAT(metrics, HasSubstr("isolation_gate_audit_would_deny_total{endpoint=\"/audit/pods\","
                                 "reason=\"SandboxUnavailable\"} 1\n"));
  EXPECT_THAT(metrics, HasSubstr("reason=\"AuditWouldDeny\",allowed=\"true\"} 3\n"));
}

TEST(AuditMode, AWouldBePatchIsNotMade) {
  Audit a(policy::SandboxAvailability::Available);
  const json r = a.answer(review(pod("parser")));
  EXPECT_TRUE(r.at("allowed").get<bool>());
  EXPECT_FALSE(r.contains("patch")) << r;
  EXPECT_FALSE(r.contains("patchType"));
  EXPECT_EQ(r["auditAnnotations"]["would-patch"], "true");
  EXPECT_EQ(r["auditAnnotations"]["decision"], "RequireSetec");
  EXPECT_THAT(a.webhook->metrics().render(),
              HasSubstr("isolation_gate_audit_would_patch_total{endpoint=\"/audit/pods\",reason=\"SandboxAvailable\"} 1\n"));
}

TEST(AuditMode, AnUndecidableRequestStaysDenied) {
  Audit a(policy::SandboxAvailability::Unavailable);
  json body = review(pod("parser"));
  body["request"]["operation"] = "BOGUS";
  const json r = a.answer(body);
  EXPECT_FALSE(r.at("allowed").get<bool>());
  EXPECT_EQ(r["status"]["code"], 400);
}

TEST(AuditMode, WorkloadTemplatesAreAuditedToo) {
  Audit a(policy::SandboxAvailability::Unavailable);
  json d = {{"apiVersion", "apps/v1"},
            {"kind", "Deployment"},
            {"metadata", {{"name", "d"}, {"namespace", "team-c"}}},
            {"spec", {{"template", {{"metadata", pod("parser")["metadata"]}, {"spec", pod("parser")["spec"]}}}}}};
  json body = review(d);
  body["request"]["kind"] = {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}};
  const json r = a.answer(body, "/audit/workloads");
  EXPECT_TRUE(r.at("allowed").get<bool>()) << r;
  EXPECT_EQ(r["auditAnnotations"]["would-deny"], "SandboxUnavailable");
}

}  // namespace
}  // namespace ig::admission
