#include "model/component.h"

#include "base/quote.h"
#include "model/document.h"
#include "model/image.h"

namespace ig::model {
namespace {

// An optional string field: absent or null -> nullopt; a string -> value;
// anything else -> error naming the field.
Result<std::optional<std::string>> optional_string(const json& parent, std::string_view key,
                                                   std::string_view path,
                                                   std::string_view source) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return std::optional<std::string>{};
  if (!it->is_string()) {
    return fail(std::string(source) + ": " + std::string(path) + ": expected a string, got " +
                std::string(json_type_phrase(*it)));
  }
  return std::optional<std::string>{it->get<std::string>()};
}

// An optional map field: absent or null -> nullptr; a map -> pointer; else error.
Result<const json*> optional_map(const json& parent, std::string_view key, std::string_view path,
                                 std::string_view source) {
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return static_cast<const json*>(nullptr);
  if (!it->is_object()) {
    return fail(std::string(source) + ": " + std::string(path) + ": expected a map, got " +
                std::string(json_type_phrase(*it)));
  }
  return &*it;
}

}  // namespace

bool looks_like_component(const json& doc) noexcept {
  if (!doc.is_object()) return false;
  auto kind = doc.find("kind");
  auto api = doc.find("apiVersion");
  if (kind == doc.end() || !kind->is_string() || *kind != kComponentKind) return false;
  if (api == doc.end() || !api->is_string()) return false;
  const auto& a = api->get_ref<const std::string&>();
  return a.rfind(std::string(kComponentGroup) + "/", 0) == 0;
}

Result<Component> decode_component(const json& doc, std::string_view source) {
  const std::string src(source);
  if (!doc.is_object()) {
    return fail(src + ": not a Component: expected a map with apiVersion " +
                std::string(kComponentApiVersion) + " and kind Component, got " +
                std::string(json_type_phrase(doc)));
  }
  auto api = optional_string(doc, "apiVersion", "apiVersion", source);
  if (!api) return fail(api.error());
  auto kind = optional_string(doc, "kind", "kind", source);
  if (!kind) return fail(kind.error());
  if (!kind->has_value() || **kind != kComponentKind || !api->has_value() ||
      **api != kComponentApiVersion) {
    return fail(src + ": not a Component: found apiVersion " +
                (api->has_value() ? quote(**api) : std::string("(none)")) + ", kind " +
                (kind->has_value() ? quote(**kind) : std::string("(none)")) +
                "; expected apiVersion " + std::string(kComponentApiVersion) + ", kind Component");
  }

  Component c;
  auto metadata = optional_map(doc, "metadata", "metadata", source);
  if (!metadata) return fail(metadata.error());
  if (*metadata == nullptr) return fail(src + ": metadata: required, with metadata.name");
  auto name = optional_string(**metadata, "name", "metadata.name", source);
  if (!name) return fail(name.error());
  if (!name->has_value() || (*name)->empty()) {
    return fail(src + ": metadata.name: required, expected a non-empty string");
  }
  c.name = std::move(**name);
  auto ns = optional_string(**metadata, "namespace", "metadata.namespace", source);
  if (!ns) return fail(ns.error());
  c.namespace_ = ns->value_or("");

  auto spec = optional_map(doc, "spec", "spec", source);
  if (!spec) return fail(spec.error());
  const json* policy_map = nullptr;
  if (*spec != nullptr) {
    auto ckind = optional_string(**spec, "kind", "spec.kind", source);
    if (!ckind) return fail(ckind.error());
    c.kind = ckind->value_or("");
    auto image = optional_string(**spec, "image", "spec.image", source);
    if (!image) return fail(image.error());
    c.image = image->value_or("");
    auto pol = optional_map(**spec, "policy", "spec.policy", source);
    if (!pol) return fail(pol.error());
    policy_map = *pol;
  }
  if (policy_map != nullptr) {
    auto trust = optional_string(*policy_map, "content_trust", kTrustField, source);
    if (!trust) return fail(trust.error());
    c.trust_raw = std::move(*trust);
  }
  c.trust = policy::parse_content_trust(c.trust_raw ? std::optional<std::string_view>(*c.trust_raw)
                                                    : std::nullopt);
  return c;
}

std::vector<std::string> component_problems(const Component& c, std::string_view source) {
  std::vector<std::string> problems;
  if (!c.trust.valid) {
    problems.push_back(std::string(source) + ": " + std::string(kTrustField) + ": " +
                       quote(c.trust_raw.value_or("")) + " is not a valid content trust; " +
                       "expected one of: " + std::string(policy::kValidTrustValues) +
                       " (or omit it to mean trusted)");
  }
  if (!c.kind.empty() && c.kind != "tool" && c.kind != "agent" && c.kind != "plugin" &&
      c.kind != "connector") {
    problems.push_back(std::string(source) + ": spec.kind: " + quote(c.kind) +
                       " is not a valid component kind; expected one of: " +
                       std::string(kValidComponentKinds));
  }
  if (!c.image.empty()) {
    if (auto image = parse_image(c.image); !image) {
      problems.push_back(std::string(source) + ": spec.image: " + image.error());
    }
  }
  return problems;
}

const Projection& component_projection() {
  static const Projection projection = Projection::object({
      {"apiVersion", Projection::whole()},
      {"kind", Projection::whole()},
      {"metadata", Projection::object({{"name", Projection::whole()},
                                       {"namespace", Projection::whole()}})},
      {"spec", Projection::object({
                   {"kind", Projection::whole()},
                   {"image", Projection::whole()},
                   {"policy", Projection::object({{"content_trust", Projection::whole()}})},
               })},
  });
  return projection;
}

}  // namespace ig::model
