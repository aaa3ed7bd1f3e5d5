#include "admission/context.h"

#include <algorithm>

namespace ig::admission {

bool is_never_enforced(std::string_view ns, const GateSettings& settings) noexcept {
  return ns == "kube-system" || ns == "kube-public" || ns == "kube-node-lease" ||
         ns == settings.own_namespace;
}

std::string_view admin_group(std::span<const std::string> groups, const std::vector<std::string>& admins) noexcept {
  for (const std::string& g : groups) {
    if (std::find(admins.begin(), admins.end(), g) != admins.end()) return g;
  }
  return {};
}

std::string describe_admins(const std::vector<std::string>& admins, std::string_view flag) {
  if (admins.empty()) return "none is configured (" + std::string(flag) + ")";
  std::string out = "it is one of: ";
  for (std::size_t i = 0; i < admins.size(); ++i) out.append(i ? ", " : "").append(admins[i]);
  return out;
}

std::string FixedSandbox::describe() const {
  return std::string(policy::to_string(availability_));
}

}  // namespace ig::admission
