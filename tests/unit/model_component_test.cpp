// The Component custom resource as isolation-gate reads it
// (src/model/component.h): trust from spec.policy.content_trust, field-naming
// errors for wrong shapes, and the problems a strict caller refuses.
#include "model/component.h"

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
using policy::ContentTrust;

std::string example(const std::string& name) {
  return std::string(IG_SOURCE_DIR) + "/examples/components/" + name;
}

json load_example(const std::string& name) {
  auto doc = load_single_document_file(example(name));
  EXPECT_TRUE(doc.ok()) << doc.error();
  return doc.ok() ? *doc : json();
}

// A valid Component manifest to mutate in tests.
json component_doc() {
  return json::parse(R"({
    "apiVersion": "gibson.zeroroot.ai/v1alpha1",
    "kind": "Component",
    "metadata": {"name": "report-parser", "namespace": "team-a"},
    "spec": {"kind": "tool", "image": "registry.example.com/x:1", "policy": {"content_trust": "untrusted"}}
  })");
}

void expect_one_line(const std::string& message) {
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

// ---- the examples --------------------------------------------------------

TEST(ComponentExamples, ReportParserIsDeclaredUntrusted) {
  const std::string path = example("report-parser.yaml");
  auto c = decode_component(load_example("report-parser.yaml"), path);
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->name, "report-parser");
  EXPECT_EQ(c->namespace_, "team-a");
  EXPECT_EQ(c->kind, "tool");
  EXPECT_EQ(c->image, "registry.example.com/gibson/report-parser:1.4.2");
  EXPECT_EQ(c->trust_raw(), std::optional<std::string>("untrusted"));
  EXPECT_EQ(c->trust.trust, ContentTrust::Untrusted);
  EXPECT_TRUE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_TRUE(component_problems(*c, path).empty());
}

TEST(ComponentExamples, DocsIndexerIsDeclaredTrusted) {
  auto c = decode_component(load_example("docs-indexer.yaml"), "docs-indexer.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->name, "docs-indexer");
  EXPECT_EQ(c->kind, "agent");
  EXPECT_EQ(c->trust_raw(), std::optional<std::string>("trusted"));
  EXPECT_EQ(c->trust.trust, ContentTrust::Trusted);
  EXPECT_TRUE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_TRUE(component_problems(*c, "docs-indexer.yaml").empty());
}

TEST(ComponentExamples, LegacyExporterOmitsTrustSoItIsUnspecifiedAndNotDeclared) {
  auto c = decode_component(load_example("legacy-exporter.yaml"), "legacy-exporter.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->name, "legacy-exporter");
  EXPECT_EQ(c->kind, "plugin");
  EXPECT_EQ(c->trust_raw(), std::nullopt);
  EXPECT_EQ(c->trust.trust, ContentTrust::Unspecified);
  EXPECT_FALSE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_EQ(policy::effective_trust_name(c->trust.trust), "trusted");
  EXPECT_TRUE(component_problems(*c, "legacy-exporter.yaml").empty());
}

TEST(ComponentExamples, EveryExampleLooksLikeAComponent) {
  for (const char* name : {"report-parser.yaml", "docs-indexer.yaml", "legacy-exporter.yaml"}) {
    EXPECT_TRUE(looks_like_component(load_example(name))) << name;
  }
}

// ---- wrong types ---------------------------------------------------------

TEST(ComponentDecoding, ContentTrustAsAListNamesFileFieldAndExpectedType) {
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = json::array({"trusted"});
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(),
            "components/x.yaml: spec.policy.content_trust: expected a string, got a list");
  expect_one_line(c.error());
}

TEST(ComponentDecoding, ContentTrustAsABooleanNamesTheField) {
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = true;
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "x.yaml: spec.policy.content_trust: expected a string, got a boolean");
}

TEST(ComponentDecoding, PolicyAsAStringNamesFileFieldAndExpectedType) {
  json doc = component_doc();
  doc["spec"]["policy"] = "untrusted";
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "components/x.yaml: spec.policy: expected a map, got a string");
  expect_one_line(c.error());
}

TEST(ComponentDecoding, MissingMetadataNameNamesFileAndField) {
  json doc = component_doc();
  doc["metadata"].erase("name");
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "components/x.yaml: metadata.name: required, expected a non-empty string");
  expect_one_line(c.error());
}

TEST(ComponentDecoding, EmptyMetadataNameIsRefusedLikeAMissingOne) {
  json doc = component_doc();
  doc["metadata"]["name"] = "";
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "x.yaml: metadata.name: required, expected a non-empty string");
}

