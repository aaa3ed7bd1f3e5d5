// Reading pods and workload pod templates (src/model/pod.h): where the pod
// template sits for each kind, the facts the gate's callers need, and
// field-naming errors for wrong shapes.
#include "model/pod.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "model/document.h"

#ifndef IG_SOURCE_DIR
#error "IG_SOURCE_DIR must name the repository root"
#endif

namespace ig::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using json = nlohmann::json;

// (name, image) of every container, in order.
std::vector<std::pair<std::string, std::optional<std::string>>> images_of(const PodFacts& facts) {
  std::vector<std::pair<std::string, std::optional<std::string>>> out;
  for (const auto& c : facts.containers) out.emplace_back(c.name, c.image);
  return out;
}

void expect_same_facts(const PodFacts& a, const PodFacts& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.object_name, b.object_name);
  EXPECT_EQ(a.namespace_, b.namespace_);
  EXPECT_EQ(a.component, b.component);
  EXPECT_EQ(a.runtime_class, b.runtime_class);
  EXPECT_EQ(a.host_network, b.host_network);
  EXPECT_EQ(a.host_pid, b.host_pid);
  EXPECT_EQ(a.host_ipc, b.host_ipc);
  EXPECT_EQ(a.privileged_containers, b.privileged_containers);
  EXPECT_EQ(a.containers, b.containers);
  EXPECT_EQ(a.has_metadata, b.has_metadata);
  EXPECT_EQ(a.has_annotations, b.has_annotations);
  EXPECT_EQ(a.isolation_annotation, b.isolation_annotation);
}

// locate_pod + read_pod_facts, as every caller does; and take_pod_facts (the
// webhook's: strings moved out of the object) on a copy, which must give the
// same facts or the same error, in every test below.
Result<PodFacts> read_pod_facts(const json& object, std::string_view source) {
  auto where = locate_pod(object, source);
  if (!where) return fail(where.error());
  auto read = model::read_pod_facts(object, *where, source);
  json copy = object;
  auto copy_where = locate_pod(copy, source);
  EXPECT_TRUE(copy_where.ok());
  if (copy_where) {
    auto taken = take_pod_facts(copy, *copy_where, source);
    EXPECT_EQ(read.ok(), taken.ok());
    if (read.ok() && taken.ok()) {
      expect_same_facts(*read, *taken);
    } else if (!read.ok() && !taken.ok()) {
      EXPECT_EQ(read.error(), taken.error());
    }
  }
  return read;
}

json load_pod_example(const std::string& name) {
  auto doc = load_single_document_file(std::string(IG_SOURCE_DIR) + "/examples/pods/" + name);
  EXPECT_TRUE(doc.ok()) << doc.error();
  return doc.ok() ? *doc : json();
}

json pod_spec() {
  return json{{"containers", json::array({{{"name", "main"}, {"image", "busybox"}}})}};
}

json pod_template(const std::string& component = "report-parser") {
  return json{{"metadata", {{"labels", {{std::string(kComponentLabel), component}}}}},
              {"spec", pod_spec()}};
}

json pod(const std::string& component = "report-parser") {
  json p = pod_template(component);
  p["apiVersion"] = "v1";
  p["kind"] = "Pod";
  p["metadata"]["name"] = "p";
  p["metadata"]["namespace"] = "team-a";
  return p;
}

json workload(const std::string& api_version, const std::string& kind) {
  json w = {{"apiVersion", api_version},
            {"kind", kind},
            {"metadata", {{"name", "w"}, {"namespace", "team-b"}}}};
  if (kind == "CronJob") {
    w["spec"] = {{"schedule", "* * * * *"}, {"jobTemplate", {{"spec", {{"template", pod_template()}}}}}};
  } else {
    w["spec"] = {{"template", pod_template()}};
  }
  return w;
}

// ---- locate_pod ----------------------------------------------------------

TEST(LocatePod, APodIsItsOwnTemplateAtTheRoot) {
  const json p = pod();
  auto where = locate_pod(p, "pod.yaml");
  ASSERT_TRUE(where.ok()) << where.error();
  EXPECT_EQ(where->kind, ObjectKind::Pod);
  EXPECT_EQ(where->pod, &p);
  EXPECT_EQ(where->pointer, "");
  EXPECT_EQ(where->field_path, "");
}

