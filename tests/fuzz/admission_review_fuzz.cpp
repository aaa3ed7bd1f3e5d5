// libFuzzer target: the admission handler below the socket, the whole route
// the HTTPS server calls (Webhook::serve: method, path, content type, body ->
// status and body).
//
// Input: byte 0 chooses the request line (bits 0-2: the path, bits 3-4: the
// method, bits 5-6: the content type); the rest is the body.
//
// Invariants, checked here and abort() on a breach:
//  1. The projected parser agrees with nlohmann (same verdict, same value),
//     and its capture slots (decode_review's parse) agree with it.
//  2. serve() never crashes or hangs, and answers every request with a JSON
//     document: a non-200 answer is a Kubernetes Status with that code; a 200
//     answer to an admission path is an AdmissionReview echoing the uid and
//     apiVersion, and only to a POST of application/json.
//  3. Never `allowed: true` for a request that could not be decided. What is
//     decidable is computed here, independently of the code under test
//     (nlohmann with our own duplicate-key check, then the AdmissionReview v1
//     contract and docs/architecture.md, "Admission rules", spelled out again): a
//     body that is not strict JSON, not an AdmissionReview v1/v1beta1, with
//     no uid, an operation that is not exactly one of the four, a field of
//     the wrong type, a kind that is not the endpoint's, a subresource, no
//     object or no namespace for an enforced operation, an object whose
//     kind/apiVersion/namespace disagree with the request, a pod in an
//     enforced namespace that does not name a Component of the catalog, a
//     pod (the sandbox is available, so every pod is RequireSetec) asking
//     for host namespaces or privilege or (at /validate/pods) not on the
//     sandbox's runtimeClassName, a Component
//     with an unknown content_trust or spec.kind.
//  4. The denial observer sees only denials.
// Build and run: scripts/fuzz.sh [seconds] [admission_review_fuzz]
#include <cstdint>
#include <cstdlib>
#include <string>

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "config/defaults.h"
#include "fuzz_support.h"
#include "model/document.h"
#include "model/json_projection.h"
#include "pod_text_check.h"

