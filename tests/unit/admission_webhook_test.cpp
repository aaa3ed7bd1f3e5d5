// The webhook's HTTP-level handler in-process (src/admission/webhook.h,
// routes.h, handlers.h, answer.h, review.h, metrics.h): routing, the
// AdmissionReview contract, fail-closed answers, the per-endpoint behaviour,
// metrics and readiness.
#include "admission/webhook.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <optional>
#include <string>

#include "admission/catalog.h"
#include "config/defaults.h"
#include "model/document.h"
#include "model/pod.h"

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the repository root"
#endif

namespace ig::admission {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using json = nlohmann::json;
using policy::DeploymentShape;
using policy::SandboxAvailability;

constexpr const char* kNs = "team-a";
const std::string kAnnotation(model::kIsolationAnnotation);

// ---- helpers -------------------------------------------------------------

// A sandbox whose availability a test can flip.
class SwitchableSandbox final : public SandboxView {
 public:
  explicit SwitchableSandbox(SandboxAvailability a) : a_(a) {}
  void set(SandboxAvailability a) { a_.store(a); }
  SandboxAvailability availability() const noexcept override { return a_.load(); }
  std::string describe() const override { return std::string(policy::to_string(a_.load())); }

 private:
  std::atomic<SandboxAvailability> a_;
};

std::optional<std::string> base64_decode(std::string_view in) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  if (in.size() % 4 != 0) return std::nullopt;
  std::string out;
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad) return std::nullopt;
        v[k] = value(c);
        if (v[k] < 0) return std::nullopt;
      }
    }
    const unsigned n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out.push_back(static_cast<char>((n >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xFF));
  }
  return out;
}

json load_example(const std::string& relative) {
  auto doc = model::load_single_document_file(std::string(IG_SOURCE_DIR) + "/examples/" + relative);
  EXPECT_TRUE(doc.ok()) << doc.error();
  return doc.ok() ? *doc : json();
}

struct Gvk {
  std::string group, version, kind;
};

const Gvk kPodKind{"", "v1", "Pod"};
const Gvk kComponentKind{"gibson.zeroroot.ai", "v1alpha1", "Component"};

Gvk gvk_of(const json& object) {
  const std::string api = object.value("apiVersion", "");
  const auto slash = api.find('/');
  if (slash == std::string::npos) return {"", api, object.value("kind", "")};
  return {api.substr(0, slash), api.substr(slash + 1), object.value("kind", "")};
}

json review_json(const std::string& uid, const Gvk& kind, const std::string& operation,
                 const json& object, bool dry_run = false,
                 const std::string& api_version = "admission.k8s.io/v1") {
  json request = {{"uid", uid},
                  {"kind", {{"group", kind.group}, {"version", kind.version}, {"kind", kind.kind}}},
                  {"resource", {{"group", kind.group}, {"version", kind.version}, {"resource", "x"}}},
                  {"namespace", kNs},
                  {"operation", operation},
                  {"userInfo", {{"username", "alice"}}},
                  {"dryRun", dry_run}};
  if (object.is_object() && object.contains("metadata") && object["metadata"].contains("name")) {
    request["name"] = object["metadata"]["name"];
  }
  if (!object.is_null()) request["object"] = object;
  return {{"apiVersion", api_version}, {"kind", "AdmissionReview"}, {"request", request}};
}

http::Request post(const std::string& target, const std::string& body,
                    const std::string& content_type = "application/json") {
  return {"POST", target, content_type, body};
}

http::Request get(const std::string& target) { return {"GET", target, "", ""}; }

// The parsed body of a 200 answer, and its response member.
struct Reply {
  unsigned status = 0;
  json body;
  const json& response() const { return body.at("response"); }
  bool allowed() const { return response().at("allowed").get<bool>(); }
  std::string message() const {
    return response().contains("status") ? response()["status"].value("message", "") : "";
  }
};

class WebhookTest : public ::testing::Test {
 protected:
  WebhookTest()
      : catalog_(load_catalog()),
        sandbox_(SandboxAvailability::Unavailable),
        webhook_(AdmissionContext{settings_for(DeploymentShape::SetecOnly), catalog_, sandbox_},
                 WebhookOptions{}) {}

  static StaticCatalog load_catalog() {
    auto c = StaticCatalog::load_directory(std::string(IG_SOURCE_DIR) + "/examples/components",
                                           kNs);
    EXPECT_TRUE(c.ok()) << c.error();
    EXPECT_EQ(c.ok() ? c->size() : 0u, 3u);
    return c.ok() ? std::move(c).value() : StaticCatalog();
  }

  static GateSettings settings_for(DeploymentShape shape) {
    GateSettings s;
    s.runtime_class = std::string(config::kDefaultRuntimeClass);
    s.own_namespace = std::string(config::kDefaultNamespace);
    s.shape = {shape, false};
    return s;
  }

  Reply send(http::Request request) {
    http::Response r = webhook_.serve(std::move(request));
    Reply a;
    a.status = r.status;
    EXPECT_EQ(r.content_type, "application/json");
    try {
      a.body = json::parse(r.body);
    } catch (const json::exception& e) {
      ADD_FAILURE() << "response body is not JSON: " << r.body;
    }
    return a;
  }

  Reply review(const std::string& path, const json& review) {
    Reply a = send(post(path, review.dump()));
    EXPECT_EQ(a.status, 200u) << a.body.dump();
    return a;
  }

  StaticCatalog catalog_;
  SwitchableSandbox sandbox_;
  Webhook webhook_;
};

// ---- routing -------------------------------------------------------------

TEST_F(WebhookTest, UnknownPathIs404WithAStatusBody) {
  Reply a = send(get("/nope"));
  EXPECT_EQ(a.status, 404u);
  EXPECT_EQ(a.body["kind"], "Status");
  EXPECT_EQ(a.body["code"], 404);
  EXPECT_EQ(a.body["reason"], "NotFound");
  Reply b = send(post("/mutate/pods/extra", "{}"));
  EXPECT_EQ(b.status, 404u);
  Reply c = send(post("/", "{}"));
  EXPECT_EQ(c.status, 404u);
}

TEST_F(WebhookTest, WrongMethodIs405) {
  for (const char* path :
       {"/mutate/pods", "/validate/pods", "/validate/workloads", "/validate/components"}) {
    Reply a = send(get(path));
    EXPECT_EQ(a.status, 405u) << path;
    EXPECT_EQ(a.body["reason"], "MethodNotAllowed") << path;
  }
}

TEST_F(WebhookTest, ContentTypeOtherThanJsonIs415) {
  const std::string body =
      review_json("u1", kPodKind, "CREATE", load_example("pods/report-parser-pod.yaml")).dump();
  for (const char* ct : {"text/plain", "", "application/yaml", "application/jsonx",
                         "application/json-patch+json"}) {
    Reply a = send(post("/mutate/pods", body, ct));
    EXPECT_EQ(a.status, 415u) << ct;
    EXPECT_EQ(a.body["reason"], "UnsupportedMediaType") << ct;
  }
}

