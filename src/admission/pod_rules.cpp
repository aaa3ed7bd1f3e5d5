#include "admission/pod_rules.h"

#include <algorithm>

#include "admission/binding.h"

#include "base/json_text.h"
#include "base/quote.h"
#include "model/image.h"

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
    return "is treated as untrusted (content_trust " + q(c.trust_raw().value_or("")) +
           " is not valid; use trusted or untrusted)";
  }
  if (!c.trust.declared) return "is trusted (content_trust omitted, treated as trusted)";
  return std::string("is ") + std::string(policy::effective_trust_name(c.trust.trust)) +
         " (content_trust: " + *c.trust_raw() + ")";
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

// A patch path: the pod's pointer and a suffix, built on the stack (the
// longest, a CronJob's annotation path, is under 100 bytes; anything longer
// goes to the heap).
class PatchPath {
 public:
  PatchPath(std::string_view pointer, std::string_view suffix) {
    const std::size_t n = pointer.size() + suffix.size();
    char* at = buf_;
    if (n > sizeof buf_) {
      heap_.resize(n);
      at = heap_.data();
    }
    std::copy_n(pointer.data(), pointer.size(), at);
    std::copy_n(suffix.data(), suffix.size(), at + pointer.size());
    view_ = std::string_view(at, n);
  }
  PatchPath(const PatchPath&) = delete;
  PatchPath& operator=(const PatchPath&) = delete;
  std::string_view view() const noexcept { return view_; }

 private:
  char buf_[160];
  std::string heap_;
  std::string_view view_;
};

// kIsolationAnnotation as a JSON Pointer reference token (RFC 6901), fixed at
// compile time: the one '/' as "~1", no '~'.
constexpr std::string_view kIsolationAnnotationPath = "/metadata/annotations/gibson.zeroroot.ai~1isolation";
constexpr bool is_annotation_path(std::string_view key, std::string_view path) {
  constexpr std::string_view prefix = "/metadata/annotations/";
  if (path.substr(0, prefix.size()) != prefix) return false;
  std::size_t j = prefix.size();
  for (char c : key) {
    const std::string_view want = c == '~' ? "~0" : c == '/' ? "~1" : std::string_view(&c, 1);
    if (path.substr(j, want.size()) != want) return false;
    j += want.size();
  }
  return j == path.size();
}
static_assert(is_annotation_path(model::kIsolationAnnotation, kIsolationAnnotationPath));

// Appends one operation to `patch` (RFC 6902 text, kept a complete array:
// "" -> "[op]", "[...]" -> "[...,op]"); `value` writes the operation's value.
template <typename WriteValue>
void append_op(std::string& patch, std::string_view op, std::string_view path, WriteValue value) {
  if (patch.empty()) {
    patch.reserve(192);
    patch.push_back('[');
  } else {
    patch.back() = ',';
  }
  json_text::Writer w(patch);
  w.begin_object().key("op").string(op).key("path").string(path).key("value");
  value(w);
  w.end_object();
  patch.push_back(']');
}

void add_annotation_patch(PodVerdict& v, const model::PodFacts& facts, const model::PodLocation& where,
              std::string_view value) {
  if (facts.isolation_annotation && *facts.isolation_annotation == value) return;
  const std::string_view key = model::kIsolationAnnotation;
  if (!facts.has_metadata) {
    append_op(v.patch, "add", PatchPath(where.pointer, "/metadata").view(), [&](json_text::Writer& w) {
      w.begin_object().key("annotations").begin_object().key(key).string(value).end_object().end_object();
    });
  } else if (!facts.has_annotations) {
    append_op(v.patch, "add", PatchPath(where.pointer, "/metadata/annotations").view(),
              [&](json_text::Writer& w) { w.begin_object().key(key).string(value).end_object(); });
  } else {
    append_op(v.patch, "add", PatchPath(where.pointer, kIsolationAnnotationPath).view(),
              [&](json_text::Writer& w) { w.string(value); });
  }
}

// "a, b, c": every item.
std::string join_list(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out.append(", ");
    out.append(i);
  }
  return out;
}

