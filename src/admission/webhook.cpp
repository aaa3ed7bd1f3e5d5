#include "admission/webhook.h"

#include <algorithm>
#include <cctype>

#include "admission/pod_rules.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"

namespace ig::admission {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::string_view kSource = "request.object";

Webhook::ReviewOutcome undecidable(std::string message) {
  Webhook::ReviewOutcome out;
  out.response.allowed = false;
  out.response.code = 400;
  out.response.reason = "BadRequest";
  out.response.message = "isolation-gate cannot decide this request: " + std::move(message) +
                         "; denied (fail closed).";
  out.outcome = Outcome::Invalid;
  return out;
}

Webhook::ReviewOutcome allowed_without_decision(std::string why) {
  Webhook::ReviewOutcome out;
  out.response.allowed = true;
  out.response.audit.emplace_back("decision", "NotEnforced");
  out.response.audit.emplace_back("reason", std::move(why));
  out.outcome = Outcome::Allowed;
  return out;
}

Outcome outcome_of(const PodVerdict& v) {
  if (!v.decided) return v.allowed ? Outcome::Allowed : Outcome::DeniedBeforeGate;
  switch (v.decision) {
    case policy::Decision::RequireSetec:
      return v.allowed ? Outcome::RequireSetec : Outcome::DeniedBeforeGate;
    case policy::Decision::AllowInProcess: return Outcome::AllowInProcess;
    case policy::Decision::Deny: break;
  }
  return Outcome::Deny;
}

bool is_json_content_type(std::string_view ct) {
  auto semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.back()))) media.remove_suffix(1);
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.front()))) media.remove_prefix(1);
  static constexpr std::string_view kJson = "application/json";
  return media.size() == kJson.size() &&
         std::equal(media.begin(), media.end(), kJson.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

bool is_workload_kind(std::string_view group, std::string_view kind) {
  if (group == "apps") {
    return kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" ||
           kind == "ReplicaSet";
  }
  return group == "batch" && (kind == "Job" || kind == "CronJob");
}

// Admission objects carry apiVersion/kind; fill them from request.kind when
// absent. An object whose type disagrees with request.kind is not decided:
// the rules read the template of the object's own kind, and the endpoint was
// chosen by request.kind. Returns the disagreement, or "" when they agree.
std::string ensure_type_meta(AdmissionRequest& r) {
  const std::string api_version =
      r.kind_group.empty() ? r.kind_version : r.kind_group + "/" + r.kind_version;
  auto kind = r.object.find("kind");
  if (kind == r.object.end() || kind->is_null()) {
    r.object["kind"] = r.kind;
  } else if (!kind->is_string() || *kind != r.kind) {
    return "request.object.kind does not match request.kind " + r.kind;
  }
  auto api = r.object.find("apiVersion");
  if (api == r.object.end() || api->is_null()) {
    r.object["apiVersion"] = api_version;
  } else if (!api->is_string() || *api != api_version) {
    return "request.object.apiVersion does not match request.kind " + api_version;
  }
  return {};
}

}  // namespace

Webhook::Webhook(GateSettings settings, const ComponentLookup& components,
                 const SandboxView& sandbox)
    : settings_(std::move(settings)), components_(components), sandbox_(sandbox) {}

Webhook::ReviewOutcome Webhook::review(Endpoint endpoint, AdmissionRequest& r) const {
  const std::string kind_name = (r.kind_group.empty() ? "" : r.kind_group + "/") + r.kind;
  switch (endpoint) {
    case Endpoint::MutatePods:
    case Endpoint::ValidatePods:
    case Endpoint::ValidateWorkloads: {
      const bool pods = endpoint != Endpoint::ValidateWorkloads;
      if (pods && !(r.kind_group.empty() && r.kind == "Pod")) {
        return undecidable("this endpoint admits Pods, got " + kind_name);
      }
      if (!pods && !is_workload_kind(r.kind_group, r.kind)) {
        return undecidable("this endpoint admits Deployments, StatefulSets, DaemonSets, "
                           "ReplicaSets, Jobs and CronJobs, got " + kind_name);
      }
      if (!r.sub_resource.empty()) return undecidable("subresource " + r.sub_resource + " is not admitted here");
      const bool enforced_op = r.operation == "CREATE" || (!pods && r.operation == "UPDATE");
      if (!enforced_op) return allowed_without_decision("operation " + r.operation + " is not enforced");
      if (!r.object.is_object()) return undecidable("request.object is missing or not an object");
      if (auto mismatch = ensure_type_meta(r); !mismatch.empty()) return undecidable(mismatch);
      auto where = model::locate_pod(r.object, kSource);
      if (!where) return undecidable(where.error());
      auto facts = model::read_pod_facts(r.object, *where, kSource);
      if (!facts) return undecidable(facts.error());
      const std::string& ns = !r.namespace_.empty() ? r.namespace_ : facts->namespace_;
      if (ns.empty()) return undecidable("request.namespace is missing");
      if (facts->object_name.empty() && !r.name.empty()) facts->object_name = r.name;
      const Stage stage = endpoint == Endpoint::MutatePods     ? Stage::Mutate
                          : endpoint == Endpoint::ValidatePods ? Stage::Validate
                                                               : Stage::Workload;
      PodVerdict v = admit_pod(*facts, *where, ns, components_, sandbox_, settings_, stage);
      ReviewOutcome out;
      out.outcome = outcome_of(v);
      out.response.allowed = v.allowed;
      out.response.message = std::move(v.message);
      if (stage == Stage::Mutate && !v.patch.empty()) out.response.patch = model::dump_json(v.patch);
      out.response.warnings = std::move(v.warnings);
      out.response.audit = std::move(v.audit);
      return out;
    }
    case Endpoint::ValidateComponents: {
      if (r.kind_group != model::kComponentGroup || r.kind != model::kComponentKind) {
        return undecidable("this endpoint admits gibson.zeroroot.ai Components, got " + kind_name);
      }
      if (r.operation != "CREATE" && r.operation != "UPDATE") {
        return allowed_without_decision("operation " + r.operation + " is not validated");
      }
      if (!r.object.is_object()) return undecidable("request.object is missing or not an object");
      if (auto mismatch = ensure_type_meta(r); !mismatch.empty()) return undecidable(mismatch);
      const std::string source = "Component \"" + r.name.substr(0, 253) + "\"";
      ReviewOutcome out;
      out.outcome = Outcome::DeniedBeforeGate;
      auto component = model::decode_component(r.object, source);
      if (!component) {
        out.response.message = component.error();
        return out;
      }
      auto problems = model::component_problems(*component, source);
      if (!problems.empty()) {
        std::string message;
        for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
        out.response.message = std::move(message);
        return out;
      }
      out.outcome = Outcome::Allowed;
      out.response.allowed = true;
      out.response.audit.emplace_back("content-trust",
                                      std::string(policy::effective_trust_name(component->trust.trust)));
      out.response.audit.emplace_back("trust-declared", component->trust.declared ? "true" : "false");
      if (!component->trust.declared) {
        add_warning(out.response.warnings,
                    "spec.policy.content_trust omitted: Component \"" + component->name +
                        "\" is treated as trusted; declare it");
      }
      return out;
    }
  }
  return undecidable("unknown endpoint");
}