TEST_F(WebhookTest, JsonContentTypeWithParametersOrOtherCaseIsAccepted) {
  const std::string body =
      review_json("u1", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml")).dump();
  for (const char* ct : {"application/json", "application/json; charset=utf-8",
                         "Application/JSON", " application/json ;charset=UTF-8"}) {
    Reply a = send(post("/mutate/pods", body, ct));
    EXPECT_EQ(a.status, 200u) << ct;
  }
}

TEST_F(WebhookTest, QueryStringIsIgnored) {
  const json r = review_json("u-timeout", kPodKind, "CREATE",
                             load_example("pods/docs-indexer-pod.yaml"));
  Reply a = review("/mutate/pods?timeout=10s", r);
  EXPECT_EQ(a.response()["uid"], "u-timeout");
  EXPECT_TRUE(a.allowed());
}

// /healthz, /readyz and /metrics are the manager's: runtime_probes_test.cpp.
TEST_F(WebhookTest, ProbePathsAreNotTheWebhooks) {
  for (const char* path : {"/healthz", "/readyz", "/metrics"}) EXPECT_EQ(send(get(path)).status, 404u) << path;
}

// ---- requests that are not AdmissionReviews ------------------------------

TEST_F(WebhookTest, InvalidJsonIs400WithAStatusBody) {
  for (const char* body : {"", "{", "not json", "{\"apiVersion\":}", "\xff\xfe"}) {
    Reply a = send(post("/mutate/pods", body));
    EXPECT_EQ(a.status, 400u) << body;
    EXPECT_EQ(a.body["apiVersion"], "v1");
    EXPECT_EQ(a.body["kind"], "Status");
    EXPECT_EQ(a.body["status"], "Failure");
    EXPECT_EQ(a.body["reason"], "BadRequest");
    EXPECT_EQ(a.body["code"], 400);
    EXPECT_THAT(a.body["message"].get<std::string>(), StartsWith("request body: invalid JSON"))
        << body;
  }
}

TEST_F(WebhookTest, DeeplyNestedJsonIs400NotACrash) {
  const std::string body = std::string(100'000, '[') + std::string(100'000, ']');
  Reply a = send(post("/validate/pods", body));
  EXPECT_EQ(a.status, 400u);
  EXPECT_THAT(a.body["message"].get<std::string>(), HasSubstr("nested deeper than"));
}

TEST_F(WebhookTest, NotAnAdmissionReviewIs400) {
  const json pod = load_example("pods/report-parser-pod.yaml");
  struct Case {
    json body;
    const char* message;
  } cases[] = {
      {pod, "apiVersion must be admission.k8s.io/v1"},
      {json::array(), "expected an AdmissionReview object"},
      {json{{"apiVersion", "admission.k8s.io/v2"}, {"kind", "AdmissionReview"}},
       "apiVersion must be admission.k8s.io/v1"},
      {json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "Review"}},
       "kind must be AdmissionReview"},
  };
  for (const auto& c : cases) {
    Reply a = send(post("/mutate/pods", c.body.dump()));
    EXPECT_EQ(a.status, 400u) << c.body.dump();
    EXPECT_THAT(a.body["message"].get<std::string>(), HasSubstr(c.message));
  }
}

TEST_F(WebhookTest, AReviewWithoutRequestIs400) {
  for (const json& body :
       {json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}},
        json{{"apiVersion", "admission.k8s.io/v1"}, {"kind", "AdmissionReview"}, {"request", 1}}}) {
    Reply a = send(post("/validate/pods", body.dump()));
    EXPECT_EQ(a.status, 400u);
    EXPECT_EQ(a.body["message"], "request body: AdmissionReview has no request");
  }
}

TEST_F(WebhookTest, AReviewWithoutUidIs400) {
  json r = review_json("", kPodKind, "CREATE", load_example("pods/report-parser-pod.yaml"));
  Reply a = send(post("/mutate/pods", r.dump()));
  EXPECT_EQ(a.status, 400u);
  EXPECT_EQ(a.body["message"], "request body: request.uid is missing");
  r["request"]["uid"] = 12;
  EXPECT_EQ(send(post("/mutate/pods", r.dump())).status, 400u);
}

// ---- the AdmissionReview contract ----------------------------------------

TEST_F(WebhookTest, AReviewWithUidButNoObjectIsAnsweredNotAllowedWithCode400) {
  const json r = review_json("uid-no-object", kPodKind, "CREATE", json());
  Reply a = review("/mutate/pods", r);
  EXPECT_EQ(a.body["apiVersion"], "admission.k8s.io/v1");
  EXPECT_EQ(a.body["kind"], "AdmissionReview");
  EXPECT_EQ(a.response()["uid"], "uid-no-object");
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 400);
  EXPECT_EQ(a.response()["status"]["reason"], "BadRequest");
  EXPECT_THAT(a.message(), AllOf(HasSubstr("request.object is missing"),
                                 HasSubstr("denied (fail closed)")));
  EXPECT_FALSE(a.response().contains("patch"));
}

