// One handler per admission endpoint, behind one interface (the shape of
// controller-runtime's admission.Handler). A handler reads the decoded
// request and the immutable context and returns an Answer built with the
// builders of admission/answer.h; it never sees HTTP, never throws on bad
// input, and denies whatever it cannot decide.
//
//   MutatePodsHandler          /mutate/pods          decide, patch the pod onto the sandbox
//   ValidatePodsHandler        /validate/pods        re-decide on the final pod, never patch;
//                                                    UPDATE and the pods/ephemeralcontainers
//                                                    subresource are judged against oldObject
//   ValidateWorkloadsHandler   /validate/workloads   decide on the pod template, never patch
//   ValidateComponentsHandler  /validate/components  content_trust, spec.kind, spec.image checks
//   AuditPodsHandler           /audit/pods           what enforcement would answer: CREATE as
//                                                    /mutate/pods (its patch), UPDATE as /validate/pods
#pragma once

#include <string>

#include "admission/answer.h"
#include "admission/context.h"
#include "admission/review.h"

namespace ig::admission {

class Handler {
 public:
  virtual ~Handler() = default;
  // "" when the request's kind (and subresource) is what this endpoint
  // admits; otherwise what is wrong (the request is then undecidable).
  virtual std::string refuses(const AdmissionRequest& request) const = 0;
  // Called only for an enforced operation on an admitted kind.
  virtual Answer handle(AdmissionRequest& request, const AdmissionContext& context) const = 0;
  // How the webhook decodes request.object for this handler (review.h):
  // the pod handlers read it as text (model::read_pod_text), falling back
  // to the DOM; handle() accepts either form.
  virtual ObjectRead object_read() const { return ObjectRead::Projected; }
};

const Handler& mutate_pods_handler() noexcept;
const Handler& validate_pods_handler() noexcept;
const Handler& validate_workloads_handler() noexcept;
const Handler& validate_components_handler() noexcept;
const Handler& audit_pods_handler() noexcept;

}  // namespace ig::admission
