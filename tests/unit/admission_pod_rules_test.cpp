// Carrying out the gate's decision on pods and pod templates
// (src/admission/pod_rules.h): every combination of the gate's inputs through
// admit_pod, the fail-closed rules around it, the JSON Patch it builds, and
// the messages a kubectl user sees.
#include "admission/pod_rules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "admission/catalog.h"
#include "config/defaults.h"
#include "model/component.h"
#include "model/pod.h"

namespace ig::admission {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::Pair;
using json = nlohmann::json;
using policy::ContentTrust;
using policy::Decision;
using policy::DeploymentShape;
using policy::SandboxAvailability;

// The verdict's patch (RFC 6902 text, "" for none) as JSON: [] for none. The
// text must always parse: json::parse throws, and the test fails, if not.
json ops(const PodVerdict& v) { return v.patch.empty() ? json::array() : json::parse(v.patch); }

const std::string kLabel(model::kComponentLabel);
const std::string kAnnotation(model::kIsolationAnnotation);
constexpr const char* kNs = "team-a";
// The image every fixture Component declares (spec.image) and its pods run.
constexpr const char* kImage = "registry.example.com/x:1";

// ---- fixtures ------------------------------------------------------------

enum class Trust { Untrusted, Trusted, Omitted, Invalid };

const char* trust_name(Trust t) {
  switch (t) {
    case Trust::Untrusted: return "untrusted";
    case Trust::Trusted: return "trusted";
    case Trust::Omitted: return "omitted";
    case Trust::Invalid: return "invalid";
  }
  return "?";
}

model::Component make_component(const std::string& name, Trust t) {
  model::Component c;
  c.name = name;
  c.namespace_ = kNs;
  c.kind = "tool";
  c.image = kImage;
  switch (t) {
    case Trust::Untrusted: c.set_trust_raw("untrusted"); break;
    case Trust::Trusted: c.set_trust_raw("trusted"); break;
    case Trust::Omitted: c.set_trust_raw(std::nullopt); break;
    case Trust::Invalid: c.set_trust_raw("maybe"); break;
  }
  return c;
}

// One component of each trust, named after it.
StaticCatalog catalog_of_every_trust() {
  StaticCatalog catalog;
  for (Trust t : {Trust::Untrusted, Trust::Trusted, Trust::Omitted, Trust::Invalid}) {
    EXPECT_TRUE(catalog.add(make_component(trust_name(t), t), kNs));
  }
  return catalog;
}

GateSettings settings_for(DeploymentShape shape) {
  GateSettings s;
  s.runtime_class = std::string(config::kDefaultRuntimeClass);
  s.own_namespace = std::string(config::kDefaultNamespace);
  s.shape = {shape, false};
  s.shape_raw = shape == DeploymentShape::CustomerIsolation ? "customer-isolation" : "";
  return s;
}

json make_pod(const std::string& component) {
  json p = {{"apiVersion", "v1"},
            {"kind", "Pod"},
            {"metadata", {{"name", "p-0"}, {"namespace", kNs}}},
            {"spec", {{"containers", json::array({{{"name", "main"}, {"image", kImage}}})}}}};
  if (!component.empty()) p["metadata"]["labels"] = {{kLabel, component}};
  return p;
}

json make_workload(const std::string& api_version, const std::string& kind,
                   const std::string& component) {
  json tmpl = {{"metadata", {{"labels", {{kLabel, component}}}}},
               {"spec", {{"containers", json::array({{{"name", "main"}, {"image", kImage}}})}}}};
  if (component.empty()) tmpl["metadata"].erase("labels");
  json w = {{"apiVersion", api_version}, {"kind", kind}, {"metadata", {{"name", "w"}}}};
  if (kind == "CronJob") {
    w["spec"] = {{"schedule", "@hourly"}, {"jobTemplate", {{"spec", {{"template", tmpl}}}}}};
  } else {
    w["spec"] = {{"template", tmpl}};
  }
  return w;
}

// Runs admit_pod on an object (which must outlive the call: PodLocation
// points into it).
PodVerdict admit(const json& object, const ComponentLookup& components, SandboxAvailability sb,
                 const GateSettings& settings, Stage stage, std::string_view ns = kNs) {
  auto where = model::locate_pod(object, "test");
  EXPECT_TRUE(where.ok()) << where.error();
  auto facts = model::read_pod_facts(object, *where, "test");
  EXPECT_TRUE(facts.ok()) << facts.error();
  FixedSandbox sandbox(sb);
  return admit_pod(*facts, *where, ns, AdmissionContext{settings, components, sandbox}, stage);
}

// Applies the verdict's patch in-process (a sanity check; the independent
// python jsonpatch check lives in the e2e tests).
json applied(const json& object, const PodVerdict& v) {
  EXPECT_TRUE(ops(v).is_array());
  json out;
  EXPECT_NO_THROW(out = object.patch(ops(v))) << ops(v).dump();
  return out;
}

std::string audit_value(const PodVerdict& v, const std::string& key) {
  for (const auto& [k, value] : v.answer.audit)
    if (k == key) return value;
  return "(absent)";
}

class ErrorLookup final : public ComponentLookup {
 public:
  LookupResult find(std::string_view, std::string_view) const override {
    LookupResult r;
    r.status = LookupResult::Status::Error;
    r.error = "the API server did not answer within 2s";
    return r;
  }
};

// ---- every combination the gate sees -------------------------------------

struct GateCase {
  SandboxAvailability sandbox;
  Trust trust;
  DeploymentShape shape;
  Decision expected;
};

std::string case_name(const GateCase& c) {
  std::string out = c.sandbox == SandboxAvailability::Available ? "SandboxAvailable_"
                                                                : "SandboxUnavailable_";
  out += trust_name(c.trust);
  out += c.shape == DeploymentShape::CustomerIsolation ? "_CustomerIsolation" : "_SetecOnly";
  return out;
}
void PrintTo(const GateCase& c, std::ostream* os) { *os << case_name(c); }

std::vector<GateCase> every_combination() {
  std::vector<GateCase> cases;
  for (auto sb : {SandboxAvailability::Unavailable, SandboxAvailability::Available}) {
    for (Trust t : {Trust::Untrusted, Trust::Trusted, Trust::Omitted, Trust::Invalid}) {
      for (auto shape : {DeploymentShape::SetecOnly, DeploymentShape::CustomerIsolation}) {
        Decision d = Decision::AllowInProcess;
        if (sb == SandboxAvailability::Available) {
          d = Decision::RequireSetec;
        } else if ((t == Trust::Untrusted || t == Trust::Invalid) &&
                   shape == DeploymentShape::SetecOnly) {
          d = Decision::Deny;  // an invalid trust fails closed: treated as untrusted
        }
        cases.push_back({sb, t, shape, d});
      }
    }
  }
  return cases;
}

class EveryGateCombination : public ::testing::TestWithParam<GateCase> {};

TEST_P(EveryGateCombination, MutateStageDecidesAndPatchesAsTheGateSays) {
  const GateCase& c = GetParam();
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod(trust_name(c.trust));
  const PodVerdict v =
      admit(pod, catalog, c.sandbox, settings_for(c.shape), Stage::Mutate);

  ASSERT_TRUE(v.decided);
  EXPECT_EQ(v.decision, c.expected);
  EXPECT_EQ(v.answer.allowed(), c.expected != Decision::Deny);
  EXPECT_EQ(audit_value(v, "decision"), policy::to_string(c.expected));
  EXPECT_EQ(audit_value(v, "component"), trust_name(c.trust));
  EXPECT_EQ(audit_value(v, "shape"), policy::to_string(c.shape));
  EXPECT_EQ(audit_value(v, "sandbox"), policy::to_string(c.sandbox));
  EXPECT_EQ(audit_value(v, "content-trust"),
            (c.trust == Trust::Untrusted || c.trust == Trust::Invalid) ? "untrusted" : "trusted");
  EXPECT_EQ(v.inputs.component, trust_name(c.trust));
  EXPECT_EQ(v.inputs.trust.valid, c.trust != Trust::Invalid);
  EXPECT_EQ(v.inputs.trust.declared, c.trust != Trust::Omitted);

  switch (c.expected) {
    case Decision::RequireSetec:
      EXPECT_EQ(ops(v), json::parse(R"([
        {"op":"add","path":"/spec/runtimeClassName","value":"kata-fc"},
        {"op":"add","path":"/metadata/annotations","value":{"gibson.zeroroot.ai/isolation":"RequireSetec"}}
      ])"));
      break;
    case Decision::AllowInProcess:
      EXPECT_EQ(ops(v), json::parse(R"([
        {"op":"add","path":"/metadata/annotations","value":{"gibson.zeroroot.ai/isolation":"AllowInProcess"}}
      ])"));
      break;
    case Decision::Deny:
      EXPECT_EQ(ops(v), json::array());
      EXPECT_THAT(v.answer.message, HasSubstr("To fix"));
      break;
  }
  if (v.answer.allowed()) {
    const json result = applied(pod, v);
    EXPECT_EQ(result["metadata"]["annotations"][kAnnotation], policy::to_string(c.expected));
    if (c.expected == Decision::RequireSetec) {
      EXPECT_EQ(result["spec"]["runtimeClassName"], "kata-fc");
    } else {
      EXPECT_FALSE(result["spec"].contains("runtimeClassName"));
    }
  }

  // Warnings about the trust declaration, whatever the decision.
  if (c.trust == Trust::Omitted) {
    EXPECT_THAT(v.answer.warnings, Contains(HasSubstr("declares no content_trust: treated as trusted")));
  } else if (c.trust == Trust::Invalid) {
    EXPECT_THAT(v.answer.warnings, Contains(HasSubstr("invalid content_trust \"maybe\"")));
  } else {
    EXPECT_THAT(v.answer.warnings, IsEmpty());
  }
}

TEST_P(EveryGateCombination, ValidateAndWorkloadStagesDecideTheSameAndNeverPatch) {
  const GateCase& c = GetParam();
  const StaticCatalog catalog = catalog_of_every_trust();
  // A pod already carrying what the mutating webhook would have set.
  json pod = make_pod(trust_name(c.trust));
  if (c.expected == Decision::RequireSetec) pod["spec"]["runtimeClassName"] = "kata-fc";
  const PodVerdict validate =
      admit(pod, catalog, c.sandbox, settings_for(c.shape), Stage::Validate);
  EXPECT_EQ(validate.decision, c.expected);
  EXPECT_EQ(validate.answer.allowed(), c.expected != Decision::Deny);
  EXPECT_EQ(ops(validate), json::array());

  const json deployment = make_workload("apps/v1", "Deployment", trust_name(c.trust));
  const PodVerdict workload =
      admit(deployment, catalog, c.sandbox, settings_for(c.shape), Stage::Workload);
  EXPECT_EQ(workload.decision, c.expected);
  EXPECT_EQ(workload.answer.allowed(), c.expected != Decision::Deny);
  EXPECT_EQ(ops(workload), json::array());
}

INSTANTIATE_TEST_SUITE_P(AllInputs, EveryGateCombination,
                         ::testing::ValuesIn(every_combination()),
                         [](const auto& info) { return case_name(info.param); });

TEST(EveryGateCombinationCount, CoversSixteenCombinations) {
  EXPECT_EQ(every_combination().size(), 16u);
}

// ---- denied before the gate ----------------------------------------------

TEST(PodRules, MissingComponentLabelIsDeniedWithAFix) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(ops(v), json::array());
  EXPECT_THAT(v.answer.message, AllOf(HasSubstr("pod \"p-0\" in namespace \"team-a\" denied"),
                               HasSubstr("it has no label gibson.zeroroot.ai/component"),
                               HasSubstr("namespace \"team-a\" is enforced"),
                               HasSubstr("To fix: add the label gibson.zeroroot.ai/component: "
                                         "<Component name> to the pod (metadata.labels)")));
  EXPECT_EQ(audit_value(v, "reason"), "MissingComponentLabel");
  EXPECT_EQ(audit_value(v, "decision"), "Deny");
}

