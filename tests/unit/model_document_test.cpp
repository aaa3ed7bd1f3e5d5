// Decoding Kubernetes documents (JSON and YAML) safely: limits, scalar
// resolution, multi-document streams and error messages (src/model/document.h).
#include "model/document.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace ig::model {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr std::size_t kDeep = 100'000;
constexpr std::size_t kMiB = 1024 * 1024;

// A loose wall-clock bound: it does not measure speed, it only catches an
// exponential or unbounded decode (which would take minutes or forever).
constexpr auto kGenerousBound = std::chrono::seconds(30);

std::string repeat(std::string_view unit, std::size_t n) {
  std::string out;
  out.reserve(unit.size() * n);
  for (std::size_t i = 0; i < n; ++i) out.append(unit);
  return out;
}

template <typename F>
auto timed(F&& f, std::chrono::steady_clock::duration& took) {
  const auto start = std::chrono::steady_clock::now();
  auto result = f();
  took = std::chrono::steady_clock::now() - start;
  return result;
}

// A file under the test temp dir, removed at scope exit.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_(std::filesystem::path(::testing::TempDir()) / ("ig_model_doc_" + name)) {
    std::ofstream out(path_, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  }
  ~TempFile() {
    std::error_code ec;
    std::filesystem::remove(path_, ec);
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

// ---- nesting limits ------------------------------------------------------

TEST(DocumentDecoding, RejectsJsonArraysNestedDeeperThanTheLimitWithoutCrashing) {
  const std::string text = repeat("[", kDeep) + repeat("]", kDeep);
  std::chrono::steady_clock::duration took{};
  auto doc = timed([&] { return parse_json(text, "deep.json"); }, took);
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.error(), StartsWith("deep.json: "));
  EXPECT_THAT(doc.error(), HasSubstr("JSON nested deeper than 128 levels"));
  EXPECT_LT(took, kGenerousBound);
}

TEST(DocumentDecoding, RejectsJsonObjectsNestedDeeperThanTheLimitWithoutCrashing) {
  const std::string text = repeat("{\"a\":", kDeep) + "1" + repeat("}", kDeep);
  auto doc = parse_json(text, "deep-objects.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.error(), "deep-objects.json: JSON nested deeper than 128 levels");
}

TEST(DocumentDecoding, RejectsUnterminatedDeepJsonWithoutCrashing) {
  // No closing brackets at all: the pre-scan still stops at the limit.
  auto doc = parse_json(repeat("{\"a\":", kDeep), "open.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.error(), HasSubstr("nested deeper than 128"));
}

TEST(DocumentDecoding, ParseDocumentsRoutesDeepJsonToTheJsonDepthCheck) {
  auto docs = parse_documents("  \n" + repeat("[", kDeep), "stdin");
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.error(), "stdin: JSON nested deeper than 128 levels");
}

TEST(DocumentDecoding, AcceptsJsonExactlyAtTheDepthLimit) {
  DecodeLimits limits;
  limits.max_depth = 8;
  auto ok = parse_json(repeat("[", 8) + repeat("]", 8), "eight", limits);
  ASSERT_TRUE(ok.ok()) << ok.error();
  auto too_deep = parse_json(repeat("[", 9) + repeat("]", 9), "nine", limits);
  ASSERT_FALSE(too_deep.ok());
  EXPECT_EQ(too_deep.error(), "nine: JSON nested deeper than 8 levels");
}

TEST(DocumentDecoding, RejectsYamlBlockSequencesNestedDeeperThanTheLimitWithoutCrashing) {
  // "- - - - ... x" on one line: 100,000 nested block sequences.
  const std::string text = repeat("- ", kDeep) + "x\n";
  std::chrono::steady_clock::duration took{};
  auto docs = timed([&] { return parse_yaml_documents(text, "deep-block.yaml"); }, took);
  ASSERT_FALSE(docs.ok());
  // yaml-cpp's own 500-level guard fires first (at column 1000 of line 1).
  EXPECT_EQ(docs.error(), "deep-block.yaml: line 1, column 1000: YAML nested too deeply");
  EXPECT_LT(took, kGenerousBound);
}

TEST(DocumentDecoding, RejectsYamlFlowSequencesNestedDeeperThanTheLimitWithoutCrashing) {
  const std::string text = "key: " + repeat("[", kDeep) + repeat("]", kDeep) + "\n";
  std::chrono::steady_clock::duration took{};
  auto docs = timed([&] { return parse_yaml_documents(text, "deep-flow.yaml"); }, took);
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("deep-flow.yaml: "));
  EXPECT_THAT(docs.error(), HasSubstr("YAML nested too deeply"));
  EXPECT_LT(took, kGenerousBound);
}

