// The one builder of the gate settings (cli/gate_options.h) and the flag
// helpers it uses (cli/command_line.h).
#include "cli/gate_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/command_line.h"
#include "cli/commands.h"
#include "config/defaults.h"

namespace ig::cli {
namespace {

struct Parsed {
  std::optional<int> exit_code;
  GateOptions options;
};

Parsed parse_gate(const std::vector<std::string>& args) {
  Parsed out;
  auto app = make_app("test", "test");
  add_gate_options(*app, out.options);
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  out.exit_code = parse(*app, args);
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return out;
}

TEST(CliGateOptions, DefaultsComeFromConfigDefaults) {
  const auto p = parse_gate({});
  ASSERT_FALSE(p.exit_code);
  EXPECT_EQ(p.options.sandbox, policy::SandboxAvailability::Unavailable);
  EXPECT_EQ(p.options.runtime_class, config::kDefaultRuntimeClass);
  EXPECT_EQ(p.options.own_namespace, config::kDefaultNamespace);
}

TEST(CliGateOptions, FlagsBuildTheSettingsWhole) {
  const auto p = parse_gate({"--sandbox", "available", "--runtime-class=my-sandbox", "--namespace", "ns"});
  ASSERT_FALSE(p.exit_code);
  config::ShapeFromEnv shape;
  shape.set = true;
  shape.raw = "customer-isolation";
  shape.setting = policy::parse_shape(std::string_view(shape.raw));
  const auto settings = gate_settings(p.options, shape);
  EXPECT_EQ(settings.shape.shape, policy::DeploymentShape::CustomerIsolation);
  EXPECT_EQ(settings.shape_raw, "customer-isolation");
  EXPECT_EQ(settings.runtime_class, "my-sandbox");
  EXPECT_EQ(settings.own_namespace, "ns");
  EXPECT_TRUE(policy::is_available(fixed_sandbox(p.options).availability()));
}

TEST(CliGateOptions, SandboxTakesOnlyItsWords) {
  // Not the enum's numbers, not another case, not a prefix; the last of a
  // repeated flag wins.
  for (const char* bad : {"1", "0", "Available", "avail", "", "maybe"}) {
    const auto p = parse_gate({"--sandbox", bad});
    EXPECT_EQ(p.exit_code, kExitBadInput) << bad;
  }
  const auto p = parse_gate({"--sandbox", "available", "--sandbox", "unavailable"});
  ASSERT_FALSE(p.exit_code);
  EXPECT_EQ(p.options.sandbox, policy::SandboxAvailability::Unavailable);
}

TEST(CliGateOptions, UnknownFlagsAndPositionalsAreBadInput) {
  EXPECT_EQ(parse_gate({"--bogus"}).exit_code, kExitBadInput);
  EXPECT_EQ(parse_gate({"extra"}).exit_code, kExitBadInput);
  EXPECT_EQ(parse_gate({"--runtime-class"}).exit_code, kExitBadInput);
  EXPECT_EQ(parse_gate({"--help"}).exit_code, kExitAllowed);
}

TEST(CliGateOptions, AllowedExtraImagesAreParsedIntoTheSettings) {
  EXPECT_TRUE(parse_gate({}).options.allowed_extra_images.empty());
  const auto p = parse_gate({"--allowed-extra-images", "istio/proxyv2:1.20.0, gcr.io/mesh/*,envoy:*"});
  ASSERT_FALSE(p.exit_code);
  const auto settings = gate_settings(p.options, config::ShapeFromEnv{});
  ASSERT_EQ(settings.allowed_extra_images.size(), 3u);
  auto image = model::parse_image("gcr.io/mesh/init:7");
  ASSERT_TRUE(image.ok());
  EXPECT_TRUE(model::any_pattern_matches(settings.allowed_extra_images, *image));
}

TEST(CliGateOptions, ABadImagePatternIsBadInputNamingIt) {
  for (const char* bad : {"nginx", "*", "a*b:1", "istio/proxyv2:1.20.0,UPPER"}) {
    EXPECT_EQ(parse_gate({"--allowed-extra-images", bad}).exit_code, kExitBadInput) << bad;
  }
  auto app = make_app("test", "test");
  GateOptions options;
  add_gate_options(*app, options);
  testing::internal::CaptureStderr();
  EXPECT_EQ(parse(*app, {"--allowed-extra-images=nginx"}), kExitBadInput);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("--allowed-extra-images"), std::string::npos) << err;
  EXPECT_NE(err.find("bare repository"), std::string::npos) << err;
}

TEST(ConfigDefaults, ServiceDnsNames) {
  EXPECT_EQ(config::service_dns_names("gate", "sys"),
            (std::vector<std::string>{"gate", "gate.sys", "gate.sys.svc", "gate.sys.svc.cluster.local"}));
}

}  // namespace
}  // namespace ig::cli
