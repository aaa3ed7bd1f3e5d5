#include "policy/gate.h"

namespace ig::policy {

bool is_trusted(ContentTrust trust) noexcept {
  // Omitted trust is trusted: descriptors from before the field existed.
  // Every other value, named or not, is untrusted.
  return trust == ContentTrust::Trusted || trust == ContentTrust::Unspecified;
}

bool requires_platform_sandbox(DeploymentShape shape) noexcept {
  return shape != DeploymentShape::CustomerIsolation;
}

bool is_available(SandboxAvailability sandbox) noexcept {
  return sandbox == SandboxAvailability::Available;
}

Decision decide(SandboxAvailability sandbox, ContentTrust trust,
                DeploymentShape shape) noexcept {
  // A platform-operated sandbox is there: everything runs in it, trusted too.
  if (is_available(sandbox)) return Decision::RequireSetec;
  // Hosted, no sandbox, untrusted content: never fall back to an ordinary runtime.
  if (!is_trusted(trust) && shape != DeploymentShape::CustomerIsolation) return Decision::Deny;
  // Trusted content, or a self-hosted deployment that owns its isolation.
  return Decision::AllowInProcess;
}

ShapeSetting parse_shape(std::optional<std::string_view> raw) noexcept {
  if (!raw) return {DeploymentShape::SetecOnly, false};
  if (*raw == "customer-isolation") return {DeploymentShape::CustomerIsolation, false};
  if (*raw == "setec-only" || raw->empty()) return {DeploymentShape::SetecOnly, false};
  return {DeploymentShape::SetecOnly, true};
}

TrustSetting parse_content_trust(std::optional<std::string_view> raw) noexcept {
  if (!raw || raw->empty()) return {ContentTrust::Unspecified, false, true};
  if (*raw == "trusted") return {ContentTrust::Trusted, true, true};
  if (*raw == "untrusted") return {ContentTrust::Untrusted, true, true};
  return {ContentTrust::Untrusted, true, false};
}

std::string_view effective_trust_name(ContentTrust trust) noexcept {
  return is_trusted(trust) ? "trusted" : "untrusted";
}

std::string_view to_string(Decision d) noexcept {
  switch (d) {
    case Decision::RequireSetec: return "RequireSetec";
    case Decision::AllowInProcess: return "AllowInProcess";
    case Decision::Deny: break;
  }
  return "Deny";
}

std::string_view to_string(SandboxAvailability s) noexcept {
  return is_available(s) ? "available" : "unavailable";
}

std::string_view to_string(ContentTrust t) noexcept {
  switch (t) {
    case ContentTrust::Trusted: return "trusted";
    case ContentTrust::Unspecified: return "unspecified";
    case ContentTrust::Untrusted: break;
  }
  return "untrusted";
}

std::string_view to_string(DeploymentShape s) noexcept {
  return s == DeploymentShape::CustomerIsolation ? "customer-isolation" : "setec-only";
}

}  // namespace ig::policy