TEST(PodRules, AnEmptyComponentLabelIsDeniedLikeAMissingOne) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("");
  pod["metadata"]["labels"] = {{kLabel, ""}};
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_EQ(audit_value(v, "reason"), "MissingComponentLabel");
}

TEST(PodRules, MissingLabelOnAWorkloadTemplateNamesTheTemplateField) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json w = make_workload("apps/v1", "Deployment", "");
  const PodVerdict v = admit(w, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Workload);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_THAT(v.answer.message,
              AllOf(HasSubstr("Deployment \"w\" in namespace \"team-a\" denied: its pods would "
                              "be denied: it has no label gibson.zeroroot.ai/component"),
                    HasSubstr("to the pod template (spec.template.metadata.labels)")));

  const json cj = make_workload("batch/v1", "CronJob", "");
  const PodVerdict v2 = admit(cj, catalog, SandboxAvailability::Available,
                              settings_for(DeploymentShape::SetecOnly), Stage::Workload);
  EXPECT_THAT(v2.answer.message, HasSubstr("(spec.jobTemplate.spec.template.metadata.labels)"));
}

TEST(PodRules, UnknownComponentIsDeniedWithAFix) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("no-such-component");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(ops(v), json::array());
  EXPECT_THAT(v.answer.message,
              AllOf(HasSubstr("names Component \"no-such-component\", which does not exist in "
                              "namespace \"team-a\""),
                    HasSubstr("To fix: create the Component first (kubectl apply -n team-a")));
  EXPECT_EQ(audit_value(v, "reason"), "UnknownComponent");
}

