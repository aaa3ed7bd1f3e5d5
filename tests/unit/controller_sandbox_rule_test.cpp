// Sandbox availability as a table (src/controller/sandbox_rule.h): the
// RuntimeClass, its setec label under each shape, and every way a Node can
// or cannot run it; plus the facts decoders on real-looking objects.
#include "controller/sandbox_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ig::controller {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;
using policy::DeploymentShape;
using policy::SandboxAvailability;

RuntimeClassFacts setec_rc() {
  RuntimeClassFacts rc;
  rc.name = "kata-fc";
  rc.handler = "kata-fc";
  rc.platform_operated = true;
  rc.node_selector = {{"setec.zeroroot.ai/runtime.firecracker", "true"}};
  rc.tolerations = {{"setec.zeroroot.ai/dedicated", "Exists", "", "NoSchedule"}};
  return rc;
}

NodeFacts capable(const std::string& name) {
  NodeFacts n;
  n.name = name;
  n.ready = true;
  n.labels = {{"setec.zeroroot.ai/runtime.firecracker", "true"}, {"kubernetes.io/os", "linux"}};
  return n;
}

struct Row {
  const char* name;
  std::function<void(std::optional<RuntimeClassFacts>&, std::vector<NodeFacts>&)> change;
  DeploymentShape shape;
  bool available;
  const char* reason;
};

class SandboxTable : public ::testing::TestWithParam<Row> {};

TEST_P(SandboxTable, DecidesAvailabilityAsDesignSection3Says) {
  const Row& row = GetParam();
  std::optional<RuntimeClassFacts> rc = setec_rc();
  std::vector<NodeFacts> nodes = {capable("n1")};
  row.change(rc, nodes);
  const auto got = assess_sandbox("kata-fc", rc, nodes, row.shape);
  EXPECT_EQ(policy::is_available(got.availability), row.available) << got.reason;
  EXPECT_THAT(got.reason, HasSubstr(row.reason));
  EXPECT_EQ(got.capable_nodes > 0, row.available);
}

const auto none = [](std::optional<RuntimeClassFacts>&, std::vector<NodeFacts>&) {};

INSTANTIATE_TEST_SUITE_P(
    Rows, SandboxTable,
    ::testing::Values(
        Row{"AllHold", none, DeploymentShape::SetecOnly, true, "available: 1 of 1 nodes"},
        Row{"NoRuntimeClass", [](auto& rc, auto&) { rc.reset(); }, DeploymentShape::SetecOnly,
            false, "RuntimeClass \"kata-fc\" not found"},
        Row{"NoRuntimeClassSelfHosted", [](auto& rc, auto&) { rc.reset(); },
            DeploymentShape::CustomerIsolation, false, "not found"},
        Row{"NoSetecLabelHosted", [](auto& rc, auto&) { rc->platform_operated = false; },
            DeploymentShape::SetecOnly, false, "has no label setec.zeroroot.ai/runtime"},
        Row{"NoSetecLabelSelfHosted", [](auto& rc, auto&) { rc->platform_operated = false; },
            DeploymentShape::CustomerIsolation, true, "available"},
        Row{"NoNodes", [](auto&, auto& n) { n.clear(); }, DeploymentShape::SetecOnly, false,
            "no node can run"},
        Row{"NodeNotReady", [](auto&, auto& n) { n[0].ready = false; }, DeploymentShape::SetecOnly,
            false, "0 Ready"},
        Row{"NodeCordoned", [](auto&, auto& n) { n[0].unschedulable = true; },
            DeploymentShape::SetecOnly, false, "0 schedulable"},
        Row{"NodeWithoutTheSelectorLabel", [](auto&, auto& n) { n[0].labels.clear(); },
            DeploymentShape::SetecOnly, false, "0 matching its nodeSelector"},
        Row{"NodeSelectorValueDiffers",
            [](auto&, auto& n) { n[0].labels["setec.zeroroot.ai/runtime.firecracker"] = "false"; },
            DeploymentShape::SetecOnly, false, "0 matching"},
        Row{"NoSelectorMeansAnyNode",
            [](auto& rc, auto& n) {
              rc->node_selector.clear();
              n[0].labels.clear();
            },
            DeploymentShape::SetecOnly, true, "available"},
        Row{"UntoleratedNoSchedule",
            [](auto&, auto& n) { n[0].taints = {{"gpu", "yes", "NoSchedule"}}; },
            DeploymentShape::SetecOnly, false, "untolerated"},
        Row{"UntoleratedNoExecute",
            [](auto&, auto& n) { n[0].taints = {{"node.kubernetes.io/unreachable", "", "NoExecute"}}; },
            DeploymentShape::SetecOnly, false, "untolerated"},
        Row{"PreferNoScheduleIsIgnored",
            [](auto&, auto& n) { n[0].taints = {{"gpu", "yes", "PreferNoSchedule"}}; },
            DeploymentShape::SetecOnly, true, "available"},
        Row{"ToleratedTaint",
            [](auto&, auto& n) { n[0].taints = {{"setec.zeroroot.ai/dedicated", "x", "NoSchedule"}}; },
            DeploymentShape::SetecOnly, true, "available"},
        Row{"ToleratedForAnotherEffectOnly",
            [](auto&, auto& n) { n[0].taints = {{"setec.zeroroot.ai/dedicated", "x", "NoExecute"}}; },
            DeploymentShape::SetecOnly, false, "untolerated"},
        Row{"OneGoodNodeAmongBadOnes",
            [](auto&, auto& n) {
              n[0].ready = false;
              n.push_back(capable("n2"));
              n.back().unschedulable = true;
              n.push_back(capable("n3"));
            },
            DeploymentShape::SetecOnly, true, "1 of 3 nodes"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(Tolerations, FollowTheKubernetesMatchingRules) {
  const Taint t{"k", "v", "NoSchedule"};
  EXPECT_TRUE(tolerates({"k", "Equal", "v", "NoSchedule"}, t));
  EXPECT_TRUE(tolerates({"k", "Equal", "v", ""}, t));        // any effect
  EXPECT_FALSE(tolerates({"k", "Equal", "w", ""}, t));       // other value
  EXPECT_TRUE(tolerates({"k", "Exists", "", ""}, t));
  EXPECT_TRUE(tolerates({"", "Exists", "", ""}, t));         // tolerates everything
  EXPECT_FALSE(tolerates({"", "Equal", "", ""}, t));
  EXPECT_FALSE(tolerates({"k", "Exists", "", "NoExecute"}, t));
  EXPECT_FALSE(tolerates({"k", "Bogus", "v", ""}, t));       // unknown operator: no
}

TEST(Decoders, ReadARuntimeClassAndANodeAsTheApiSendsThem) {
  const json rc = json::parse(R"({
    "apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "handler": "kata-fc",
    "metadata": {"name": "kata-fc", "resourceVersion": "7",
                 "labels": {"setec.zeroroot.ai/runtime": "firecracker"}},
    "scheduling": {"nodeSelector": {"setec.zeroroot.ai/runtime.firecracker": "true"},
                   "tolerations": [{"key": "d", "operator": "Exists", "effect": "NoSchedule"}]}})");
  auto facts = decode_runtime_class(rc);
  ASSERT_TRUE(facts.ok()) << facts.error();
  EXPECT_EQ(facts->name, "kata-fc");
  EXPECT_TRUE(facts->platform_operated);
  EXPECT_EQ(facts->node_selector.at("setec.zeroroot.ai/runtime.firecracker"), "true");
  ASSERT_EQ(facts->tolerations.size(), 1u);
  EXPECT_EQ(facts->tolerations[0].op, "Exists");

  const json node = json::parse(R"({
    "apiVersion": "v1", "kind": "Node",
    "metadata": {"name": "n1", "labels": {"a": "b"}},
    "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoExecute"}]},
    "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                              {"type": "Ready", "status": "True"}]}})");
  auto n = decode_node(node);
  ASSERT_TRUE(n.ok()) << n.error();
  EXPECT_TRUE(n->ready);
  EXPECT_TRUE(n->unschedulable);
  ASSERT_EQ(n->taints.size(), 1u);
  EXPECT_EQ(n->taints[0].effect, "NoExecute");

  json unknown = node;
  unknown["status"]["conditions"][1]["status"] = "Unknown";
  EXPECT_FALSE(decode_node(unknown)->ready);
}

