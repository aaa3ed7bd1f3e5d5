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

// An optional list of strings: absent, null or [] -> nullopt.
Result<std::optional<std::vector<std::string>>> optional_strings(const json& parent, std::string_view key,
                                                                 std::string_view path,
                                                                 std::string_view source) {
  using Out = std::optional<std::vector<std::string>>;
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return Out{};
  auto wrong = [&](std::string_view where, const json& got) {
    return fail(std::string(source) + ": " + std::string(where) + ": expected a list of strings, got " +
                std::string(json_type_phrase(got)));
  };
  if (!it->is_array()) return wrong(path, *it);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& item = (*it)[i];
    if (!item.is_string()) return wrong(std::string(path) + "[" + std::to_string(i) + "]", item);
    out.push_back(item.get<std::string>());
  }
  if (out.empty()) return Out{};
  return Out{std::move(out)};
}

// spec.exec: a list of {command: [strings]}.
Result<std::vector<std::vector<std::string>>> exec_commands(const json& spec, std::string_view source) {
  std::vector<std::vector<std::string>> out;
  auto it = spec.find("exec");
  if (it == spec.end() || it->is_null()) return out;
  if (!it->is_array()) {
    return fail(std::string(source) + ": spec.exec: expected a list of {command: [...]}, got " +
                std::string(json_type_phrase(*it)));
  }
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string path = "spec.exec[" + std::to_string(i) + "]";
    const json& entry = (*it)[i];
    if (!entry.is_object()) {
      return fail(std::string(source) + ": " + path + ": expected a map with command, got " +
                  std::string(json_type_phrase(entry)));
    }
    auto command = optional_strings(entry, "command", path + ".command", source);
    if (!command) return fail(command.error());
    out.push_back(command->value_or(std::vector<std::string>{}));
  }
  return out;
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

Component::Component(const Component& other)
    : name(other.name),
      namespace_(other.namespace_),
      kind(other.kind),
      image(other.image),
      trust(other.trust),
      written_(other.written_),
      out_of_line_(other.out_of_line_ ? std::make_unique<const OutOfLine>(*other.out_of_line_) : nullptr) {}

Component& Component::operator=(const Component& other) {
  if (this != &other) *this = Component(other);
  return *this;
}

const std::optional<std::string>& Component::trust_raw() const noexcept {
  static const std::optional<std::string> omitted, trusted("trusted"), untrusted("untrusted");
  switch (written_) {
    case Written::Omitted: return omitted;
    case Written::Trusted: return trusted;
    case Written::Untrusted: return untrusted;
    case Written::Other: break;
  }
  return out_of_line_ ? out_of_line_->trust_raw : omitted;  // null only when moved from
}

const Entrypoint& Component::entrypoint() const noexcept {
  static const Entrypoint none;
  return out_of_line_ ? out_of_line_->entrypoint : none;
}

void Component::set_trust_raw(std::optional<std::string> raw) {
  trust = policy::parse_content_trust(raw ? std::optional<std::string_view>(*raw) : std::nullopt);
  // Declared and valid is exactly "trusted" or "untrusted" (policy::parse_content_trust).
  if (!raw) written_ = Written::Omitted;
  else if (!trust.declared || !trust.valid) written_ = Written::Other;
  else written_ = policy::is_trusted(trust.trust) ? Written::Trusted : Written::Untrusted;
  if (written_ != Written::Other) raw.reset();  // trust_raw() answers it
  keep_out_of_line(entrypoint(), std::move(raw));
}

void Component::set_entrypoint(Entrypoint e) {
  keep_out_of_line(std::move(e), written_ == Written::Other ? trust_raw() : std::nullopt);
}

void Component::keep_out_of_line(Entrypoint e, std::optional<std::string> trust_raw) {
  const bool none = !e.command && !e.args && e.exec.empty() && !trust_raw;
  out_of_line_ = none ? nullptr : std::make_unique<const OutOfLine>(OutOfLine{std::move(e), std::move(trust_raw)});
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
    auto command = optional_strings(**spec, "command", "spec.command", source);
    if (!command) return fail(command.error());
    auto args = optional_strings(**spec, "args", "spec.args", source);
    if (!args) return fail(args.error());
    auto exec = exec_commands(**spec, source);
    if (!exec) return fail(exec.error());
    c.set_entrypoint({std::move(*command), std::move(*args), std::move(*exec)});
    auto pol = optional_map(**spec, "policy", "spec.policy", source);
    if (!pol) return fail(pol.error());
    policy_map = *pol;
  }
  std::optional<std::string> trust;
  if (policy_map != nullptr) {
    auto written = optional_string(*policy_map, "content_trust", kTrustField, source);
    if (!written) return fail(written.error());
    trust = std::move(*written);
  }
  c.set_trust_raw(std::move(trust));
  return c;
}

std::vector<std::string> component_problems(const Component& c, std::string_view source) {
  std::vector<std::string> problems;
  if (!c.trust.valid) {
    problems.push_back(std::string(source) + ": " + std::string(kTrustField) + ": " +
                       quote(c.trust_raw().value_or("")) + " is not a valid content trust; " +
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
  const Entrypoint& declared = c.entrypoint();
  for (std::size_t i = 0; i < declared.exec.size(); ++i) {
    if (declared.exec[i].empty()) {
      problems.push_back(std::string(source) + ": spec.exec[" + std::to_string(i) +
                         "].command: required, a non-empty list of strings (the command a hook or "
                         "probe runs)");
    }
  }
  if (c.image.empty() && (declared.command || declared.args || !declared.exec.empty())) {
    problems.push_back(std::string(source) +
                       ": spec.command, spec.args and spec.exec declare what runs in spec.image; "
                       "declare spec.image too");
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
                   {"command", Projection::whole()},
                   {"args", Projection::whole()},
                   {"exec", Projection::whole()},
                   {"policy", Projection::object({{"content_trust", Projection::whole()}})},
               })},
  });
  return projection;
}

}  // namespace ig::model