TEST(ComponentDecoding, MetadataNameAsANumberNamesTheField) {
  json doc = component_doc();
  doc["metadata"]["name"] = 7;
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "x.yaml: metadata.name: expected a string, got a number");
}

TEST(ComponentDecoding, MissingMetadataNamesTheField) {
  json doc = component_doc();
  doc.erase("metadata");
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "x.yaml: metadata: required, with metadata.name");
}

TEST(ComponentDecoding, SpecAsAListNamesFileFieldAndExpectedType) {
  json doc = component_doc();
  doc["spec"] = json::array({json::object()});
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "components/x.yaml: spec: expected a map, got a list");
  expect_one_line(c.error());
}

TEST(ComponentDecoding, ImageAndKindOfTheWrongTypeNameTheirFields) {
  json doc = component_doc();
  doc["spec"]["image"] = json::object();
  auto a = decode_component(doc, "x.yaml");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), "x.yaml: spec.image: expected a string, got a map");

  doc = component_doc();
  doc["spec"]["kind"] = 3;
  auto b = decode_component(doc, "x.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), "x.yaml: spec.kind: expected a string, got a number");
}

TEST(ComponentDecoding, AComponentWithoutSpecIsOmittedTrust) {
  json doc = component_doc();
  doc.erase("spec");
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->trust.trust, ContentTrust::Unspecified);
  EXPECT_FALSE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_EQ(c->kind, "");
  EXPECT_EQ(c->image, "");
}

TEST(ComponentDecoding, AComponentWithoutNamespaceKeepsItEmpty) {
  json doc = component_doc();
  doc["metadata"].erase("namespace");
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->namespace_, "");
}

// ---- unknown content_trust values ----------------------------------------

class UnknownContentTrust : public ::testing::TestWithParam<const char*> {};

TEST_P(UnknownContentTrust, DecodesAsInvalidAndFailsClosedWithAProblemNamingFieldValueAndValidValues) {
  const std::string value = GetParam();
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = value;
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->trust_raw(), std::optional<std::string>(value));
  EXPECT_FALSE(c->trust.valid);
  EXPECT_TRUE(c->trust.declared);
  EXPECT_EQ(c->trust.trust, ContentTrust::Untrusted);
  EXPECT_EQ(policy::effective_trust_name(c->trust.trust), "untrusted");

  auto problems = component_problems(*c, "components/x.yaml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_EQ(problems[0], "components/x.yaml: spec.policy.content_trust: \"" + value +
                             "\" is not a valid content trust; expected one of: trusted, "
                             "untrusted (or omit it to mean trusted)");
  expect_one_line(problems[0]);
}

INSTANTIATE_TEST_SUITE_P(Values, UnknownContentTrust,
                         ::testing::Values("maybe", "Trusted", " trusted", "UNTRUSTED",
                                           "untrusted "));

TEST(ComponentProblems, ALongInvalidValueIsCutInTheMessage) {
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = std::string(500, 'q');
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  auto problems = component_problems(*c, "x.yaml");
  ASSERT_EQ(problems.size(), 1u);
  // The one quoting rule (base/quote.h): cut after 253 bytes, the longest
  // Kubernetes name, so a real name is always shown whole.
  EXPECT_THAT(problems[0], HasSubstr("\"" + std::string(253, 'q') + "...\""));
  EXPECT_LT(problems[0].size(), 400u);
}

TEST(ComponentProblems, AnUnknownSpecKindIsAProblemNamingTheValidKinds) {
  json doc = component_doc();
  doc["spec"]["kind"] = "daemon";
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_THAT(component_problems(*c, "x.yaml"),
              ElementsAre("x.yaml: spec.kind: \"daemon\" is not a valid component kind; "
                          "expected one of: tool, agent, plugin, connector"));
}

TEST(ComponentProblems, ReportsBothAnInvalidTrustAndAnInvalidKind) {
  json doc = component_doc();
  doc["spec"]["kind"] = "daemon";
  doc["spec"]["policy"]["content_trust"] = "maybe";
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  auto problems = component_problems(*c, "x.yaml");
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_THAT(problems[0], HasSubstr("spec.policy.content_trust"));
  EXPECT_THAT(problems[1], HasSubstr("spec.kind"));
}