// Does the update change anything the pod rules read?
bool judged_fields_equal(const model::PodFacts& a, const model::PodFacts& b) {
  return a.component == b.component && a.runtime_class == b.runtime_class &&
         a.host_network == b.host_network && a.host_pid == b.host_pid &&
         a.host_ipc == b.host_ipc && a.privileged_containers == b.privileged_containers &&
         a.containers == b.containers && a.volumes == b.volumes &&
         a.kata_annotations == b.kata_annotations && a.isolation_annotation == b.isolation_annotation;
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
                     std::string_view ns, const AdmissionContext& context, Stage stage,
                     const model::PodFacts* old, const Requester& requester) {
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
  a.audit.reserve(6);  // shape, sandbox, decision, component, content-trust (and a reason)
  a.annotate("shape", shape_name);
  a.annotate("sandbox", sandbox_name);

  // The label's name, for the denials only (no copy on the admitted path).
  const auto label = [] { return std::string(model::kComponentLabel); };
  if (stage == Stage::Update) {
    if (old == nullptr) {
      a = undecidable("the pod before the update (request.oldObject) is missing");
      return v;
    }
    if (old->component != facts.component) {
      auto label_value = [](const std::optional<std::string>& c) {
        return c ? q(*c) : std::string("(none)");
      };
      deny(Reason::ComponentLabelChanged,
           denied_prefix(facts, ns) + "the update changes its label " + label() + " from " +
               label_value(old->component) + " to " + label_value(facts.component) +
               ": a pod's Component is fixed when it is created (it was admitted, isolated "
               "and bound to an image as that Component). To fix: keep the label, and create a "
               "new pod to run as another Component.");
      a.annotate("decision", "Deny");
      a.annotate("reason", "ComponentLabelChanged");
      if (facts.component) a.component = *facts.component;
      return v;
    }
    if (judged_fields_equal(*old, facts)) {
      a.reason = Reason::PodUnchanged;
      a.message = "the update of " + subject(facts, ns) +
                  " changes nothing isolation-gate judges (component label, images, containers, "
                  "privileges, host namespaces, runtimeClassName)";
      a.annotate("decision", "Unchanged");
      if (facts.component) a.component = *facts.component;
      return v;
    }
  }
  if (!facts.component || facts.component->empty()) {
    deny(Reason::MissingComponentLabel,
         denied_prefix(facts, ns) + "it has no label " + label() + ", and namespace " + q(ns) +
             " is enforced by isolation-gate, so every pod must name the Component it runs. "
             "To fix: add the label " +
             label() + ": <Component name> to the pod" +
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
           denied_prefix(facts, ns) + "its label " + label() + " names Component " +
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
  in.trust_raw = component.trust_raw().value_or("");
  const std::string trust_name(policy::effective_trust_name(component.trust.trust));
  if (!component.trust.valid) {
    a.warn("Component " + q(component.name) + " has invalid content_trust " + q(in.trust_raw) +
           ": treated as untrusted");
  } else if (!component.trust.declared) {
    a.warn("Component " + q(component.name) +
           " declares no content_trust: treated as trusted; declare it");
  }

  // Ephemeral containers this request adds (kubectl debug), and whether the
  // requester is an enforcement admin, whose debug containers are left out of
  // the code checks (binding.h).
  const std::vector<std::size_t> added = added_ephemeral(facts, old);
  const std::string_view admin = added.empty() ? std::string_view()
                                               : admin_group(requester.groups, settings.enforcement_admins);
  Exempt exempt;
  if (!admin.empty()) {
    exempt.assign(facts.containers.size(), false);
    for (std::size_t i : added) exempt[i] = true;
    a.annotate("debug-admin-group", std::string(admin));
  }

  const ImageBinding binding = image_binding(facts, component, settings, exempt);
  if (!binding.bound) {
    a.warn("Component " + q(component.name) +
           " declares no spec.image: its pods are not bound to an image");
  }
  const auto deny_with = [&](Reason reason, std::string message) {
    deny(reason, std::move(message));
    a.annotate("reason", std::string(to_string(reason)));
  };
  // Carried out on every answer that would admit (after the gate's Deny and
  // the microVM conflicts, which deny anyway).
  auto deny_unbound = [&]() {
    if (!binding.component_image_error.empty()) {
      deny_with(Reason::ImageNotBound,
                denied_prefix(facts, ns) + "Component " + q(component.name) + " has spec.image " +
                    q(component.image) + ", which is not a valid image reference (" +
                    binding.component_image_error +
                    "), so its pods cannot be bound to it; isolation-gate fails closed. To fix: "
                    "correct spec.image of the Component.");
      return true;
    }
    if (binding.unbound.empty()) return false;
    deny_with(Reason::ImageNotBound,
              denied_prefix(facts, ns) + "its label " + label() + " names Component " +
                  q(component.name) + ", which is bound to image " + q(component.image) +
                  " (spec.image), but " + join_phrases(binding.unbound, "container") +
                  ". Only the Component's image" +
                  (settings.allowed_extra_images.empty()
                       ? std::string()
                       : std::string(" and the images of --allowed-extra-images")) +
                  " may run under its label. To fix: run " + q(component.image) +
                  (binding.digest_hint
                       ? std::string(" (a container that names a digest runs that digest: declare "
                                     "it in the Component's spec.image as repo:tag@sha256:...)")
                       : std::string()) +
                  ", or label the pod with the Component that declares its image.");
    return true;
  };
  // Outside a microVM, what runs must be the Component's code and may not
  // reach the host (binding.h); the first rule that fails denies.
  auto deny_outside_microvm = [&]() {
    if (auto host = host_access(facts); !host.empty()) {
      deny_with(Reason::HostAccessOutsideMicroVM,
                denied_prefix(facts, ns) + "component " + q(component.name) +
                    " runs outside a microVM (" + sandbox_phrase(in) + "), where a pod may not reach the host, "
                    "but it asks for " + join_phrases(host) +
                    ". To fix: remove them from the pod spec (privileged, hostNetwork, hostPID, hostIPC, "
                    "hostPath volumes, securityContext.capabilities.add beyond the runtime's default).");
      return true;
    }
    if (!added.empty() && admin.empty()) {
      std::vector<std::string> names;
      constexpr std::string_view kPrefix = "ephemeral:";
      for (std::size_t i : added) names.push_back(q(std::string_view(facts.containers[i].name).substr(kPrefix.size())));
      deny_with(Reason::EphemeralContainerRefused,
                denied_prefix(facts, ns) + (names.size() == 1 ? "ephemeral container " : "ephemeral containers ") +
                    join_phrases(names) +
                    " would run beside component " + q(component.name) +
                    " outside a microVM, and " +
                    (requester.username.empty() ? std::string("the requester")
                                                : "user " + q(requester.username)) +
                    " is not an enforcement admin (--enforcement-admins). To fix: ask an enforcement "
                    "admin to debug this pod, or debug a copy (kubectl debug --copy-to).");
      return true;
    }
    if (deny_unbound()) return true;
    if (auto entry = entrypoint_binding(facts, component, binding, exempt); !entry.empty()) {
      deny_with(Reason::EntrypointNotBound,
                denied_prefix(facts, ns) + "component " + q(component.name) +
                    " runs outside a microVM, where a pod runs only what its Component declares, but " +
                    join_phrases(entry) +
                    ". To fix: run the Component's declared entrypoint, or declare the command, args "
                    "and exec commands in the Component (spec.command, spec.args, spec.exec; "
                    "docs/components.md).");
      return true;
    }
    if (auto env = loader_env(facts, exempt); !env.empty()) {
      deny_with(Reason::LoaderEnvNotAllowed,
                denied_prefix(facts, ns) + "component " + q(component.name) +
                    " runs outside a microVM, where nothing may load code the Component does not "
                    "declare, but " +
                    join_phrases(env) +
                    ". To fix: remove these variables and envFrom (list variables one by one under env), "
                    "or build what they load into the Component's image.");
      return true;
    }
    return false;
  };

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
      if (auto conflicts = microvm_conflicts(facts, settings); !conflicts.empty()) {
        deny_with(Reason::IncompatibleWithMicroVM,
                  denied_prefix(facts, ns) + "component " + q(component.name) +
                      " must run in the setec sandbox (RuntimeClass " + q(in.runtime_class) +
                      ", a Firecracker microVM), which cannot provide " + join_list(conflicts) +
                      ". To fix: remove hostNetwork, hostPID, hostIPC, securityContext.privileged, "
                      "hostPath volumes and io.katacontainers.* annotations from the pod (an admin "
                      "allows a specific annotation with --allowed-kata-annotations).");
        return v;
      }
      if (deny_unbound()) return v;
      const auto& rc = facts.runtime_class;
      const bool on_sandbox = rc && *rc == settings.runtime_class;
      if (stage == Stage::Update && !on_sandbox) {
        deny(Reason::RuntimeClassChanged,
             denied_prefix(facts, ns) + "component " + q(component.name) +
                 " must now run on RuntimeClass " + q(in.runtime_class) +
                 " (RequireSetec), but the pod runs on " +
                 (rc ? q(*rc) : std::string("the default runtime")) +
                 ", and runtimeClassName cannot change on an existing pod, so it may not be "
                 "changed in place. To fix: delete the pod (its controller recreates it on the "
                 "sandbox).");
        a.annotate("reason", "RuntimeClassChanged");
        return v;
      }
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
      // Admitted in the microVM, but it would be denied outside one: said now,
      // not during the outage that takes the sandbox away.
      if (!unbound_outside_microvm(facts, component, binding, exempt).empty()) {
        a.warn("pod runs code Component " + q(component.name) +
               " does not declare: it would be denied if the sandbox went away");
        a.annotate("unbound-outside-microvm", "true");
      }
      if (patches && !on_sandbox) {
        append_op(v.patch, rc ? "replace" : "add", PatchPath(where.pointer, "/spec/runtimeClassName").view(),
                  [&](json_text::Writer& w) { w.string(settings.runtime_class); });
      }
      if (patches) add_annotation_patch(v, facts, where, decision_name);
      a.reason = Reason::SandboxAvailable;
      // Every mutating review's message: one buffer, no temporaries.
      std::string& m = a.message;
      m.reserve(80 + component.name.size() + trust_name.size() + in.runtime_class.size());
      m.assign("component ");
      append_quoted(m, component.name);
      m.append(" (").append(trust_name).append(") runs in the setec sandbox: RuntimeClass ");
      append_quoted(m, in.runtime_class);
      return v;
    }

    case Decision::AllowInProcess: {
      if (deny_outside_microvm()) return v;
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