TEST(DocumentDecoding, RejectsYamlFlowMapsNestedDeeperThanTheLimitWithoutCrashing) {
  const std::string text = repeat("{a: ", kDeep) + "1" + repeat("}", kDeep) + "\n";
  auto docs = parse_yaml_documents(text, "deep-map.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("deep-map.yaml: "));
}

TEST(DocumentDecoding, RejectsYamlDeeperThanTheWalkLimitButShallowerThanYamlCppsGuard) {
  // 200 levels: under yaml-cpp's own 500-level guard, over our 128-level walk cap.
  const std::string text = repeat("[", 200) + repeat("]", 200) + "\n";
  auto docs = parse_yaml_documents(text, "mid.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("mid.yaml: line 1, column "));
  EXPECT_THAT(docs.error(), HasSubstr("nesting deeper than 128 levels"));
}

// ---- sizes ---------------------------------------------------------------

TEST(DocumentDecoding, DecodesATenMebibyteJsonStringValue) {
  const std::string big(10 * kMiB, 'x');
  auto doc = parse_json("{\"data\":\"" + big + "\"}", "big.json");
  ASSERT_TRUE(doc.ok()) << doc.error();
  ASSERT_TRUE((*doc)["data"].is_string());
  EXPECT_EQ((*doc)["data"].get_ref<const std::string&>().size(), 10 * kMiB);
}

TEST(DocumentDecoding, DecodesATenMebibyteYamlStringValue) {
  const std::string big(10 * kMiB, 'y');
  auto docs = parse_yaml_documents("data: " + big + "\n", "big.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  ASSERT_EQ(docs->size(), 1u);
  const json& data = docs->front()["data"];
  ASSERT_TRUE(data.is_string());
  EXPECT_EQ(data.get_ref<const std::string&>().size(), 10 * kMiB);
}

TEST(DocumentDecoding, RefusesASeventeenMebibyteFileNamingTheFile) {
  std::string text = "data: \"" + std::string(17 * kMiB, 'z') + "\"\n";
  TempFile file("seventeen.yaml", text);
  auto docs = load_documents_file(file.path());
  ASSERT_FALSE(docs.ok());
  EXPECT_EQ(docs.error(), file.path() + ": file is larger than 16777216 bytes");
}

TEST(DocumentDecoding, RefusesOversizedTextGivenDirectly) {
  DecodeLimits limits;
  limits.max_bytes = 10;
  auto j = parse_json("[1,2,3,4,5,6]", "small", limits);
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.error(), "small: input is larger than 10 bytes");
  auto y = parse_yaml_documents("a: 123456789", "small.yaml", limits);
  ASSERT_FALSE(y.ok());
  EXPECT_EQ(y.error(), "small.yaml: input is larger than 10 bytes");
}

TEST(DocumentDecoding, MissingFileErrorNamesTheFile) {
  const std::string path = ::testing::TempDir() + "/ig_model_doc_does_not_exist.yaml";
  auto docs = load_documents_file(path);
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith(path + ": cannot open"));
}

// ---- aliases -------------------------------------------------------------

TEST(DocumentDecoding, YamlBillionLaughsEndsWithTheValueCountError) {
  // 9 levels of 10 aliases each: 10^9 values if expanded.
  std::string text = "a0: &a0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n";
  for (int level = 1; level <= 9; ++level) {
    const std::string prev = "*a" + std::to_string(level - 1);
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? "," : "") + prev;
    text += "]\n";
  }
  std::chrono::steady_clock::duration took{};
  auto docs = timed([&] { return parse_yaml_documents(text, "lol.yaml"); }, took);
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("lol.yaml: "));
  EXPECT_THAT(docs.error(),
              HasSubstr("document too large: more than 1000000 values (after expanding aliases)"));
  EXPECT_LT(took, kGenerousBound);
}

