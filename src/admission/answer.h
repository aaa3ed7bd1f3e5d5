// An admission answer and the few builders that make one (the shape of
// controller-runtime's Allowed/Denied/Errored). An answer carries its own
// reason; the reason fixes the outcome, whether the object is allowed and the
// status code, from one table (IG_ADMISSION_REASONS). Nothing re-derives an
// outcome after the fact, and no answer can be "allowed" with a deny reason.
//
// The table also generates the metric label values (admission/metrics.h).
// encode_response() (admission/review.h) is the one place that turns an answer
// into the AdmissionReview response: uid, status, patch type, warnings and
// audit annotations.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ig::admission {

// How a review ended, coarsely: the metric's `outcome` label.
//   X(name)
#define IG_ADMISSION_OUTCOMES(X) \
  X(RequireSetec)                \
  X(AllowInProcess)              \
  X(Allowed)                     \
  X(Deny)                        \
  X(LookupError)                 \
  X(Undecidable)                 \
  X(Errored)

enum class Outcome : std::uint8_t {
#define IG_OUTCOME_ENUM(name) name,
  IG_ADMISSION_OUTCOMES(IG_OUTCOME_ENUM)
#undef IG_OUTCOME_ENUM
};

// Why, exactly: the metric's `reason` label, and the answer's whole meaning.
//   X(name, outcome, allowed, HTTP status code, status reason)
#define IG_ADMISSION_REASONS(X)                                                   \
  X(SandboxAvailable, RequireSetec, true, 200, "")                                \
  X(TrustedInProcess, AllowInProcess, true, 200, "")                              \
  X(CustomerIsolation, AllowInProcess, true, 200, "")                             \
  X(NamespaceNotEnforced, Allowed, true, 200, "")                                 \
  X(OperationNotEnforced, Allowed, true, 200, "")                                 \
  X(ComponentValid, Allowed, true, 200, "")                                       \
  X(EnforcementUnchanged, Allowed, true, 200, "")                                 \
  X(EnforcementAdded, Allowed, true, 200, "")                                     \
  X(EnforcementRemovedByAdmin, Allowed, true, 200, "")                            \
  X(PodUnchanged, Allowed, true, 200, "")                                         \
  X(ContentTrustTightened, Allowed, true, 200, "")                                \
  X(AuditWouldDeny, Allowed, true, 200, "")                                       \
  X(ContentTrustLoosenedByAdmin, Allowed, true, 200, "")                          \
  X(SandboxUnavailable, Deny, false, 403, "Forbidden")                            \
  X(MissingComponentLabel, Deny, false, 403, "Forbidden")                         \
  X(UnknownComponent, Deny, false, 403, "Forbidden")                              \
  X(IncompatibleWithMicroVM, Deny, false, 403, "Forbidden")                       \
  X(RuntimeClassChanged, Deny, false, 403, "Forbidden")                           \
  X(ImageNotBound, Deny, false, 403, "Forbidden")                                 \
  X(EntrypointNotBound, Deny, false, 403, "Forbidden")                            \
  X(LoaderEnvNotAllowed, Deny, false, 403, "Forbidden")                           \
  X(HostAccessOutsideMicroVM, Deny, false, 403, "Forbidden")                      \
  X(EphemeralContainerRefused, Deny, false, 403, "Forbidden")                     \
  X(ComponentLabelChanged, Deny, false, 403, "Forbidden")                         \
  X(InvalidComponent, Deny, false, 403, "Forbidden")                              \
  X(EnforcementChangeRefused, Deny, false, 403, "Forbidden")                      \
  X(ContentTrustChangeRefused, Deny, false, 403, "Forbidden")                     \
  X(LookupError, LookupError, false, 403, "Forbidden")                            \
  X(UndecidableRequest, Undecidable, false, 400, "BadRequest")                    \
  X(InternalError, Errored, false, 500, "InternalError")

enum class Reason : std::uint8_t {
#define IG_REASON_ENUM(name, outcome, allowed, code, status) name,
  IG_ADMISSION_REASONS(IG_REASON_ENUM)
#undef IG_REASON_ENUM
};

inline constexpr std::size_t kOutcomeCount = 0
#define IG_COUNT(...) +1
    IG_ADMISSION_OUTCOMES(IG_COUNT);
inline constexpr std::size_t kReasonCount = 0 IG_ADMISSION_REASONS(IG_COUNT);
#undef IG_COUNT

std::string_view to_string(Outcome o) noexcept;
std::string_view to_string(Reason r) noexcept;
Outcome outcome_of(Reason r) noexcept;
bool allows(Reason r) noexcept;  // out-of-range values: false

struct Answer {
  Reason reason = Reason::InternalError;  // the zero-effort answer denies
  std::string message;   // status.message when denied; a one-line summary when allowed
  std::string patch;     // RFC 6902 JSON text; "" for none (validating endpoints: always "")
  std::vector<std::string> warnings;                       // each under 120 characters
  std::vector<std::pair<std::string, std::string>> audit;  // audit annotations, in order
  // The Component the request names (a pod's or template's label, or the
  // Component under review); "" when it names none. Not sent to the API
  // server: the webhook's denial observer reads it (Events on the Component).
  std::string component;

  bool allowed() const noexcept { return allows(reason); }
  Outcome outcome() const noexcept { return outcome_of(reason); }
  int code() const noexcept;                // status.code when denied
  std::string_view status_reason() const noexcept;  // status.reason when denied

  // Appends a warning, cut to the API server's 120-character limit.
  Answer& warn(std::string text);
  Answer& annotate(std::string key, std::string value);
};

// The builders.
Answer allowed(Reason why, std::string summary);      // `why` must be an allowing reason
Answer denied(Reason why, std::string message);       // `why` must be a denying reason
// Allowed without a decision (audit decision=NotEnforced, reason=`why`).
Answer not_enforced(Reason why, std::string why_text);
// The request cannot be decided: allowed=false, 400 BadRequest, and a message
// "isolation-gate cannot decide this request: <what>; denied (fail closed)."
Answer undecidable(std::string what);
// Something failed inside isolation-gate: allowed=false, 500 InternalError.
Answer errored(std::string what);

}  // namespace ig::admission
