// The one place that builds the gate's settings, shared by `serve` and
// `evaluate`: the --sandbox, --runtime-class and --namespace flags, the
// deployment shape from GIBSON_UNTRUSTED_EXEC, and the fixed sandbox view of
// local mode and `evaluate` (docs/architecture.md, "Where cluster mode plugs
// in": cluster mode replaces only the sandbox view).
//
// Contract: add_gate_options() declares the flags on a command with the
// defaults of config/defaults.h; --allowed-extra-images is a comma list of
// image patterns (model/image.h), a bad pattern is a bad flag naming it; --sandbox is parsed into
// policy::SandboxAvailability by its words (policy::to_string), so nothing
// compares them afterwards. gate_settings() builds admission::GateSettings
// whole from the parsed flags and the shape; fixed_sandbox() the sandbox view.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "admission/context.h"
#include "config/defaults.h"
#include "config/environment.h"
#include "model/image.h"
#include "policy/gate.h"

namespace ig::cli {

struct GateOptions {
  policy::SandboxAvailability sandbox = policy::SandboxAvailability::Unavailable;
  std::string runtime_class = std::string(config::kDefaultRuntimeClass);
  std::string own_namespace = std::string(config::kDefaultNamespace);
  // serve's --enforcement-admins (declared there: evaluate has no requester).
  std::vector<std::string> enforcement_admins = {std::string(config::kDefaultEnforcementAdmin)};
  // serve's --trust-admins (default: the enforcement admins).
  std::vector<std::string> trust_admins = {std::string(config::kDefaultEnforcementAdmin)};
  // --allowed-extra-images, parsed (model/image.h); empty: none.
  std::vector<model::ImagePattern> allowed_extra_images;
  // --allowed-kata-annotations: io.katacontainers.* keys sandboxed pods may carry.
  std::vector<std::string> allowed_kata_annotations;
};

// Declares --sandbox, --runtime-class, --namespace, --allowed-extra-images and
// --allowed-kata-annotations on `app`, parsed into `options`
// (which must outlive the parse).
void add_gate_options(CLI::App& app, GateOptions& options);

// The settings the admission handlers read; `shape` defaults to the process's
// GIBSON_UNTRUSTED_EXEC.
admission::GateSettings gate_settings(const GateOptions& options,
                                      const config::ShapeFromEnv& shape = config::read_shape_from_env());

// The --sandbox state as a SandboxView.
admission::FixedSandbox fixed_sandbox(const GateOptions& options);

}  // namespace ig::cli
