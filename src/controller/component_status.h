// A Component as the operator caches it, and the status the operator wants
// it to carry (docs/operations.md, "Component status").
//
// ComponentRecord is what the Components cache holds: the model::Component,
// the object's uid and generation, and a compact mark of the status the API
// server holds (a fingerprint, each condition's status and transition time),
// so "written only when it changes" needs no GET and no copy of the status.
//
// Contract:
//  - decode_component_record() decodes the Component as
//    model::decode_component; a status it cannot read is no error (no marks:
//    the status is rewritten).
//  - desired_status() is pure: from the gate's decision now (decision_for(),
//    the one call to policy::decide), the trust and the drift figures, the
//    status fields and the conditions Admitted, TrustDeclared, Drifted and
//    BoundOutsideMicroVM, in that order. A condition keeps the
//    lastTransitionTime the API server holds while its status is unchanged.
//    Messages name no counts that churn (node numbers).
//  - BoundOutsideMicroVM: with RequireSetec, True (PodsBound) unless a
//    running pod on the sandbox runs or reaches what its Component does not
//    declare, else False (PodsUnboundOutsideMicroVM) with the count and one
//    example pod; with any other decision True (NotInMicroVM).
//  - Writes are server-side applies by kFieldManager of
//    apply_configuration(): the API server keeps other managers' fields and
//    conditions and removes what the gate no longer applies.
//  - status_fingerprint() hashes only what the gate owns (its fields and
//    kConditionTypes, without lastTransitionTime); holds_status() compares
//    it, the one test of "needs a write", so another manager's condition
//    causes no write loop.
#pragma once

#include <array>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/store.h"
#include "model/component.h"
#include "policy/gate.h"

namespace ig::controller {

enum class ConditionType : std::uint8_t { Admitted, TrustDeclared, Drifted, BoundOutsideMicroVM };
inline constexpr std::array<std::string_view, 4> kConditionTypes = {"Admitted", "TrustDeclared", "Drifted",
                                                                    "BoundOutsideMicroVM"};

enum class ConditionStatus : std::uint8_t { Absent, True, False, Unknown };

// One condition as the API server holds it (8 bytes).
struct ConditionMark {
  // Unix seconds; 0 when absent, unreadable, before 1970 or after 2106 (then
  // the status loop treats it as unknown and takes `now`, as for unreadable).
  std::uint32_t last_transition = 0;
  ConditionStatus status = ConditionStatus::Absent;
};

// metadata.uid in 24 bytes: the API server's UUIDs (36 characters, lower-case
// hex) as their 16 bytes, anything else as written; str() gives back the
// text exactly.
class ObjectUid {
 public:
  ObjectUid() = default;
  explicit ObjectUid(std::string_view text);
  ObjectUid(const ObjectUid& other);
  ObjectUid& operator=(const ObjectUid& other);
  ObjectUid(ObjectUid&&) noexcept = default;
  ObjectUid& operator=(ObjectUid&&) noexcept = default;
  std::string str() const;
  bool empty() const noexcept;

 private:
  std::array<std::uint8_t, 16> bytes_{};  // a UUID when other_ is null and not all zero
  std::unique_ptr<std::string> other_;    // not a UUID (or the all-zero one)
};

struct ComponentRecord {
  model::Component component;
  ObjectUid uid;
  std::int64_t generation = 0;
  std::uint64_t status_fingerprint = 0;  // 0: no status (or none readable)
  std::array<ConditionMark, kConditionTypes.size()> conditions{};  // by ConditionType
};

Result<ComponentRecord> decode_component_record(const nlohmann::json& object);

}  // namespace ig::controller

// The Components cache keys a record by the namespace and name it carries:
// no copy of the key per Component.
template <>
struct ig::kube::KeyParts<ig::controller::ComponentRecord> {
  static constexpr bool kCarried = true;
  static std::pair<std::string_view, std::string_view> of(const ig::controller::ComponentRecord& r) noexcept {
    return {r.component.namespace_, r.component.name};
  }
};

namespace ig::controller {

// The running pods of a Component on the sandbox that would be unbound
// outside a microVM (the drift audit's count), and one of them.
struct UnboundPods {
  std::size_t count = 0;
  std::string example_pod;     // its name
  std::string example_phrase;  // the first of admission::unbound_outside_microvm()
  bool operator==(const UnboundPods&) const = default;
};

struct StatusInputs {
  policy::SandboxAvailability sandbox = policy::SandboxAvailability::Unavailable;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  std::string_view runtime_class;
  std::size_t drifted_pods = 0;
  UnboundPods unbound;
  std::time_t now = 0;
};

// What the gate decides for this Component's pods under `in`: the
// controller's one call to policy::decide (the status and the drift audit
// both ask here).
policy::Decision decision_for(const model::Component& c, const StatusInputs& in) noexcept;

nlohmann::json desired_status(const ComponentRecord& record, const StatusInputs& in);

// The field manager of the gate's status writes (server-side apply).
inline constexpr std::string_view kFieldManager = "isolation-gate";

// The apply configuration of `status` (a desired_status()) for the record's
// Component: {apiVersion, kind, metadata: {name, namespace}, status}.
nlohmann::json apply_configuration(const ComponentRecord& record, nlohmann::json status);

std::uint64_t status_fingerprint(const nlohmann::json& status);

// After an apply: a merge patch of the status removing the gate's fields the
// API server still holds though `desired` leaves them out (null: none). They
// stay when another manager co-owns them, as the Update entry of the merge
// patches an earlier version of the gate wrote does, on an upgraded cluster
// (runtimeClassName, once the decision is no longer RequireSetec); removing
// them disowns them for every manager, so this happens once.
nlohmann::json leftover_fields_patch(const nlohmann::json& desired, const nlohmann::json& held);

// The status the API server holds (the record's) already carries exactly
// `desired`'s fields and conditions, whatever other managers add to it:
// nothing to write.
bool holds_status(const ComponentRecord& record, const nlohmann::json& desired);

// "2026-12-02T21:00:00Z" and back (metav1.Time: seconds); 0 when unreadable.
std::string format_time(std::time_t t);
std::int64_t parse_time(std::string_view text) noexcept;

}  // namespace ig::controller