TEST_F(WebhookTest, AReviewMissingKindOrOperationIsAnsweredNotAllowed) {
  json r = review_json("u", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
  r["request"].erase("kind");
  Reply a = review("/mutate/pods", r);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 400);
  EXPECT_THAT(a.message(), HasSubstr("request.kind is missing"));

  r = review_json("u", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
  r["request"].erase("operation");
  Reply b = review("/mutate/pods", r);
  EXPECT_FALSE(b.allowed());
  EXPECT_THAT(b.message(), HasSubstr("request.operation is missing"));
}

TEST_F(WebhookTest, AMalformedObjectIsAnsweredNotAllowedNamingTheField) {
  json pod = load_example("pods/report-parser-pod.yaml");
  pod["spec"]["hostNetwork"] = "yes";
  Reply a = review("/mutate/pods", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 400);
  EXPECT_THAT(a.message(),
              HasSubstr("request.object: spec.hostNetwork: expected a boolean, got a string"));
}

TEST_F(WebhookTest, TheWrongKindForAnEndpointIsAnsweredNotAllowed) {
  const json deployment = load_example("pods/report-parser-deployment.yaml");
  Reply a = review("/mutate/pods", review_json("u", gvk_of(deployment), "CREATE", deployment));
  EXPECT_FALSE(a.allowed());
  EXPECT_THAT(a.message(), HasSubstr("this endpoint admits Pods, got apps/Deployment"));

  const json pod = load_example("pods/report-parser-pod.yaml");
  Reply b = review("/validate/workloads", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_FALSE(b.allowed());
  EXPECT_THAT(b.message(), HasSubstr("this endpoint admits Deployments"));

  Reply c = review("/validate/components", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_FALSE(c.allowed());
  EXPECT_THAT(c.message(), HasSubstr("admits gibson.zeroroot.ai Components, got Pod"));
}

TEST_F(WebhookTest, ASubresourceIsAnsweredNotAllowed) {
  json r = review_json("u", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
  r["request"]["subResource"] = "ephemeralcontainers";
  Reply a = review("/mutate/pods", r);
  EXPECT_FALSE(a.allowed());
  EXPECT_THAT(a.message(), HasSubstr("subresource ephemeralcontainers is not admitted here"));
}

TEST_F(WebhookTest, TheV1beta1ApiVersionAndTheUidAreEchoed) {
  const json r = review_json("705ab4f5-6393-11e8-b7cc-42010a800002", kPodKind, "CREATE",
                             load_example("pods/docs-indexer-pod.yaml"), false,
                             "admission.k8s.io/v1beta1");
  Reply a = review("/mutate/pods", r);
  EXPECT_EQ(a.body["apiVersion"], "admission.k8s.io/v1beta1");
  EXPECT_EQ(a.body["kind"], "AdmissionReview");
  EXPECT_EQ(a.response()["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002");
}

TEST_F(WebhookTest, MutatePodsCarriesABase64JsonPatchThatAppliesToTheObject) {
  sandbox_.set(SandboxAvailability::Available);
  const json pod = load_example("pods/report-parser-pod.yaml");
  Reply a = review("/mutate/pods", review_json("u", kPodKind, "CREATE", pod));
  ASSERT_TRUE(a.allowed());
  EXPECT_FALSE(a.response().contains("status"));
  EXPECT_EQ(a.response()["patchType"], "JSONPatch");
  ASSERT_TRUE(a.response()["patch"].is_string());
  auto decoded = base64_decode(a.response()["patch"].get<std::string>());
  ASSERT_TRUE(decoded.has_value());
  const json patch = json::parse(*decoded);
  EXPECT_EQ(patch, json::parse(R"([
    {"op":"add","path":"/spec/runtimeClassName","value":"kata-fc"},
    {"op":"add","path":"/metadata/annotations","value":{"gibson.zeroroot.ai/isolation":"RequireSetec"}}
  ])"));
  const json patched = pod.patch(patch);
  EXPECT_EQ(patched["spec"]["runtimeClassName"], "kata-fc");
  EXPECT_EQ(patched["metadata"]["annotations"][kAnnotation], "RequireSetec");
  EXPECT_EQ(a.response()["auditAnnotations"],
            (json{{"decision", "RequireSetec"},
                  {"component", "report-parser"},
                  {"content-trust", "untrusted"},
                  {"shape", "setec-only"},
                  {"sandbox", "available"}}));
}

TEST_F(WebhookTest, MutatePodsCarriesNoPatchWhenThereIsNothingToChange) {
  sandbox_.set(SandboxAvailability::Available);
  json pod = load_example("pods/report-parser-pod.yaml");
  pod["spec"]["runtimeClassName"] = "kata-fc";
  pod["metadata"]["annotations"] = {{kAnnotation, "RequireSetec"}};
  Reply a = review("/mutate/pods", review_json("u", kPodKind, "CREATE", pod));
  ASSERT_TRUE(a.allowed());
  EXPECT_FALSE(a.response().contains("patch"));
  EXPECT_FALSE(a.response().contains("patchType"));
}

TEST_F(WebhookTest, ValidateEndpointsNeverCarryAPatch) {
  sandbox_.set(SandboxAvailability::Available);
  json pod = load_example("pods/docs-indexer-pod.yaml");
  pod["spec"]["runtimeClassName"] = "kata-fc";  // annotation still missing
  Reply a = review("/validate/pods", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_TRUE(a.allowed());
  EXPECT_FALSE(a.response().contains("patch"));
  EXPECT_FALSE(a.response().contains("patchType"));

  const json deployment = load_example("pods/report-parser-deployment.yaml");
  Reply b = review("/validate/workloads",
                    review_json("u", gvk_of(deployment), "CREATE", deployment));
  EXPECT_TRUE(b.allowed());
  EXPECT_FALSE(b.response().contains("patch"));
  EXPECT_FALSE(b.response().contains("patchType"));

  const json component = load_example("components/report-parser.yaml");
  Reply c = review("/validate/components", review_json("u", kComponentKind, "CREATE", component));
  EXPECT_TRUE(c.allowed());
  EXPECT_FALSE(c.response().contains("patch"));
}

TEST_F(WebhookTest, ValidatePodsDeniesARequireSetecPodMovedOffTheSandbox) {
  sandbox_.set(SandboxAvailability::Available);
  json pod = load_example("pods/report-parser-pod.yaml");
  pod["spec"]["runtimeClassName"] = "runc";
  Reply a = review("/validate/pods", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 403);
  EXPECT_EQ(a.response()["status"]["reason"], "Forbidden");
  EXPECT_THAT(a.message(), HasSubstr("the pod's runtimeClassName is \"runc\""));
  EXPECT_FALSE(a.response().contains("patch"));
}

TEST_F(WebhookTest, DeniedPodsGet403ForbiddenWithAnActionableMessage) {
  const json pod = load_example("pods/report-parser-pod.yaml");
  Reply a = review("/mutate/pods", review_json("u", kPodKind, "CREATE", pod));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 403);
  EXPECT_EQ(a.response()["status"]["reason"], "Forbidden");
  EXPECT_EQ(a.response()["status"]["status"], "Failure");
  EXPECT_THAT(a.message(),
              AllOf(HasSubstr("pod \"report-parser-0\" in namespace \"team-a\" denied"),
                    HasSubstr("component \"report-parser\" is untrusted"),
                    HasSubstr("setec-only"), HasSubstr("is unavailable"), HasSubstr("To fix")));
  EXPECT_FALSE(a.response().contains("patch"));
  EXPECT_EQ(a.response()["auditAnnotations"]["decision"], "Deny");
}

TEST_F(WebhookTest, DryRunGetsTheSameAnswer) {
  sandbox_.set(SandboxAvailability::Available);
  const json pod = load_example("pods/report-parser-pod.yaml");
  http::Response normal =
      webhook_.serve(post("/mutate/pods", review_json("u", kPodKind, "CREATE", pod).dump()));
  http::Response dry = webhook_.serve(
      post("/mutate/pods", review_json("u", kPodKind, "CREATE", pod, true).dump()));
  EXPECT_EQ(normal.status, 200u);
  EXPECT_EQ(dry.status, normal.status);
  EXPECT_EQ(dry.body, normal.body);

  sandbox_.set(SandboxAvailability::Unavailable);
  http::Response denied =
      webhook_.serve(post("/mutate/pods", review_json("d", kPodKind, "CREATE", pod).dump()));
  http::Response dry_denied = webhook_.serve(
      post("/mutate/pods", review_json("d", kPodKind, "CREATE", pod, true).dump()));
  EXPECT_EQ(dry_denied.body, denied.body);
  EXPECT_THAT(webhook_.metrics().render(),
              HasSubstr("isolation_gate_admission_dry_run_total{endpoint=\"/mutate/pods\"} 2\n"));
}

// The denial observer (Events) hears each real denial with the Component
// it names (undecidable requests too), and nothing of allows or dry runs.
TEST_F(WebhookTest, TheDenialObserverHearsRealDenialsOnly) {
  struct Heard {
    std::string endpoint, ns, component, kind, name, message;
    Reason reason;
  };
  std::vector<Heard> heard;
  WebhookOptions options;
  options.on_denial = [&heard](const DenialNotice& n) {
    heard.push_back({std::string(n.endpoint), std::string(n.namespace_), std::string(n.component),
                     std::string(n.kind), std::string(n.name), std::string(n.message), n.reason});
  };
  Webhook observed(AdmissionContext{settings_for(DeploymentShape::SetecOnly), catalog_, sandbox_},
                   std::move(options));
  auto serve = [&observed](const std::string& path, const json& review) {
    return observed.serve(post(path, review.dump())).status;
  };
  const json pod = load_example("pods/report-parser-pod.yaml");
  sandbox_.set(SandboxAvailability::Available);
  EXPECT_EQ(serve("/mutate/pods", review_json("a", kPodKind, "CREATE", pod)), 200u);  // allowed
  EXPECT_TRUE(heard.empty());

  sandbox_.set(SandboxAvailability::Unavailable);
  EXPECT_EQ(serve("/mutate/pods", review_json("d", kPodKind, "CREATE", pod, /*dry_run=*/true)), 200u);
  EXPECT_TRUE(heard.empty()) << "a dry run records nothing";

  EXPECT_EQ(serve("/validate/pods", review_json("e", kPodKind, "CREATE", pod)), 200u);
  ASSERT_EQ(heard.size(), 1u);
  EXPECT_EQ(heard[0].endpoint, "/validate/pods");
  EXPECT_EQ(heard[0].reason, Reason::SandboxUnavailable);
  EXPECT_EQ(heard[0].ns, kNs);
  EXPECT_EQ(heard[0].component, "report-parser");
  EXPECT_EQ(heard[0].kind, "Pod");
  EXPECT_EQ(heard[0].name, "report-parser-0");
  EXPECT_THAT(heard[0].message, HasSubstr("To fix"));

  json unlabelled = pod;
  unlabelled["metadata"]["labels"].erase(std::string(model::kComponentLabel));
  EXPECT_EQ(serve("/mutate/pods", review_json("f", kPodKind, "CREATE", unlabelled)), 200u);
  ASSERT_EQ(heard.size(), 2u);
  EXPECT_EQ(heard[1].reason, Reason::MissingComponentLabel);
  EXPECT_EQ(heard[1].component, "");

  json bad_component = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
                        {"kind", "Component"},
                        {"metadata", {{"name", "c1"}, {"namespace", kNs}}},
                        {"spec", {{"kind", "tool"}, {"policy", {{"content_trust", "maybe"}}}}}};
  EXPECT_EQ(serve("/validate/components", review_json("g", kComponentKind, "CREATE", bad_component)), 200u);
  ASSERT_EQ(heard.size(), 3u);
  EXPECT_EQ(heard[2].reason, Reason::InvalidComponent);
  EXPECT_EQ(heard[2].component, "c1");

  json undecidable = review_json("h", kPodKind, "CREATE", pod);
  undecidable["request"].erase("object");
  EXPECT_EQ(serve("/mutate/pods", undecidable), 200u);
  ASSERT_EQ(heard.size(), 4u) << "an undecidable request is a denial too, recorded on its namespace";
  EXPECT_EQ(heard[3].reason, Reason::UndecidableRequest);
  EXPECT_EQ(heard[3].component, "");
}

TEST_F(WebhookTest, AMissingRequestNamespaceOrAnObjectInAnotherNamespaceIsUndecidable) {
  // The API server always sends request.namespace for a namespaced kind; the
  // object's own namespace is never a substitute (it could name a
  // never-enforced namespace).
  json r = review_json("u", kPodKind, "CREATE", load_example("pods/report-parser-pod.yaml"));
  r["request"].erase("namespace");
  Reply a = review("/mutate/pods", r);
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 400);
  EXPECT_THAT(a.message(), HasSubstr("request.namespace is missing or empty for a namespaced kind"));
  r["request"]["namespace"] = "";
  EXPECT_FALSE(review("/validate/pods", r).allowed());

  json other = review_json("v", kPodKind, "CREATE", load_example("pods/report-parser-pod.yaml"));
  other["request"]["object"]["metadata"]["namespace"] = "kube-system";
  Reply b = review("/mutate/pods", other);
  EXPECT_FALSE(b.allowed());
  EXPECT_EQ(b.response()["status"]["code"], 400);
  EXPECT_THAT(b.message(), HasSubstr("request.object.metadata.namespace \"kube-system\" is not request.namespace"));

  json component = review_json("w", kComponentKind, "CREATE", load_example("components/docs-indexer.yaml"));
  component["request"].erase("namespace");
  EXPECT_FALSE(review("/validate/components", component).allowed());
}

TEST_F(WebhookTest, PodsInNeverEnforcedNamespacesAreAllowed) {
  json r = review_json("u", kPodKind, "CREATE", load_example("pods/report-parser-pod.yaml"));
  r["request"]["namespace"] = "kube-system";
  r["request"]["object"]["metadata"]["namespace"] = "kube-system";
  Reply a = review("/mutate/pods", r);
  EXPECT_TRUE(a.allowed());
  EXPECT_FALSE(a.response().contains("patch"));
  EXPECT_EQ(a.response()["auditAnnotations"]["decision"], "NotEnforced");
}

// ---- workloads -----------------------------------------------------------

json workload_of(const std::string& api_version, const std::string& kind, const json& pod) {
  json tmpl = {{"metadata", pod["metadata"]}, {"spec", pod["spec"]}};
  tmpl["metadata"].erase("name");
  tmpl["metadata"].erase("namespace");
  json w = {{"apiVersion", api_version},
            {"kind", kind},
            {"metadata", {{"name", "report-parser"}, {"namespace", kNs}}}};
  if (kind == "CronJob") {
    w["spec"] = {{"schedule", "@daily"}, {"jobTemplate", {{"spec", {{"template", tmpl}}}}}};
  } else {
    w["spec"] = {{"selector", {{"matchLabels", {{"app", "x"}}}}}, {"template", tmpl}};
  }
  return w;
}

std::string after(const std::string& text, const std::string& marker) {
  const auto at = text.find(marker);
  return at == std::string::npos ? std::string("(marker not found: " + marker + ")")
                                 : text.substr(at + marker.size());
}

TEST_F(WebhookTest, EveryWorkloadKindIsDeniedAtApplyTimeWithThePodsMessage) {
  const json pod = load_example("pods/report-parser-pod.yaml");
  Reply pod_answer = review("/mutate/pods", review_json("p", kPodKind, "CREATE", pod));
  ASSERT_FALSE(pod_answer.allowed());
  const std::string pod_reason = after(pod_answer.message(), " denied: ");

  for (const auto& [api, kind] : std::vector<std::pair<std::string, std::string>>{
           {"apps/v1", "Deployment"}, {"apps/v1", "StatefulSet"}, {"apps/v1", "DaemonSet"},
           {"apps/v1", "ReplicaSet"}, {"batch/v1", "Job"}, {"batch/v1", "CronJob"}}) {
    const json w = workload_of(api, kind, pod);
    for (const char* op : {"CREATE", "UPDATE"}) {
      Reply a = review("/validate/workloads", review_json("w", gvk_of(w), op, w));
      EXPECT_FALSE(a.allowed()) << kind << " " << op;
      EXPECT_EQ(a.response()["status"]["code"], 403) << kind;
      EXPECT_THAT(a.message(), StartsWith(kind + " \"report-parser\" in namespace \"team-a\" "
                                                 "denied: its pods would be denied: "))
          << kind;
      EXPECT_EQ(after(a.message(), "its pods would be denied: "), pod_reason) << kind;
      EXPECT_FALSE(a.response().contains("patch")) << kind;
    }
  }
}

TEST_F(WebhookTest, TheExampleCronJobIsEvaluatedThroughItsJobTemplate) {
  sandbox_.set(SandboxAvailability::Available);
  const json cj = load_example("pods/legacy-exporter-cronjob.yaml");
  Reply a = review("/validate/workloads", review_json("u", gvk_of(cj), "CREATE", cj));
  EXPECT_TRUE(a.allowed());
  EXPECT_EQ(a.response()["auditAnnotations"]["decision"], "RequireSetec");
  EXPECT_EQ(a.response()["auditAnnotations"]["component"], "legacy-exporter");
  // Trust omitted: the warning travels with the answer.
  ASSERT_TRUE(a.response().contains("warnings"));
  EXPECT_THAT(a.response()["warnings"][0].get<std::string>(),
              HasSubstr("declares no content_trust: treated as trusted"));
}

TEST_F(WebhookTest, WorkloadWithoutTypeMetaInTheObjectUsesTheRequestKind) {
  json w = workload_of("apps/v1", "Deployment", load_example("pods/report-parser-pod.yaml"));
  const Gvk kind = gvk_of(w);
  w.erase("apiVersion");
  w.erase("kind");
  Reply a = review("/validate/workloads", review_json("u", kind, "CREATE", w));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 403);
  EXPECT_THAT(a.message(), StartsWith("Deployment \"report-parser\""));
}

TEST_F(WebhookTest, DeleteIsAllowedWithoutADecision) {
  const json pod = load_example("pods/report-parser-pod.yaml");
  const json w = workload_of("apps/v1", "Deployment", pod);
  Reply a = review("/validate/workloads", review_json("u", gvk_of(w), "DELETE", json()));
  EXPECT_TRUE(a.allowed());
  EXPECT_EQ(a.response()["auditAnnotations"]["decision"], "NotEnforced");
  EXPECT_EQ(a.response()["auditAnnotations"]["reason"], "operation DELETE is not enforced");
  Reply b = review("/mutate/pods", review_json("u", kPodKind, "DELETE", json()));
  EXPECT_TRUE(b.allowed());
  EXPECT_FALSE(b.response().contains("patch"));
  Reply c = review("/validate/components",
                    review_json("u", kComponentKind, "DELETE", json()));
  EXPECT_TRUE(c.allowed());
}

// A pod UPDATE review as the API server sends it: object and oldObject.
json update_review(const json& old_pod, const json& new_pod, const std::string& sub_resource = "") {
  json r = review_json("u-up", kPodKind, "UPDATE", new_pod);
  r["request"]["oldObject"] = old_pod;
  if (!sub_resource.empty()) r["request"]["subResource"] = sub_resource;
  return r;
}

json sandboxed_example_pod() {
  json pod = load_example("pods/report-parser-pod.yaml");
  pod["spec"]["runtimeClassName"] = "kata-fc";
  return pod;
}

TEST_F(WebhookTest, PodUpdatesAreJudgedAgainstTheOldPod) {
  sandbox_.set(SandboxAvailability::Available);
  const json old_pod = sandboxed_example_pod();
  // Nothing judged changed: admitted without a decision.
  json same = old_pod;
  same["metadata"]["finalizers"] = json::array({"example.com/keep"});
  Reply a = review("/validate/pods", update_review(old_pod, same));
  EXPECT_TRUE(a.allowed()) << a.message();
  EXPECT_EQ(a.response()["auditAnnotations"]["decision"], "Unchanged");
  // An image swap is judged: denied.
  json swapped = old_pod;
  swapped["spec"]["containers"][0]["image"] = "evil.example/report-parser:1.4.2";
  Reply b = review("/validate/pods", update_review(old_pod, swapped));
  EXPECT_FALSE(b.allowed());
  EXPECT_EQ(b.response()["status"]["code"], 403);
  EXPECT_EQ(b.response()["auditAnnotations"]["reason"], "ImageNotBound");
  EXPECT_THAT(b.message(), HasSubstr("container \"parser\" runs \"evil.example/report-parser:1.4.2\""));
  // A changed component label is denied.
  json relabelled = old_pod;
  relabelled["metadata"]["labels"]["gibson.zeroroot.ai/component"] = "docs-indexer";
  Reply c = review("/validate/pods", update_review(old_pod, relabelled));
  EXPECT_FALSE(c.allowed());
  EXPECT_EQ(c.response()["auditAnnotations"]["reason"], "ComponentLabelChanged");
  // /mutate/pods still decides only CREATE.
  Reply d = review("/mutate/pods", update_review(old_pod, swapped));
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.response()["auditAnnotations"]["decision"], "NotEnforced");
}

TEST_F(WebhookTest, APodUpdateWithoutAUsableOldObjectIsUndecidable) {
  const json pod = sandboxed_example_pod();
  Reply a = review("/validate/pods", review_json("u", kPodKind, "UPDATE", pod));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 400);
  EXPECT_THAT(a.message(), HasSubstr("request.oldObject is missing"));
  json other_ns = pod;
  other_ns["metadata"]["namespace"] = "kube-system";
  Reply b = review("/validate/pods", update_review(other_ns, pod));
  EXPECT_FALSE(b.allowed());
  EXPECT_THAT(b.message(), HasSubstr("request.oldObject.metadata.namespace"));
  json wrong_kind = pod;
  wrong_kind["kind"] = "Deployment";
  Reply c = review("/validate/pods", update_review(wrong_kind, pod));
  EXPECT_FALSE(c.allowed());
  EXPECT_THAT(c.message(), HasSubstr("request.oldObject.kind does not match"));
  json bad_type = pod;
  bad_type["spec"]["containers"][0]["image"] = 7;
  Reply d = review("/validate/pods", update_review(bad_type, pod));
  EXPECT_FALSE(d.allowed());
  EXPECT_THAT(d.message(), HasSubstr("request.oldObject: spec.containers[0].image: expected a string"));
}

