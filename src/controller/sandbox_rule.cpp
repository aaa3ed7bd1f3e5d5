#include "controller/sandbox_rule.h"

#include <algorithm>

#include "base/quote.h"
#include "model/document.h"

namespace ig::controller {
namespace {

using nlohmann::json;

std::string type_phrase(const json& v) { return std::string(model::json_type_phrase(v)); }
std::string type_phrase(json::value_t t) { return std::string(model::json_type_phrase(t)); }

// A field of the wrong type: thrown by the readers below, each decoder's error.
struct Invalid {
  std::string message;
};

// A member that must be of `want` type when present; absent (or null): an
// empty value of that type.
const json& member(const json& parent, std::string_view key, json::value_t want, const std::string& path) {
  static const json kEmpty[] = {nullptr, json::object(), json::array(), "", false, 0};
  auto it = parent.find(key);
  if (it == parent.end() || it->is_null()) return kEmpty[static_cast<int>(want)];
  const bool ok = want == json::value_t::number_integer ? it->is_number() : it->type() == want;
  if (!ok) throw Invalid{path + ": expected " + type_phrase(want) + ", got " + type_phrase(*it)};
  return *it;
}

std::string string_member(const json& parent, std::string_view key, const std::string& path) {
  return member(parent, key, json::value_t::string, path).get<std::string>();
}

std::map<std::string, std::string> string_map(const json& parent, std::string_view key, const std::string& path) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : member(parent, key, json::value_t::object, path).items()) {
    if (!v.is_string()) throw Invalid{path + "." + k + ": expected a string, got " + type_phrase(v)};
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

// Calls `f(item, its path)` for each map of the list at `key`.
template <typename F>
void each_map(const json& parent, std::string_view key, const std::string& path, F f) {
  std::size_t i = 0;
  for (const auto& item : member(parent, key, json::value_t::array, path)) {
    const std::string at = path + "[" + std::to_string(i++) + "]";
    if (!item.is_object()) throw Invalid{at + ": expected a map, got " + type_phrase(item)};
    f(item, at);
  }
}

// The object's metadata (a map), once it has a name.
const json& named_metadata(const json& object, std::string_view kind) {
  if (!object.is_object()) throw Invalid{std::string(kind) + ": expected a map"};
  const json& meta = member(object, "metadata", json::value_t::object, "metadata");
  if (string_member(meta, "name", "metadata.name").empty()) throw Invalid{"metadata.name: required"};
  return meta;
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
  fit.selected = std::all_of(p.node_selector.begin(), p.node_selector.end(), [&](const auto& kv) {
    auto it = node.labels.find(kv.first);
    return it != node.labels.end() && it->second == kv.second;
  });
  fit.tolerated = std::all_of(node.taints.begin(), node.taints.end(), [&](const Taint& taint) {
    // PreferNoSchedule never excludes a node.
    if (taint.effect != "NoSchedule" && taint.effect != "NoExecute") return true;
    return std::any_of(p.tolerations.begin(), p.tolerations.end(), [&](const auto& t) { return tolerates(t, taint); });
  });
  return fit;
}

SandboxAssessment assess_sandbox(const std::string& name,
                                 const std::optional<RuntimeClassFacts>& rc,
                                 const std::vector<NodeFacts>& nodes,
                                 policy::DeploymentShape shape) {
  std::vector<NodeFit> fits(nodes.size());
  if (rc) {
    const NodeProjection p{0, rc->node_selector, rc->tolerations};
    std::transform(nodes.begin(), nodes.end(), fits.begin(), [&](const NodeFacts& n) { return fit_node(n, p); });
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
  try {
    RuntimeClassFacts out;
    const json& meta = named_metadata(object, "RuntimeClass");
    out.name = meta["name"].get<std::string>();
    out.handler = string_member(object, "handler", "handler");
    out.platform_operated = string_map(meta, "labels", "metadata.labels").count(std::string(kSetecRuntimeLabel)) != 0;
    const json& scheduling = member(object, "scheduling", json::value_t::object, "scheduling");
    out.node_selector = string_map(scheduling, "nodeSelector", "scheduling.nodeSelector");
    each_map(scheduling, "tolerations", "scheduling.tolerations", [&](const json& t, const std::string& path) {
      Toleration& added = out.tolerations.emplace_back();
      added.key = string_member(t, "key", path + ".key");
      added.op = string_member(t, "operator", path + ".operator");
      if (added.op.empty()) added.op = "Equal";
      added.value = string_member(t, "value", path + ".value");
      added.effect = string_member(t, "effect", path + ".effect");
    });
    return out;
  } catch (const Invalid& e) {
    return fail(e.message);
  }
}

Result<NodeFacts> decode_node(const json& object) {
  try {
    NodeFacts out;
    const json& meta = named_metadata(object, "Node");
    out.name = meta["name"].get<std::string>();
    out.labels = string_map(meta, "labels", "metadata.labels");
    const json& spec = member(object, "spec", json::value_t::object, "spec");
    out.unschedulable = member(spec, "unschedulable", json::value_t::boolean, "spec.unschedulable").get<bool>();
    each_map(spec, "taints", "spec.taints", [&](const json& t, const std::string& path) {
      Taint& added = out.taints.emplace_back();
      added.key = string_member(t, "key", path + ".key");
      added.value = string_member(t, "value", path + ".value");
      added.effect = string_member(t, "effect", path + ".effect");
    });
    const json& status = member(object, "status", json::value_t::object, "status");
    for (const auto& c : member(status, "conditions", json::value_t::array, "status.conditions")) {
      if (c.is_object() && c.value("type", json()) == "Ready") out.ready = c.value("status", json()) == "True";
    }
    return out;
  } catch (const Invalid& e) {
    return fail(e.message);
  }
}

Result<NodeFit> decode_node_fit(const json& object, const NodeProjection& projection) {
  auto node = decode_node(object);
  if (!node) return fail(node.error());
  return fit_node(*node, projection);
}

}  // namespace ig::controller
