// Whether the setec sandbox is available, from facts about the RuntimeClass
// and the Nodes (pure). Available only when:
//  1. the configured RuntimeClass exists;
//  2. in setec-only, it carries the label setec.zeroroot.ai/runtime;
//  3. a Node is Ready, schedulable, matches its scheduling.nodeSelector and
//     has no NoSchedule/NoExecute taint its tolerations do not tolerate.
// Decoders fail on a wrong type (the object is left out of the cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "policy/gate.h"

namespace ig::controller {

inline constexpr std::string_view kSetecRuntimeLabel = "setec.zeroroot.ai/runtime";

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule, NoExecute
};

struct Toleration {
  std::string key, op = "Equal", value, effect;  // op: Equal or Exists; effect "" = any
  bool operator==(const Toleration&) const = default;
};

struct RuntimeClassFacts {
  std::string name;
  std::string handler;
  bool platform_operated = false;  // carries kSetecRuntimeLabel
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
};

struct NodeFacts {
  std::string name;
  bool ready = false;  // condition Ready is "True"
  bool unschedulable = false;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
};

// What a NodeFit is evaluated against: the RuntimeClass's scheduling.
// `generation` names it (NodeFit::projection); equal scheduling, same fits.
struct NodeProjection {
  std::uint32_t generation = 0;
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  // The RuntimeClass's scheduling is this one (nullopt RuntimeClass: none).
  bool same_scheduling(const std::optional<RuntimeClassFacts>& rc) const;
};

// One Node as rule 3 reads it, under the projection `projection` names.
struct NodeFit {
  std::uint32_t projection = 0;  // NodeProjection::generation
  bool ready = false;
  bool unschedulable = false;
  bool selected = false;   // labels match the projection's nodeSelector
  bool tolerated = false;  // every NoSchedule/NoExecute taint is tolerated
};

NodeFit fit_node(const NodeFacts& node, const NodeProjection& projection);

struct SandboxAssessment {
  policy::SandboxAvailability availability{};  // Unavailable unless every rule holds
  std::size_t capable_nodes = 0;
  std::string reason;  // "available: 2 of 3 nodes can run RuntimeClass \"kata-fc\"" / why not
};

bool tolerates(const Toleration& toleration, const Taint& taint) noexcept;

// `runtime_class` is the configured RuntimeClass when it exists, nullopt when not.
SandboxAssessment assess_sandbox(const std::string& runtime_class_name,
                                 const std::optional<RuntimeClassFacts>& runtime_class,
                                 const std::vector<NodeFacts>& nodes,
                                 policy::DeploymentShape shape);
// The same rule on fits made under `rc`'s scheduling (the caller checks
// that they were: NodeFit::projection).
SandboxAssessment assess_sandbox(const std::string& runtime_class_name,
                                 const std::optional<RuntimeClassFacts>& runtime_class,
                                 const std::vector<NodeFit>& nodes, policy::DeploymentShape shape);

Result<RuntimeClassFacts> decode_runtime_class(const nlohmann::json& object);
Result<NodeFacts> decode_node(const nlohmann::json& object);
// decode_node then fit_node: what the Node cache keeps.
Result<NodeFit> decode_node_fit(const nlohmann::json& object, const NodeProjection& projection);

}  // namespace ig::controller
