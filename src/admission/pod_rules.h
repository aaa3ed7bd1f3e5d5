// Carrying out the gate's decision on a pod (or a workload's pod template).
// This file gathers the gate's inputs (component, trust, shape, sandbox),
// calls policy::decide() once, and turns the decision into an admission
// outcome: allowed or denied with an actionable message, the JSON Patch that
// applies it, warnings and audit annotations. It never decides isolation
// itself: the only branches on a Decision are the `switch`es that carry it out.
//
// The rules beyond the gate (docs/architecture.md, "Admission rules"), all
// fail-closed:
//  - a pod in an enforced namespace must name its Component by label;
//  - the Component must exist (a lookup error denies, as its own reason);
//  - a RequireSetec pod cannot use hostNetwork/hostPID/hostIPC, a
//    privileged container, a hostPath volume or an io.katacontainers.*
//    annotation an admin did not allow (IncompatibleWithMicroVM);
//  - a Component that declares spec.image binds its pods to it: every
//    container, init and ephemeral container runs that image (model/image.h:
//    same repository and tag, or the Component's digest) or one of
//    GateSettings::allowed_extra_images, and one regular container runs it;
//    else ImageNotBound, naming each container and both images. Without
//    spec.image: a warning that the pods are not bound to an image. Checked
//    on every answer that would admit;
//  - AllowInProcess (outside a microVM), in this order (binding.h): no host
//    access (HostAccessOutsideMicroVM); no ephemeral container added unless
//    the requester is an enforcement admin (EphemeralContainerRefused); the
//    image binding; the declared entrypoint and exec commands
//    (EntrypointNotBound); no loader variables or envFrom
//    (LoaderEnvNotAllowed). A RequireSetec pod that would fail these is
//    admitted with a warning and the audit annotation
//    unbound-outside-microvm=true;
//  - Stage::Validate: a RequireSetec pod must already carry the sandbox's
//    runtimeClassName (a later mutating webhook may have changed it);
//  - Stage::Update (pod UPDATE, pods/ephemeralcontainers): a changed
//    component label is denied (ComponentLabelChanged); an update that
//    changes nothing these rules read (label, images, containers, privileges,
//    host namespaces, runtimeClassName, the decision annotation) is admitted
//    as PodUnchanged (finalizers, status-like metadata, graceful deletion of
//    pods admitted earlier); any other update is judged like a new pod.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "admission/answer.h"
#include "admission/context.h"
#include "model/pod.h"
#include "policy/gate.h"

namespace ig::admission {

enum class Stage {
  Mutate,    // /mutate/pods: decide and patch
  Validate,  // /validate/pods on CREATE: re-decide on the final object, never patch
  Update,    // /validate/pods on UPDATE (and pods/ephemeralcontainers): as Validate, vs the old pod
  Workload,  // /validate/workloads: decide on the template, never patch
  Evaluate,  // `isolation-gate evaluate`: decide and show the patch
};

// What the gate was given, for messages and `evaluate`: the gate's own types,
// turned into words only when printed.
struct GateInputsReport {
  std::string component;
  policy::TrustSetting trust;       // effective trust, declared, valid
  std::string trust_raw;            // as written ("" when omitted)
  policy::ShapeSetting shape;       // shape and whether it fell back
  std::string shape_raw;            // GIBSON_UNTRUSTED_EXEC as given
  policy::SandboxAvailability sandbox{};
  std::string sandbox_detail;       // SandboxView::describe(), for people
  std::string runtime_class;
};

struct PodVerdict {
  Answer answer;                // reason (so allowed or not), message, warnings, audit
  bool decided = false;         // the gate ran (false: denied or skipped before it)
  policy::Decision decision{};  // valid when decided
  // RFC 6902 operations as JSON text, "[...]" (Mutate, Evaluate); "" for none.
  // Written directly (base/json_text.h), never through a DOM: it is on every
  // mutating review.
  std::string patch;
  GateInputsReport inputs;
};

// `ns` is the namespace the pod will live in. `where` is the pod template's
// location in the admitted object (from model::locate_pod); patch paths are
// relative to the object. `old` is the pod before the update (Stage::Update
// only; required there: without it the answer is undecidable). `requester`
// is request.userInfo (empty for `evaluate`).
PodVerdict admit_pod(const model::PodFacts& facts, const model::PodLocation& where,
                     std::string_view ns, const AdmissionContext& context, Stage stage,
                     const model::PodFacts* old = nullptr, const Requester& requester = {});

// Escapes a JSON Pointer reference token (RFC 6901: ~ -> ~0, / -> ~1).
std::string escape_pointer_token(std::string_view token);

}  // namespace ig::admission
