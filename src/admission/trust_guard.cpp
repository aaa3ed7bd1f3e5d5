#include "admission/trust_guard.h"

#include "base/quote.h"

namespace ig::admission {
namespace {

std::string trust_as_written(const model::Component& c) { return c.trust_raw().value_or(""); }

std::string trust_shown(const std::optional<std::string>& raw) {
  return raw ? quote(*raw) : std::string("omitted");
}

}  // namespace

std::optional<Answer> guard_trust_change(const AdmissionRequest& r, const model::Component& now,
                                         const GateSettings& settings) {
  if (r.operation != Operation::Update) return std::nullopt;
  // The old object as the API server stored it; unreadable counts as untrusted.
  auto old = model::decode_component(r.old_object, "request.oldObject");
  const bool was_trusted = old && policy::is_trusted(old->trust.trust);
  const bool is_trusted = policy::is_trusted(now.trust.trust);
  if (was_trusted == is_trusted) return std::nullopt;
  const std::optional<std::string> before_raw = old ? old->trust_raw() : std::optional<std::string>("(unreadable)");
  const std::string subject = "Component " + quote(now.name) + " in namespace " + quote(r.namespace_);
  const std::string change = "content_trust from " + trust_shown(before_raw) + " to " + trust_shown(now.trust_raw());
  auto annotate = [&](Answer a) {
    a.component = now.name;
    a.annotate("content-trust-before", before_raw.value_or(""));
    a.annotate("content-trust-after", trust_as_written(now));
    a.annotate("content-trust", std::string(policy::effective_trust_name(now.trust.trust)));
    return a;
  };
  if (!is_trusted) {
    return annotate(allowed(Reason::ContentTrustTightened,
                            subject + ": " + change + " (its pods now need the sandbox or are denied)"));
  }
  const std::string group(admin_group(r.groups, settings.trust_admins));
  if (!group.empty()) {
    Answer a = annotate(allowed(Reason::ContentTrustLoosenedByAdmin,
                                subject + ": " + change + " by " + quote(r.username) + " (group " + quote(group) +
                                    "): its pods may now run outside a microVM"));
    a.annotate("content-trust-changed-by", r.username);
    a.annotate("trust-admin-group", group);
    a.warn("Component " + quote(now.name) + " is now trusted: its pods may run outside a microVM");
    return a;
  }
  const std::string admins = describe_admins(settings.trust_admins, "--trust-admins");
  Answer a = annotate(denied(
      Reason::ContentTrustChangeRefused,
      "isolation-gate: changing " + subject + " " + change +
          " would let its pods run outside a microVM, and " +
          (r.username.empty() ? std::string("the requester") : "user " + quote(r.username)) +
          " is not in a trust-admin group (" + admins +
          "). Trust is part of review: ask a trust admin to make the change (docs/components.md)."));
  a.annotate("content-trust-changed-by", r.username);
  return a;
}

std::optional<GuardedChange> trust_change(const AdmissionRequest& r, const Answer& a) {
  if (a.reason != Reason::ContentTrustTightened && a.reason != Reason::ContentTrustLoosenedByAdmin &&
      a.reason != Reason::ContentTrustChangeRefused) {
    return std::nullopt;
  }
  GuardedChange c;
  c.kind = "Component";
  c.namespace_ = r.namespace_;
  c.name = a.component.empty() ? r.name : a.component;
  c.field = "spec.policy.content_trust";
  c.username = r.username;
  for (const auto& [k, v] : a.audit) {
    if (k == "content-trust-before") c.before = v;
    if (k == "content-trust-after") c.after = v;
    if (k == "trust-admin-group") c.admin_group = v;
  }
  c.removed = c.after.empty();
  return c;
}

}  // namespace ig::admission
