// What the admission handlers read besides the request: the process's fixed
// settings, the Component lookup and the observed sandbox, bundled in one
// AdmissionContext built whole before the first request and never changed.
//
// Contract: GateSettings is built once at start (cli/gate_options.h is the one
// builder, shared by `serve` and `evaluate`) and never changes. The
// ComponentLookup and SandboxView implementations are thread-safe and called
// concurrently from request threads; a lookup that cannot answer (cluster
// unreachable, timeout) returns Status::Error and the request is denied with
// its own outcome (LookupError). Local mode and `evaluate` use StaticCatalog
// and FixedSandbox; cluster mode plugs in cache-backed implementations.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/component.h"
#include "model/image.h"
#include "policy/gate.h"

namespace ig::admission {

struct GateSettings {
  policy::ShapeSetting shape;  // from GIBSON_UNTRUSTED_EXEC
  std::string shape_raw;       // the env value as given ("" when unset)
  std::string runtime_class;   // the setec sandbox RuntimeClass (config::kDefaultRuntimeClass)
  std::string own_namespace;   // never enforced (config::kDefaultNamespace)
  // Groups whose members may switch enforcement off in a namespace (remove or
  // change its gibson.zeroroot.ai/isolation=enforced label): --enforcement-admins.
  std::vector<std::string> enforcement_admins;
  // Groups whose members may loosen a Component's content trust (untrusted to
  // trusted, omitted, null or empty): --trust-admins (default: the
  // enforcement admins).
  std::vector<std::string> trust_admins;
  // --allowed-extra-images: images any Component's pods may run besides its
  // spec.image (mesh sidecars and the like); empty: none.
  std::vector<model::ImagePattern> allowed_extra_images;
  // --allowed-kata-annotations: io.katacontainers.* annotation keys a
  // sandboxed pod may carry (exact keys); empty: none.
  std::vector<std::string> allowed_kata_annotations;
};

// Namespaces isolation-gate never enforces (docs/architecture.md, "Names").
bool is_never_enforced(std::string_view ns, const GateSettings& settings) noexcept;

// Who sent the request (request.userInfo); empty for `evaluate`.
struct Requester {
  std::string_view username;
  std::span<const std::string> groups;
};

// The first of `groups` that is one of `admins`; "" when none is.
std::string_view admin_group(std::span<const std::string> groups, const std::vector<std::string>& admins) noexcept;

// For a refusal: "it is one of: a, b", or "none is configured (FLAG)".
std::string describe_admins(const std::vector<std::string>& admins, std::string_view flag);

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
  // One phrase for messages: "available", "unavailable: RuntimeClass kata-fc
  // not found". Only for people: code reads availability(), never this.
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

// Everything a handler reads besides the request. The referenced lookup and
// sandbox outlive every handler call.
struct AdmissionContext {
  GateSettings settings;
  const ComponentLookup& components;
  const SandboxView& sandbox;
};

}  // namespace ig::admission
