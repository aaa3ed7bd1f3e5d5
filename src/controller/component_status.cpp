#include "controller/component_status.h"

#include <algorithm>
#include <chrono>
#include <functional>

#include "base/quote.h"
#include "base/rfc3339.h"
#include "kube/object_meta.h"

namespace ig::controller {
namespace {

using nlohmann::json;
using policy::Decision;

// Calls f(its index in kConditionTypes, condition) for each of status.conditions of the gate's types.
template <typename F>
void for_each_condition(const json& status, F f) {
  auto c = status.find("conditions");
  if (c == status.end() || !c->is_array()) return;
  for (const auto& condition : *c) {
    auto type = condition.find("type");  // end() when not an object
    if (type == condition.end() || !type->is_string()) continue;
    auto which = std::find(kConditionTypes.begin(), kConditionTypes.end(), type->get_ref<const std::string&>());
    if (which != kConditionTypes.end()) f(static_cast<std::size_t>(which - kConditionTypes.begin()), condition);
  }
}

// By ConditionStatus (Absent: never written).
constexpr std::array<std::string_view, 4> kStatusWords = {"Unknown", "True", "False", "Unknown"};

// The fields desired_status() writes (conditions apart).
constexpr std::array<const char*, 6> kOwnedFields = {"observedGeneration", "contentTrust", "trustDeclared",
                                                     "isolation", "runtimeClassName", "driftedPods"};

// What the fingerprint covers: the gate's fields and conditions (in
// kConditionTypes order, without lastTransitionTime).
json owned_part(const json& status) {
  json ours = json::object();
  if (!status.is_object()) return ours;
  for (const char* field : kOwnedFields) {
    if (auto f = status.find(field); f != status.end() && !f->is_null()) ours[field] = *f;
  }
  std::array<const json*, kConditionTypes.size()> by_type{};
  for_each_condition(status, [&](std::size_t i, const json& condition) {
    if (!by_type[i]) by_type[i] = &condition;
  });
  json conditions = json::array();
  for (const json* condition : by_type) {
    if (!condition) continue;
    json kept = *condition;
    kept.erase("lastTransitionTime");
    conditions.push_back(std::move(kept));
  }
  if (!conditions.empty()) ours["conditions"] = std::move(conditions);
  return ours;
}

struct Condition {
  ConditionType type;
  ConditionStatus status;
  std::string_view reason;
  std::string message;
};

Condition admitted(const model::Component& c, Decision d, const StatusInputs& in) {
  const std::string rc = quote(in.runtime_class);
  switch (d) {
    case Decision::RequireSetec:
      return {ConditionType::Admitted, ConditionStatus::True, "SandboxAvailable",
              "its pods are admitted onto the setec sandbox: RuntimeClass " + rc + " is available"};
    case Decision::AllowInProcess:
      if (policy::is_trusted(c.trust.trust)) {
        return {ConditionType::Admitted, ConditionStatus::True, "TrustedInProcess",
                "the setec sandbox (RuntimeClass " + rc +
                    ") is unavailable and the Component is trusted: its pods are admitted on an "
                    "ordinary runtime"};
      }
      return {ConditionType::Admitted, ConditionStatus::True, "CustomerIsolation",
              "the setec sandbox (RuntimeClass " + rc +
                  ") is unavailable; the customer-isolation shape admits its untrusted pods on the "
                  "customer's own isolation"};
    case Decision::Deny:
    default:
      return {ConditionType::Admitted, ConditionStatus::False, "SandboxUnavailable",
              "its pods are denied: the Component is untrusted, the shape is setec-only and the "
              "setec sandbox (RuntimeClass " +
                  rc + ") is unavailable; they are admitted again once it is available"};
  }
}

Condition trust_declared(const model::Component& c) {
  if (!c.trust.valid) {
    return {ConditionType::TrustDeclared, ConditionStatus::False, "Invalid",
            "spec.policy.content_trust " + quote(c.trust_raw().value_or("")) +
                " is neither trusted nor untrusted: treated as untrusted; set one of them"};
  }
  if (!c.trust.declared) {
    return {ConditionType::TrustDeclared, ConditionStatus::False, "Omitted",
            "spec.policy.content_trust is omitted, so the Component is treated as trusted; "
            "declare it: trusted, or untrusted if it parses attacker-controlled input"};
  }
  return {ConditionType::TrustDeclared, ConditionStatus::True, "Declared",
          "spec.policy.content_trust is " + quote(policy::effective_trust_name(c.trust.trust))};
}

Condition drifted(Decision d, std::size_t pods) {
  if (pods == 0) {
    return {ConditionType::Drifted, ConditionStatus::False, "NoDrift",
            "every running pod of the Component is placed as the gate decides now (" +
                std::string(policy::to_string(d)) + ")"};
  }
  return {ConditionType::Drifted, ConditionStatus::True, "PodsDrifted",
          std::to_string(pods) + (pods == 1 ? " running pod is" : " running pods are") +
              " placed against the gate's decision now (" + std::string(policy::to_string(d)) +
              "): see the Component's Events; recreate them (or run with --evict-drifted)"};
}

Condition bound_outside_microvm(Decision d, const UnboundPods& unbound) {
  switch (d) {
    case Decision::RequireSetec: break;
    case Decision::AllowInProcess:
    case Decision::Deny:
    default:
      return {ConditionType::BoundOutsideMicroVM, ConditionStatus::True, "NotInMicroVM",
              "its pods do not run in the setec sandbox now (" + std::string(policy::to_string(d)) +
                  "): outside a microVM admission admits only what the Component declares"};
  }
  if (unbound.count == 0) {
    return {ConditionType::BoundOutsideMicroVM, ConditionStatus::True, "PodsBound",
            "every running pod of the Component runs only what it declares: none would be denied if the "
            "sandbox went away"};
  }
  return {ConditionType::BoundOutsideMicroVM, ConditionStatus::False, "PodsUnboundOutsideMicroVM",
          std::to_string(unbound.count) + (unbound.count == 1 ? " running pod runs" : " running pods run") +
              " what the Component does not declare (pod " + quote(unbound.example_pod) + ": " +
              unbound.example_phrase +
              "): they run in the microVM now but would be denied if the sandbox went away; declare "
              "spec.command/spec.args/spec.exec in the Component (docs/components.md) or remove it from the pod"};
}

constexpr std::size_t kUuidLength = 36;
bool uuid_dash(std::size_t i) noexcept { return i == 8 || i == 13 || i == 18 || i == 23; }
int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // upper case is kept as written: str() must give back the same text
}

}  // namespace

