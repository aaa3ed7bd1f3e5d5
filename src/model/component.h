// The Component custom resource (gibson.zeroroot.ai/v1alpha1, kind Component)
// as isolation-gate reads it.
//
// Contract: decode_component() accepts any JSON value and returns either a
// Component or a one-line error naming the source, the field and what was
// expected. An unknown content_trust value is NOT a decode error: it is kept
// (trust.valid == false, trust.trust == Untrusted, fail closed) so that the
// gate can still act on an object it meets, while callers that validate
// (the components webhook, `evaluate`, the local catalog) report it through
// component_problems().
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "model/json_projection.h"
#include "policy/gate.h"

namespace ig::model {

inline constexpr std::string_view kComponentGroup = "gibson.zeroroot.ai";
inline constexpr std::string_view kComponentApiVersion = "gibson.zeroroot.ai/v1alpha1";
inline constexpr std::string_view kComponentKind = "Component";
inline constexpr std::string_view kTrustField = "spec.policy.content_trust";
inline constexpr std::string_view kValidComponentKinds = "tool, agent, plugin, connector";

// What a Component's pods may run besides the image (docs/components.md,
// "Declaring the entrypoint"): spec.command and spec.args (nullopt when
// omitted, null or []: the image's own ENTRYPOINT and CMD, and pods may not
// set them), and spec.exec[].command, the commands its exec hooks and exec
// probes may run (empty: none).
struct Entrypoint {
  std::optional<std::vector<std::string>> command, args;
  std::vector<std::vector<std::string>> exec;
};

struct Component {
  std::string name;
  std::string namespace_;  // "" when the manifest names none
  std::string kind;        // spec.kind, "" when omitted
  std::string image;       // spec.image, "" when omitted (pods are then not bound to an image)
  policy::TrustSetting trust;  // effective trust, declared or not, valid or not

  Component() = default;
  Component(const Component& other);
  Component& operator=(const Component& other);
  Component(Component&&) noexcept = default;
  Component& operator=(Component&&) noexcept = default;

  // spec.policy.content_trust as written (nullopt: omitted or null), and the
  // entrypoint. The caches hold 100,000s of Components, nearly all with
  // "trusted" or "untrusted" and no entrypoint, so the rest is out of line.
  const std::optional<std::string>& trust_raw() const noexcept;
  const Entrypoint& entrypoint() const noexcept;
  void set_trust_raw(std::optional<std::string> raw);  // sets `trust` from it too
  void set_entrypoint(Entrypoint entrypoint);

 private:
  enum class Written : std::uint8_t { Omitted, Trusted, Untrusted, Other };
  struct OutOfLine {
    Entrypoint entrypoint;
    std::optional<std::string> trust_raw;  // when Written::Other
  };
  void keep_out_of_line(Entrypoint e, std::optional<std::string> trust_raw);
  Written written_ = Written::Omitted;
  std::unique_ptr<const OutOfLine> out_of_line_;  // null: no entrypoint, trust not Other
};

Result<Component> decode_component(const nlohmann::json& doc, std::string_view source);

// Every field decode_component() reads.
const Projection& component_projection();

// Validation problems a strict caller must refuse: an unknown content_trust
// value, an unknown spec.kind, a spec.image that is not an image reference
// (model/image.h), an empty spec.exec[].command, spec.command, spec.args or
// spec.exec without spec.image (nothing to bind them to). Each is one line
// naming source and field.
std::vector<std::string> component_problems(const Component& c, std::string_view source);

// A doc that claims to be a Component (by kind and group); used to pick
// Components out of a directory that holds other manifests too.
bool looks_like_component(const nlohmann::json& doc) noexcept;

}  // namespace ig::model
