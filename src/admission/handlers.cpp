#include "admission/handlers.h"

#include <optional>

#include "admission/pod_rules.h"
#include "admission/trust_guard.h"
#include "base/quote.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"
#include "model/pod_text.h"

namespace ig::admission {
namespace {

constexpr std::string_view kSource = "request.object";

std::string kind_name(const AdmissionRequest& r) {
  return (r.kind_group.empty() ? "" : r.kind_group + "/") + r.kind;
}

bool is_workload_kind(std::string_view group, std::string_view kind) {
  if (group == "apps") {
    return kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" ||
           kind == "ReplicaSet";
  }
  return group == "batch" && (kind == "Job" || kind == "CronJob");
}

// Admission objects carry apiVersion/kind; fill them from request.kind when
// absent. An object whose type disagrees with request.kind is not decided:
// the rules read the template of the object's own kind, and the endpoint was
// chosen by request.kind. Returns the disagreement, or "" when they agree.
std::string ensure_type_meta(AdmissionRequest& r, nlohmann::json& object,
                             std::string_view field = "request.object") {
  // Compared as strings (a json == string builds a json first), and the
  // group/version joined only when there is a group.
  auto kind = object.find("kind");
  if (kind == object.end() || kind->is_null()) {
    object["kind"] = r.kind;
  } else if (!kind->is_string() || kind->get_ref<const std::string&>() != r.kind) {
    return std::string(field) + ".kind does not match request.kind " + r.kind;
  }
  const std::string api_version = request_api_version(r);
  auto api = object.find("apiVersion");
  if (api == object.end() || api->is_null()) {
    object["apiVersion"] = api_version;
  } else if (!api->is_string() || api->get_ref<const std::string&>() != api_version) {
    return std::string(field) + ".apiVersion does not match request.kind " + api_version;
  }
  return {};
}
std::string ensure_type_meta(AdmissionRequest& r) { return ensure_type_meta(r, r.object); }

constexpr std::string_view kOldSource = "request.oldObject";

// A pod's (template's) facts and where it sits, read from request.object
// (`object` / `text`) or oldObject: from the text when it has the usual
// shape (model/pod_text.h), otherwise from the DOM (parsed from the text
// first), which gives the same facts or words the error.
struct LocatedFacts {
  model::PodLocation where;
  model::PodFacts facts;
};

Result<LocatedFacts> read_located(AdmissionRequest& r, nlohmann::json& object, std::string_view text,
                                  std::optional<model::PodText>& pod, std::string_view source,
                                  std::string_view missing) {
  if (pod) return LocatedFacts{std::move(pod->where), std::move(pod->facts)};  // read in the decode
  if (!text.empty()) {
    if (auto read = model::read_pod_text(text, r.kind, request_api_version(r))) {
      return LocatedFacts{std::move(read->where), std::move(read->facts)};
    }
    auto dom = model::parse_projected(text, admission_object_projection(), source);
    if (!dom) return fail(dom.error());
    object = std::move(*dom);
  }
  if (!object.is_object()) return fail(std::string(missing));
  if (auto mismatch = ensure_type_meta(r, object, source); !mismatch.empty()) return fail(mismatch);
  auto where = model::locate_pod(object, source);
  if (!where) return fail(where.error());
  // The review is dropped after this answer: the facts take their strings
  // out of the object rather than copy them (nothing reads them there again).
  auto facts = model::take_pod_facts(object, *where, source);
  if (!facts) return fail(facts.error());
  return LocatedFacts{std::move(*where), std::move(*facts)};
}

// What the three pod endpoints share: read the pod (template) and run the
// pod rules at `stage`.
Answer admit_object(AdmissionRequest& r, const AdmissionContext& context, Stage stage) {
  auto read = read_located(r, r.object, r.object_text, r.object_pod, kSource,
                           "request.object is missing or not an object");
  if (!read) return undecidable(read.error());
  model::PodFacts* facts = &read->facts;
  // Every kind these endpoints admit is namespaced, and the API server always
  // sends request.namespace for them: without it (or with an object claiming
  // another namespace, say a never-enforced one) the request is undecidable.
  if (r.namespace_.empty()) return undecidable("request.namespace is missing or empty for a namespaced kind");
  if (!facts->namespace_.empty() && facts->namespace_ != r.namespace_) {
    return undecidable("request.object.metadata.namespace " + quote(facts->namespace_) +
                       " is not request.namespace " + quote(r.namespace_));
  }
  const std::string& ns = r.namespace_;
  if (facts->object_name.empty() && !r.name.empty()) facts->object_name = r.name;
  // An UPDATE is judged against the pod it replaces: read it as strictly.
  std::optional<model::PodFacts> old_facts;
  if (stage == Stage::Update) {
    auto old = read_located(r, r.old_object, r.old_object_text, r.old_object_pod, kOldSource,
                            "request.oldObject is missing or not an object on UPDATE");
    if (!old) return undecidable(old.error());
    if (!old->facts.namespace_.empty() && old->facts.namespace_ != r.namespace_) {
      return undecidable("request.oldObject.metadata.namespace " + quote(old->facts.namespace_) +
                         " is not request.namespace " + quote(r.namespace_));
    }
    old_facts = std::move(old->facts);
  }
  PodVerdict v = admit_pod(*facts, read->where, ns, context, stage,
                           old_facts ? &*old_facts : nullptr, Requester{r.username, r.groups});
  if (stage == Stage::Mutate) v.answer.patch = std::move(v.patch);
  return std::move(v.answer);
}

std::string refuse_subresource(const AdmissionRequest& r) {
  if (r.sub_resource.empty()) return {};
  return "subresource " + r.sub_resource + " is not admitted here";
}

// The subresource through which ephemeral containers are added to a running
// pod (kubectl debug): its object is the whole Pod.
constexpr std::string_view kEphemeralContainers = "ephemeralcontainers";

class PodHandler final : public Handler {
 public:
  // `audit`: /audit/pods, the answer enforcement would give on both pod
  // endpoints: CREATE as /mutate/pods (with its patch), UPDATE as /validate/pods.
  explicit PodHandler(Stage stage, bool audit = false) : stage_(stage), audit_(audit) {}
  std::string refuses(const AdmissionRequest& r) const override {
    if (!(r.kind_group.empty() && r.kind == "Pod")) {
      return "this endpoint admits Pods, got " + kind_name(r);
    }
    // /validate/pods also judges ephemeral containers added later.
    if ((stage_ == Stage::Validate || audit_) && r.sub_resource == kEphemeralContainers) {
      if (r.operation != Operation::Update) {
        return "subresource " + r.sub_resource + " is admitted here on UPDATE only";
      }
      return {};
    }
    return refuse_subresource(r);
  }
  Answer handle(AdmissionRequest& r, const AdmissionContext& context) const override {
    const bool update = (stage_ == Stage::Validate || audit_) && r.operation == Operation::Update;
    return admit_object(r, context, update ? Stage::Update : stage_);
  }
  ObjectRead object_read() const override { return ObjectRead::Text; }

