// Carrying out the gate's decision on a pod (or a workload's pod template).
// This file gathers the gate's inputs (component, trust, shape, sandbox),
// calls policy::decide() once, and turns the decision into an admission
// outcome: allowed or denied with an actionable message, the JSON Patch that
// applies it, warnings and audit annotations. It never decides isolation
// itself: the only branches on a Decision are the `switch`es that carry it out.
//
// The rules beyond the gate (DESIGN.md section 4), all fail-closed:
//  - a pod in an enforced namespace must name its Component by label;
//  - the Component must exist (lookup errors deny);
//  - a RequireSetec pod cannot use hostNetwork/hostPID/hostIPC or a
//    privileged container (a microVM cannot provide them);
//  - Stage::Validate: a RequireSetec pod must already carry the sandbox's
//    runtimeClassName (a later mutating webhook may have changed it).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "admission/context.h"
#include "model/pod.h"
#include "policy/gate.h"

namespace ig::admission {

enum class Stage {
  Mutate,    // /mutate/pods: decide and patch
  Validate,  // /validate/pods: re-decide on the final object, never patch
  Workload,  // /validate/workloads: decide on the template, never patch
  Evaluate,  // `isolation-gate evaluate`: decide and show the patch
};

// Why the gate decided as it did, for messages and `evaluate`.
struct GateInputsReport {
  std::string component;
  std::string trust;           // effective: "trusted" / "untrusted"
  bool trust_declared = false;
  bool trust_valid = true;
  std::string trust_raw;       // as written ("" when omitted)
  std::string shape;           // "setec-only" / "customer-isolation"
  bool shape_fell_back = false;
  std::string shape_raw;
  std::string sandbox;         // SandboxView::describe()
  std::string runtime_class;
};

struct PodVerdict {
  bool allowed = false;
  bool decided = false;  // the gate ran (false: denied or skipped before it)
  policy::Decision decision{};  // valid when decided
  std::string message;          // denial reason, or a one-line summary when allowed
  std::vector<std::string> warnings;          // each under 120 characters
  nlohmann::json patch = nlohmann::json::array();  // RFC 6902 operations
  std::vector<std::pair<std::string, std::string>> audit;  // audit annotations
  GateInputsReport inputs;
};

// `ns` is the namespace the pod will live in. `pod` is the object being
// admitted (Pod or workload) and `where` its pod template location (from
// model::locate_pod); patch paths are relative to the object.
PodVerdict admit_pod(const model::PodFacts& facts, const model::PodLocation& where,
                     std::string_view ns, const ComponentLookup& components,
                     const SandboxView& sandbox, const GateSettings& settings, Stage stage);

// Appends a warning, shortened to fit the API server's 120-character limit.
void add_warning(std::vector<std::string>& warnings, std::string text);

// Escapes a JSON Pointer reference token (RFC 6901: ~ -> ~0, / -> ~1).
std::string escape_pointer_token(std::string_view token);

}  // namespace ig::admission
