#include "admission/answer.h"

#include "base/quote.h"

namespace ig::admission {
namespace {

struct ReasonInfo {
  std::string_view name;
  Outcome outcome;
  bool allowed;
  int code;
  std::string_view status_reason;
};

constexpr ReasonInfo kReasons[] = {
#define IG_REASON_INFO(name, outcome, allowed, code, status) \
  {#name, Outcome::outcome, allowed, code, status},
    IG_ADMISSION_REASONS(IG_REASON_INFO)
#undef IG_REASON_INFO
};

constexpr std::string_view kOutcomes[] = {
#define IG_OUTCOME_NAME(name) #name,
    IG_ADMISSION_OUTCOMES(IG_OUTCOME_NAME)
#undef IG_OUTCOME_NAME
};

static_assert(std::size(kReasons) == kReasonCount);
static_assert(std::size(kOutcomes) == kOutcomeCount);

// Out-of-range values read as the internal error: denied.
const ReasonInfo& info(Reason r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  return i < kReasonCount ? kReasons[i] : kReasons[static_cast<std::size_t>(Reason::InternalError)];
}

}  // namespace

std::string_view to_string(Outcome o) noexcept {
  const auto i = static_cast<std::size_t>(o);
  return i < kOutcomeCount ? kOutcomes[i] : "Errored";
}

std::string_view to_string(Reason r) noexcept { return info(r).name; }
Outcome outcome_of(Reason r) noexcept { return info(r).outcome; }
bool allows(Reason r) noexcept {
  const auto i = static_cast<std::size_t>(r);
  return i < kReasonCount && kReasons[i].allowed;
}

int Answer::code() const noexcept { return allowed() ? 200 : info(reason).code; }
std::string_view Answer::status_reason() const noexcept { return info(reason).status_reason; }

Answer& Answer::warn(std::string text) {
  warnings.push_back(cut_utf8(text, kMaxWarning));
  return *this;
}

Answer& Answer::annotate(std::string key, std::string value) {
  audit.emplace_back(std::move(key), std::move(value));
  return *this;
}

Answer allowed(Reason why, std::string summary) {
  Answer a;
  a.reason = why;
  a.message = std::move(summary);
  return a;
}

Answer denied(Reason why, std::string message) {
  Answer a;
  // A denial never allows, whatever reason it is given.
  a.reason = allows(why) ? Reason::InternalError : why;
  a.message = std::move(message);
  return a;
}

Answer not_enforced(Reason why, std::string why_text) {
  Answer a = allowed(why, why_text);
  a.annotate("decision", "NotEnforced");
  a.annotate("reason", std::move(why_text));
  return a;
}

Answer undecidable(std::string what) {
  return denied(Reason::UndecidableRequest, "isolation-gate cannot decide this request: " +
                                                std::move(what) + "; denied (fail closed).");
}

Answer errored(std::string what) {
  return denied(Reason::InternalError,
                "isolation-gate failed while deciding this request (" + std::move(what) +
                    "); denied (fail closed). Retry; if this persists, check the isolation-gate "
                    "logs.");
}

}  // namespace ig::admission