TEST_F(WebhookTest, TheEphemeralContainersSubresourceIsJudgedOnValidatePods) {
  sandbox_.set(SandboxAvailability::Available);
  const json old_pod = sandboxed_example_pod();
  json debugged = old_pod;
  debugged["spec"]["ephemeralContainers"] = json::array(
      {{{"name", "debugger"}, {"image", "registry.example.com/gibson/report-parser:1.4.2"},
        {"securityContext", {{"privileged", true}}}}});
  Reply a = review("/validate/pods", update_review(old_pod, debugged, "ephemeralcontainers"));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["auditAnnotations"]["reason"], "IncompatibleWithMicroVM");
  EXPECT_THAT(a.message(), HasSubstr("privileged container \"ephemeral:debugger\""));
  // A foreign debug image is not bound.
  debugged["spec"]["ephemeralContainers"][0].erase("securityContext");
  debugged["spec"]["ephemeralContainers"][0]["image"] = "busybox";
  Reply b = review("/validate/pods", update_review(old_pod, debugged, "ephemeralcontainers"));
  EXPECT_EQ(b.response()["auditAnnotations"]["reason"], "ImageNotBound");
  // The Component's own image, unprivileged: admitted.
  debugged["spec"]["ephemeralContainers"][0]["image"] = "registry.example.com/gibson/report-parser:1.4.2";
  Reply c = review("/validate/pods", update_review(old_pod, debugged, "ephemeralcontainers"));
  EXPECT_TRUE(c.allowed()) << c.message();
  // Only UPDATE reaches that subresource; other subresources stay refused.
  json create = review_json("u", kPodKind, "CREATE", debugged);
  create["request"]["subResource"] = "ephemeralcontainers";
  EXPECT_FALSE(review("/validate/pods", create).allowed());
  Reply e = review("/validate/pods", update_review(old_pod, debugged, "status"));
  EXPECT_FALSE(e.allowed());
  EXPECT_THAT(e.message(), HasSubstr("subresource status is not admitted here"));
}