struct WorkloadCase {
  const char* api_version;
  const char* kind;
  ObjectKind expected;
  const char* pointer;
  const char* field_path;
};

void PrintTo(const WorkloadCase& c, std::ostream* os) { *os << c.kind; }

class LocatePodInWorkload : public ::testing::TestWithParam<WorkloadCase> {};

TEST_P(LocatePodInWorkload, FindsThePodTemplateWithItsPointerAndFieldPath) {
  const auto& c = GetParam();
  const json w = workload(c.api_version, c.kind);
  auto where = locate_pod(w, "w.yaml");
  ASSERT_TRUE(where.ok()) << where.error();
  EXPECT_EQ(where->kind, c.expected);
  EXPECT_EQ(where->pointer, c.pointer);
  EXPECT_EQ(where->field_path, c.field_path);
  EXPECT_EQ(where->pod, &w.at(json::json_pointer(c.pointer)));
  EXPECT_EQ(to_string(where->kind), c.kind);
}

TEST_P(LocatePodInWorkload, ReadsTheTemplatesLabelAndTheWorkloadsName) {
  const auto& c = GetParam();
  auto facts = read_pod_facts(workload(c.api_version, c.kind), "w.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->kind, c.expected);
  EXPECT_EQ(facts->object_name, "w");
  EXPECT_EQ(facts->namespace_, "team-b");
  EXPECT_EQ(facts->component, std::optional<std::string>("report-parser"));
  EXPECT_TRUE(facts->has_metadata);
  EXPECT_FALSE(facts->has_annotations);
}

TEST_P(LocatePodInWorkload, WrongApiVersionIsAnErrorNamingTheExpectedOne) {
  const auto& c = GetParam();
  json w = workload(c.api_version, c.kind);
  w["apiVersion"] = "extensions/v1beta1";
  auto where = locate_pod(w, "w.yaml");
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.error(), std::string("w.yaml: apiVersion: expected ") + c.api_version +
                               " for kind " + c.kind);
}

TEST_P(LocatePodInWorkload, MissingTemplateIsAnErrorNamingTheField) {
  const auto& c = GetParam();
  json w = workload(c.api_version, c.kind);
  w["spec"].erase(c.expected == ObjectKind::CronJob ? "jobTemplate" : "template");
  auto where = locate_pod(w, "w.yaml");
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.error(), std::string("w.yaml: ") +
                               (c.expected == ObjectKind::CronJob ? "spec.jobTemplate"
                                                                  : "spec.template") +
                               ": required for kind " + c.kind);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, LocatePodInWorkload,
    ::testing::Values(
        WorkloadCase{"apps/v1", "Deployment", ObjectKind::Deployment, "/spec/template",
                     "spec.template"},
        WorkloadCase{"apps/v1", "StatefulSet", ObjectKind::StatefulSet, "/spec/template",
                     "spec.template"},
        WorkloadCase{"apps/v1", "DaemonSet", ObjectKind::DaemonSet, "/spec/template",
                     "spec.template"},
        WorkloadCase{"apps/v1", "ReplicaSet", ObjectKind::ReplicaSet, "/spec/template",
                     "spec.template"},
        WorkloadCase{"batch/v1", "Job", ObjectKind::Job, "/spec/template", "spec.template"},
        WorkloadCase{"batch/v1", "CronJob", ObjectKind::CronJob, "/spec/jobTemplate/spec/template",
                     "spec.jobTemplate.spec.template"}),
    [](const auto& info) { return std::string(info.param.kind); });

TEST(LocatePod, APodWithAnotherApiVersionIsAnError) {
  json p = pod();
  p["apiVersion"] = "v2";
  auto where = locate_pod(p, "pod.yaml");
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.error(), "pod.yaml: apiVersion: expected v1 for kind Pod");
}

TEST(LocatePod, ANonStringApiVersionIsAnError) {
  json p = pod();
  p["apiVersion"] = 1;
  auto where = locate_pod(p, "pod.yaml");
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.error(), "pod.yaml: apiVersion: expected v1 for kind Pod");
}

TEST(LocatePod, UnsupportedKindsAreErrorsNamingTheKind) {
  for (const char* kind : {"Service", "ConfigMap", "pod", "deployment"}) {
    auto where = locate_pod(json{{"apiVersion", "v1"}, {"kind", kind}}, "x.yaml");
    ASSERT_FALSE(where.ok()) << kind;
    EXPECT_EQ(where.error(), std::string("x.yaml: kind: \"") + kind +
                                 "\" is not a pod or workload; expected one of Pod, Deployment, "
                                 "StatefulSet, DaemonSet, ReplicaSet, Job, CronJob");
  }
}

