#include "admission/routes.h"

#include "admission/namespace_guard.h"

#include <array>

namespace ig::admission {
namespace {

using enum Operation;

const std::array<Route, kEndpointCount>& table() noexcept {
  static const std::array<Route, kEndpointCount> routes = {{
      {Endpoint::MutatePods, "/mutate/pods", {Create}, "enforced", mutate_pods_handler()},
      {Endpoint::ValidatePods, "/validate/pods", {Create, Update}, "enforced",
       validate_pods_handler()},
      {Endpoint::ValidateWorkloads, "/validate/workloads", {Create, Update}, "enforced",
       validate_workloads_handler()},
      {Endpoint::ValidateComponents, "/validate/components", {Create, Update}, "validated",
       validate_components_handler()},
      {Endpoint::ValidateNamespaces, "/validate/namespaces", {Update}, "guarded",
       validate_namespaces_handler()},
      {Endpoint::AuditPods, "/audit/pods", {Create, Update}, "audited", audit_pods_handler(), true},
      {Endpoint::AuditWorkloads, "/audit/workloads", {Create, Update}, "audited", validate_workloads_handler(),
       true},
  }};
  return routes;
}

}  // namespace

std::span<const Route> admission_routes() noexcept { return table(); }

const Route& route_for(Endpoint e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return table()[i < kEndpointCount ? i : 0];
}

const Route* find_route(std::string_view path) noexcept {
  for (const Route& r : table())
    if (r.path == path) return &r;
  return nullptr;
}

}  // namespace ig::admission