TEST(PodRules, AComponentOfAnotherNamespaceIsUnknown) {
  const StaticCatalog catalog = catalog_of_every_trust();  // all in team-a
  const json pod = make_pod("trusted");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate, "team-b");
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_EQ(audit_value(v, "reason"), "UnknownComponent");
}

TEST(PodRules, ALookupErrorIsDeniedFailClosed) {
  const ErrorLookup lookup;
  const json pod = make_pod("trusted");
  const PodVerdict v = admit(pod, lookup, SandboxAvailability::Available,
                             settings_for(DeploymentShape::CustomerIsolation), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(ops(v), json::array());
  EXPECT_THAT(v.answer.message, AllOf(HasSubstr("Component \"trusted\" could not be looked up (the API "
                                         "server did not answer within 2s)"),
                               HasSubstr("fails closed")));
  EXPECT_EQ(audit_value(v, "reason"), "LookupError");
}

// ---- namespaces never enforced -------------------------------------------

TEST(PodRules, NeverEnforcedNamespacesAreAllowedWithoutADecision) {
  const ErrorLookup lookup;  // would deny if it were consulted
  GateSettings settings = settings_for(DeploymentShape::SetecOnly);
  settings.own_namespace = "gate-ns";
  const json pod = make_pod("");  // no label either
  for (const char* ns : {"kube-system", "kube-public", "kube-node-lease", "gate-ns"}) {
    const PodVerdict v =
        admit(pod, lookup, SandboxAvailability::Unavailable, settings, Stage::Mutate, ns);
    EXPECT_TRUE(v.answer.allowed()) << ns;
    EXPECT_FALSE(v.decided) << ns;
    EXPECT_EQ(ops(v), json::array()) << ns;
    EXPECT_THAT(v.answer.message, HasSubstr("is never enforced")) << ns;
    EXPECT_EQ(audit_value(v, "decision"), "NotEnforced") << ns;
  }
}

TEST(PodRules, TheDefaultOwnNamespaceIsNeverEnforced) {
  const GateSettings settings = settings_for(DeploymentShape::SetecOnly);
  EXPECT_TRUE(is_never_enforced("isolation-gate-system", settings));
  EXPECT_FALSE(is_never_enforced("kube-system-extra", settings));
  EXPECT_FALSE(is_never_enforced("default", settings));
  EXPECT_FALSE(is_never_enforced("", settings));
}

TEST(PodRules, NamespacesThatMerelyResembleNeverEnforcedOnesAreEnforced) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("");
  for (const char* ns : {"kube-system-2", "Kube-System", "default", "isolation-gate"}) {
    const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                               settings_for(DeploymentShape::SetecOnly), Stage::Mutate, ns);
    EXPECT_FALSE(v.answer.allowed()) << ns;
    EXPECT_EQ(audit_value(v, "reason"), "MissingComponentLabel") << ns;
  }
}

// ---- RequireSetec and what a microVM cannot provide ----------------------

struct MicroVmCase {
  const char* name;
  const char* pointer;
  json value;
  const char* reason;
};

void PrintTo(const MicroVmCase& c, std::ostream* os) { *os << c.name; }

class RequireSetecConflict : public ::testing::TestWithParam<MicroVmCase> {};

TEST_P(RequireSetecConflict, IsDeniedWithTheReason) {
  const auto& c = GetParam();
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod[json::json_pointer(c.pointer)] = c.value;
  for (Stage stage : {Stage::Mutate, Stage::Validate, Stage::Evaluate}) {
    const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                               settings_for(DeploymentShape::SetecOnly), stage);
    EXPECT_FALSE(v.answer.allowed());
    EXPECT_TRUE(v.decided);
    EXPECT_EQ(v.decision, Decision::RequireSetec);
    EXPECT_EQ(ops(v), json::array());
    EXPECT_THAT(v.answer.message, AllOf(HasSubstr("component \"untrusted\" must run in the setec sandbox "
                                           "(RuntimeClass \"kata-fc\", a Firecracker microVM), "
                                           "which cannot provide "),
                                 HasSubstr(c.reason), HasSubstr("To fix")));
    EXPECT_EQ(audit_value(v, "reason"), "IncompatibleWithMicroVM");
  }
}

json privileged(const char* name) {
  return json::array(
      {{{"name", name}, {"image", kImage}, {"securityContext", {{"privileged", true}}}}});
}

INSTANTIATE_TEST_SUITE_P(
    Conflicts, RequireSetecConflict,
    ::testing::Values(
        MicroVmCase{"HostNetwork", "/spec/hostNetwork", json(true), "cannot provide hostNetwork."},
        MicroVmCase{"HostPID", "/spec/hostPID", json(true), "cannot provide hostPID."},
        MicroVmCase{"HostIPC", "/spec/hostIPC", json(true), "cannot provide hostIPC."},
        MicroVmCase{"PrivilegedContainer", "/spec/containers", privileged("app"),
                    "privileged container \"app\""},
        MicroVmCase{"PrivilegedInitContainer", "/spec/initContainers", privileged("setup"),
                    "privileged container \"init:setup\""},
        MicroVmCase{"PrivilegedEphemeralContainer", "/spec/ephemeralContainers",
                    privileged("debug"), "privileged container \"ephemeral:debug\""},
        // Nothing in a sandboxed pod reaches the host: a host path shared
        // writable into the guest, or the microVM configured from the pod.
        MicroVmCase{"HostPathVolume", "/spec/volumes",
                    json::array({{{"name", "manifests"}, {"hostPath", {{"path", "/etc/kubernetes/manifests"}}}}}),
                    "hostPath volume \"manifests\""},
        MicroVmCase{"KataAnnotation", "/metadata/annotations",
                    json{{"io.katacontainers.config.hypervisor.path", "/tmp/qemu"}},
                    "annotation \"io.katacontainers.config.hypervisor.path\""}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PodRules, EveryMicroVmConflictIsListed) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["hostNetwork"] = true;
  pod["spec"]["hostPID"] = true;
  pod["spec"]["hostIPC"] = true;
  pod["spec"]["initContainers"] = privileged("setup");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_THAT(v.answer.message,
              HasSubstr("cannot provide hostNetwork, hostPID, hostIPC, privileged container "
                        "\"init:setup\"."));
}

// Outside a microVM a pod may not reach the host either (it once could: a
// trusted Component's pod could take over its node).
TEST(PodRules, HostAccessIsDeniedWhenThePodRunsInProcess) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["hostNetwork"] = true;
  pod["spec"]["containers"] = privileged("app");
  pod["spec"]["containers"][0]["image"] = kImage;
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_EQ(v.decision, Decision::AllowInProcess);
  EXPECT_EQ(v.answer.reason, Reason::HostAccessOutsideMicroVM);
  EXPECT_THAT(v.answer.message, HasSubstr("asks for hostNetwork and privileged container \"app\""));
}

