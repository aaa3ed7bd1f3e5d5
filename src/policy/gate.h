// The isolation gate: the one place in isolation-gate that turns its three
// inputs into a decision. Everything else gathers inputs or carries out the
// decision (docs/architecture.md, "The gate").
//
// Contract:
//  - decide() is pure, total and noexcept: no I/O, no globals, no logging.
//    Every combination of inputs, including values that are not one of the
//    named enumerators (a corrupted or cast integer), has an answer.
//  - The zero (value-initialised) value of every enum is the fail-closed one:
//    Decision{} is Deny, SandboxAvailability{} is Unavailable,
//    ContentTrust{} is Untrusted, DeploymentShape{} is SetecOnly (hosted).
//  - This header depends on nothing but the standard library.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ig::policy {

enum class Decision : std::uint8_t {
  Deny = 0,            // reject the pod: no sandbox and untrusted in the hosted shape
  RequireSetec = 1,    // run only on the setec RuntimeClass (Firecracker microVM via Kata)
  AllowInProcess = 2,  // run on the ordinary runtime
};

enum class SandboxAvailability : std::uint8_t {
  Unavailable = 0,  // not observed (never assume a sandbox that was not seen)
  Available = 1,    // the setec RuntimeClass exists and a Ready node can run it
};

enum class ContentTrust : std::uint8_t {
  Untrusted = 0,    // parses attacker-controlled input
  Trusted = 1,      // declared trusted
  Unspecified = 2,  // omitted, empty or null: trusted for backward compatibility
};

enum class DeploymentShape : std::uint8_t {
  SetecOnly = 0,          // hosted: untrusted code never falls back to an ordinary runtime
  CustomerIsolation = 1,  // self-hosted: the customer owns isolation
};

// The gate.
//   sandbox available                           -> RequireSetec (trusted components too)
//   untrusted and hosted (setec-only)           -> Deny
//   otherwise                                   -> AllowInProcess
// Unknown enumerator values are read fail-closed: a sandbox that is not exactly
// Available is unavailable, a trust that is not Trusted/Unspecified is
// untrusted, a shape that is not exactly CustomerIsolation is setec-only.
[[nodiscard]] Decision decide(SandboxAvailability sandbox, ContentTrust trust,
                              DeploymentShape shape) noexcept;

// Deployment shape from the value of GIBSON_UNTRUSTED_EXEC. Exactly
// "customer-isolation" selects CustomerIsolation; everything else (unset,
// empty, other case, padded, garbage, and "setec-only" itself) is SetecOnly.
struct ShapeSetting {
  DeploymentShape shape = DeploymentShape::SetecOnly;
  bool fell_back = false;  // a value was given but was not recognised
};
[[nodiscard]] ShapeSetting parse_shape(std::optional<std::string_view> raw) noexcept;

// Content trust from spec.policy.content_trust as it appeared in a manifest.
// `raw` is nullopt when the field is absent or null.
//   absent, null or ""   -> Unspecified, declared=false, valid
//   "trusted"            -> Trusted, declared, valid
//   "untrusted"          -> Untrusted, declared, valid
//   anything else        -> Untrusted (fail closed), declared, invalid
struct TrustSetting {
  ContentTrust trust = ContentTrust::Untrusted;
  bool declared = false;
  bool valid = false;
};
[[nodiscard]] TrustSetting parse_content_trust(std::optional<std::string_view> raw) noexcept;

// The trust the gate will act on, for reporting: "trusted" or "untrusted".
[[nodiscard]] std::string_view effective_trust_name(ContentTrust trust) noexcept;

[[nodiscard]] std::string_view to_string(Decision d) noexcept;
[[nodiscard]] std::string_view to_string(SandboxAvailability s) noexcept;
[[nodiscard]] std::string_view to_string(ContentTrust t) noexcept;
[[nodiscard]] std::string_view to_string(DeploymentShape s) noexcept;

// How the gate reads its inputs, for code that reports or explains a
// decision (metrics, messages) without comparing enumerators itself:
// exactly Available is available; Trusted and Unspecified are trusted;
// any other value, named or not, is not.
[[nodiscard]] bool is_available(SandboxAvailability sandbox) noexcept;
[[nodiscard]] bool is_trusted(ContentTrust trust) noexcept;

// Whether only the platform-operated sandbox (the setec RuntimeClass, with
// its label) counts as "sandbox available": true in the hosted shape and for
// every value that is not exactly CustomerIsolation (fail closed); a
// self-hosted deployment may name its own sandbox.
[[nodiscard]] bool requires_platform_sandbox(DeploymentShape shape) noexcept;

inline constexpr std::string_view kShapeEnvVar = "GIBSON_UNTRUSTED_EXEC";
inline constexpr std::string_view kValidTrustValues = "trusted, untrusted";

}  // namespace ig::policy