std::string format_time(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::int64_t parse_time(std::string_view text) noexcept {
  const auto t = parse_rfc3339(text);
  if (!t) return 0;
  const auto seconds = std::chrono::floor<std::chrono::seconds>(t->time_since_epoch()).count();
  return seconds < 0 ? 0 : static_cast<std::int64_t>(seconds);
}

ObjectUid::ObjectUid(std::string_view text) {
  bool uuid = text.size() == kUuidLength;
  std::array<std::uint8_t, 16> bytes{};
  for (std::size_t i = 0, b = 0; uuid && i < text.size(); ++i) {
    if (uuid_dash(i)) {
      uuid = text[i] == '-';
      continue;
    }
    const int d = hex_digit(text[i]);
    if (d < 0) {
      uuid = false;
      break;
    }
    bytes[b / 2] = static_cast<std::uint8_t>(bytes[b / 2] | (b % 2 == 0 ? d << 4 : d));
    ++b;
  }
  const bool zero = bytes == std::array<std::uint8_t, 16>{};
  if (uuid && !zero) {
    bytes_ = bytes;
  } else if (!text.empty()) {
    other_ = std::make_unique<std::string>(text);
  }
}

bool ObjectUid::empty() const noexcept {
  return !other_ && bytes_ == std::array<std::uint8_t, 16>{};
}

std::string ObjectUid::str() const {
  if (other_) return *other_;
  if (empty()) return {};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(kUuidLength);
  for (std::size_t i = 0, b = 0; i < kUuidLength; ++i) {
    if (uuid_dash(i)) {
      out.push_back('-');
      continue;
    }
    const std::uint8_t byte = bytes_[b / 2];
    out.push_back(kHex[b % 2 == 0 ? byte >> 4 : byte & 0xf]);
    ++b;
  }
  return out;
}

Result<ComponentRecord> decode_component_record(const json& object) {
  auto component = model::decode_component(object, "Component");
  if (!component) return component.failure();
  ComponentRecord r;
  r.component = std::move(component).value();
  const kube::ObjectMeta meta = kube::object_meta(object);
  if (!meta.uid.empty()) r.uid = ObjectUid(meta.uid);
  r.generation = meta.generation;
  auto status = object.find("status");
  if (status == object.end() || !status->is_object() || status->empty()) return r;
  r.status_fingerprint = status_fingerprint(*status);
  for_each_condition(*status, [&](std::size_t i, const json& condition) {
    ConditionMark& mark = r.conditions[i];
    const json word = condition.value("status", json());
    mark.status = word == "True"    ? ConditionStatus::True
                  : word == "False" ? ConditionStatus::False
                                    : ConditionStatus::Unknown;
    if (auto t = condition.find("lastTransitionTime"); t != condition.end() && t->is_string()) {
      const std::int64_t at = parse_time(t->get_ref<const std::string&>());
      mark.last_transition = at > 0 && at <= std::int64_t{UINT32_MAX} ? static_cast<std::uint32_t>(at) : 0;
    }
  });
  return r;
}

Decision decision_for(const model::Component& c, const StatusInputs& in) noexcept {
  return policy::decide(in.sandbox, c.trust.trust, in.shape);
}

json desired_status(const ComponentRecord& record, const StatusInputs& in) {
  const model::Component& c = record.component;
  const Decision d = decision_for(c, in);
  json status = {{"observedGeneration", record.generation},
                 {"contentTrust", policy::effective_trust_name(c.trust.trust)},
                 {"trustDeclared", c.trust.declared && c.trust.valid},
                 {"isolation", policy::to_string(d)},
                 {"driftedPods", in.drifted_pods}};
  switch (d) {
    case Decision::RequireSetec: status["runtimeClassName"] = in.runtime_class; break;
    case Decision::AllowInProcess:
    case Decision::Deny: break;
  }
  json conditions = json::array();
  for (const Condition& k : {admitted(c, d, in), trust_declared(c), drifted(d, in.drifted_pods),
                             bound_outside_microvm(d, in.unbound)}) {
    const ConditionMark& seen = record.conditions[static_cast<std::size_t>(k.type)];
    const std::time_t since =
        seen.status == k.status && seen.last_transition > 0 ? seen.last_transition : in.now;
    conditions.push_back({{"type", kConditionTypes[static_cast<std::size_t>(k.type)]},
                          {"status", kStatusWords[static_cast<std::size_t>(k.status)]},
                          {"observedGeneration", record.generation},
                          {"lastTransitionTime", format_time(since)},
                          {"reason", k.reason},
                          {"message", cut_utf8(k.message, 32768)}});
  }
  status["conditions"] = std::move(conditions);
  return status;
}

json apply_configuration(const ComponentRecord& record, json status) {
  return {{"apiVersion", model::kComponentApiVersion},
          {"kind", model::kComponentKind},
          {"metadata", {{"name", record.component.name}, {"namespace", record.component.namespace_}}},
          {"status", std::move(status)}};
}

std::uint64_t status_fingerprint(const json& status) {
  const json ours = owned_part(status);
  if (ours.empty()) return 0;  // none of ours: as "no status"
  const std::string text = ours.dump(-1, ' ', false, json::error_handler_t::replace);
  const std::uint64_t h = std::hash<std::string>{}(text);
  return h == 0 ? 1 : h;  // 0 means "no status"
}

json leftover_fields_patch(const json& desired, const json& held) {
  if (!held.is_object()) return nullptr;
  json removed = json::object();
  for (const char* field : kOwnedFields) {
    if (held.contains(field) && !desired.contains(field)) removed[field] = nullptr;
  }
  if (removed.empty()) return nullptr;
  return {{"status", std::move(removed)}};
}

}  // namespace ig::controller