TEST(PodRules, AWorkloadWithAMicroVmConflictIsDeniedAtApplyTime) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json w = make_workload("apps/v1", "DaemonSet", "untrusted");
  w["spec"]["template"]["spec"]["hostNetwork"] = true;
  const PodVerdict v = admit(w, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Workload);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_THAT(v.answer.message, AllOf(HasSubstr("DaemonSet \"w\" in namespace \"team-a\" denied: its pods "
                                         "would be denied: "),
                               HasSubstr("cannot provide hostNetwork")));
}

// ---- runtimeClassName ----------------------------------------------------

TEST(PodRules, AnotherRuntimeClassIsReplacedWithAWarning) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod["spec"]["runtimeClassName"] = "runc";
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v)[0], (json{{"op", "replace"},
                              {"path", "/spec/runtimeClassName"},
                              {"value", "kata-fc"}}));
  EXPECT_THAT(v.answer.warnings, Contains("runtimeClassName \"runc\" replaced by \"kata-fc\": component "
                                   "\"untrusted\" runs only in the sandbox"));
  EXPECT_EQ(applied(pod, v)["spec"]["runtimeClassName"], "kata-fc");
}

TEST(PodRules, AMissingRuntimeClassIsAddedWithoutAWarning) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("untrusted");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v)[0], (json{{"op", "add"},
                              {"path", "/spec/runtimeClassName"},
                              {"value", "kata-fc"}}));
  EXPECT_THAT(v.answer.warnings, IsEmpty());
}

TEST(PodRules, TheSandboxRuntimeClassAlreadySetNeedsNoRuntimeClassOp) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod["spec"]["runtimeClassName"] = "kata-fc";
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v), json::parse(R"([{"op":"add","path":"/metadata/annotations",
                                      "value":{"gibson.zeroroot.ai/isolation":"RequireSetec"}}])"));
  EXPECT_THAT(v.answer.warnings, IsEmpty());
}

TEST(PodRules, AConfiguredRuntimeClassIsTheOneRequired) {
  const StaticCatalog catalog = catalog_of_every_trust();
  GateSettings settings = settings_for(DeploymentShape::CustomerIsolation);
  settings.runtime_class = "my-sandbox";
  const json pod = make_pod("trusted");
  const PodVerdict v =
      admit(pod, catalog, SandboxAvailability::Available, settings, Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(applied(pod, v)["spec"]["runtimeClassName"], "my-sandbox");
  EXPECT_THAT(v.answer.message, HasSubstr("RuntimeClass \"my-sandbox\""));
}

TEST(PodRules, AllowInProcessLeavesTheRuntimeClassAlone) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["runtimeClassName"] = "gvisor";
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(v.decision, Decision::AllowInProcess);
  EXPECT_EQ(applied(pod, v)["spec"]["runtimeClassName"], "gvisor");
  EXPECT_THAT(v.answer.warnings, IsEmpty());
}

// ---- Stage::Validate -----------------------------------------------------

TEST(PodRules, ValidateDeniesRequireSetecPodsWithoutTheSandboxRuntimeClass) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json unset = make_pod("untrusted");
  const PodVerdict a = admit(unset, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Validate);
  EXPECT_FALSE(a.answer.allowed());
  EXPECT_EQ(a.decision, Decision::RequireSetec);
  EXPECT_EQ(ops(a), json::array());
  EXPECT_THAT(a.answer.message, AllOf(HasSubstr("must run on RuntimeClass \"kata-fc\" (RequireSetec), but "
                                         "the pod's runtimeClassName is not set"),
                               HasSubstr("To fix")));
  EXPECT_EQ(audit_value(a, "reason"), "RuntimeClassChanged");

  json other = make_pod("untrusted");
  other["spec"]["runtimeClassName"] = "runc";
  const PodVerdict b = admit(other, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Validate);
  EXPECT_FALSE(b.answer.allowed());
  EXPECT_EQ(ops(b), json::array());
  EXPECT_THAT(b.answer.message, HasSubstr("the pod's runtimeClassName is \"runc\""));
}

TEST(PodRules, ValidateAllowsRequireSetecPodsOnTheSandboxWithoutAPatch) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod["spec"]["runtimeClassName"] = "kata-fc";
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Validate);
  EXPECT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v), json::array());
  EXPECT_THAT(v.answer.warnings, IsEmpty());
}

// ---- Stage::Workload -----------------------------------------------------

TEST(PodRules, WorkloadStageNeverPatchesEvenWhenTheTemplateNeedsIt) {
  const StaticCatalog catalog = catalog_of_every_trust();
  for (const auto& [api, kind] : std::vector<std::pair<std::string, std::string>>{
           {"apps/v1", "Deployment"}, {"apps/v1", "StatefulSet"}, {"apps/v1", "DaemonSet"},
           {"apps/v1", "ReplicaSet"}, {"batch/v1", "Job"}, {"batch/v1", "CronJob"}}) {
    json w = make_workload(api, kind, "untrusted");
    const PodVerdict v = admit(w, catalog, SandboxAvailability::Available,
                               settings_for(DeploymentShape::SetecOnly), Stage::Workload);
    EXPECT_TRUE(v.answer.allowed()) << kind;
    EXPECT_EQ(v.decision, Decision::RequireSetec) << kind;
    EXPECT_EQ(ops(v), json::array()) << kind;
  }
}

TEST(PodRules, WorkloadDenialNamesTheWorkloadAndWhatItsPodsWouldMeet) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json w = make_workload("batch/v1", "CronJob", "untrusted");
  const PodVerdict v = admit(w, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Workload);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_EQ(v.decision, Decision::Deny);
  EXPECT_THAT(v.answer.message, HasSubstr("CronJob \"w\" in namespace \"team-a\" denied: its pods would "
                                   "be denied: component \"untrusted\""));
}

TEST(PodRules, EvaluateStagePatchesAtTheTemplatePointerOfAWorkload) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json cj = make_workload("batch/v1", "CronJob", "trusted");
  const PodVerdict v = admit(cj, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Evaluate);
  ASSERT_TRUE(v.answer.allowed());
  ASSERT_EQ(ops(v).size(), 2u);
  EXPECT_EQ(ops(v)[0]["path"], "/spec/jobTemplate/spec/template/spec/runtimeClassName");
  EXPECT_EQ(ops(v)[1]["path"], "/spec/jobTemplate/spec/template/metadata/annotations");
  const json result = applied(cj, v);
  const json& tmpl = result["spec"]["jobTemplate"]["spec"]["template"];
  EXPECT_EQ(tmpl["spec"]["runtimeClassName"], "kata-fc");
  EXPECT_EQ(tmpl["metadata"]["annotations"][kAnnotation], "RequireSetec");
}

// ---- the decision annotation patch ---------------------------------------