TEST(Decoders, ANodeFitIsTheRuleEvaluatedUnderOneProjection) {
  NodeProjection p;
  p.generation = 7;
  p.node_selector = {{"pool", "setec"}};
  p.tolerations = {{"dedicated", "Exists", "", ""}};
  const json node = json::parse(R"({
    "metadata": {"name": "n1", "labels": {"pool": "setec", "zone": "a"}},
    "spec": {"taints": [{"key": "dedicated", "effect": "NoSchedule"},
                        {"key": "gpu", "effect": "PreferNoSchedule"}]},
    "status": {"conditions": [{"type": "Ready", "status": "True"}]}})");
  auto fit = decode_node_fit(node, p);
  ASSERT_TRUE(fit.ok()) << fit.error();
  EXPECT_EQ(fit->projection, 7u);
  EXPECT_TRUE(fit->ready);
  EXPECT_FALSE(fit->unschedulable);
  EXPECT_TRUE(fit->selected);
  EXPECT_TRUE(fit->tolerated);  // PreferNoSchedule never excludes
  json other = node;
  other["metadata"]["labels"]["pool"] = "general";
  other["spec"]["taints"][0]["key"] = "other";
  EXPECT_FALSE(decode_node_fit(other, p)->selected);
  EXPECT_FALSE(decode_node_fit(other, p)->tolerated);
  EXPECT_FALSE(decode_node_fit(json{{"metadata", {{"name", "x"}}}, {"spec", {{"unschedulable", "yes"}}}}, p).ok());

  RuntimeClassFacts rc = setec_rc();
  EXPECT_FALSE(p.same_scheduling(rc));
  p.node_selector = rc.node_selector;
  p.tolerations = rc.tolerations;
  EXPECT_TRUE(p.same_scheduling(rc));
  rc.platform_operated = false;  // not part of the scheduling
  EXPECT_TRUE(p.same_scheduling(rc));
  EXPECT_FALSE(p.same_scheduling(std::nullopt));
  EXPECT_TRUE(NodeProjection{}.same_scheduling(std::nullopt));
}

TEST(Decoders, AWrongTypeIsAnErrorNamingTheField) {
  auto rc = decode_runtime_class(json{{"metadata", {{"name", "x"}}}, {"scheduling", {{"nodeSelector", {{"a", 1}}}}}});
  ASSERT_FALSE(rc.ok());
  EXPECT_THAT(rc.error(), HasSubstr("scheduling.nodeSelector.a: expected a string, got a number"));
  auto node = decode_node(json{{"metadata", {{"name", "x"}}}, {"spec", {{"unschedulable", "yes"}}}});
  ASSERT_FALSE(node.ok());
  EXPECT_THAT(node.error(), HasSubstr("spec.unschedulable: expected a boolean, got a string"));
  EXPECT_FALSE(decode_node(json{{"metadata", json::object()}}).ok());
  EXPECT_FALSE(decode_node(json::array()).ok());
}

}  // namespace
}  // namespace ig::controller
