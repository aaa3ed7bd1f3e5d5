#include "admission/context.h"

namespace ig::admission {

bool is_never_enforced(std::string_view ns, const GateSettings& settings) noexcept {
  return ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease" ||
         ns == settings.own_namespace;
}

std::string FixedSandbox::describe() const {
  return std::string(policy::to_string(availability_));
}

}  // namespace ig::admission