TEST(DecisionAnnotationPatch, APodWithoutMetadataGetsTheWholeMetadataMap) {
  // Reachable only for never-labelled objects in tests, but the patch must
  // still be valid: build facts by hand for a pod with no metadata.
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = {{"apiVersion", "v1"},
                    {"kind", "Pod"},
                    {"spec", {{"containers", json::array({{{"name", "m"}, {"image", kImage}}})}}}};
  auto where = model::locate_pod(pod, "t");
  ASSERT_TRUE(where.ok());
  auto facts = model::read_pod_facts(pod, *where, "t");
  ASSERT_TRUE(facts.ok());
  facts->component = "trusted";  // as if the label came from elsewhere
  const FixedSandbox sandbox(SandboxAvailability::Unavailable);
  const PodVerdict v =
      admit_pod(*facts, *where, kNs,
                AdmissionContext{settings_for(DeploymentShape::SetecOnly), catalog, sandbox},
                Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v), json::parse(R"([{"op":"add","path":"/metadata",
      "value":{"annotations":{"gibson.zeroroot.ai/isolation":"AllowInProcess"}}}])"));
  EXPECT_EQ(applied(pod, v)["metadata"]["annotations"][kAnnotation], "AllowInProcess");
}

TEST(DecisionAnnotationPatch, APodWithoutAnnotationsGetsTheWholeAnnotationsMap) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("trusted");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(ops(v), json::parse(R"([{"op":"add","path":"/metadata/annotations",
      "value":{"gibson.zeroroot.ai/isolation":"AllowInProcess"}}])"));
  const json result = applied(pod, v);
  EXPECT_EQ(result["metadata"]["labels"][kLabel], "trusted");  // untouched
}

TEST(DecisionAnnotationPatch, APodWithAnnotationsGetsOnlyTheEscapedKey) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["metadata"]["annotations"] = {{"team", "docs"}};
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(ops(v), json::parse(R"([{"op":"add",
      "path":"/metadata/annotations/gibson.zeroroot.ai~1isolation","value":"AllowInProcess"}])"));
  const json result = applied(pod, v);
  EXPECT_EQ(result["metadata"]["annotations"],
            (json{{"team", "docs"}, {kAnnotation, "AllowInProcess"}}));
}

TEST(DecisionAnnotationPatch, AnAnnotationAlreadyEqualNeedsNoOp) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["metadata"]["annotations"] = {{kAnnotation, "AllowInProcess"}};
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_TRUE(v.answer.allowed());
  EXPECT_EQ(ops(v), json::array());
}

TEST(DecisionAnnotationPatch, AnAnnotationWithAnotherValueIsOverwritten) {
  // A pod that claims a decision it was not given (forged or stale).
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod["metadata"]["annotations"] = {{kAnnotation, "AllowInProcess"}};
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  const json result = applied(pod, v);
  EXPECT_EQ(result["metadata"]["annotations"][kAnnotation], "RequireSetec");
  EXPECT_EQ(result["spec"]["runtimeClassName"], "kata-fc");
}

TEST(DecisionAnnotationPatch, OtherAnnotationKeysWithTildeAndSlashSurviveThePatch) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["metadata"]["annotations"] = {
      {"example.com/a~b", "1"}, {"~1", "2"}, {"a/b/c", "3"}, {"~0/~1", "4"}};
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_TRUE(v.answer.allowed());
  const json result = applied(pod, v);
  EXPECT_EQ(result["metadata"]["annotations"],
            (json{{"example.com/a~b", "1"},
                  {"~1", "2"},
                  {"a/b/c", "3"},
                  {"~0/~1", "4"},
                  {kAnnotation, "RequireSetec"}}));
}

TEST(EscapePointerToken, EscapesTildeThenSlashPerRfc6901) {
  EXPECT_EQ(escape_pointer_token("gibson.zeroroot.ai/isolation"), "gibson.zeroroot.ai~1isolation");
  EXPECT_EQ(escape_pointer_token("a~b"), "a~0b");
  EXPECT_EQ(escape_pointer_token("~1"), "~01");
  EXPECT_EQ(escape_pointer_token("/~"), "~1~0");
  EXPECT_EQ(escape_pointer_token(""), "");
  // Round trip through nlohmann's own pointer parsing.
  for (const char* key : {"a/b", "a~b", "~0/~1", "//", "~~"}) {
    const json doc = {{key, 1}};
    EXPECT_EQ(doc.at(json::json_pointer("/" + escape_pointer_token(key))), 1) << key;
  }
}

// ---- messages ------------------------------------------------------------

TEST(PodRulesMessages, EveryWarningIsUnder120CharactersEvenWithA253CharacterName) {
  const std::string long_name(253, 'c');
  StaticCatalog catalog;
  model::Component invalid = make_component(long_name, Trust::Invalid);
  invalid.set_trust_raw(std::string(300, 'v'));
  ASSERT_TRUE(catalog.add(invalid, kNs));
  ASSERT_TRUE(catalog.add(make_component(long_name + "-x", Trust::Omitted), kNs));

  GateSettings settings = settings_for(DeploymentShape::CustomerIsolation);
  settings.runtime_class = std::string(253, 'r');
  for (const std::string& name : {long_name, long_name + "-x"}) {
    json pod = make_pod(name);
    pod["spec"]["runtimeClassName"] = std::string(253, 'o');
    for (Stage stage : {Stage::Mutate, Stage::Workload, Stage::Evaluate}) {
      const PodVerdict v =
          admit(pod, catalog, SandboxAvailability::Available, settings, stage);
      ASSERT_TRUE(v.answer.allowed()) << v.answer.message;
      ASSERT_EQ(v.answer.warnings.size(), 2u);  // the trust warning and the runtimeClassName one
      for (const auto& w : v.answer.warnings) {
        EXPECT_LT(w.size(), 120u) << w;
        EXPECT_THAT(w, testing::EndsWith("..."));
      }
    }
  }
}

TEST(PodRulesMessages, AddWarningKeepsShortTextAndNeverSplitsAUtf8Sequence) {
  Answer answer;
  answer.warn("short");
  std::string accented;
  for (int i = 0; i < 100; ++i) accented += "\xC3\xA9";  // "é" x 100 = 200 bytes
  answer.warn(accented);
  answer.warn(std::string(119, 'x'));
  answer.warn(std::string(120, 'x'));
  const std::vector<std::string>& warnings = answer.warnings;
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_EQ(warnings[0], "short");
  EXPECT_LT(warnings[1].size(), 120u);
  EXPECT_THAT(warnings[1], testing::EndsWith("..."));
  const std::string body = warnings[1].substr(0, warnings[1].size() - 3);
  EXPECT_EQ(body.size() % 2, 0u);  // whole two-byte sequences only
  for (std::size_t i = 0; i < body.size(); i += 2) EXPECT_EQ(body.substr(i, 2), "\xC3\xA9");
  EXPECT_EQ(warnings[2], std::string(119, 'x'));
  EXPECT_EQ(warnings[3].size(), 119u);
}

