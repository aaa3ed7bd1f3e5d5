// The trust guard: on a Component UPDATE, loosening its content trust
// (untrusted, or an invalid value, to trusted, omitted, null or empty) lets
// its pods run outside a microVM: only a trust admin may do it.
//
// Contract (called by /validate/components once the new object is valid):
//  - the old object is read as strictly as the new one; one that cannot be
//    read counts as untrusted (fail closed: loosening it needs an admin);
//  - effective trust compared (policy::is_trusted):
//      untrusted -> trusted, requester in settings.trust_admins
//                                      -> ContentTrustLoosenedByAdmin (allowed)
//      untrusted -> trusted, otherwise -> ContentTrustChangeRefused (403)
//      trusted -> untrusted            -> ContentTrustTightened (allowed)
//      unchanged                       -> nullopt (the caller's answer stands)
//    Each answer carries audit annotations content-trust-before/-after (the
//    value as written, "" when omitted) and, for a loosening, the user and the
//    admin group.
//  - trust_change() tells the webhook which answers are trust changes to be
//    logged and recorded (Events); it reads only the request and the answer.
#pragma once

#include <optional>

#include "admission/answer.h"
#include "admission/context.h"
#include "admission/guarded_change.h"
#include "admission/review.h"
#include "model/component.h"

namespace ig::admission {

std::optional<Answer> guard_trust_change(const AdmissionRequest& request, const model::Component& now,
                                         const GateSettings& settings);

std::optional<GuardedChange> trust_change(const AdmissionRequest& request, const Answer& answer);

}  // namespace ig::admission
