#include "cli/gate_options.h"

#include "cli/command_line.h"

namespace ig::cli {

void add_gate_options(CLI::App& app, GateOptions& options) {
  using policy::SandboxAvailability;
  add_enum_option(app, "--sandbox", options.sandbox,
                  EnumWords<SandboxAvailability>{
                      {std::string(policy::to_string(SandboxAvailability::Available)),
                       SandboxAvailability::Available},
                      {std::string(policy::to_string(SandboxAvailability::Unavailable)),
                       SandboxAvailability::Unavailable}},
                  "whether the setec sandbox (the RuntimeClass) is available");
  app.add_option("--runtime-class", options.runtime_class,
                 "the setec sandbox's RuntimeClass, set on RequireSetec pods")
      ->type_name("NAME");
  app.add_option("--namespace", options.own_namespace,
                 "the namespace isolation-gate runs in (never enforced)")
      ->type_name("NS");
  app.add_option_function<std::string>(
         "--allowed-extra-images",
         [&options](const std::string& list) {
           auto patterns = model::parse_image_patterns(list);
           if (patterns) options.allowed_extra_images = std::move(patterns).value();
         },
         "images every Component's pods may run besides its spec.image (sidecars):\n"
         "comma list of REPO:TAG, REPO@DIGEST, REPO:* (any tag) or PREFIX/* (docs/security.md)")
      ->check(CLI::Validator(
          [](const std::string& list) {
            auto patterns = model::parse_image_patterns(list);
            return patterns ? std::string() : patterns.error();
          },
          "", "image patterns"))
      ->type_name("PATTERNS");
}

admission::GateSettings gate_settings(const GateOptions& options, const config::ShapeFromEnv& shape) {
  return admission::GateSettings{shape.setting, shape.raw, options.runtime_class,
                                 options.own_namespace, options.enforcement_admins,
                                 options.allowed_extra_images};
}

admission::FixedSandbox fixed_sandbox(const GateOptions& options) {
  return admission::FixedSandbox(options.sandbox);
}

}  // namespace ig::cli
