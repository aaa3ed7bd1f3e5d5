#include "cli/gate_options.h"

#include "cli/command_line.h"
#include "model/pod.h"

namespace ig::cli {

namespace {

std::vector<std::string> kata_annotations(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const auto comma = list.find(',');
    std::string_view key = list.substr(0, comma);
    while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
    while (!key.empty() && key.back() == ' ') key.remove_suffix(1);
    if (!key.empty()) out.emplace_back(key);
    list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
  }
  return out;
}

}  // namespace

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
  app.add_option_function<std::string>(
         "--allowed-kata-annotations",
         [&options](const std::string& list) { options.allowed_kata_annotations = kata_annotations(list); },
         "io.katacontainers.* annotations sandboxed pods may carry (comma list of\n"
         "exact keys; every other one is refused: it configures the microVM)")
      ->check(CLI::Validator(
          [](const std::string& list) {
            for (const auto& key : kata_annotations(list)) {
              if (key.rfind(model::kKataAnnotationPrefix, 0) != 0 || key.find('*') != std::string::npos) {
                return "annotation " + key + " is not an exact io.katacontainers.* key";
              }
            }
            return std::string();
          },
          "", "annotation keys"))
      ->type_name("KEYS");
}

admission::GateSettings gate_settings(const GateOptions& options, const config::ShapeFromEnv& shape) {
  return admission::GateSettings{shape.setting,         shape.raw,
                                 options.runtime_class, options.own_namespace,
                                 options.enforcement_admins, options.trust_admins,
                                 options.allowed_extra_images, options.allowed_kata_annotations};
}

admission::FixedSandbox fixed_sandbox(const GateOptions& options) {
  return admission::FixedSandbox(options.sandbox);
}

}  // namespace ig::cli