namespace {

using nlohmann::json;

constexpr std::string_view kNamespace = "team-a";
constexpr std::string_view kUntrusted = "report-parser";
constexpr std::string_view kTrusted = "docs-indexer";
constexpr std::string_view kLabel = "gibson.zeroroot.ai/component";

ig::model::Component component(std::string_view name, std::string_view trust) {
  ig::model::Component comp;
  comp.name = std::string(name);
  comp.set_trust_raw(std::string(trust));
  return comp;
}

bool denial_seen = false;

ig::admission::Webhook& webhook() {
  static ig::admission::StaticCatalog catalog = [] {
    ig::admission::StaticCatalog c;
    c.add(component(kUntrusted, "untrusted"), kNamespace);
    c.add(component(kTrusted, "trusted"), kNamespace);
    return c;
  }();
  static ig::admission::FixedSandbox sandbox(ig::policy::SandboxAvailability::Available);
  static const ig::admission::GateSettings settings = [] {
    ig::admission::GateSettings g;
    g.runtime_class = std::string(ig::config::kDefaultRuntimeClass);
    g.own_namespace = std::string(ig::config::kDefaultNamespace);
    return g;
  }();
  static ig::admission::Webhook hook(
      ig::admission::AdmissionContext{settings, catalog, sandbox},
      ig::admission::WebhookOptions{[](const ig::admission::DenialNotice& n) {
                                      denial_seen = true;
                                      if (n.namespace_.empty())
                                        ig::fuzz::fail("denial notice without a namespace");
                                    },
                                    {}});
  return hook;
}

// absent or null
bool absent(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null();
}
// absent, null or a string
bool string_or_absent(const json& obj, const char* key) {
  return absent(obj, key) || obj.at(key).is_string();
}
std::string str(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}
const json* member(const json* obj, const char* key) {
  if (obj == nullptr || !obj->is_object()) return nullptr;
  auto it = obj->find(key);
  return it == obj->end() ? nullptr : &*it;
}
bool is_true(const json* v) { return v != nullptr && v->is_boolean() && v->get<bool>(); }

enum class Route { MutatePods, ValidatePods, Workloads, Components };

bool workload_kind(const std::string& group, const std::string& kind) {
  if (group == "apps") return kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet";
  return group == "batch" && (kind == "Job" || kind == "CronJob");
}

// Why allowing this request would be wrong; "" when an allow is acceptable.
std::string why_allow_is_wrong(Route route, std::string_view body) {
  auto strict = ig::fuzz::parse_strict_json(body);
  if (strict.duplicate) return "duplicate member name";
  if (!strict.value) return "not strict JSON";
  const json& review = *strict.value;
  if (!review.is_object()) return "not an object";
  const std::string api = str(review, "apiVersion");
  if (api != "admission.k8s.io/v1" && api != "admission.k8s.io/v1beta1") return "apiVersion";
  if (str(review, "kind") != "AdmissionReview") return "kind";
  const json* req = member(&review, "request");
  if (req == nullptr || !req->is_object()) return "no request";
  if (!string_or_absent(*req, "uid") || str(*req, "uid").empty()) return "no uid";
  const json* kind = member(req, "kind");
  if (kind == nullptr || !kind->is_object()) return "request.kind";
  for (const char* k : {"group", "version", "kind"})
    if (!string_or_absent(*kind, k)) return "request.kind field type";
  for (const char* k : {"namespace", "name", "subResource", "operation"})
    if (!string_or_absent(*req, k)) return "request field type";
  if (!absent(*req, "dryRun") && !req->at("dryRun").is_boolean()) return "dryRun type";
  const std::string group = str(*kind, "group"), version = str(*kind, "version"), k = str(*kind, "kind");
  if (k.empty()) return "no request.kind.kind";
  const std::string op = str(*req, "operation");
  if (op != "CREATE" && op != "UPDATE" && op != "DELETE" && op != "CONNECT") return "operation " + op;
  const bool pod_route = route == Route::MutatePods || route == Route::ValidatePods;
  if (pod_route && !(group.empty() && k == "Pod")) return "not a Pod";
  if (route == Route::Workloads && !workload_kind(group, k)) return "not a workload";
  if (route == Route::Components && !(group == "gibson.zeroroot.ai" && k == "Component")) return "not a Component";
  const std::string subresource = str(*req, "subResource");
  // /validate/pods judges pods/ephemeralcontainers as the pod it changes.
  const bool pod_subresource = route == Route::ValidatePods && subresource == "ephemeralcontainers";
  if (route != Route::Components && !subresource.empty() && !pod_subresource) return "subresource";
  // Pod UPDATEs (/validate/pods) are judged against oldObject, with rules of
  // their own (tests/unit/admission_pod_rules_test.cpp); here only CREATE is
  // modelled for pods, so an allowed pod UPDATE is never called wrong.
  const bool enforced = op == "CREATE" || (op == "UPDATE" && !pod_route);
  if (!enforced) return {};  // not enforced: allowed without a decision

  const json* object = member(req, "object");
  if (object == nullptr || !object->is_object()) return "no object";
  const std::string ns = str(*req, "namespace");
  if (ns.empty()) return "no namespace";
  if (!string_or_absent(*object, "kind") || (!absent(*object, "kind") && str(*object, "kind") != k))
    return "object.kind";
  const std::string want_api = group.empty() ? version : group + "/" + version;
  if (!string_or_absent(*object, "apiVersion") ||
      (!absent(*object, "apiVersion") && str(*object, "apiVersion") != want_api))
    return "object.apiVersion";
  const json* meta = member(object, "metadata");
  if (meta != nullptr && !meta->is_null() && !meta->is_object()) return "metadata type";
  if (meta != nullptr && meta->is_object()) {
    if (!string_or_absent(*meta, "namespace")) return "metadata.namespace type";
    const std::string mns = str(*meta, "namespace");
    if (!mns.empty() && mns != ns) return "metadata.namespace differs";
  }

  if (route == Route::Components) {
    const json* spec = member(object, "spec");
    if (spec == nullptr || spec->is_null()) return {};
    if (!spec->is_object()) return "spec type";
    if (!string_or_absent(*spec, "kind")) return "spec.kind type";
    const std::string sk = str(*spec, "kind");
    if (!sk.empty() && sk != "tool" && sk != "agent" && sk != "plugin" && sk != "connector")
      return "spec.kind " + sk;
    const json* policy = member(spec, "policy");
    if (policy == nullptr || policy->is_null()) return {};
    if (!policy->is_object()) return "policy type";
    if (!string_or_absent(*policy, "content_trust")) return "content_trust type";
    const std::string t = str(*policy, "content_trust");
    if (!t.empty() && t != "trusted" && t != "untrusted") return "content_trust " + t;
    return {};
  }

  if (ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease" || ns == ig::config::kDefaultNamespace)
    return {};  // never enforced
  // The pod (template) the rules read.
  const json* pod = object;
  if (route == Route::Workloads) {
    const json* owner = k == "CronJob" ? member(member(object, "spec"), "jobTemplate") : object;
    pod = member(member(owner, "spec"), "template");
  }
  const json* labels = member(member(pod, "metadata"), "labels");
  const json* label = member(labels, kLabel.data());
  if (label == nullptr || !label->is_string()) return "no component label";
  const std::string name = label->get<std::string>();
  if (ns != kNamespace || (name != kUntrusted && name != kTrusted)) return "no such Component";
  {  // The sandbox is available: every Component's pods go to the sandbox (README, "The rule").
    const json* spec = member(pod, "spec");
    for (const char* host : {"hostNetwork", "hostPID", "hostIPC"})
      if (is_true(member(spec, host))) return std::string("sandboxed pod with ") + host;
    for (const char* list : {"containers", "initContainers", "ephemeralContainers"}) {
      const json* cs = member(spec, list);
      if (cs == nullptr || !cs->is_array()) continue;
      for (const auto& c : *cs)
        if (is_true(member(member(&c, "securityContext"), "privileged"))) return "sandboxed privileged container";
    }
    if (route == Route::ValidatePods) {
      const json* rc = member(spec, "runtimeClassName");
      if (rc == nullptr || !rc->is_string() || *rc != ig::config::kDefaultRuntimeClass)
        return "sandboxed pod not on the sandbox";
    }
  }
  return {};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t line = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);

  // 1. The projected parser against its reference, model::parse_json
  // (nlohmann, the depth limit, no repeated member name). nlohmann takes a
  // NUL byte for the end of input ("{}\0x" parses); we do not.
  const auto& projection = ig::admission::admission_review_projection();
  auto got = ig::model::parse_projected(text, projection, "fuzz");
  std::optional<json> expected;
  if (text.find('\0') == std::string_view::npos) {
    if (auto full = ig::model::parse_json(text, "fuzz")) expected = ig::model::project(*full, projection);
  }
  IG_FUZZ_CHECK(got.ok() == expected.has_value(), "projected parser and nlohmann disagree on validity", text);
  if (expected) IG_FUZZ_CHECK(*expected == *got, "projected parser and nlohmann disagree on the value", text);
  // 1b. The envelope's capture slots (decode_review's parse) against the
  // projected DOM: the same verdict and error, slots == capture(DOM).
  {
    const std::size_t n = ig::admission::admission_review_slot_count();
    std::vector<ig::model::Captured> slots(n);
    auto captured = ig::model::parse_captured(text, projection, slots, "fuzz");
    IG_FUZZ_CHECK(captured.ok() == got.ok(), "capture slots and the projected parser disagree on validity", text);
    if (!got.ok()) {
      IG_FUZZ_CHECK(captured.error() == got.error(), "capture slots and the projected parser word an error differently",
                    text);
    } else {
      const auto want = ig::model::capture(*got, projection, n);
      for (std::size_t i = 0; i < n; ++i)
        IG_FUZZ_CHECK(want[i] == slots[i], "capture slot differs from the projected DOM", text);
    }
  }

  // 1c. The pod endpoints' decode, which reads a pod's text in its pass
  // (model/pod_text.h), against the projected decode: the same verdict and
  // error; and facts it read are the DOM path's (pod_text_check.h).
  {
    auto as_text = ig::admission::decode_review(text, ig::admission::ObjectRead::Text);
    auto projected = ig::admission::decode_review(text, ig::admission::ObjectRead::Projected);
    IG_FUZZ_CHECK(as_text.kind == projected.kind && as_text.error == projected.error,
                  "the pod endpoints' decode and the projected decode disagree", text);
    const auto& r = as_text.request;
    const std::string api = r.kind_group.empty() ? r.kind_version : r.kind_group + "/" + r.kind_version;
    for (auto [pod_text, pod] : {std::pair{r.object_text, &r.object_pod}, {r.old_object_text, &r.old_object_pod}}) {
      if (!pod->has_value()) continue;
      std::string disagreement;
      const auto outcome = ig::pod_text_check::compare(pod_text, r.kind, api, disagreement);
      IG_FUZZ_CHECK(disagreement.empty() && outcome == ig::pod_text_check::Outcome::Same,
                    "facts read in the decode differ from the DOM path's: " + disagreement, text);
      const auto again = ig::model::read_pod_text(pod_text, r.kind, api);
      IG_FUZZ_CHECK(again && ig::pod_text_check::same_facts(again->facts, (*pod)->facts),
                    "facts read in the decode differ from read_pod_text's", text);
    }
  }

  // 2. The route.
  static const char* const kPaths[] = {"/mutate/pods", "/validate/pods", "/validate/workloads",
                                       "/validate/components", "/mutate/pods?timeout=10s",
                                       "/healthz", "/metrics", "/validate/nothing"};
  static const char* const kMethods[] = {"POST", "POST", "POST", "GET"};
  static const char* const kTypes[] = {"application/json", "application/json",
                                       "Application/JSON; charset=utf-8", "text/plain"};
  const unsigned path_index = line & 7u;
  const std::string method = kMethods[(line >> 3) & 3u];
  const std::string type = kTypes[(line >> 5) & 3u];
  const bool admission_path = path_index < 5;
  denial_seen = false;
  auto response = webhook().serve({method, kPaths[path_index], type, std::string(text)});

  if (path_index == 6 && response.status == 200) return 0;  // Prometheus text
  json body = json::parse(response.body, nullptr, false);
  IG_FUZZ_CHECK(!body.is_discarded() && body.is_object(), "answer is not a JSON object", response.body);
  if (response.status != 200) {
    IG_FUZZ_CHECK(body.value("kind", "") == "Status" && body.value("code", 0u) == response.status,
                  "non-200 answer is not a Status with its code", response.body);
    IG_FUZZ_CHECK(!denial_seen, "denial observer called for a request answered without a review", response.body);
    return 0;
  }
  if (!admission_path) {
    IG_FUZZ_CHECK(method == "GET", "probe answered 200 to a POST", response.body);
    return 0;
  }
  IG_FUZZ_CHECK(method == "POST" && type != "text/plain", "review answered for a non-POST or non-JSON request",
                response.body);
  const json* resp = member(&body, "response");
  IG_FUZZ_CHECK(resp != nullptr && resp->is_object(), "200 without a response", response.body);
  IG_FUZZ_CHECK(body.value("kind", "") == "AdmissionReview", "200 answer is not an AdmissionReview", response.body);
  const json* allowed = member(resp, "allowed");
  IG_FUZZ_CHECK(allowed != nullptr && allowed->is_boolean(), "response.allowed is not a boolean", response.body);
  auto request = json::parse(text, nullptr, false);
  if (request.is_object() && request.contains("request") && request["request"].is_object()) {
    const json& uid = request["request"]["uid"];
    IG_FUZZ_CHECK(uid.is_string() && resp->value("uid", "") == uid.get<std::string>(), "uid not echoed",
                  response.body);
    IG_FUZZ_CHECK(body.value("apiVersion", "") == request.value("apiVersion", "x"), "apiVersion not echoed",
                  response.body);
  }
  const Route route = path_index == 4 ? Route::MutatePods : static_cast<Route>(path_index);
  if (allowed->get<bool>()) {
    IG_FUZZ_CHECK(!denial_seen, "denial observer called for an allow", response.body);
    if (route != Route::MutatePods)
      IG_FUZZ_CHECK(!resp->contains("patch"), "a validating endpoint answered with a patch", response.body);
    const std::string why = why_allow_is_wrong(route, text);
    IG_FUZZ_CHECK(why.empty(), "allowed: true for an undecidable request: " + why, response.body);
  }
  return 0;
}