 private:
  Stage stage_;
  bool audit_;
};

class WorkloadHandler final : public Handler {
 public:
  std::string refuses(const AdmissionRequest& r) const override {
    if (!is_workload_kind(r.kind_group, r.kind)) {
      return "this endpoint admits Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and "
             "CronJobs, got " +
             kind_name(r);
    }
    return refuse_subresource(r);
  }
  Answer handle(AdmissionRequest& r, const AdmissionContext& context) const override {
    return admit_object(r, context, Stage::Workload);
  }
  ObjectRead object_read() const override { return ObjectRead::Text; }
};

class ComponentHandler final : public Handler {
 public:
  std::string refuses(const AdmissionRequest& r) const override {
    if (r.kind_group != model::kComponentGroup || r.kind != model::kComponentKind) {
      return "this endpoint admits gibson.zeroroot.ai Components, got " + kind_name(r);
    }
    return {};
  }
  Answer handle(AdmissionRequest& r, const AdmissionContext& context) const override {
    if (!r.object.is_object()) return undecidable("request.object is missing or not an object");
    if (auto mismatch = ensure_type_meta(r); !mismatch.empty()) return undecidable(mismatch);
    if (r.namespace_.empty()) return undecidable("request.namespace is missing or empty for a namespaced kind");
    const std::string source = "Component " + quote(r.name);
    auto invalid = [&r](std::string message) {
      Answer a = denied(Reason::InvalidComponent, std::move(message));
      a.component = r.name;
      return a;
    };
    auto component = model::decode_component(r.object, source);
    if (!component) return invalid(component.error());
    // As for pods: an object claiming another namespace is not decided.
    if (!component->namespace_.empty() && component->namespace_ != r.namespace_) {
      return undecidable("request.object.metadata.namespace " + quote(component->namespace_) +
                         " is not request.namespace " + quote(r.namespace_));
    }
    auto problems = model::component_problems(*component, source);
    if (!problems.empty()) {
      std::string message;
      for (const auto& p : problems) message += (message.empty() ? "" : "; ") + p;
      return invalid(std::move(message));
    }
    // An UPDATE is judged against the Component it replaces (the trust guard).
    if (r.operation == Operation::Update && !r.old_object.is_object()) {
      return undecidable("request.oldObject is missing or not an object on UPDATE");
    }
    if (auto guarded = guard_trust_change(r, *component, context.settings)) {
      if (!guarded->allowed()) return std::move(*guarded);
      Answer a = std::move(*guarded);
      a.annotate("trust-declared", component->trust.declared ? "true" : "false");
      if (!component->trust.declared) {
        a.warn("spec.policy.content_trust omitted: Component \"" + component->name +
               "\" is treated as trusted; declare it");
      }
      return a;
    }
    Answer a = allowed(Reason::ComponentValid, "Component " + quote(component->name) + " is valid");
    a.component = component->name;
    a.annotate("content-trust", std::string(policy::effective_trust_name(component->trust.trust)));
    a.annotate("trust-declared", component->trust.declared ? "true" : "false");
    if (!component->trust.declared) {
      a.warn("spec.policy.content_trust omitted: Component \"" + component->name +
             "\" is treated as trusted; declare it");
    }
    return a;
  }
};

}  // namespace

const Handler& mutate_pods_handler() noexcept {
  static const PodHandler handler(Stage::Mutate);
  return handler;
}
const Handler& validate_pods_handler() noexcept {
  static const PodHandler handler(Stage::Validate);
  return handler;
}
const Handler& audit_pods_handler() noexcept {
  static const PodHandler handler(Stage::Mutate, /*audit=*/true);
  return handler;
}
const Handler& validate_workloads_handler() noexcept {
  static const WorkloadHandler handler;
  return handler;
}
const Handler& validate_components_handler() noexcept {
  static const ComponentHandler handler;
  return handler;
}

}  // namespace ig::admission
