// The route table: every admission endpoint, the handler that answers it and
// the operations it enforces, in one list. /audit/pods and /audit/workloads
// answer for namespaces in audit mode (gibson.zeroroot.ai/isolation=audit). A review whose operation is not in
// its route's set is allowed without a decision (OperationNotEnforced); an
// operation that is not exactly one of the API's four values never gets this
// far (admission/review.h: undecidable).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "admission/handlers.h"
#include "admission/review.h"

namespace ig::admission {

enum class Endpoint : std::uint8_t {
  MutatePods,
  ValidatePods,
  ValidateWorkloads,
  ValidateComponents,
  ValidateNamespaces,
  AuditPods,
  AuditWorkloads,
};
inline constexpr std::size_t kEndpointCount = 7;

struct Route {
  Endpoint endpoint;
  std::string_view path;
  OperationSet enforced;      // the operations this endpoint decides
  std::string_view verb;      // "enforced" / "validated", for the not-enforced audit reason
  const Handler& handler;
  // An audit endpoint (admission/audit.h): the handler's answer is what
  // enforcement would say; the webhook turns it into warnings, never a
  // denial or a patch.
  bool audit = false;
};

// In Endpoint order; one entry per endpoint.
std::span<const Route> admission_routes() noexcept;
const Route& route_for(Endpoint e) noexcept;
// nullptr when no admission endpoint has this path.
const Route* find_route(std::string_view path) noexcept;

}  // namespace ig::admission