TEST(PodRulesMessages, DenyMessageNamesComponentNamespaceTrustShapeSandboxAndAFix) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("untrusted");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_FALSE(v.answer.allowed());
  ASSERT_EQ(v.decision, Decision::Deny);
  EXPECT_THAT(v.answer.message,
              AllOf(HasSubstr("pod \"p-0\" in namespace \"team-a\" denied: "),
                    HasSubstr("component \"untrusted\" is untrusted (content_trust: untrusted)"),
                    HasSubstr("isolation-gate runs in the setec-only (hosted) shape"),
                    HasSubstr("the setec sandbox (RuntimeClass \"kata-fc\") is unavailable"),
                    HasSubstr("To fix: make RuntimeClass \"kata-fc\" available")));
  EXPECT_EQ(v.answer.message.find('\n'), std::string::npos);
}

TEST(PodRulesMessages, DenyMessageForAnInvalidTrustSaysItIsTreatedAsUntrusted) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("invalid");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  ASSERT_EQ(v.decision, Decision::Deny);
  EXPECT_THAT(v.answer.message,
              AllOf(HasSubstr("component \"invalid\" is treated as untrusted (content_trust "
                              "\"maybe\" is not valid; use trusted or untrusted)"),
                    HasSubstr("namespace \"team-a\""), HasSubstr("setec-only"),
                    HasSubstr("is unavailable"), HasSubstr("To fix")));
}

TEST(PodRulesMessages, DenyMessageSaysWhenTheShapeFellBack) {
  const StaticCatalog catalog = catalog_of_every_trust();
  GateSettings settings = settings_for(DeploymentShape::SetecOnly);
  settings.shape = policy::parse_shape("Customer-Isolation");
  settings.shape_raw = "Customer-Isolation";
  ASSERT_TRUE(settings.shape.fell_back);
  const json pod = make_pod("untrusted");
  const PodVerdict v =
      admit(pod, catalog, SandboxAvailability::Unavailable, settings, Stage::Mutate);
  ASSERT_EQ(v.decision, Decision::Deny);
  EXPECT_THAT(v.answer.message, HasSubstr("setec-only (hosted) shape (GIBSON_UNTRUSTED_EXEC="
                                   "\"Customer-Isolation\" is not recognised)"));
  EXPECT_TRUE(v.inputs.shape.fell_back);
  EXPECT_EQ(v.inputs.shape_raw, "Customer-Isolation");
}

TEST(PodRulesMessages, AllowedMessagesSummariseTheOutcome) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("trusted");
  const PodVerdict a = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(a.answer.message,
            "component \"trusted\" (trusted) runs in the setec sandbox: RuntimeClass \"kata-fc\"");
  const PodVerdict b = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::CustomerIsolation), Stage::Mutate);
  EXPECT_EQ(b.answer.message,
            "component \"trusted\" (trusted) runs on the ordinary runtime: the setec sandbox "
            "(RuntimeClass \"kata-fc\") is unavailable and trusted components may run "
            "in-process");
  const json untrusted = make_pod("untrusted");
  const PodVerdict c = admit(untrusted, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::CustomerIsolation), Stage::Mutate);
  ASSERT_EQ(c.decision, Decision::AllowInProcess);
  EXPECT_THAT(c.answer.message,
              AllOf(HasSubstr("component \"untrusted\" (untrusted) runs on the ordinary runtime"),
                    HasSubstr("is unavailable"),
                    HasSubstr("the customer-isolation (self-hosted) shape")));
}

TEST(PodRulesMessages, AnUnnamedPodIsCalledUnnamed) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("");
  pod["metadata"].erase("name");
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_THAT(v.answer.message, testing::StartsWith("pod (unnamed) in namespace \"team-a\" denied: "));
}

// ---- pods are bound to their Component's image ---------------------------

const std::string kSha = "sha256:" + std::string(64, 'c');

json container(const std::string& name, const std::string& image) {
  return {{"name", name}, {"image", image}};
}

// Every stage that can admit, with the sandbox states that lead to both
// admitting decisions (RequireSetec and AllowInProcess).
struct StageSandbox {
  Stage stage;
  SandboxAvailability sandbox;
};
std::vector<StageSandbox> admitting_paths() {
  std::vector<StageSandbox> out;
  for (Stage stage : {Stage::Mutate, Stage::Workload, Stage::Evaluate}) {
    for (auto sb : {SandboxAvailability::Available, SandboxAvailability::Unavailable}) {
      out.push_back({stage, sb});
    }
  }
  return out;
}

TEST(ImageBinding, ATrustedComponentsLabelOnAForeignImageIsDenied) {
  // The attack: label an arbitrary image as a trusted Component to run it
  // in-process while the sandbox is down.
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["containers"] = json::array({container("main", "evil.example/miner:1")});
  for (const auto& path : admitting_paths()) {
    const PodVerdict v = admit(pod, catalog, path.sandbox, settings_for(DeploymentShape::SetecOnly),
                               path.stage);
    EXPECT_FALSE(v.answer.allowed());
    EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
    EXPECT_EQ(audit_value(v, "reason"), "ImageNotBound");
    EXPECT_EQ(ops(v), json::array());
    EXPECT_THAT(v.answer.message,
                AllOf(HasSubstr("Component \"trusted\", which is bound to image "
                                "\"registry.example.com/x:1\" (spec.image)"),
                      HasSubstr("container \"main\" runs \"evil.example/miner:1\""),
                      HasSubstr("To fix")));
  }
  // The validating stage too.
  pod["spec"]["runtimeClassName"] = "kata-fc";
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Validate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
}

TEST(ImageBinding, EveryContainerKindIsBoundAndEachViolationIsNamed) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["containers"].push_back(container("sidecar", "registry.example.com/x:2"));
  pod["spec"]["initContainers"] = json::array({container("setup", "busybox")});
  pod["spec"]["ephemeralContainers"] = json::array({{{"name", "debug"}}});
  // In the sandbox (outside it, a non-admin's ephemeral container is refused first).
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message,
              HasSubstr("but container \"sidecar\" runs \"registry.example.com/x:2\", container "
                        "\"init:setup\" runs \"busybox\" (docker.io/library/busybox:latest) and "
                        "container \"ephemeral:debug\" names no image."));
  EXPECT_THAT(v.answer.message, Not(HasSubstr("container \"main\"")));
}

TEST(ImageBinding, ManyForeignContainersAreNamedUpToFiveThenCounted) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  for (int i = 0; i < 7; ++i) {
    pod["spec"]["containers"].push_back(container("c" + std::to_string(i), "evil.example/x:" + std::to_string(i)));
  }
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message,
              AllOf(HasSubstr("container \"c3\" runs \"evil.example/x:3\", container \"c4\" runs "
                              "\"evil.example/x:4\" and 2 more containers."),
                    Not(HasSubstr("\"c5\"")), Not(HasSubstr("container \"main\""))));
}

