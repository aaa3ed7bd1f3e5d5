// A Component as the operator caches it, and the status it should carry
// (docs/operations.md, "Component status").
//  - ComponentRecord: the Component, its uid and generation, and a compact
//    mark of the status the API server holds (fingerprint, each condition's
//    status and transition time); a status it cannot read is no error.
//  - desired_status() is pure: the status fields and the conditions
//    Admitted, TrustDeclared, Drifted and BoundOutsideMicroVM; a condition
//    keeps its lastTransitionTime while its status is unchanged.
//  - Writes are server-side applies by kFieldManager; status_fingerprint()
//    covers only the gate's own fields and conditions (not other managers').
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

// One condition as the API server holds it.
struct ConditionMark {
  std::uint32_t last_transition = 0;  // Unix seconds; 0: absent or unreadable (then `now` is taken)
  ConditionStatus status = ConditionStatus::Absent;
};

// metadata.uid in 24 bytes (a lower-case UUID as its 16 bytes); str() gives
// back the text exactly.
class ObjectUid {
 public:
  ObjectUid() = default;
  explicit ObjectUid(std::string_view text);
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

// The Components cache keys a record by the namespace and name it carries.
template <>
struct ig::kube::KeyParts<ig::controller::ComponentRecord> {
  static constexpr bool kCarried = true;
  static std::pair<std::string_view, std::string_view> of(const ig::controller::ComponentRecord& r) noexcept {
    return {r.component.namespace_, r.component.name};
  }
};

namespace ig::controller {

// A Component's running pods on the sandbox that would be unbound outside a
// microVM (the drift audit's count), and one of them.
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

// What the gate decides for this Component's pods: the controller's one call
// to policy::decide (status and drift both ask here).
policy::Decision decision_for(const model::Component& c, const StatusInputs& in) noexcept;

nlohmann::json desired_status(const ComponentRecord& record, const StatusInputs& in);

inline constexpr std::string_view kFieldManager = "isolation-gate";

// {apiVersion, kind, metadata: {name, namespace}, status} of the record's Component.
nlohmann::json apply_configuration(const ComponentRecord& record, nlohmann::json status);

std::uint64_t status_fingerprint(const nlohmann::json& status);

// After an apply: a merge patch removing the gate's fields the API server
// still holds though `desired` leaves them out (co-owned by an earlier
// version's merge patches); null: none.
nlohmann::json leftover_fields_patch(const nlohmann::json& desired, const nlohmann::json& held);

// "2026-12-02T21:00:00Z" and back (metav1.Time: seconds); 0 when unreadable.
std::string format_time(std::time_t t);
std::int64_t parse_time(std::string_view text) noexcept;

}  // namespace ig::controller