// ---- components ----------------------------------------------------------

TEST_F(WebhookTest, AComponentWithAnInvalidContentTrustIsRejectedNamingFieldValueAndValidValues) {
  json component = load_example("components/report-parser.yaml");
  component["spec"]["policy"]["content_trust"] = "maybe";
  Reply a = review("/validate/components",
                    review_json("u", kComponentKind, "CREATE", component));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.response()["status"]["code"], 403);
  EXPECT_EQ(a.message(),
            "Component \"report-parser\": spec.policy.content_trust: \"maybe\" is not a valid "
            "content trust; expected one of: trusted, untrusted (or omit it to mean trusted)");
  // UPDATE is validated the same way.
  Reply b = review("/validate/components",
                    review_json("u", kComponentKind, "UPDATE", component));
  EXPECT_FALSE(b.allowed());
}

TEST_F(WebhookTest, AComponentWithAWrongTypeIsRejectedNamingTheField) {
  json component = load_example("components/report-parser.yaml");
  component["spec"]["policy"] = "untrusted";
  Reply a = review("/validate/components",
                    review_json("u", kComponentKind, "CREATE", component));
  EXPECT_FALSE(a.allowed());
  EXPECT_EQ(a.message(),
            "Component \"report-parser\": spec.policy: expected a map, got a string");
}

TEST_F(WebhookTest, AComponentWithOmittedTrustIsAcceptedWithAWarning) {
  const json component = load_example("components/legacy-exporter.yaml");
  Reply a = review("/validate/components",
                    review_json("u", kComponentKind, "CREATE", component));
  EXPECT_TRUE(a.allowed());
  ASSERT_TRUE(a.response().contains("warnings"));
  ASSERT_EQ(a.response()["warnings"].size(), 1u);
  const std::string warning = a.response()["warnings"][0];
  EXPECT_EQ(warning,
            "spec.policy.content_trust omitted: Component \"legacy-exporter\" is treated as "
            "trusted; declare it");
  EXPECT_LT(warning.size(), 120u);
  EXPECT_EQ(a.response()["auditAnnotations"],
            (json{{"content-trust", "trusted"}, {"trust-declared", "false"}}));
}

TEST_F(WebhookTest, DeclaredComponentsAreAcceptedWithoutWarnings) {
  for (const char* file : {"components/report-parser.yaml", "components/docs-indexer.yaml"}) {
    const json component = load_example(file);
    Reply a = review("/validate/components",
                      review_json("u", kComponentKind, "CREATE", component));
    EXPECT_TRUE(a.allowed()) << file;
    EXPECT_FALSE(a.response().contains("warnings")) << file;
    EXPECT_EQ(a.response()["auditAnnotations"]["trust-declared"], "true") << file;
  }
}

// ---- metrics -------------------------------------------------------------

TEST_F(WebhookTest, MetricsCountReviewsByEndpointOutcomeAndAllowed) {
  sandbox_.set(SandboxAvailability::Available);
  const json pod = load_example("pods/report-parser-pod.yaml");
  review("/mutate/pods", review_json("a", kPodKind, "CREATE", pod));
  review("/mutate/pods", review_json("b", kPodKind, "CREATE", pod));
  sandbox_.set(SandboxAvailability::Unavailable);
  review("/mutate/pods", review_json("c", kPodKind, "CREATE", pod));
  review("/validate/components",
         review_json("d", kComponentKind, "CREATE", load_example("components/docs-indexer.yaml")));
  review("/validate/pods", review_json("e", kPodKind, "CREATE", json()));
  send(get("/nowhere"));
  send(post("/mutate/pods", "{"));

  std::string text;
  prometheus::TextWriter out(text);
  webhook_.metrics().write(out);
  EXPECT_THAT(text, HasSubstr("# TYPE isolation_gate_admission_reviews_total counter\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/mutate/pods\","
                              "outcome=\"RequireSetec\",reason=\"SandboxAvailable\","
                              "allowed=\"true\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/mutate/pods\","
                              "outcome=\"Deny\",reason=\"SandboxUnavailable\","
                              "allowed=\"false\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/validate/components\","
                        "outcome=\"Allowed\",reason=\"ComponentValid\",allowed=\"true\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/validate/pods\","
                        "outcome=\"Undecidable\",reason=\"UndecidableRequest\","
                        "allowed=\"false\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_duration_seconds_count{endpoint=\"/mutate/"
                              "pods\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_duration_seconds_bucket{endpoint=\"/mutate/"
                              "pods\",le=\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_http_errors_total{code=\"404\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_http_errors_total{code=\"400\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_dry_run_total{endpoint=\"/mutate/pods\"} 0\n"));
}

