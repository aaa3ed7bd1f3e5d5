// The enforcement guard: /validate/namespaces. Enforcement in a namespace is
// one label, gibson.zeroroot.ai/isolation=enforced (the pod and workload
// webhooks' namespaceSelector); whoever may remove it may switch the gate off
// there. This handler refuses that unless the requester is an enforcement
// admin, so switching enforcement off is never quiet.
//
// Contract (Namespace UPDATE, and its status and finalize subresources; the
// chart scopes the webhook by an objectSelector to namespaces that carry the
// label, so the rest of the cluster never depends on the gate):
//  - "Enforced" means the label's value is exactly "enforced". The handler
//    compares request.oldObject with request.object:
//      enforced before and after, or neither     -> EnforcementUnchanged (allowed)
//      not enforced before, enforced after       -> EnforcementAdded (allowed)
//      enforced before, not after (the label removed or its value changed)
//        requester in a group of settings.enforcement_admins
//                                                -> EnforcementRemovedByAdmin (allowed)
//        otherwise                               -> EnforcementChangeRefused (403)
//    Every answer carries audit annotations (enforcement-before/-after, and
//    for a removal the user and the admin group that allowed it).
//  - Undecidable (denied): a missing request.object or request.oldObject, or
//    a label that is not a string. CREATE and DELETE are not enforced (a new
//    namespace may carry the label; a deleted one runs no pods).
//  - enforcement_change() tells the webhook which allowed or refused answers
//    are enforcement changes to be logged and recorded (Events), and what they
//    changed; it reads only the request and the answer.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "admission/answer.h"
#include "admission/guarded_change.h"
#include "admission/handlers.h"
#include "admission/review.h"
#include "model/json_projection.h"

namespace ig::admission {

inline constexpr std::string_view kEnforcementLabel = "gibson.zeroroot.ai/isolation";
inline constexpr std::string_view kEnforcedValue = "enforced";

// What /validate/namespaces reads of a Namespace: its name and the label.
const model::Projection& namespace_object_projection();

const Handler& validate_namespaces_handler() noexcept;

// The change `answer` (for `request`, on /validate/namespaces) made or
// refused (admission/guarded_change.h); nullopt when it is not one
// (EnforcementUnchanged, undecidable).
std::optional<GuardedChange> enforcement_change(const AdmissionRequest& request, const Answer& answer);

}  // namespace ig::admission
