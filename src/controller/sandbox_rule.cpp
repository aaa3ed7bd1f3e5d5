#include "controller/sandbox_rule.h"

#include "base/quote.h"

namespace ig::controller {
namespace {

using nlohmann::json;

std::string type_phrase(const json& v) {
  if (v.is_object()) return "a map";
  if (v.is_array()) return "a list";
  if (v.is_string()) return "a string";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  return "null";
}

// A member that must be of `want` type when present; absent (or null): an
// empty value of that type.
Result<const json*> member(const json& parent, std::string_view key, json::value_t want,
                           const std::string& path) {
  static const json kEmpty[] = {nullptr, json::object(), json::array(), "", false, 0};
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return &kEmpty[static_cast<int>(want)];
  const bool ok = want == json::value_t::number_integer ? it->is_number() : it->type() == want;
  if (!ok) {
    static const char* names[] = {"null", "a map", "a list", "a string", "a boolean",
                                  "a number", "a number", "a number", "binary", "discarded"};
    return fail(path + ": expected " + names[static_cast<int>(want)] + ", got " + type_phrase(*it));
  }
  return &*it;
}

Result<std::string> string_member(const json& parent, std::string_view key, const std::string& path) {
  auto m = member(parent, key, json::value_t::string, path);
  if (!m) return fail(m.error());
  return (*m)->get<std::string>();
}

Result<std::map<std::string, std::string>> string_map(const json& parent, std::string_view key,
                                                      const std::string& path) {
  auto m = member(parent, key, json::value_t::object, path);
  if (!m) return fail(m.error());
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : (*m)->items()) {
    if (!v.is_string()) return fail(path + "." + k + ": expected a string, got " + type_phrase(v));
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

Result<std::string> object_name(const json& object, std::string_view kind) {
  if (!object.is_object()) return fail(std::string(kind) + ": expected a map");
  auto meta = member(object, "metadata", json::value_t::object, "metadata");
  if (!meta) return fail(meta.error());
  if (!*meta) return fail("metadata: required");
  auto name = string_member(**meta, "name", "metadata.name");
  if (!name) return fail(name.error());
  if (name->empty()) return fail("metadata.name: required");
  return name;
}

bool matches(const std::map<std::string, std::string>& selector,
             const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : selector) {
    auto it = labels.find(k);
    if (it == labels.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

bool tolerates(const Toleration& t, const Taint& taint) noexcept {
  if (!t.effect.empty() && t.effect != taint.effect) return false;
  if (t.op == "Exists") return t.key.empty() || t.key == taint.key;
  // Equal (the default): key and value must match; an empty key tolerates nothing.
  return t.op == "Equal" && !t.key.empty() && t.key == taint.key && t.value == taint.value;
}

bool NodeProjection::same_scheduling(const std::optional<RuntimeClassFacts>& rc) const {
  if (!rc) return node_selector.empty() && tolerations.empty();
  return node_selector == rc->node_selector && tolerations == rc->tolerations;
}

NodeFit fit_node(const NodeFacts& node, const NodeProjection& p) {
  NodeFit fit;
  fit.projection = p.generation;
  fit.ready = node.ready;
  fit.unschedulable = node.unschedulable;
  fit.selected = matches(p.node_selector, node.labels);
  fit.tolerated = true;
  for (const auto& taint : node.taints) {
    // PreferNoSchedule never excludes a node.
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") continue;
    bool tolerated = false;
    for (const auto& t : p.tolerations) tolerated = tolerated || tolerates(t, taint);
    if (!tolerated) {
      fit.tolerated = false;
      break;
    }
  }
  return fit;
}

SandboxAssessment assess_sandbox(const std::string& name,
                                 const std::optional<RuntimeClassFacts>& rc,
                                 const std::vector<NodeFacts>& nodes,
                                 policy::DeploymentShape shape) {
  std::vector<NodeFit> fits;
  if (rc) {
    NodeProjection p;
    p.node_selector = rc->node_selector;
    p.tolerations = rc->tolerations;
    fits.reserve(nodes.size());
    for (const auto& n : nodes) fits.push_back(fit_node(n, p));
  } else {
    fits.resize(nodes.size());
  }
  return assess_sandbox(name, rc, fits, shape);
}

SandboxAssessment assess_sandbox(const std::string& name,
                                 const std::optional<RuntimeClassFacts>& rc,
                                 const std::vector<NodeFit>& nodes,
                                 policy::DeploymentShape shape) {
  SandboxAssessment out;
  const std::string rc_phrase = "RuntimeClass " + quote(name);
  if (!rc) {
    out.reason = "unavailable: " + rc_phrase + " not found";
    return out;
  }
  // Only the platform-operated sandbox counts in the hosted shape; a
  // self-hosted deployment may name its own.
  if (policy::requires_platform_sandbox(shape) && !rc->platform_operated) {
    out.reason = "unavailable: " + rc_phrase + " has no label " + std::string(kSetecRuntimeLabel) +
                 " (not installed by setec; in the setec-only shape only the platform-operated "
                 "sandbox counts)";
    return out;
  }
  std::size_t ready = 0, schedulable = 0, selected = 0;
  for (const auto& node : nodes) {
    if (!node.ready) continue;
    ++ready;
    if (node.unschedulable) continue;
    ++schedulable;
    if (!node.selected) continue;
    ++selected;
    if (node.tolerated) ++out.capable_nodes;
  }
  if (out.capable_nodes > 0) {
    out.availability = policy::SandboxAvailability::Available;
    out.reason = "available: " + std::to_string(out.capable_nodes) + " of " +
                 std::to_string(nodes.size()) + " nodes can run " + rc_phrase;
    return out;
  }
  out.reason = "unavailable: no node can run " + rc_phrase + " (" + std::to_string(nodes.size()) +
               " nodes, " + std::to_string(ready) + " Ready, " + std::to_string(schedulable) +
               " schedulable, " + std::to_string(selected) +
               " matching its nodeSelector, none without an untolerated NoSchedule/NoExecute taint)";
  return out;
}

Result<RuntimeClassFacts> decode_runtime_class(const json& object) {
  RuntimeClassFacts out;
  auto name = object_name(object, "RuntimeClass");
  if (!name) return fail(name.error());
  out.name = std::move(*name);
  auto handler = string_member(object, "handler", "handler");
  if (!handler) return fail(handler.error());
  out.handler = std::move(*handler);
  auto labels = string_map(object["metadata"], "labels", "metadata.labels");
  if (!labels) return fail(labels.error());
  out.platform_operated = labels->count(std::string(kSetecRuntimeLabel)) != 0;
  auto scheduling = member(object, "scheduling", json::value_t::object, "scheduling");
  if (!scheduling) return fail(scheduling.error());
  auto selector = string_map(**scheduling, "nodeSelector", "scheduling.nodeSelector");
  if (!selector) return fail(selector.error());
  out.node_selector = std::move(*selector);
  auto tolerations = member(**scheduling, "tolerations", json::value_t::array, "scheduling.tolerations");
  if (!tolerations) return fail(tolerations.error());
  std::size_t i = 0;
  for (const auto& t : **tolerations) {
    const std::string path = "scheduling.tolerations[" + std::to_string(i++) + "]";
    if (!t.is_object()) return fail(path + ": expected a map, got " + type_phrase(t));
    auto key = string_member(t, "key", path + ".key");
    auto op = string_member(t, "operator", path + ".operator");
    auto value = string_member(t, "value", path + ".value");
    auto effect = string_member(t, "effect", path + ".effect");
    for (auto* r : {&key, &op, &value, &effect}) {
      if (!*r) return fail(r->error());
    }
    out.tolerations.push_back({*key, op->empty() ? "Equal" : *op, *value, *effect});
  }
  return out;
}

Result<NodeFacts> decode_node(const json& object) {
  NodeFacts out;
  auto name = object_name(object, "Node");
  if (!name) return fail(name.error());
  out.name = std::move(*name);
  auto labels = string_map(object["metadata"], "labels", "metadata.labels");
  if (!labels) return fail(labels.error());
  out.labels = std::move(*labels);
  auto spec = member(object, "spec", json::value_t::object, "spec");
  if (!spec) return fail(spec.error());
  auto unsched = member(**spec, "unschedulable", json::value_t::boolean, "spec.unschedulable");
  if (!unsched) return fail(unsched.error());
  out.unschedulable = (*unsched)->get<bool>();
  auto taints = member(**spec, "taints", json::value_t::array, "spec.taints");
  if (!taints) return fail(taints.error());
  std::size_t i = 0;
  for (const auto& t : **taints) {
    const std::string path = "spec.taints[" + std::to_string(i++) + "]";
    if (!t.is_object()) return fail(path + ": expected a map, got " + type_phrase(t));
    auto key = string_member(t, "key", path + ".key");
    auto value = string_member(t, "value", path + ".value");
    auto effect = string_member(t, "effect", path + ".effect");
    for (auto* r : {&key, &value, &effect}) {
      if (!*r) return fail(r->error());
    }
    out.taints.push_back({*key, *value, *effect});
  }
  auto status = member(object, "status", json::value_t::object, "status");
  if (!status) return fail(status.error());
  auto conditions = member(**status, "conditions", json::value_t::array, "status.conditions");
  if (!conditions) return fail(conditions.error());
  for (const auto& c : **conditions) {
    if (!c.is_object()) continue;
    auto type = c.find("type");
    auto value = c.find("status");
    if (type != c.end() && type->is_string() && *type == "Ready") {
      out.ready = value != c.end() && value->is_string() && *value == "True";
    }
  }
  return out;
}

Result<NodeFit> decode_node_fit(const json& object, const NodeProjection& projection) {
  auto node = decode_node(object);
  if (!node) return fail(node.error());
  return fit_node(*node, projection);
}

}  // namespace ig::controller
