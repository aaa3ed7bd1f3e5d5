// What the admission code reads besides the request: the process's fixed
// settings, the Component catalog and the observed sandbox.
//
// Contract: GateSettings is built once at start and never changes. The
// ComponentLookup and SandboxView implementations are thread-safe and called
// concurrently from request threads; a lookup that cannot answer (cluster
// unreachable, timeout) returns Status::Error and the request is denied.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "model/component.h"
#include "policy/gate.h"

namespace ig::admission {

struct GateSettings {
  policy::ShapeSetting shape;               // from GIBSON_UNTRUSTED_EXEC
  std::string shape_raw;                    // the env value as given ("" when unset)
  std::string runtime_class = "kata-fc";    // the setec sandbox RuntimeClass
  std::string own_namespace = "isolation-gate-system";  // never enforced
};

// Namespaces isolation-gate never enforces (DESIGN.md section 2).
bool is_never_enforced(std::string_view ns, const GateSettings& settings) noexcept;

struct LookupResult {
  enum class Status { Found, NotFound, Error };
  Status status = Status::Error;
  std::shared_ptr<const model::Component> component;  // set when Found
  std::string error;                                  // set when Error
};

class ComponentLookup {
 public:
  virtual ~ComponentLookup() = default;
  virtual LookupResult find(std::string_view ns, std::string_view name) const = 0;
};

class SandboxView {
 public:
  virtual ~SandboxView() = default;
  virtual policy::SandboxAvailability availability() const noexcept = 0;
  // One phrase for messages: "available", "unavailable: RuntimeClass kata-fc not found".
  virtual std::string describe() const = 0;
};

// A sandbox state fixed at start (local mode's --sandbox flag, `evaluate`).
class FixedSandbox final : public SandboxView {
 public:
  explicit FixedSandbox(policy::SandboxAvailability a) : availability_(a) {}
  policy::SandboxAvailability availability() const noexcept override { return availability_; }
  std::string describe() const override;

 private:
  policy::SandboxAvailability availability_;
};

}  // namespace ig::admission