TEST(AdmissionMetrics, HistogramBucketsAreCumulative) {
  AdmissionMetrics m;
  m.record(Endpoint::ValidatePods, Reason::TrustedInProcess, false,
           std::chrono::microseconds(30));   // <= 0.00005
  m.record(Endpoint::ValidatePods, Reason::TrustedInProcess, false,
           std::chrono::milliseconds(3));    // <= 0.005
  m.record(Endpoint::ValidatePods, Reason::TrustedInProcess, true,
           std::chrono::seconds(40));        // only +Inf
  const std::string text = m.render();
  const std::string label = "isolation_gate_admission_duration_seconds_bucket{endpoint=\"/validate/pods\",le=";
  EXPECT_THAT(text, HasSubstr(label + "\"5e-05\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(label + "\"0.0025\"} 1\n"));
  EXPECT_THAT(text, HasSubstr(label + "\"0.005\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(label + "\"1\"} 2\n"));
  EXPECT_THAT(text, HasSubstr(label + "\"+Inf\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_duration_seconds_count{endpoint=\"/validate/pods\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_dry_run_total{endpoint=\"/validate/pods\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/validate/pods\","
                              "outcome=\"AllowInProcess\",reason=\"TrustedInProcess\","
                              "allowed=\"true\"} 3\n"));
}

TEST(AdmissionMetrics, EveryHttpErrorTheWebhookAnswersIsExportedAndNoOther) {
  AdmissionMetrics m;
  m.record(HttpError::ServiceUnavailable);
  m.record(HttpError::InternalError);
  m.record(HttpError::InternalError);
  const std::string text = m.render();
  EXPECT_THAT(text, HasSubstr("isolation_gate_http_errors_total{code=\"503\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("isolation_gate_http_errors_total{code=\"500\"} 2\n"));
  for (const char* code : {"400", "404", "405", "415"}) {
    EXPECT_THAT(text, HasSubstr("isolation_gate_http_errors_total{code=\"" + std::string(code) +
                                "\"} 0\n"));
  }
  // 413 (and 431) are the transport's: the webhook never answers them, so it
  // exports no series for them; nor an "other" bucket.
  EXPECT_THAT(text, Not(HasSubstr("code=\"413\"")));
  EXPECT_THAT(text, Not(HasSubstr("code=\"other\"")));
}

// ---- review codec --------------------------------------------------------

TEST(Base64Encode, MatchesTheRfc4648TestVectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
}

TEST(Base64Encode, UsesTheStandardAlphabetForHighBytes) {
  EXPECT_EQ(base64_encode(std::string("\xfb\xff", 2)), "+/8=");
  EXPECT_EQ(base64_encode(std::string("\x00\x00\x00", 3)), "AAAA");
  EXPECT_EQ(base64_encode(std::string("\xff\xff\xff", 3)), "////");
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  auto round = base64_decode(base64_encode(all));
  ASSERT_TRUE(round.has_value());
  EXPECT_EQ(*round, all);
}

TEST(EncodeResponse, AnAllowedAnswerHasNoStatusAndADeniedOneHasAFullStatus) {
  AdmissionRequest request;
  request.uid = "abc";
  const Answer yes = allowed(Reason::TrustedInProcess, "runs in-process");
  const json a = json::parse(encode_response(request, yes));
  EXPECT_EQ(a, (json{{"apiVersion", "admission.k8s.io/v1"},
                     {"kind", "AdmissionReview"},
                     {"response", {{"uid", "abc"}, {"allowed", true}}}}));

  const Answer no = denied(Reason::SandboxUnavailable, "no");
  const json d = json::parse(encode_response(request, no));
  EXPECT_EQ(d["response"]["status"], (json{{"metadata", json::object()},
                                           {"status", "Failure"},
                                           {"code", 403},
                                           {"reason", "Forbidden"},
                                           {"message", "no"}}));
}

TEST(EncodeResponse, InvalidUtf8InAMessageIsReplacedNotThrown) {
  AdmissionRequest request;
  request.uid = "u";
  const Answer no = denied(Reason::UnknownComponent, "bad \xff byte");
  std::string out;
  ASSERT_NO_THROW(out = encode_response(request, no));
  json parsed;
  EXPECT_NO_THROW(parsed = json::parse(out));
  EXPECT_THAT(parsed["response"]["status"]["message"].get<std::string>(), StartsWith("bad "));
}

// The response used to be built as an nlohmann DOM and dumped; it is written
// as text now. The bytes must be the DOM's, for every shape of answer.
std::string dom_encoded(const AdmissionRequest& request, const Answer& answer) {
  json resp = {{"uid", request.uid}, {"allowed", answer.allowed()}};
  if (!answer.allowed()) {
    resp["status"] = {{"metadata", json::object()}, {"status", "Failure"},
                      {"code", answer.code()},      {"reason", answer.status_reason()},
                      {"message", answer.message}};
  }
  if (!answer.patch.empty()) {
    resp["patchType"] = "JSONPatch";
    resp["patch"] = base64_encode(answer.patch);
  }
  if (!answer.warnings.empty()) resp["warnings"] = answer.warnings;
  if (!answer.audit.empty()) {
    json audit = json::object();
    for (const auto& [k, v] : answer.audit) audit[k] = v;
    resp["auditAnnotations"] = std::move(audit);
  }
  json review = {{"apiVersion", request.api_version.empty() ? std::string("admission.k8s.io/v1")
                                                            : request.api_version},
                 {"kind", "AdmissionReview"},
                 {"response", std::move(resp)}};
  return ig::model::dump_json(review);
}

TEST(EncodeResponse, WritesTheBytesTheDomDumpWrote) {
  AdmissionRequest request;
  request.uid = "0b1e\"quoted\"-\u00e9-uid";
  std::vector<Answer> answers;
  answers.push_back(allowed(Reason::TrustedInProcess, "runs in-process"));
  Answer setec = allowed(Reason::SandboxAvailable, "sandbox");
  setec.patch = R"([{"op":"add","path":"/spec/runtimeClassName","value":"kata-fc"}])";
  setec.warn("runtimeClassName \"runc\" replaced by \"kata-fc\"").warn("second \xe2\x98\x83 warning");
  setec.annotate("reason", "b").annotate("decision", "RequireSetec").annotate("reason", "last wins");
  answers.push_back(setec);
  answers.push_back(denied(Reason::SandboxUnavailable, "no sandbox:\n\ttabs \x01 and \"quotes\" \\"));
  answers.push_back(denied(Reason::UnknownComponent, "bad \xff\xc3 bytes \xed\xa0\x80 \xf4\x90"));
  answers.push_back(undecidable("request.kind is missing").warn("w"));
  answers.push_back(errored("boom"));
  answers.push_back(not_enforced(Reason::NamespaceNotEnforced, "namespace is not enforced"));
  // More audit annotations than the encoder sorts on the stack (16), out of
  // order, repeated keys among them (the last value wins, as in a map).
  Answer many = allowed(Reason::SandboxAvailable, "many annotations");
  for (int i = 40; i > 0; --i) many.annotate("k" + std::to_string(i % 23), "v" + std::to_string(i));
  answers.push_back(many);
  Answer sixteen = allowed(Reason::SandboxAvailable, "sixteen annotations");
  for (int i = 16; i > 0; --i) sixteen.annotate("k" + std::to_string(i % 9), "v" + std::to_string(i));
  answers.push_back(sixteen);
  for (const char* api : {"", "admission.k8s.io/v1beta1"}) {
    request.api_version = api;
    for (const Answer& a : answers) {
      EXPECT_EQ(encode_response(request, a), dom_encoded(request, a)) << a.message;
    }
  }
}

TEST(DecodeReview, ReadsEveryFieldAndMovesTheObjectOut) {
  const json body = {{"apiVersion", "admission.k8s.io/v1"},
                     {"kind", "AdmissionReview"},
                     {"request",
                      {{"uid", "u-1"},
                       {"kind", {{"group", "apps"}, {"version", "v1"}, {"kind", "Deployment"}}},
                       {"subResource", ""},
                       {"namespace", "ns"},
                       {"name", "d"},
                       {"operation", "UPDATE"},
                       {"dryRun", true},
                       {"object", {{"a", 1}, {"kind", "Deployment"}, {"spec", {{"replicas", 2}, {"template", {{"spec", {{"hostPID", true}}}}}}}}}}}};
  DecodedReview r = decode_review(body.dump());
  ASSERT_EQ(r.kind, DecodedReview::Kind::Ok) << r.error;
  EXPECT_EQ(r.request.api_version, "admission.k8s.io/v1");
  EXPECT_EQ(r.request.uid, "u-1");
  EXPECT_EQ(r.request.kind_group, "apps");
  EXPECT_EQ(r.request.kind_version, "v1");
  EXPECT_EQ(r.request.kind, "Deployment");
  EXPECT_EQ(r.request.namespace_, "ns");
  EXPECT_EQ(r.request.name, "d");
  EXPECT_EQ(r.request.operation, Operation::Update);
  EXPECT_TRUE(r.request.dry_run);
  // Only what the rules read is kept of the object (model/json_projection.h).
  EXPECT_EQ(r.request.object,
            (json{{"kind", "Deployment"}, {"spec", {{"template", {{"spec", {{"hostPID", true}}}}}}}}));
}

// ---- operations: exactly the API's four values ---------------------------

json review_for(const std::string& path, const std::string& operation) {
  if (path == "/validate/workloads" || path == "/audit/workloads") {
    const json w = workload_of("apps/v1", "Deployment", load_example("pods/docs-indexer-pod.yaml"));
    return review_json("u-op", gvk_of(w), operation, w);
  }
  if (path == "/validate/components") {
    json r = review_json("u-op", kComponentKind, operation, load_example("components/docs-indexer.yaml"));
    if (operation == "UPDATE") r["request"]["oldObject"] = r["request"]["object"];
    return r;
  }
  if (path == "/validate/namespaces") {
    const json ns = {{"apiVersion", "v1"},
                     {"kind", "Namespace"},
                     {"metadata", {{"name", kNs}, {"labels", {{"gibson.zeroroot.ai/isolation", "enforced"}}}}}};
    json r = review_json("u-op", {"", "v1", "Namespace"}, operation, ns);
    r["request"]["oldObject"] = ns;
    return r;
  }
  json pod = load_example("pods/docs-indexer-pod.yaml");
  // /validate/pods sees the pod after /mutate/pods put it on the sandbox.
  if (path == "/validate/pods") pod["spec"]["runtimeClassName"] = "kata-fc";
  json r = review_json("u-op", kPodKind, operation, pod);
  if (operation == "UPDATE") r["request"]["oldObject"] = pod;  // as the API server sends it
  return r;
}

TEST_F(WebhookTest, AnOperationThatIsNotExactlyOneOfTheApisIsUndecidableOnEveryEndpoint) {
  // Allowed as "not enforced" before: fail-open. Now denied, 400, naming the value.
  sandbox_.set(SandboxAvailability::Available);  // so the real operations would be allowed
  for (const Route& route : admission_routes()) {
    const std::string path(route.path);
    for (const char* op : {"BOGUS", "create", "Create", "CREATE ", " CREATE", "CREATE\n",
                           "update", "DELETE\t", "connect", "CREATE,UPDATE"}) {
      Reply a = review(path, review_for(path, op));
      EXPECT_FALSE(a.allowed()) << path << " [" << op << "]";
      EXPECT_EQ(a.response()["status"]["code"], 400) << path << " [" << op << "]";
      EXPECT_EQ(a.response()["status"]["reason"], "BadRequest") << path;
      EXPECT_THAT(a.message(), AllOf(HasSubstr("request.operation"),
                                     HasSubstr("is not one of CREATE, UPDATE, DELETE, CONNECT"),
                                     HasSubstr("denied (fail closed)")))
          << path << " [" << op << "]";
      EXPECT_FALSE(a.response().contains("patch")) << path;
    }
    // Not a string at all.
    json r = review_for(path, "CREATE");
    r["request"]["operation"] = 1;
    Reply b = review(path, r);
    EXPECT_FALSE(b.allowed()) << path;
    EXPECT_THAT(b.message(), HasSubstr("request.operation: expected a string, got a number"));
  }
  EXPECT_THAT(webhook_.metrics().render(),
              HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/validate/components\","
                        "outcome=\"Undecidable\",reason=\"UndecidableRequest\","
                        "allowed=\"false\"} 11\n"));
}

