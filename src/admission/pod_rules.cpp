#include "admission/pod_rules.h"

#include "base/quote.h"

namespace ig::admission {
namespace {

using policy::Decision;
using nlohmann::json;

std::string q(std::string_view s) { return quote(s); }

bool is_workload(model::ObjectKind k) { return k != model::ObjectKind::Pod; }

// `pod "x" in namespace "ns"` or `Deployment "x" in namespace "ns"`.
std::string subject(const model::PodFacts& facts, std::string_view ns) {
  std::string out = is_workload(facts.kind) ? std::string(model::to_string(facts.kind)) : "pod";
  out.push_back(' ');
  out.append(facts.object_name.empty() ? "(unnamed)" : q(facts.object_name));
  out.append(" in namespace ").append(q(ns));
  return out;
}

std::string denied_prefix(const model::PodFacts& facts, std::string_view ns) {
  return subject(facts, ns) + (is_workload(facts.kind) ? " denied: its pods would be denied: "
                                                       : " denied: ");
}

std::string trust_phrase(const model::Component& c) {
  if (!c.trust.valid) {
    return "is treated as untrusted (content_trust " + q(c.trust_raw.value_or("")) +
           " is not valid; use trusted or untrusted)";
  }
  if (!c.trust.declared) return "is trusted (content_trust omitted, treated as trusted)";
  return std::string("is ") + std::string(policy::effective_trust_name(c.trust.trust)) +
         " (content_trust: " + *c.trust_raw + ")";
}

std::string sandbox_phrase(const GateInputsReport& in) {
  return "the setec sandbox (RuntimeClass " + q(in.runtime_class) + ") is " + in.sandbox_detail;
}

std::string shape_phrase(const GateInputsReport& in) {
  std::string out;
  switch (in.shape.shape) {
    case policy::DeploymentShape::CustomerIsolation:
      out = "the customer-isolation (self-hosted) shape";
      break;
    case policy::DeploymentShape::SetecOnly:
    default:
      out = "the setec-only (hosted) shape";
      break;
  }
  if (in.shape.fell_back) {
    out += " (GIBSON_UNTRUSTED_EXEC=" + q(in.shape_raw) + " is not recognised)";
  }
  return out;
}

void add_annotation_patch(PodVerdict& v, const model::PodFacts& facts, const model::PodLocation& where,
              std::string_view value) {
  if (facts.isolation_annotation && *facts.isolation_annotation == value) return;
  const std::string meta = where.pointer + "/metadata";
  const std::string key(model::kIsolationAnnotation);
  if (!facts.has_metadata) {
    v.patch.push_back({{"op", "add"}, {"path", meta}, {"value", {{"annotations", {{key, value}}}}}});
  } else if (!facts.has_annotations) {
    v.patch.push_back({{"op", "add"}, {"path", meta + "/annotations"}, {"value", {{key, value}}}});
  } else {
    v.patch.push_back({{"op", "add"},
                       {"path", meta + "/annotations/" + escape_pointer_token(key)},
                       {"value", value}});
  }
}

// What a microVM cannot provide, as a phrase; empty when the pod fits.
std::string microvm_conflicts(const model::PodFacts& facts) {
  std::string out;
  auto add = [&out](std::string_view what) {
    if (!out.empty()) out.append(", ");
    out.append(what);
  };
  if (facts.host_network) add("hostNetwork");
  if (facts.host_pid) add("hostPID");
  if (facts.host_ipc) add("hostIPC");
  for (const auto& c : facts.privileged_containers) add("privileged container " + q(c));
  return out;
}

}  // namespace

std::string escape_pointer_token(std::string_view token) {
  std::string out;
  out.reserve(token.size() + 4);
  for (char c : token) {
    if (c == '~') {
      out.append("~0");
    } else if (c == '/') {
      out.append("~1");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

PodVerdict admit_pod(const model::PodFacts& facts, const model::PodLocation& where,
                     std::string_view ns, const AdmissionContext& context, Stage stage) {
  const GateSettings& settings = context.settings;
  PodVerdict v;
  Answer& a = v.answer;
  GateInputsReport& in = v.inputs;
  in.shape = settings.shape;
  in.shape_raw = settings.shape_raw;
  in.runtime_class = settings.runtime_class;

  if (is_never_enforced(ns, settings)) {
    a = allowed(Reason::NamespaceNotEnforced,
                "namespace " + q(ns) + " is never enforced by isolation-gate");
    a.annotate("decision", "NotEnforced");
    return v;
  }

  // Every enforced answer says under which shape and sandbox state it was given.
  in.sandbox = context.sandbox.availability();
  const std::string shape_name(policy::to_string(in.shape.shape));
  const std::string sandbox_name(policy::to_string(in.sandbox));

  auto deny = [&](Reason reason, std::string message) {
    std::vector<std::string> warnings = std::move(a.warnings);
    auto audit = std::move(a.audit);
    std::string component = std::move(a.component);
    a = denied(reason, std::move(message));
    a.warnings = std::move(warnings);
    a.audit = std::move(audit);
    a.component = std::move(component);
  };
  a.annotate("shape", shape_name);
  a.annotate("sandbox", sandbox_name);

  const std::string label(model::kComponentLabel);
  if (!facts.component || facts.component->empty()) {
    deny(Reason::MissingComponentLabel,
         denied_prefix(facts, ns) + "it has no label " + label + ", and namespace " + q(ns) +
             " is enforced by isolation-gate, so every pod must name the Component it runs. "
             "To fix: add the label " +
             label + ": <Component name> to the pod" +
             (is_workload(facts.kind) ? " template (" + where.field_path + ".metadata.labels)"
                                      : " (metadata.labels)") +
             ".");
    a.annotate("decision", "Deny");
    a.annotate("reason", "MissingComponentLabel");
    return v;
  }
  in.component = *facts.component;
  a.component = *facts.component;

  LookupResult found = context.components.find(ns, *facts.component);
  switch (found.status) {
    case LookupResult::Status::Found: break;
    case LookupResult::Status::NotFound:
      deny(Reason::UnknownComponent,
           denied_prefix(facts, ns) + "its label " + label + " names Component " +
               q(*facts.component) + ", which does not exist in namespace " + q(ns) +
               ". To fix: create the Component first (kubectl apply -n " + std::string(ns) +
               " -f <component>.yaml) or correct the label.");
      a.annotate("decision", "Deny");
      a.annotate("reason", "UnknownComponent");
      return v;
    case LookupResult::Status::Error:
    default:
      deny(Reason::LookupError,
           denied_prefix(facts, ns) + "Component " + q(*facts.component) +
               " could not be looked up (" + found.error +
               "); isolation-gate fails closed. Retry; if this persists, check the "
               "isolation-gate logs.");
      a.annotate("decision", "Deny");
      a.annotate("reason", "LookupError");
      return v;
  }
  if (!found.component) {
    deny(Reason::LookupError, denied_prefix(facts, ns) + "Component " + q(*facts.component) +
                                  " was found without its content; isolation-gate fails closed.");
    a.annotate("decision", "Deny");
    a.annotate("reason", "LookupError");
    return v;
  }
  const model::Component& component = *found.component;

  in.trust = component.trust;
  in.trust_raw = component.trust_raw.value_or("");
  const std::string trust_name(policy::effective_trust_name(component.trust.trust));
  if (!component.trust.valid) {
    a.warn("Component " + q(component.name) + " has invalid content_trust " + q(in.trust_raw) +
           ": treated as untrusted");
  } else if (!component.trust.declared) {
    a.warn("Component " + q(component.name) +
           " declares no content_trust: treated as trusted; declare it");
  }

  in.sandbox_detail = context.sandbox.describe();

  // The one call to the gate.
  v.decision = policy::decide(in.sandbox, component.trust.trust, settings.shape.shape);
  v.decided = true;
  const std::string decision_name(policy::to_string(v.decision));
  a.annotate("decision", decision_name);
  a.annotate("component", component.name);
  a.annotate("content-trust", trust_name);

  const bool patches = stage == Stage::Mutate || stage == Stage::Evaluate;
  switch (v.decision) {
    case Decision::Deny:
      deny(Reason::SandboxUnavailable,
           denied_prefix(facts, ns) + "component " + q(component.name) + " " +
               trust_phrase(component) + ", isolation-gate runs in " + shape_phrase(in) +
               ", and " + sandbox_phrase(in) +
               ", so untrusted code has nowhere safe to run. To fix: make RuntimeClass " +
               q(in.runtime_class) +
               " available (installed by setec, with a Ready node that can run it); in the "
               "hosted shape untrusted components never fall back to an ordinary runtime.");
      return v;

    case Decision::RequireSetec: {
      const std::string conflicts = microvm_conflicts(facts);
      if (!conflicts.empty()) {
        deny(Reason::IncompatibleWithMicroVM,
             denied_prefix(facts, ns) + "component " + q(component.name) +
                 " must run in the setec sandbox (RuntimeClass " + q(in.runtime_class) +
                 ", a Firecracker microVM), which cannot provide " + conflicts +
                 ". To fix: remove hostNetwork, hostPID, hostIPC and "
                 "securityContext.privileged from the pod spec.");
        a.annotate("reason", "IncompatibleWithMicroVM");
        return v;
      }
      const auto& rc = facts.runtime_class;
      const bool on_sandbox = rc && *rc == settings.runtime_class;
      if (stage == Stage::Validate && !on_sandbox) {
        deny(Reason::RuntimeClassChanged,
             denied_prefix(facts, ns) + "component " + q(component.name) +
                 " must run on RuntimeClass " + q(in.runtime_class) +
                 " (RequireSetec), but the pod's runtimeClassName is " +
                 (rc ? q(*rc) : std::string("not set")) +
                 ": a mutating webhook that ran after isolation-gate changed it. To fix: "
                 "stop other webhooks from setting runtimeClassName on component pods.");
        a.annotate("reason", "RuntimeClassChanged");
        return v;
      }
      if (rc && !on_sandbox) {
        a.warn("runtimeClassName " + q(*rc) + " replaced by " + q(in.runtime_class) +
               ": component " + q(component.name) + " runs only in the sandbox");
      }
      if (patches && !on_sandbox) {
        v.patch.push_back({{"op", rc ? "replace" : "add"},
                           {"path", where.pointer + "/spec/runtimeClassName"},
                           {"value", settings.runtime_class}});
      }
      if (patches) add_annotation_patch(v, facts, where, decision_name);
      a.reason = Reason::SandboxAvailable;
      a.message = "component " + q(component.name) + " (" + trust_name +
                  ") runs in the setec sandbox: RuntimeClass " + q(in.runtime_class);
      return v;
    }

    case Decision::AllowInProcess: {
      if (patches) add_annotation_patch(v, facts, where, decision_name);
      const bool trusted = policy::is_trusted(component.trust.trust);
      a.reason = trusted ? Reason::TrustedInProcess : Reason::CustomerIsolation;
      a.message = "component " + q(component.name) + " (" + trust_name +
                  ") runs on the ordinary runtime: " + sandbox_phrase(in) + " and " +
                  (trusted ? "trusted components may run in-process"
                           : "isolation-gate runs in " + shape_phrase(in) +
                                 ", which leaves isolating untrusted components to the operator");
      return v;
    }
  }
  // Unreachable for the named decisions; anything else fails closed.
  deny(Reason::InternalError,
       denied_prefix(facts, ns) + "isolation-gate reached no decision; failing closed.");
  return v;
}

}  // namespace ig::admission