TEST(DocumentDecoding, YamlBillionLaughsHonoursASmallerNodeLimit) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", *a" : "*a") + std::to_string(level - 1);
    text += "]\n";
  }
  DecodeLimits limits;
  limits.max_nodes = 500;
  auto docs = parse_yaml_documents(text, "lol.yaml", limits);
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), HasSubstr("more than 500 values"));
}

TEST(DocumentDecoding, YamlAliasCycleEndsInAnErrorWithoutCrashing) {
  auto docs = parse_yaml_documents("&x [1, *x]\n", "cycle.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("cycle.yaml: line 1, column "));
  EXPECT_THAT(docs.error(), HasSubstr("an alias that refers to itself"));
}

TEST(DocumentDecoding, YamlMapAliasCycleEndsInAnErrorWithoutCrashing) {
  auto docs = parse_yaml_documents("&m {self: *m, n: 1}\n", "cycle-map.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("cycle-map.yaml: line 1, column "));
  EXPECT_THAT(docs.error(), HasSubstr("an alias that refers to itself"));
}

TEST(DocumentDecoding, YamlAliasesThatStayWithinLimitsAreExpanded) {
  auto docs = parse_yaml_documents("base: &b {image: x, tag: \"1\"}\ncopy: *b\n", "alias.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  EXPECT_EQ(docs->front()["copy"], (json{{"image", "x"}, {"tag", "1"}}));
}

// ---- syntax errors -------------------------------------------------------

TEST(DocumentDecoding, InvalidUtf8InJsonIsAnError) {
  auto doc = parse_json("{\"name\":\"\xff\xfe\"}", "bad-utf8.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.error(), StartsWith("bad-utf8.json: invalid JSON: "));
}

TEST(DocumentDecoding, TruncatedUtf8SequenceInJsonIsAnError) {
  auto doc = parse_json("[\"\xe2\x82\"]", "trunc.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.error(), StartsWith("trunc.json: invalid JSON: "));
}

TEST(DocumentDecoding, JsonSyntaxErrorDropsNlohmannsExceptionPrefix) {
  auto doc = parse_json("{\"a\": }", "syntax.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_THAT(doc.error(), StartsWith("syntax.json: invalid JSON: "));
  EXPECT_THAT(doc.error(), Not(HasSubstr("[json.exception")));
  EXPECT_EQ(doc.error().find('\n'), std::string::npos);
}

TEST(DocumentDecoding, MalformedYamlErrorHasLineColumnAndSource) {
  auto docs = parse_yaml_documents("a: 1\nb: [1, 2\nc: 3\n", "broken.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), testing::MatchesRegex(
                                "broken\\.yaml: line [0-9]+, column [0-9]+: invalid YAML: .+"));
}

TEST(DocumentDecoding, MalformedYamlIndentationErrorHasLineColumnAndSource) {
  auto docs = parse_yaml_documents("metadata:\n  name: x\n bad: y\n", "indent.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("indent.yaml: line 3, column "));
  EXPECT_THAT(docs.error(), HasSubstr("invalid YAML: "));
}

TEST(DocumentDecoding, NonScalarYamlMapKeyIsAnError) {
  auto docs = parse_yaml_documents("? [a, b]\n: 1\n", "key.yaml");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.error(), StartsWith("key.yaml: line 1, column "));
  EXPECT_THAT(docs.error(), HasSubstr("map keys must be strings"));
}

// ---- scalar resolution ---------------------------------------------------

TEST(YamlScalarResolution, FollowsKubernetesYamlToJsonConversion) {
  auto docs = parse_yaml_documents(
      "quoted_true: \"true\"\n"
      "single_quoted_true: 'true'\n"
      "plain_true: true\n"
      "plain_false: false\n"
      "version: 1.4.2\n"
      "answer: 42\n"
      "negative: -7\n"
      "ratio: 0.5\n"
      "quoted_number: \"42\"\n"
      "null_word: null\n"
      "tilde: ~\n"
      "empty:\n"
      "text: hello world\n"
      "tagged: !!str 12\n",
      "scalars.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  ASSERT_EQ(docs->size(), 1u);
  const json& d = docs->front();
  EXPECT_EQ(d["quoted_true"], json("true"));
  EXPECT_EQ(d["single_quoted_true"], json("true"));
  EXPECT_EQ(d["plain_true"], json(true));
  EXPECT_EQ(d["plain_false"], json(false));
  EXPECT_EQ(d["version"], json("1.4.2"));
  ASSERT_TRUE(d["answer"].is_number_integer());
  EXPECT_EQ(d["answer"].get<std::int64_t>(), 42);
  EXPECT_EQ(d["negative"].get<std::int64_t>(), -7);
  ASSERT_TRUE(d["ratio"].is_number_float());
  EXPECT_DOUBLE_EQ(d["ratio"].get<double>(), 0.5);
  EXPECT_EQ(d["quoted_number"], json("42"));
  EXPECT_TRUE(d["null_word"].is_null());
  EXPECT_TRUE(d["tilde"].is_null());
  EXPECT_TRUE(d["empty"].is_null());
  EXPECT_EQ(d["text"], json("hello world"));
  EXPECT_EQ(d["tagged"], json("12"));
}

TEST(YamlScalarResolution, AnIntegerTooLargeForInt64BecomesAFloatNotAnError) {
  auto docs = parse_yaml_documents("big: 123456789012345678901234567890\n", "big.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  EXPECT_TRUE(docs->front()["big"].is_number_float());
}

TEST(YamlScalarResolution, LeadingPlusAndLoneSignsResolveSafely) {
  auto docs = parse_yaml_documents("plus: +5\nminus_word: -abc\nplus_alone: +\n", "signs.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  EXPECT_EQ(docs->front()["plus"], json(5));
  EXPECT_EQ(docs->front()["minus_word"], json("-abc"));
  EXPECT_EQ(docs->front()["plus_alone"], json("+"));
}

// ---- multi-document streams ---------------------------------------------

TEST(DocumentDecoding, MultiDocumentYamlYieldsEachDocumentAndDropsEmptyOnes) {
  auto docs = parse_documents("---\na: 1\n---\n---\nb: [x]\n...\n---\nc: true\n", "multi.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  ASSERT_EQ(docs->size(), 3u);
  EXPECT_EQ((*docs)[0], (json{{"a", 1}}));
  EXPECT_EQ((*docs)[1], (json{{"b", json::array({"x"})}}));
  EXPECT_EQ((*docs)[2], (json{{"c", true}}));
}

TEST(DocumentDecoding, ParseDocumentsReadsJsonWithExactJsonSemantics) {
  // YAML would turn "yes" in a flow map into... nothing special here, but a
  // JSON number 1.0 must stay a float and keys keep their exact spelling.
  auto docs = parse_documents("{\"on\": \"yes\", \"n\": 1.0}", "doc.json");
  ASSERT_TRUE(docs.ok()) << docs.error();
  ASSERT_EQ(docs->size(), 1u);
  EXPECT_EQ(docs->front()["on"], json("yes"));
  EXPECT_TRUE(docs->front()["n"].is_number_float());
}

TEST(DocumentDecoding, EmptyYamlStreamHasNoDocuments) {
  auto docs = parse_documents("# only a comment\n", "empty.yaml");
  ASSERT_TRUE(docs.ok()) << docs.error();
  EXPECT_TRUE(docs->empty());
}

TEST(DocumentDecoding, LoadSingleDocumentFileRequiresExactlyOne) {
  TempFile none("none.yaml", "# nothing\n");
  auto a = load_single_document_file(none.path());
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error(), none.path() + ": no document in file");

  TempFile two("two.yaml", "a: 1\n---\nb: 2\n");
  auto b = load_single_document_file(two.path());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error(), two.path() + ": expected one document, found 2");

  TempFile one("one.json", "{\"a\": [1, 2]}");
  auto c = load_single_document_file(one.path());
  ASSERT_TRUE(c.ok()) << c.error();
  EXPECT_EQ(*c, (json{{"a", {1, 2}}}));
}

// ---- json_nesting_depth --------------------------------------------------

TEST(JsonNestingDepth, CountsTheDeepestNestingOfBracketsAndBraces) {
  EXPECT_EQ(json_nesting_depth("", 10), 0u);
  EXPECT_EQ(json_nesting_depth("42", 10), 0u);
  EXPECT_EQ(json_nesting_depth("[]", 10), 1u);
  EXPECT_EQ(json_nesting_depth("{\"a\":[1,{\"b\":[]}],\"c\":{}}", 10), 4u);
  EXPECT_EQ(json_nesting_depth("[[]][[[]]]", 10), 3u);
}

TEST(JsonNestingDepth, IgnoresBracketsInsideStrings) {
  EXPECT_EQ(json_nesting_depth(R"({"a":"[[[[{{{{"})", 10), 1u);
  EXPECT_EQ(json_nesting_depth(R"(["]]]]", ["[[[["]])", 10), 2u);
}

TEST(JsonNestingDepth, IgnoresEscapedQuotesInsideStrings) {
  // The escaped quote does not end the string, so the brackets stay inside it.
  EXPECT_EQ(json_nesting_depth(R"({"a":"\"[[[[\""})", 10), 1u);
  // An escaped backslash before the closing quote does end the string.
  EXPECT_EQ(json_nesting_depth(R"({"a":"\\", "b":[[1]]})", 10), 3u);
}

TEST(JsonNestingDepth, StopsAtLimitPlusOne) {
  const std::string deep = repeat("[", kDeep);
  EXPECT_EQ(json_nesting_depth(deep, 5), 6u);
  EXPECT_EQ(json_nesting_depth(deep, 128), 129u);
}

TEST(JsonNestingDepth, StrayClosersDoNotUnderflow) {
  EXPECT_EQ(json_nesting_depth("]]]]}}[", 10), 1u);
}

// ---- helpers -------------------------------------------------------------

TEST(JsonTypePhrase, NamesEveryJsonType) {
  EXPECT_EQ(json_type_phrase(json(nullptr)), "null");
  EXPECT_EQ(json_type_phrase(json::object()), "a map");
  EXPECT_EQ(json_type_phrase(json::array()), "a list");
  EXPECT_EQ(json_type_phrase(json("s")), "a string");
  EXPECT_EQ(json_type_phrase(json(true)), "a boolean");
  EXPECT_EQ(json_type_phrase(json(1)), "a number");
  EXPECT_EQ(json_type_phrase(json(1u)), "a number");
  EXPECT_EQ(json_type_phrase(json(1.5)), "a number");
}

TEST(DumpJson, NeverThrowsOnInvalidUtf8) {
  json j = std::string("a\xff" "b");
  std::string out;
  EXPECT_NO_THROW(out = dump_json(j));
  EXPECT_EQ(out, "\"a\xEF\xBF\xBD" "b\"");
}

}  // namespace
}  // namespace ig::model

namespace ig::model {
namespace {

// A duplicate key would let the last value win: "content_trust: untrusted"
// then "content_trust: trusted" made a Component trusted. Refused, in YAML
// (as kubectl's decoder does) and in JSON, at any depth, naming the key.
TEST(DocumentDecoding, RefusesDuplicateKeysInYamlNamingTheKeyAndTheLine) {
  const std::string text =
      "kind: Component\n"
      "spec:\n"
      "  policy:\n"
      "    content_trust: untrusted\n"
      "    content_trust: trusted\n";
  auto docs = parse_yaml_documents(text, "c.yaml");
  ASSERT_FALSE(docs);
  EXPECT_EQ(docs.error(), "c.yaml: line 5, column 5: duplicate key \"content_trust\"");
  // The same key in different maps, or once per document, is fine.
  auto ok = parse_yaml_documents("a: {k: 1}\nb: {k: 2}\n---\na: 3\n", "ok.yaml");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ(ok->size(), 2u);
}

TEST(DocumentDecoding, RefusesDuplicateKeysInJsonAtAnyDepth) {
  for (const std::string& text : {std::string(R"({"a":1,"a":2})"),
                                 std::string(R"({"spec":{"policy":{"content_trust":"untrusted","content_trust":"trusted"}}})"),
                                 std::string(R"([{"x":[{"k":1,"k":1}]}])")}) {
    auto doc = parse_json(text, "c.json");
    ASSERT_FALSE(doc) << text;
    EXPECT_THAT(doc.error(), HasSubstr("c.json: invalid JSON: duplicate key")) << text;
  }
  auto ok = parse_json(R"({"a":{"k":1},"b":{"k":2},"c":[{"k":1},{"k":2}]})", "ok.json");
  ASSERT_TRUE(ok) << ok.error();
  EXPECT_EQ((*ok)["c"][1]["k"], 2);
}

}  // namespace
}  // namespace ig::model