TEST(LocatePod, MissingOrNonStringKindIsAnError) {
  auto a = locate_pod(json{{"apiVersion", "v1"}}, "x.yaml");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            "x.yaml: kind: expected one of Pod, Deployment, StatefulSet, DaemonSet, ReplicaSet, "
            "Job, CronJob");
  auto b = locate_pod(json{{"kind", 5}}, "x.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), a.error());
}

TEST(LocatePod, ANonMapObjectIsAnError) {
  auto where = locate_pod(json::array({1}), "x.yaml");
  ASSERT_FALSE(where.ok());
  EXPECT_EQ(where.error(), "x.yaml: object: expected a map, got a list");
}

TEST(LocatePod, ATemplateOfTheWrongTypeNamesTheField) {
  json w = workload("apps/v1", "Deployment");
  w["spec"]["template"] = json::array();
  auto a = locate_pod(w, "d.yaml");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "d.yaml: spec.template: expected a map, got a list");

  json cj = workload("batch/v1", "CronJob");
  cj["spec"]["jobTemplate"]["spec"] = "x";
  auto b = locate_pod(cj, "cj.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), "cj.yaml: spec.jobTemplate.spec: expected a map, got a string");
}

TEST(LocatePod, AMissingApiVersionIsAcceptedForTheKind) {
  json w = workload("apps/v1", "Deployment");
  w.erase("apiVersion");
  auto where = locate_pod(w, "d.yaml");
  ASSERT_TRUE(where.ok()) << where.error();
  EXPECT_EQ(where->kind, ObjectKind::Deployment);
}

// ---- read_pod_facts: the examples ----------------------------------------

