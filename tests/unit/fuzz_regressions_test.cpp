// Every finding of the fuzz targets (tests/fuzz/, docs/security.md "Fuzzing
// and sanitizers") as a unit test of the code that was fixed, named after
// the target that found it. The inputs are also in the targets' seed corpora
// (tests/fuzz/corpus/<target>/regress-*), so every fuzz run replays them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "admission/catalog.h"
#include "admission/webhook.h"
#include "base/one_line.h"
#include "base/quote.h"
#include "kube/config.h"
#include "model/document.h"

namespace ig::model {
namespace {

using ::testing::HasSubstr;

std::string corpus_file(const std::string& target, const std::string& name) {
  std::ifstream in(std::string(IG_SOURCE_DIR) + "/tests/fuzz/corpus/" + target + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// component_fuzz, timeout: yaml-cpp 0.7's LoadAll loops forever, allocating a
// null document per turn, on a ',' outside a flow collection
// (jbeder/yaml-cpp#1040). Before the fix this never returned (and ran the
// process out of memory); now it is an error naming the position.
TEST(FuzzRegressions, ComponentFuzzYamlCommaOutsideFlowIsAnErrorNotAHang) {
  for (const std::string& text : {std::string(","), std::string(", *b]\n"), std::string("a: 1\n---\n,\n"),
                                 corpus_file("component_fuzz", "regress-yaml-comma-hang")}) {
    ASSERT_FALSE(text.empty());
    auto docs = parse_documents(text, "c.yaml");
    ASSERT_FALSE(docs) << text;
    EXPECT_THAT(docs.error(), HasSubstr("c.yaml: line "));
    EXPECT_THAT(docs.error(), HasSubstr("unexpected token"));
  }
}

TEST(FuzzRegressions, ComponentFuzzYamlCommasInsideFlowStillParse) {
  auto docs = parse_documents("a: [1, 2]\nb: {c: 3, d: 4}\n---\ne: f\n", "c.yaml");
  ASSERT_TRUE(docs) << docs.error();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0]["a"], json::array({1, 2}));
  EXPECT_EQ((*docs)[1]["e"], "f");
}

// component_fuzz and kubeconfig_fuzz, broken invariant "an error is one
// line": yaml-cpp's "unknown escape character: " quotes the byte itself (here
// a newline after a backslash in a double-quoted scalar).
TEST(FuzzRegressions, ComponentFuzzYamlErrorsAreOneLine) {
  for (const std::string& text : {std::string("a: \"\\\v\"\n"), std::string("a: \"\\\0\"\n", 8),
                                 corpus_file("component_fuzz", "regress-yaml-error-two-lines")}) {
    auto docs = parse_documents(text, "c.yaml");
    ASSERT_FALSE(docs) << text;
    EXPECT_EQ(docs.error().find('\n'), std::string::npos) << docs.error();
    EXPECT_EQ(docs.error().find('\0'), std::string::npos) << docs.error();
    EXPECT_THAT(docs.error(), HasSubstr("c.yaml: line "));
  }
}

TEST(FuzzRegressions, KubeconfigFuzzYamlErrorsAreOneLine) {
  const std::string path = ::testing::TempDir() + "/fuzz-regress-kubeconfig";
  {
    std::ofstream out(path, std::ios::binary);
    out << corpus_file("kubeconfig_fuzz", "regress-yaml-error-two-lines");
  }
  auto cfg = kube::kubeconfig_config(path, "");
  ASSERT_FALSE(cfg);
  EXPECT_EQ(cfg.error().find('\n'), std::string::npos) << cfg.error();
  EXPECT_THAT(cfg.error(), HasSubstr(path));
  EXPECT_THAT(cfg.error(), HasSubstr("not YAML"));
}

TEST(FuzzRegressions, OneLineEscapesControlBytesOnly) {
  EXPECT_EQ(one_line(std::string("a\nb\rc\td\0e\x7f\x01 \xc3\xa9", 14)), "a\\nb\\rc\\td\\x00e\\x7f\\x01 \xc3\xa9");
  EXPECT_EQ(quote("two\nlines"), "\"two\\nlines\"");
}

// append_quoted() is quote() appended in place (no temporary): the same
// bytes for control bytes, UTF-8, the cut at kMaxQuoted (never inside a
// sequence), and after text already in the buffer.
TEST(FuzzRegressions, AppendQuotedWritesWhatQuoteReturns) {
  const std::string long_ascii(400, 'a');
  std::string long_utf8(kMaxQuoted - 1, 'x');
  long_utf8 += "\xc3\xa9\xe2\x98\x83 tail";  // a sequence across the cut
  for (const std::string& v : {std::string(), std::string("plain"), std::string("two\nlines\t\x01\x7f", 12),
                               std::string("nul \0 byte", 10), std::string("\xff\xc3 bad utf-8"), long_ascii,
                               long_utf8, std::string(kMaxQuoted, 'b'), std::string(kMaxQuoted + 1, 'c')}) {
    std::string out = "prefix ";
    append_quoted(out, v);
    EXPECT_EQ(out, "prefix " + quote(v)) << v;
  }
  EXPECT_EQ(quote(long_ascii), "\"" + std::string(kMaxQuoted, 'a') + "...\"");
}

// admission_review_fuzz, "allowed: true for an undecidable request": a
// Component whose metadata.namespace is not request.namespace was validated
// (the pod endpoints already refused such an object; the API server never
// sends one). Byte 0 of the corpus file is the fuzz target's route byte.
TEST(FuzzRegressions, AdmissionFuzzComponentInAnotherNamespaceIsUndecidable) {
  admission::StaticCatalog catalog;
  admission::FixedSandbox sandbox(policy::SandboxAvailability::Available);
  admission::GateSettings settings;
  settings.runtime_class = "kata-fc";
  settings.own_namespace = "isolation-gate-system";
  admission::Webhook hook(admission::AdmissionContext{settings, catalog, sandbox});
  const std::string input = corpus_file("admission_review_fuzz", "regress-component-namespace-mismatch");
  ASSERT_GT(input.size(), 1u);
  auto response = hook.serve({"POST", "/validate/components", "application/json", input.substr(1)});
  ASSERT_EQ(response.status, 200u) << response.body;
  auto body = nlohmann::json::parse(response.body);
  EXPECT_EQ(body["response"]["allowed"], false) << response.body;
  EXPECT_THAT(body["response"]["status"]["message"].get<std::string>(), HasSubstr("is not request.namespace"));
}

}  // namespace
}  // namespace ig::model