TEST_F(WebhookTest, EveryRealOperationIsDecidedOrNotEnforcedAsTheRouteTableSays) {
  sandbox_.set(SandboxAvailability::Available);
  for (const Route& route : admission_routes()) {
    const std::string path(route.path);
    for (Operation op : {Operation::Create, Operation::Update, Operation::Delete,
                         Operation::Connect}) {
      const std::string name(to_string(op));
      Reply a = review(path, review_for(path, name));
      EXPECT_TRUE(a.allowed()) << path << " " << name << ": " << a.message();
      const json audit = a.response().value("auditAnnotations", json::object());
      if (route.enforced.contains(op)) {
        EXPECT_NE(audit.value("decision", ""), "NotEnforced") << path << " " << name;
      } else {
        EXPECT_EQ(audit.value("decision", ""), "NotEnforced") << path << " " << name;
        EXPECT_EQ(audit.value("reason", ""),
                  "operation " + name + " is not " + std::string(route.verb));
      }
    }
  }
}

TEST(RouteTable, OneRoutePerEndpointInEndpointOrderWithTheDocumentedOperations) {
  ASSERT_EQ(admission_routes().size(), kEndpointCount);
  for (std::size_t i = 0; i < kEndpointCount; ++i) {
    const Route& r = admission_routes()[i];
    EXPECT_EQ(static_cast<std::size_t>(r.endpoint), i);
    EXPECT_EQ(&route_for(r.endpoint), &r);
    EXPECT_EQ(find_route(r.path), &r);
  }
  EXPECT_EQ(find_route("/mutate/pods/"), nullptr);
  EXPECT_EQ(find_route("/healthz"), nullptr);
  // docs/architecture.md, "Request path": pods are decided on CREATE; workloads and Components on CREATE and UPDATE.
  const Route& mutate = route_for(Endpoint::MutatePods);
  EXPECT_TRUE(mutate.enforced.contains(Operation::Create));
  EXPECT_FALSE(mutate.enforced.contains(Operation::Update));
  EXPECT_FALSE(mutate.enforced.contains(Operation::Delete));
  const Route& validate = route_for(Endpoint::ValidatePods);
  EXPECT_TRUE(validate.enforced.contains(Operation::Create));
  EXPECT_TRUE(validate.enforced.contains(Operation::Update));  // image swaps, ephemeral containers
  EXPECT_FALSE(validate.enforced.contains(Operation::Delete));
  const Route& workloads = route_for(Endpoint::ValidateWorkloads);
  EXPECT_TRUE(workloads.enforced.contains(Operation::Create));
  EXPECT_TRUE(workloads.enforced.contains(Operation::Update));
  EXPECT_FALSE(workloads.enforced.contains(Operation::Connect));
  const Route& components = route_for(Endpoint::ValidateComponents);
  EXPECT_TRUE(components.enforced.contains(Operation::Update));
  EXPECT_FALSE(components.enforced.contains(Operation::Delete));
}