TEST(PodFactsExamples, ReportParserPod) {
  auto facts = read_pod_facts(load_pod_example("report-parser-pod.yaml"), "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->kind, ObjectKind::Pod);
  EXPECT_EQ(facts->object_name, "report-parser-0");
  EXPECT_EQ(facts->namespace_, "team-a");
  EXPECT_EQ(facts->component, std::optional<std::string>("report-parser"));
  EXPECT_EQ(facts->runtime_class, std::nullopt);
  EXPECT_FALSE(facts->host_network);
  EXPECT_FALSE(facts->host_pid);
  EXPECT_FALSE(facts->host_ipc);
  EXPECT_TRUE(facts->privileged_containers.empty());
  EXPECT_TRUE(facts->has_metadata);
  EXPECT_FALSE(facts->has_annotations);
  EXPECT_EQ(facts->isolation_annotation, std::nullopt);
}

TEST(PodFactsExamples, DocsIndexerPodHasAnnotationsButNotOurs) {
  auto facts = read_pod_facts(load_pod_example("docs-indexer-pod.yaml"), "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->component, std::optional<std::string>("docs-indexer"));
  EXPECT_TRUE(facts->has_annotations);
  EXPECT_EQ(facts->isolation_annotation, std::nullopt);
}

TEST(PodFactsExamples, ReportParserDeployment) {
  auto facts = read_pod_facts(load_pod_example("report-parser-deployment.yaml"), "d.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->kind, ObjectKind::Deployment);
  EXPECT_EQ(facts->object_name, "report-parser");
  EXPECT_EQ(facts->component, std::optional<std::string>("report-parser"));
}

TEST(PodFactsExamples, LegacyExporterCronJob) {
  const json cj = load_pod_example("legacy-exporter-cronjob.yaml");
  auto where = locate_pod(cj, "cj.yaml");
  ASSERT_TRUE(where.ok()) << where.error();
  EXPECT_EQ(where->pointer, "/spec/jobTemplate/spec/template");
  auto facts = read_pod_facts(cj, *where, "cj.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->kind, ObjectKind::CronJob);
  EXPECT_EQ(facts->object_name, "legacy-exporter");
  EXPECT_EQ(facts->component, std::optional<std::string>("legacy-exporter"));
}

// ---- read_pod_facts: each fact -------------------------------------------

TEST(PodFacts, ReadsRuntimeClassAndHostNamespaces) {
  json p = pod();
  p["spec"]["runtimeClassName"] = "runc-fast";
  p["spec"]["hostNetwork"] = true;
  p["spec"]["hostPID"] = true;
  p["spec"]["hostIPC"] = true;
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->runtime_class, std::optional<std::string>("runc-fast"));
  EXPECT_TRUE(facts->host_network);
  EXPECT_TRUE(facts->host_pid);
  EXPECT_TRUE(facts->host_ipc);
}

TEST(PodFacts, ExplicitFalseAndNullHostNamespacesAreFalse) {
  json p = pod();
  p["spec"]["hostNetwork"] = false;
  p["spec"]["hostPID"] = nullptr;
  p["spec"]["runtimeClassName"] = nullptr;
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_FALSE(facts->host_network);
  EXPECT_FALSE(facts->host_pid);
  EXPECT_EQ(facts->runtime_class, std::nullopt);
}

TEST(PodFacts, ListsPrivilegedContainersOfEveryKindWithPrefixes) {
  json p = pod();
  auto privileged = [](const char* name) {
    return json{{"name", name}, {"securityContext", {{"privileged", true}}}};
  };
  p["spec"]["containers"] = json::array(
      {privileged("app"), {{"name", "sidecar"}, {"securityContext", {{"privileged", false}}}},
       {{"securityContext", {{"privileged", true}}}}});
  p["spec"]["initContainers"] = json::array({privileged("setup")});
  p["spec"]["ephemeralContainers"] = json::array({privileged("debugger")});
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_THAT(facts->privileged_containers,
              ElementsAre("app", "#2", "init:setup", "ephemeral:debugger"));
}

TEST(PodFacts, ListsEveryContainersImageInOrderWithPrefixes) {
  json p = pod();
  p["spec"]["containers"].push_back({{"name", "sidecar"}, {"image", "istio/proxyv2:1.20.0"}});
  p["spec"]["containers"].push_back({{"image", "unnamed:1"}});
  p["spec"]["initContainers"] = json::array({{{"name", "setup"}, {"image", nullptr}}});
  p["spec"]["ephemeralContainers"] = json::array({{{"name", "debugger"}}});
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_THAT(images_of(*facts),
              ElementsAre(Pair("main", "busybox"), Pair("sidecar", "istio/proxyv2:1.20.0"),
                          Pair("#2", "unnamed:1"), Pair("init:setup", std::nullopt),
                          Pair("ephemeral:debugger", std::nullopt)));
  EXPECT_TRUE(facts->containers[3].init);
  EXPECT_TRUE(facts->containers[4].ephemeral);
}

TEST(PodFacts, ReadsTheImagesOfATemplate) {
  json w = workload("batch/v1", "CronJob");
  auto facts = read_pod_facts(w, "cj.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_THAT(images_of(*facts), ElementsAre(Pair("main", "busybox")));
}

TEST(PodFacts, ContainersWithoutSecurityContextAreNotPrivileged) {
  json p = pod();
  p["spec"]["containers"].push_back({{"name", "b"}, {"securityContext", nullptr}});
  p["spec"]["containers"].push_back({{"name", "c"}, {"securityContext", {{"runAsUser", 1}}}});
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_TRUE(facts->privileged_containers.empty());
}

TEST(PodFacts, ReadsOurAnnotationValue) {
  json p = pod();
  p["metadata"]["annotations"] = {{std::string(kIsolationAnnotation), "RequireSetec"},
                                  {"other", "x"}};
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_TRUE(facts->has_annotations);
  EXPECT_EQ(facts->isolation_annotation, std::optional<std::string>("RequireSetec"));
}

TEST(PodFacts, APodWithoutMetadataHasNoLabelAndNoAnnotations) {
  json p = {{"apiVersion", "v1"}, {"kind", "Pod"}, {"spec", pod_spec()}};
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_FALSE(facts->has_metadata);
  EXPECT_FALSE(facts->has_annotations);
  EXPECT_EQ(facts->component, std::nullopt);
  EXPECT_EQ(facts->object_name, "");
  EXPECT_EQ(facts->namespace_, "");
}

TEST(PodFacts, NullAnnotationsCountAsAbsent) {
  json p = pod();
  p["metadata"]["annotations"] = nullptr;
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_TRUE(facts->has_metadata);
  EXPECT_FALSE(facts->has_annotations);
}

TEST(PodFacts, ATemplateWithoutMetadataIsReportedForTheTemplateNotTheWorkload) {
  json w = workload("apps/v1", "Deployment");
  w["spec"]["template"].erase("metadata");
  auto facts = read_pod_facts(w, "d.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_FALSE(facts->has_metadata);
  EXPECT_EQ(facts->object_name, "w");  // the workload's own metadata still counts
  EXPECT_EQ(facts->component, std::nullopt);
}

TEST(PodFacts, GenerateNameIsShownWithAStar) {
  json p = pod();
  p["metadata"].erase("name");
  p["metadata"]["generateName"] = "report-parser-";
  auto facts = read_pod_facts(p, "pod.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->object_name, "report-parser-*");
}

TEST(PodFacts, TheLabelOfAWorkloadItselfIsNotTheTemplatesLabel) {
  json w = workload("apps/v1", "Deployment");
  w["spec"]["template"]["metadata"]["labels"].erase(std::string(kComponentLabel));
  w["metadata"]["labels"] = {{std::string(kComponentLabel), "report-parser"}};
  auto facts = read_pod_facts(w, "d.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->component, std::nullopt);
}

// ---- read_pod_facts: wrong shapes ----------------------------------------

struct ShapeCase {
  const char* name;
  const char* pointer;  // where to put the value
  json value;
  const char* error;    // expected message after "pod.yaml: "
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.name; }

class PodFactsWrongShape : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(PodFactsWrongShape, IsAnErrorNamingTheFieldAndTheExpectedType) {
  const auto& c = GetParam();
  json p = pod();
  p[json::json_pointer(c.pointer)] = c.value;
  Result<PodFacts> facts = Error{};
  ASSERT_NO_THROW(facts = read_pod_facts(p, "pod.yaml"));
  ASSERT_FALSE(facts.ok());
  EXPECT_EQ(facts.error(), std::string("pod.yaml: ") + c.error);
  EXPECT_EQ(facts.error().find('\n'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(
    Fields, PodFactsWrongShape,
    ::testing::Values(
        ShapeCase{"LabelsAsAList", "/metadata/labels", json::array({"a"}),
                  "metadata.labels: expected a map, got a list"},
        ShapeCase{"ComponentLabelAsANumber", "/metadata/labels/gibson.zeroroot.ai~1component",
                  json(5),
                  "metadata.labels[gibson.zeroroot.ai/component]: expected a string, got a number"},
        ShapeCase{"AnnotationsAsAString", "/metadata/annotations", json("x"),
                  "metadata.annotations: expected a map, got a string"},
        ShapeCase{"OurAnnotationAsABoolean", "/metadata/annotations",
                  json{{"gibson.zeroroot.ai/isolation", true}},
                  "metadata.annotations[gibson.zeroroot.ai/isolation]: expected a string, got a "
                  "boolean"},
        ShapeCase{"MetadataAsAList", "/metadata", json::array(),
                  "metadata: expected a map, got a list"},
        ShapeCase{"NameAsAMap", "/metadata/name", json::object(),
                  "metadata.name: expected a string, got a map"},
        ShapeCase{"HostNetworkAsAString", "/spec/hostNetwork", json("true"),
                  "spec.hostNetwork: expected a boolean, got a string"},
        ShapeCase{"HostPidAsANumber", "/spec/hostPID", json(1),
                  "spec.hostPID: expected a boolean, got a number"},
        ShapeCase{"HostIpcAsAString", "/spec/hostIPC", json("yes"),
                  "spec.hostIPC: expected a boolean, got a string"},
        ShapeCase{"RuntimeClassAsAList", "/spec/runtimeClassName", json::array(),
                  "spec.runtimeClassName: expected a string, got a list"},
        ShapeCase{"ContainersAsAMap", "/spec/containers", json{{"main", {{"image", "x"}}}},
                  "spec.containers: expected a list, got a map"},
        ShapeCase{"InitContainersAsAString", "/spec/initContainers", json("x"),
                  "spec.initContainers: expected a list, got a string"},
        ShapeCase{"EphemeralContainerAsAString", "/spec/ephemeralContainers",
                  json::array({"debug"}),
                  "spec.ephemeralContainers[0]: expected a map, got a string"},
        ShapeCase{"SecurityContextAsAList", "/spec/containers/0/securityContext", json::array(),
                  "spec.containers[0].securityContext: expected a map, got a list"},
        ShapeCase{"PrivilegedAsAString", "/spec/containers/0/securityContext",
                  json{{"privileged", "true"}},
                  "spec.containers[0].securityContext.privileged: expected a boolean, got a "
                  "string"},
        ShapeCase{"ImageAsAList", "/spec/containers/0/image", json::array({"x"}),
                  "spec.containers[0].image: expected a string, got a list"},
        ShapeCase{"ContainerNameAsANumber", "/spec/containers/0/name", json(3),
                  "spec.containers[0].name: expected a string, got a number"},
        ShapeCase{"SpecAsAList", "/spec", json::array(), "spec: expected a map, got a list"},
        ShapeCase{"SpecNull", "/spec", json(nullptr), "spec: required"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(PodFactsWrongShapeInTemplate, NamesTheTemplatePathOfTheField) {
  json w = workload("apps/v1", "Deployment");
  w["spec"]["template"]["metadata"]["labels"] = json::array();
  auto a = read_pod_facts(w, "d.yaml");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "d.yaml: spec.template.metadata.labels: expected a map, got a list");

  json cj = workload("batch/v1", "CronJob");
  cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["hostNetwork"] = "true";
  auto b = read_pod_facts(cj, "cj.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(),
            "cj.yaml: spec.jobTemplate.spec.template.spec.hostNetwork: expected a boolean, got a "
            "string");

  json j = workload("batch/v1", "Job");
  j["spec"]["template"]["spec"]["containers"] = json::object();
  auto c = read_pod_facts(j, "j.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "j.yaml: spec.template.spec.containers: expected a list, got a map");
}

TEST(PodFactsWrongShapeInTemplate, AWorkloadWithoutTemplateSpecIsAnError) {
  json w = workload("apps/v1", "StatefulSet");
  w["spec"]["template"].erase("spec");
  auto facts = read_pod_facts(w, "s.yaml");
  ASSERT_FALSE(facts.ok());
  EXPECT_EQ(facts.error(), "s.yaml: spec.template.spec: required");
}

TEST(PodFactsWrongShapeInTemplate, ReadsPrivilegedInitContainersOfATemplate) {
  json w = workload("apps/v1", "DaemonSet");
  w["spec"]["template"]["spec"]["initContainers"] =
      json::array({{{"name", "prep"}, {"securityContext", {{"privileged", true}}}}});
  auto facts = read_pod_facts(w, "ds.yaml");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_THAT(facts->privileged_containers, ElementsAre("init:prep"));
}

TEST(PodFacts, TakeMovesTheStringsItReadsOutAndKeepsTheShape) {
  json pod = {{"apiVersion", "v1"}, {"kind", "Pod"},
              {"metadata", {{"name", "a-name-longer-than-sixteen"}, {"namespace", "ns"},
                            {"labels", {{std::string(kComponentLabel), "comp"}, {"other", "kept"}}}}},
              {"spec", {{"runtimeClassName", "kata-fc"},
                        {"containers", json::array({{{"name", "c"}, {"image", "registry.example.com/x:1"}}})}}}};
  auto where = locate_pod(pod, "t");
  ASSERT_TRUE(where.ok()) << where.error();
  auto facts = take_pod_facts(pod, *where, "t");
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->object_name, "a-name-longer-than-sixteen");
  EXPECT_EQ(facts->component, "comp");
  EXPECT_EQ(facts->containers[0].image, "registry.example.com/x:1");
  EXPECT_EQ(pod["metadata"]["name"], "");  // moved out
  EXPECT_EQ(pod["spec"]["containers"][0]["image"], "");
  EXPECT_EQ(pod["metadata"]["labels"]["other"], "kept");  // not read: untouched
  EXPECT_EQ(pod["kind"], "Pod");
}

TEST(ObjectKindNames, EveryKindHasItsKubernetesName) {
  EXPECT_EQ(to_string(ObjectKind::Pod), "Pod");
  EXPECT_EQ(to_string(ObjectKind::Deployment), "Deployment");
  EXPECT_EQ(to_string(ObjectKind::StatefulSet), "StatefulSet");
  EXPECT_EQ(to_string(ObjectKind::DaemonSet), "DaemonSet");
  EXPECT_EQ(to_string(ObjectKind::ReplicaSet), "ReplicaSet");
  EXPECT_EQ(to_string(ObjectKind::Job), "Job");
  EXPECT_EQ(to_string(ObjectKind::CronJob), "CronJob");
}

}  // namespace
}  // namespace ig::model