TEST(ComponentProblems, EveryValidKindPasses) {
  for (const char* kind : {"tool", "agent", "plugin", "connector"}) {
    json doc = component_doc();
    doc["spec"]["kind"] = kind;
    auto c = decode_component(doc, "x.yaml");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_TRUE(component_problems(*c, "x.yaml").empty()) << kind;
  }
}

// ---- omitted trust: absent, null, empty ----------------------------------

TEST(ComponentDecoding, NullContentTrustMeansOmitted) {
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = nullptr;
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->trust_raw(), std::nullopt);
  EXPECT_EQ(c->trust.trust, ContentTrust::Unspecified);
  EXPECT_FALSE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_TRUE(component_problems(*c, "x.yaml").empty());
}

TEST(ComponentDecoding, EmptyContentTrustMeansOmitted) {
  json doc = component_doc();
  doc["spec"]["policy"]["content_trust"] = "";
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->trust.trust, ContentTrust::Unspecified);
  EXPECT_FALSE(c->trust.declared);
  EXPECT_TRUE(c->trust.valid);
  EXPECT_TRUE(component_problems(*c, "x.yaml").empty());
}

TEST(ComponentDecoding, NullPolicyAndNullSpecMeanOmitted) {
  json doc = component_doc();
  doc["spec"]["policy"] = nullptr;
  auto a = decode_component(doc, "x.yaml");
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(a->trust.trust, ContentTrust::Unspecified);
  EXPECT_FALSE(a->trust.declared);

  doc["spec"] = nullptr;
  auto b = decode_component(doc, "x.yaml");
  ASSERT_TRUE(b.ok()) << b.error();
  EXPECT_EQ(b->trust.trust, ContentTrust::Unspecified);
}

TEST(ComponentDecoding, YamlNullAndTildeContentTrustMeanOmittedButQuotedNullIsInvalid) {
  for (const char* v : {"null", "~", ""}) {
    auto docs = parse_yaml_documents(
        std::string("apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\n"
                    "metadata: {name: a}\nspec:\n  policy:\n    content_trust: ") +
            v + "\n",
        "a.yaml");
    ASSERT_TRUE(docs.ok()) << docs.error();
    auto c = decode_component(docs->front(), "a.yaml");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_FALSE(c->trust.declared) << v;
    EXPECT_TRUE(c->trust.valid) << v;
  }
  auto docs = parse_yaml_documents(
      "apiVersion: gibson.zeroroot.ai/v1alpha1\nkind: Component\n"
      "metadata: {name: a}\nspec:\n  policy:\n    content_trust: \"null\"\n",
      "a.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  auto c = decode_component(docs->front(), "a.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_FALSE(c->trust.valid);
  EXPECT_EQ(c->trust.trust, ContentTrust::Untrusted);
}

// ---- not a Component -----------------------------------------------------

TEST(ComponentDecoding, APodIsNotAComponentAndTheErrorSaysWhatWasFound) {
  auto pod = load_single_document_file(std::string(IG_SOURCE_DIR) +
                                       "/examples/pods/report-parser-pod.yaml");
  ASSERT_TRUE(pod.ok()) << pod.error();
  auto c = decode_component(*pod, "pod.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(),
            "pod.yaml: not a Component: found apiVersion \"v1\", kind \"Pod\"; expected "
            "apiVersion gibson.zeroroot.ai/v1alpha1, kind Component");
  expect_one_line(c.error());
}

TEST(ComponentDecoding, ADocumentWithoutTypeMetaIsNotAComponent) {
  auto c = decode_component(json{{"metadata", {{"name", "x"}}}}, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(),
            "x.yaml: not a Component: found apiVersion (none), kind (none); expected "
            "apiVersion gibson.zeroroot.ai/v1alpha1, kind Component");
}

TEST(ComponentDecoding, AnotherVersionOfTheGroupIsNotDecoded) {
  json doc = component_doc();
  doc["apiVersion"] = "gibson.zeroroot.ai/v1beta1";
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.error(), HasSubstr("found apiVersion \"gibson.zeroroot.ai/v1beta1\""));
}

TEST(ComponentDecoding, NonMapDocumentsAreNotComponents) {
  auto a = decode_component(json::array({1, 2}), "x.yaml");
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(),
            "x.yaml: not a Component: expected a map with apiVersion "
            "gibson.zeroroot.ai/v1alpha1 and kind Component, got a list");
  auto b = decode_component(json("Component"), "x.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.error(), HasSubstr("got a string"));
}

