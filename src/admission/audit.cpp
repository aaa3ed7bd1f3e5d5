#include "admission/audit.h"

namespace ig::admission {

Answer audit_answer(Answer enforced) {
  // A request that cannot be decided stays denied (fail closed): it is no pod's answer.
  const Outcome outcome = enforced.outcome();
  if (outcome == Outcome::Undecidable || outcome == Outcome::Errored) return enforced;
  if (!enforced.allowed()) {
    const std::string reason(to_string(enforced.reason));
    Answer a = allowed(Reason::AuditWouldDeny, "audit: enforcing would deny this (" + reason + "): " + enforced.message);
    a.component = std::move(enforced.component);
    a.audit = std::move(enforced.audit);
    a.annotate("would-deny", reason);
    a.annotate("would-deny-message", enforced.message);
    a.warn("isolation-gate audit: enforcing would deny this (" + reason + ")");
    a.warn(enforced.message);
    for (auto& w : enforced.warnings) a.warn(std::move(w));
    return a;
  }
  if (!enforced.patch.empty()) {
    enforced.patch.clear();
    enforced.annotate("would-patch", "true");
    if (enforced.reason == Reason::SandboxAvailable) {
      enforced.warn("isolation-gate audit: enforcing would move this pod onto the setec sandbox");
    }
  }
  return enforced;
}

}  // namespace ig::admission