TEST(ParseOperation, AcceptsExactlyTheFourValues) {
  EXPECT_EQ(parse_operation("CREATE"), Operation::Create);
  EXPECT_EQ(parse_operation("UPDATE"), Operation::Update);
  EXPECT_EQ(parse_operation("DELETE"), Operation::Delete);
  EXPECT_EQ(parse_operation("CONNECT"), Operation::Connect);
  for (std::string_view bad : {"", "create", "CREATE ", " CREATE", "CREAT", "CREATED", "PATCH"}) {
    EXPECT_EQ(parse_operation(bad), std::nullopt) << "[" << bad << "]";
  }
}

// ---- wrong JSON types are errors, never empty strings ---------------------

TEST_F(WebhookTest, AReviewFieldOfTheWrongTypeIsUndecidableNamingTheField) {
  struct Case {
    std::function<void(json&)> mutate;
    const char* message;
  } cases[] = {
      {[](json& r) { r["request"]["namespace"] = 7; }, "request.namespace: expected a string, got a number"},
      {[](json& r) { r["request"]["name"] = json::array(); }, "request.name: expected a string, got a list"},
      {[](json& r) { r["request"]["subResource"] = true; }, "request.subResource: expected a string, got a boolean"},
      {[](json& r) { r["request"]["dryRun"] = "yes"; }, "request.dryRun: expected a boolean, got a string"},
      {[](json& r) { r["request"]["kind"] = "Pod"; }, "request.kind: expected a map, got a string"},
      {[](json& r) { r["request"]["kind"]["group"] = 1; }, "request.kind.group: expected a string, got a number"},
      {[](json& r) { r["request"]["kind"]["kind"] = json::object(); }, "request.kind.kind: expected a string, got a map"},
  };
  for (const auto& c : cases) {
    json r = review_json("u-type", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
    c.mutate(r);
    Reply a = review("/mutate/pods", r);
    EXPECT_FALSE(a.allowed()) << c.message;
    EXPECT_EQ(a.response()["uid"], "u-type");
    EXPECT_EQ(a.response()["status"]["code"], 400) << c.message;
    EXPECT_THAT(a.message(), HasSubstr(c.message));
  }
}

// ---- lookup errors and internal errors have outcomes of their own ---------

class BrokenLookup final : public ComponentLookup {
 public:
  explicit BrokenLookup(bool throws) : throws_(throws) {}
  LookupResult find(std::string_view, std::string_view) const override {
    if (throws_) throw std::runtime_error("cache corrupted");
    LookupResult r;
    r.status = LookupResult::Status::Error;
    r.error = "the API server did not answer within 2s";
    return r;
  }

 private:
  bool throws_;
};

GateSettings default_settings() {
  GateSettings s;
  s.runtime_class = std::string(config::kDefaultRuntimeClass);
  s.own_namespace = std::string(config::kDefaultNamespace);
  return s;
}

TEST(WebhookFailures, ALookupErrorDeniesAndIsCountedAsItsOwnOutcome) {
  const BrokenLookup lookup(false);
  const FixedSandbox sandbox(SandboxAvailability::Available);
  Webhook hook(AdmissionContext{default_settings(), lookup, sandbox});
  const json r = review_json("u-l", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
  http::Response resp = hook.serve(post("/mutate/pods", r.dump()));
  ASSERT_EQ(resp.status, 200u);
  const json body = json::parse(resp.body);
  EXPECT_FALSE(body["response"]["allowed"]);
  EXPECT_EQ(body["response"]["status"]["code"], 403);
  EXPECT_THAT(body["response"]["status"]["message"].get<std::string>(),
              HasSubstr("could not be looked up (the API server did not answer within 2s)"));
  EXPECT_THAT(hook.metrics().render(),
              HasSubstr("isolation_gate_admission_reviews_total{endpoint=\"/mutate/pods\","
                        "outcome=\"LookupError\",reason=\"LookupError\",allowed=\"false\"} 1\n"));
}

TEST(WebhookFailures, AnExceptionInAHandlerIsAnErroredDenialWithTheUid) {
  const BrokenLookup lookup(true);
  const FixedSandbox sandbox(SandboxAvailability::Available);
  Webhook hook(AdmissionContext{default_settings(), lookup, sandbox});
  const json r = review_json("u-x", kPodKind, "CREATE", load_example("pods/docs-indexer-pod.yaml"));
  http::Response resp = hook.serve(post("/mutate/pods", r.dump()));
  ASSERT_EQ(resp.status, 200u);
  const json body = json::parse(resp.body);
  EXPECT_EQ(body["response"]["uid"], "u-x");
  EXPECT_FALSE(body["response"]["allowed"]);
  EXPECT_EQ(body["response"]["status"]["code"], 500);
  EXPECT_EQ(body["response"]["status"]["reason"], "InternalError");
  EXPECT_THAT(body["response"]["status"]["message"].get<std::string>(),
              AllOf(HasSubstr("cache corrupted"), HasSubstr("denied (fail closed)")));
  EXPECT_THAT(hook.metrics().render(),
              HasSubstr("outcome=\"Errored\",reason=\"InternalError\",allowed=\"false\"} 1\n"));
}

// ---- the answer builders ---------------------------------------------------

TEST(AnswerBuilders, TheReasonFixesOutcomeAllowedAndStatus) {
  EXPECT_TRUE(allowed(Reason::SandboxAvailable, "").allowed());
  EXPECT_EQ(allowed(Reason::SandboxAvailable, "").outcome(), Outcome::RequireSetec);
  EXPECT_EQ(allowed(Reason::CustomerIsolation, "").outcome(), Outcome::AllowInProcess);
  const Answer d = denied(Reason::MissingComponentLabel, "m");
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.outcome(), Outcome::Deny);
  EXPECT_EQ(d.code(), 403);
  EXPECT_EQ(d.status_reason(), "Forbidden");
  const Answer u = undecidable("no object");
  EXPECT_FALSE(u.allowed());
  EXPECT_EQ(u.outcome(), Outcome::Undecidable);
  EXPECT_EQ(u.code(), 400);
  EXPECT_EQ(u.message, "isolation-gate cannot decide this request: no object; denied (fail closed).");
  const Answer e = errored("boom");
  EXPECT_EQ(e.outcome(), Outcome::Errored);
  EXPECT_EQ(e.code(), 500);
  const Answer n = not_enforced(Reason::OperationNotEnforced, "operation DELETE is not enforced");
  EXPECT_TRUE(n.allowed());
  EXPECT_EQ(n.audit, (std::vector<std::pair<std::string, std::string>>{
                         {"decision", "NotEnforced"}, {"reason", "operation DELETE is not enforced"}}));
}

TEST(AnswerBuilders, ADenialNeverAllowsAndUnknownReasonsDeny) {
  // denied() with an allowing reason is a programming error: it still denies.
  const Answer d = denied(Reason::SandboxAvailable, "oops");
  EXPECT_FALSE(d.allowed());
  EXPECT_EQ(d.outcome(), Outcome::Errored);
  // A default answer denies; so does a reason outside the table.
  EXPECT_FALSE(Answer{}.allowed());
  Answer corrupt;
  corrupt.reason = static_cast<Reason>(200);
  EXPECT_FALSE(corrupt.allowed());
  EXPECT_EQ(corrupt.code(), 500);
  EXPECT_EQ(to_string(static_cast<Reason>(200)), "InternalError");
  for (std::size_t i = 0; i < kReasonCount; ++i) {
    const auto r = static_cast<Reason>(i);
    // Allowed exactly when the outcome is one of the allowing ones.
    const Outcome o = outcome_of(r);
    const bool allowing = o == Outcome::RequireSetec || o == Outcome::AllowInProcess ||
                          o == Outcome::Allowed;
    EXPECT_EQ(allows(r), allowing) << to_string(r);
  }
}

}  // namespace
}  // namespace ig::admission