TEST(ComponentDecoding, KindOfTheWrongTypeNamesTheField) {
  json doc = component_doc();
  doc["kind"] = json::array();
  auto c = decode_component(doc, "x.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.error(), "x.yaml: kind: expected a string, got a list");
}

// The caches hold 100,000s of Components: the entrypoint and an unusual
// content_trust are kept out of line, each setter keeping what the other set.
TEST(ComponentOutOfLine, TrustAsWrittenAndTheEntrypointSurviveEachOthersSettersAndCopies) {
  Component c;
  EXPECT_EQ(c.trust_raw(), std::nullopt);
  EXPECT_FALSE(c.entrypoint().command.has_value());
  c.set_trust_raw("maybe");
  c.set_entrypoint({std::vector<std::string>{"/bin/serve"}, std::nullopt, {{"/bin/check"}}});
  const Component copy = c;
  c.set_trust_raw("untrusted");
  EXPECT_EQ(copy.trust_raw(), std::optional<std::string>("maybe"));
  EXPECT_FALSE(copy.trust.valid);
  EXPECT_EQ(c.trust_raw(), std::optional<std::string>("untrusted"));
  EXPECT_TRUE(c.trust.valid && c.trust.declared);
  EXPECT_EQ(c.trust.trust, ContentTrust::Untrusted);
  for (const Component* x : {static_cast<const Component*>(&c), &copy}) {
    EXPECT_EQ(x->entrypoint().command, (std::vector<std::string>{"/bin/serve"}));
    EXPECT_EQ(x->entrypoint().exec, (std::vector<std::vector<std::string>>{{"/bin/check"}}));
  }
  c.set_trust_raw("");  // written, empty: omitted for the gate, "" as written
  EXPECT_EQ(c.trust_raw(), std::optional<std::string>(""));
  EXPECT_FALSE(c.trust.declared);
  c.set_entrypoint({});
  EXPECT_EQ(c.trust_raw(), std::optional<std::string>(""));
  EXPECT_TRUE(c.entrypoint().exec.empty());
  // Four strings, the trust and one pointer (bench/history.md §22).
  EXPECT_LE(sizeof(Component), 4 * sizeof(std::string) + 16);
}

TEST(LooksLikeComponent, RecognisesTheGroupAndKindOnly) {
  EXPECT_TRUE(looks_like_component(component_doc()));
  EXPECT_TRUE(looks_like_component(
      json{{"apiVersion", "gibson.zeroroot.ai/v1beta1"}, {"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(json{{"apiVersion", "v1"}, {"kind", "Pod"}}));
  EXPECT_FALSE(looks_like_component(
      json{{"apiVersion", "example.com/v1"}, {"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(
      json{{"apiVersion", "gibson.zeroroot.ai"}, {"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(
      json{{"apiVersion", "gibson.zeroroot.ai.evil/v1"}, {"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(json{{"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(
      json{{"apiVersion", "gibson.zeroroot.ai/v1alpha1"}, {"kind", "component"}}));
  EXPECT_FALSE(looks_like_component(
      json{{"apiVersion", 1}, {"kind", "Component"}}));
  EXPECT_FALSE(looks_like_component(json::array()));
  EXPECT_FALSE(looks_like_component(json(nullptr)));
}

// ---- spec.image ------------------------------------------------------------

TEST(ComponentImage, AnInvalidSpecImageIsAProblemNamingTheField) {
  json doc = component_doc();
  doc["spec"]["image"] = "Registry.Example/UPPER:1";
  auto c = decode_component(doc, "components/x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  auto problems = component_problems(*c, "components/x.yaml");
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("components/x.yaml: spec.image: \"Registry.Example/UPPER:1\" "
                                     "is not a valid image reference"));
  expect_one_line(problems[0]);
}

TEST(ComponentImage, ValidAndOmittedSpecImagesAreNoProblem) {
  for (const char* image : {"registry.example.com/x:1", "nginx", "reg:5000/a/b:c",
                            "reg.example/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}) {
    json doc = component_doc();
    doc["spec"]["image"] = image;
    auto c = decode_component(doc, "x.yaml");
    ASSERT_TRUE(c.ok()) << c.error();
    EXPECT_TRUE(component_problems(*c, "x.yaml").empty()) << image;
  }
  json doc = component_doc();
  doc["spec"].erase("image");
  auto c = decode_component(doc, "x.yaml");
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(c->image, "");
  EXPECT_TRUE(component_problems(*c, "x.yaml").empty());
}

}  // namespace
}  // namespace ig::model