TEST(ImageBinding, TheComponentsImageUnderAnotherSpellingIsTheSameImage) {
  StaticCatalog catalog;
  model::Component c = make_component("hub", Trust::Trusted);
  c.image = "nginx:1.25";
  ASSERT_TRUE(catalog.add(c, kNs));
  json pod = make_pod("hub");
  pod["spec"]["containers"] = json::array({container("a", "docker.io/library/nginx:1.25"),
                                           container("b", "index.docker.io/nginx:1.25")});
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
  EXPECT_THAT(v.answer.warnings, IsEmpty());
}

TEST(ImageBinding, AComponentDigestRequiresThatDigest) {
  StaticCatalog catalog;
  model::Component c = make_component("pinned", Trust::Trusted);
  c.image = "registry.example.com/x:1@" + kSha;
  ASSERT_TRUE(catalog.add(c, kNs));
  json pod = make_pod("pinned");
  pod["spec"]["containers"] = json::array({container("main", "registry.example.com/x@" + kSha)});
  EXPECT_TRUE(admit(pod, catalog, SandboxAvailability::Unavailable,
                    settings_for(DeploymentShape::SetecOnly), Stage::Mutate)
                  .answer.allowed());
  pod["spec"]["containers"] = json::array({container("main", "registry.example.com/x:1")});
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
}

TEST(ImageBinding, AContainerDigestWithATagOnlyComponentIsDeniedWithTheFix) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["containers"] = json::array({container("main", std::string(kImage) + "@" + kSha)});
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message, HasSubstr("declare it in the Component's spec.image"));
}

TEST(ImageBinding, AllowedExtraImagesAreExemptAndNamedInTheDenial) {
  const StaticCatalog catalog = catalog_of_every_trust();
  GateSettings settings = settings_for(DeploymentShape::SetecOnly);
  auto patterns = model::parse_image_patterns("istio/proxyv2:1.20.0,gcr.io/mesh/*,envoy:*");
  ASSERT_TRUE(patterns.ok()) << patterns.error();
  settings.allowed_extra_images = *patterns;
  json pod = make_pod("trusted");
  pod["spec"]["containers"].push_back(container("istio-proxy", "docker.io/istio/proxyv2:1.20.0"));
  pod["spec"]["initContainers"] = json::array({container("init", "gcr.io/mesh/init:7")});
  for (const auto& path : admitting_paths()) {
    const PodVerdict v = admit(pod, catalog, path.sandbox, settings, path.stage);
    EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
  }
  // An ephemeral container on an extra image, in the sandbox.
  pod["spec"]["ephemeralContainers"] = json::array({container("e", "envoy@" + kSha)});
  EXPECT_TRUE(admit(pod, catalog, SandboxAvailability::Available, settings, Stage::Mutate).answer.allowed());
  pod["spec"].erase("ephemeralContainers");
  pod["spec"]["containers"].push_back(container("other", "istio/proxyv2:1.21.0"));
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable, settings, Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message, AllOf(HasSubstr("container \"other\" runs \"istio/proxyv2:1.21.0\""),
                                      HasSubstr("and the images of --allowed-extra-images")));
}

TEST(ImageBinding, AComponentWithoutSpecImageKeepsTodaysBehaviourWithAWarning) {
  StaticCatalog catalog;
  model::Component c = make_component("unbound", Trust::Trusted);
  c.image.clear();
  ASSERT_TRUE(catalog.add(c, kNs));
  json pod = make_pod("unbound");
  pod["spec"]["containers"] = json::array({container("main", "anything.example/at-all:9")});
  for (const auto& path : admitting_paths()) {
    const PodVerdict v = admit(pod, catalog, path.sandbox, settings_for(DeploymentShape::SetecOnly),
                               path.stage);
    EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
    EXPECT_THAT(v.answer.warnings,
                Contains("Component \"unbound\" declares no spec.image: its pods are not bound to "
                         "an image"));
  }
}

TEST(ImageBinding, AnInvalidComponentImageDeniesItsPodsFailClosed) {
  StaticCatalog catalog;
  model::Component c = make_component("broken", Trust::Trusted);
  c.image = "Not A Reference";
  ASSERT_TRUE(catalog.add(c, kNs));
  json pod = make_pod("broken");
  pod["spec"]["containers"] = json::array({container("main", "Not A Reference")});
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Unavailable,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message, HasSubstr("which is not a valid image reference"));
}

TEST(ImageBinding, AnInvalidContainerImageIsNotBound) {
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("trusted");
  pod["spec"]["containers"].push_back(container("odd", "UPPER:case:x"));
  const PodVerdict v = admit(pod, catalog, SandboxAvailability::Available,
                             settings_for(DeploymentShape::SetecOnly), Stage::Mutate);
  EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
  EXPECT_THAT(v.answer.message,
              HasSubstr("container \"odd\" runs \"UPPER:case:x\", which is not a valid image reference"));
}

TEST(ImageBinding, AWorkloadTemplateOnAForeignImageIsDeniedAtApplyTime) {
  const StaticCatalog catalog = catalog_of_every_trust();
  for (const auto& [api, kind] : std::vector<std::pair<std::string, std::string>>{
           {"apps/v1", "Deployment"}, {"batch/v1", "CronJob"}}) {
    json w = make_workload(api, kind, "trusted");
    json& tmpl = kind == "CronJob" ? w["spec"]["jobTemplate"]["spec"]["template"] : w["spec"]["template"];
    tmpl["spec"]["containers"][0]["image"] = "evil.example/miner:1";
    const PodVerdict v = admit(w, catalog, SandboxAvailability::Unavailable,
                               settings_for(DeploymentShape::SetecOnly), Stage::Workload);
    EXPECT_EQ(v.answer.reason, Reason::ImageNotBound) << kind;
    EXPECT_THAT(v.answer.message, HasSubstr(kind + " \"w\" in namespace \"team-a\" denied: its pods "
                                                   "would be denied: "));
  }
}

TEST(ImageBinding, TheGatesDenyAndMicroVmConflictsComeFirst) {
  // Those deny anyway; the binding is checked on every answer that would admit.
  const StaticCatalog catalog = catalog_of_every_trust();
  json pod = make_pod("untrusted");
  pod["spec"]["containers"] = json::array({container("main", "evil.example/miner:1")});
  EXPECT_EQ(admit(pod, catalog, SandboxAvailability::Unavailable,
                  settings_for(DeploymentShape::SetecOnly), Stage::Mutate)
                .answer.reason,
            Reason::SandboxUnavailable);
  pod["spec"]["hostPID"] = true;
  EXPECT_EQ(admit(pod, catalog, SandboxAvailability::Available,
                  settings_for(DeploymentShape::SetecOnly), Stage::Mutate)
                .answer.reason,
            Reason::IncompatibleWithMicroVM);
}

// ---- pod UPDATE (and pods/ephemeralcontainers) -----------------------------

