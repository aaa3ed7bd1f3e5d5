// Audit mode (namespaces labelled gibson.zeroroot.ai/isolation=audit): the
// answer enforcement would give, turned into one that neither denies nor
// patches, so an admin sees what enforcing would break before switching.
//
// Contract: audit_answer() never denies and never patches.
//  - an undecidable request or an internal error stays denied (fail closed:
//    it is no pod's answer, and the API server never sends one);
//  - any other denial becomes
//    AuditWouldDeny: allowed, the warning "isolation-gate audit: enforcing
//    would deny this (REASON)" and a second with the start of the message,
//    the audit annotations kept plus would-deny=REASON and
//    would-deny-message=the whole message;
//  - an allowed answer with a patch keeps its reason, loses the patch and
//    gains would-patch=true (and, for RequireSetec, the warning that
//    enforcing would move the pod onto the sandbox);
//  - anything else is unchanged.
// The webhook counts would-deny and would-patch by the enforced reason
// (AdmissionMetrics::record_audit) before it calls this.
#pragma once

#include "admission/answer.h"

namespace ig::admission {

Answer audit_answer(Answer enforced);

}  // namespace ig::admission