WebhookResponse Webhook::error(unsigned status, std::string_view message) {
  metrics_.record_http_error(status);
  static constexpr std::pair<unsigned, std::string_view> kReasons[] = {
      {400, "BadRequest"},         {404, "NotFound"},        {405, "MethodNotAllowed"},
      {413, "RequestEntityTooLarge"}, {415, "UnsupportedMediaType"}, {500, "InternalError"},
      {503, "ServiceUnavailable"}};
  std::string_view reason = "InternalError";
  for (const auto& [code, name] : kReasons)
    if (code == status) reason = name;
  json body = {{"apiVersion", "v1"}, {"kind", "Status"},   {"status", "Failure"},
               {"message", message}, {"reason", reason}, {"code", status}};
  return {status, "application/json", model::dump_json(body)};
}

WebhookResponse Webhook::serve_review(Endpoint endpoint, WebhookRequest& request) {
  const auto start = Clock::now();
  DecodedReview decoded = decode_review(request.body);
  std::string().swap(request.body);  // the review owns what it needs now
  if (decoded.kind == DecodedReview::Kind::NotAReview) return error(400, decoded.error);
  ReviewOutcome out = decoded.kind == DecodedReview::Kind::Ok
                          ? review(endpoint, decoded.request)
                          : undecidable(decoded.error);
  std::string body = encode_response(decoded.request, out.response);
  metrics_.record(endpoint, out.outcome, out.response.allowed, decoded.request.dry_run,
                  Clock::now() - start);
  return {200, "application/json", std::move(body)};
}

WebhookResponse Webhook::serve(WebhookRequest&& request) noexcept { return route(request, true); }

WebhookResponse Webhook::serve_probes(WebhookRequest&& request) noexcept {
  return route(request, false);
}

WebhookResponse Webhook::route(WebhookRequest& request, bool admission_routes) noexcept {
  try {
    std::string_view target = request.target;
    const std::string_view path = target.substr(0, target.find('?'));
    const bool get = request.method == "GET" || request.method == "HEAD";
    if (path == "/healthz") {
      if (!get) return error(405, "use GET");
      return {200, "application/json", R"({"status":"ok"})"};
    }
    if (path == "/readyz") {
      if (!get) return error(405, "use GET");
      if (ready_ && !ready_()) return error(503, "not ready");
      return {200, "application/json", R"({"status":"ready"})"};
    }
    if (path == "/metrics") {
      if (!get) return error(405, "use GET");
      std::string text = metrics_.render();
      if (extra_metrics_) text += extra_metrics_();
      return {200, "text/plain; version=0.0.4; charset=utf-8", std::move(text)};
    }
    static constexpr Endpoint kEndpoints[] = {Endpoint::MutatePods, Endpoint::ValidatePods,
                                              Endpoint::ValidateWorkloads,
                                              Endpoint::ValidateComponents};
    for (Endpoint e : kEndpoints) {
      if (!admission_routes || path != endpoint_path(e)) continue;
      if (request.method != "POST") return error(405, "admission endpoints accept POST only");
      if (!is_json_content_type(request.content_type)) {
        return error(415, "Content-Type must be application/json");
      }
      return serve_review(e, request);
    }
    return error(404, "no such endpoint");
  } catch (...) {
    return {500, "application/json", R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,"message":"internal error"})"};
  }
}

}  // namespace ig::admission
