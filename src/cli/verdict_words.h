// The decision of a PodVerdict as one word, for evaluate's and explain's
// output: the gate's decision when it ran, else NotEnforced (allowed without
// a decision) or Deny (denied before the gate).
#pragma once

#include <string>

#include "admission/pod_rules.h"
#include "policy/gate.h"

namespace ig::cli {

inline std::string decision_label(const admission::PodVerdict& v) {
  if (v.decided) return std::string(policy::to_string(v.decision));
  return v.answer.allowed() ? "NotEnforced" : "Deny";
}

}  // namespace ig::cli