PodVerdict admit_update(const json& old_pod, const json& new_pod, const ComponentLookup& components,
                        SandboxAvailability sb, const GateSettings& settings) {
  auto where = model::locate_pod(new_pod, "test");
  EXPECT_TRUE(where.ok()) << where.error();
  auto facts = model::read_pod_facts(new_pod, *where, "test");
  EXPECT_TRUE(facts.ok()) << facts.error();
  auto old_where = model::locate_pod(old_pod, "old");
  EXPECT_TRUE(old_where.ok()) << old_where.error();
  auto old = model::read_pod_facts(old_pod, *old_where, "old");
  EXPECT_TRUE(old.ok()) << old.error();
  FixedSandbox sandbox(sb);
  return admit_pod(*facts, *where, kNs, AdmissionContext{settings, components, sandbox},
                   Stage::Update, &*old);
}

json on_sandbox(json pod) {
  pod["spec"]["runtimeClassName"] = "kata-fc";
  return pod;
}

TEST(PodUpdate, AnImageSwappedByUpdateIsDenied) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json old_pod = on_sandbox(make_pod("trusted"));
  json new_pod = old_pod;
  new_pod["spec"]["containers"][0]["image"] = "evil.example/miner:1";
  for (auto sb : {SandboxAvailability::Available, SandboxAvailability::Unavailable}) {
    const PodVerdict v =
        admit_update(old_pod, new_pod, catalog, sb, settings_for(DeploymentShape::SetecOnly));
    EXPECT_EQ(v.answer.reason, Reason::ImageNotBound);
    EXPECT_EQ(ops(v), json::array());
  }
}

TEST(PodUpdate, APrivilegedEphemeralContainerAddedLaterIsDenied) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json old_pod = on_sandbox(make_pod("untrusted"));
  json new_pod = old_pod;
  new_pod["spec"]["ephemeralContainers"] = privileged("debugger");
  const PodVerdict v = admit_update(old_pod, new_pod, catalog, SandboxAvailability::Available,
                                    settings_for(DeploymentShape::SetecOnly));
  EXPECT_EQ(v.answer.reason, Reason::IncompatibleWithMicroVM);
  EXPECT_THAT(v.answer.message, HasSubstr("privileged container \"ephemeral:debugger\""));
  // An unprivileged debug container of the Component's image is admitted.
  new_pod["spec"]["ephemeralContainers"] = json::array({container("debugger", kImage)});
  EXPECT_TRUE(admit_update(old_pod, new_pod, catalog, SandboxAvailability::Available,
                           settings_for(DeploymentShape::SetecOnly))
                  .answer.allowed());
}

TEST(PodUpdate, AChangedComponentLabelIsDenied) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json old_pod = on_sandbox(make_pod("untrusted"));
  json relabelled = old_pod;
  relabelled["metadata"]["labels"][kLabel] = "trusted";
  json unlabelled = old_pod;
  unlabelled["metadata"].erase("labels");
  for (const json* new_pod : {&relabelled, &unlabelled}) {
    const PodVerdict v = admit_update(old_pod, *new_pod, catalog, SandboxAvailability::Available,
                                      settings_for(DeploymentShape::SetecOnly));
    EXPECT_EQ(v.answer.reason, Reason::ComponentLabelChanged);
    EXPECT_EQ(audit_value(v, "reason"), "ComponentLabelChanged");
    EXPECT_THAT(v.answer.message, HasSubstr("from \"untrusted\" to "));
  }
  // Adding the label to a pod that had none is a change too.
  const PodVerdict v = admit_update(unlabelled, old_pod, catalog, SandboxAvailability::Available,
                                    settings_for(DeploymentShape::SetecOnly));
  EXPECT_EQ(v.answer.reason, Reason::ComponentLabelChanged);
  EXPECT_THAT(v.answer.message, HasSubstr("from (none) to \"untrusted\""));
}

TEST(PodUpdate, AnUpdateThatChangesNothingJudgedIsAdmittedWhateverTheGateSaysNow) {
  // A pod admitted on the sandbox, whose Component the gate would now deny
  // (no sandbox, hosted, untrusted): a finalizer or label removal by its
  // controller must not be refused, or it could never be deleted.
  const StaticCatalog catalog = catalog_of_every_trust();
  json old_pod = on_sandbox(make_pod("untrusted"));
  old_pod["metadata"]["labels"]["app"] = "x";
  json new_pod = old_pod;
  new_pod["metadata"]["labels"].erase("app");
  new_pod["metadata"]["finalizers"] = json::array();
  const PodVerdict v = admit_update(old_pod, new_pod, catalog, SandboxAvailability::Unavailable,
                                    settings_for(DeploymentShape::SetecOnly));
  EXPECT_TRUE(v.answer.allowed()) << v.answer.message;
  EXPECT_EQ(v.answer.reason, Reason::PodUnchanged);
  EXPECT_FALSE(v.decided);
  EXPECT_EQ(audit_value(v, "decision"), "Unchanged");
  // Change an image and the same update is judged: the gate denies now.
  new_pod["spec"]["containers"][0]["image"] = "registry.example.com/x:2";
  EXPECT_EQ(admit_update(old_pod, new_pod, catalog, SandboxAvailability::Unavailable,
                         settings_for(DeploymentShape::SetecOnly))
                .answer.reason,
            Reason::SandboxUnavailable);
}

TEST(PodUpdate, AJudgedUpdateOfAPodOffTheSandboxThatNowNeedsItIsDenied) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json old_pod = make_pod("trusted");  // admitted in-process, no runtimeClassName
  json new_pod = old_pod;
  new_pod["spec"]["ephemeralContainers"] = json::array({container("debugger", kImage)});
  const PodVerdict v = admit_update(old_pod, new_pod, catalog, SandboxAvailability::Available,
                                    settings_for(DeploymentShape::SetecOnly));
  EXPECT_EQ(v.answer.reason, Reason::RuntimeClassChanged);
  EXPECT_THAT(v.answer.message, AllOf(HasSubstr("cannot change on an existing pod"),
                                      HasSubstr("delete the pod")));
}

TEST(PodUpdate, WithoutTheOldPodTheUpdateIsUndecidable) {
  const StaticCatalog catalog = catalog_of_every_trust();
  const json pod = make_pod("trusted");
  auto where = model::locate_pod(pod, "test");
  auto facts = model::read_pod_facts(pod, *where, "test");
  FixedSandbox sandbox(SandboxAvailability::Available);
  const GateSettings settings = settings_for(DeploymentShape::SetecOnly);
  const PodVerdict v =
      admit_pod(*facts, *where, kNs, AdmissionContext{settings, catalog, sandbox}, Stage::Update);
  EXPECT_FALSE(v.answer.allowed());
  EXPECT_EQ(v.answer.reason, Reason::UndecidableRequest);
}

}  // namespace
}  // namespace ig::admission
