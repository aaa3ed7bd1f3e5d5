// The manifest reader of `evaluate -f` and the YAML merge key, as tables
// (src/model/document.h): merge keys read as go-yaml reads them or refused,
// multi-document streams and lists with their lines, streams read without
// seeking, and dump_yaml reading back equal.
#include "model/document.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>

namespace ig::model {
namespace {

using ::testing::HasSubstr;

struct MergeCase {
  const char* name;
  const char* yaml;
  const char* want_json;  // nullptr: refused
  const char* error;      // a fragment of the error when refused
};

const MergeCase kMergeCases[] = {
    {"inline map", "policy: {<<: {content_trust: untrusted}}", R"({"policy":{"content_trust":"untrusted"}})", ""},
    {"alias", "base: &b {content_trust: untrusted}\npolicy:\n  <<: *b\n",
     R"({"base":{"content_trust":"untrusted"},"policy":{"content_trust":"untrusted"}})", ""},
    {"key after the merge overrides it", "b: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n",
     R"({"b":{"x":1,"y":2},"m":{"x":3,"y":2}})", ""},
    {"list: earlier maps win", "a: &a {x: 1}\nb: &b {x: 2, y: 2}\nm:\n  <<: [*a, *b]\n",
     R"({"a":{"x":1},"b":{"x":2,"y":2},"m":{"x":1,"y":2}})", ""},
    {"nested merge inside the merged map", "a: &a {x: 1}\nb: &b {<<: *a, y: 2}\nm: {<<: *b}\n",
     R"({"a":{"x":1},"b":{"x":1,"y":2},"m":{"x":1,"y":2}})", ""},
    {"quoted << is an ordinary key", "m: {\"<<\": {x: 1}}", R"({"m":{"<<":{"x":1}}})", ""},
    {"explicit !!merge tag", "m: {!!merge <<: {x: 1}}", R"({"m":{"x":1}})", ""},
    {"key before the merge that sets it", "b: &b {x: 1}\nm:\n  x: 3\n  <<: *b\n", nullptr,
     "line 4, column 3: key \"x\" is set both before the merge key (<<) and by it"},
    {"merge of a scalar", "m: {<<: 3}", nullptr, "a merge key (<<) takes a map or a list of maps, found a scalar"},
    {"merge of a list with a scalar", "m: {<<: [{x: 1}, 2]}", nullptr,
     "a merge key (<<) takes a map or a list of maps, found a scalar"},
    {"two merge keys", "m:\n  <<: {x: 1}\n  <<: {y: 1}\n", nullptr, "line 3, column 3: duplicate key \"<<\""},
    {"duplicate keys still refused", "m: {x: 1, x: 2}", nullptr, "duplicate key \"x\""},
};

TEST(ManifestReader, MergeKeysAreMergedAsGoYamlDoesOrRefused) {
  for (const auto& c : kMergeCases) {
    SCOPED_TRACE(c.name);
    auto docs = parse_documents(c.yaml, "in.yaml");
    if (c.want_json == nullptr) {
      ASSERT_FALSE(docs) << dump_json(docs->front());
      EXPECT_THAT(docs.error(), HasSubstr("in.yaml: "));
      EXPECT_THAT(docs.error(), HasSubstr(c.error));
    } else {
      ASSERT_TRUE(docs) << docs.error();
      ASSERT_EQ(docs->size(), 1u);
      EXPECT_EQ(docs->front(), json::parse(c.want_json));
    }
  }
}

TEST(ManifestReader, MergeKeyExpansionCountsTowardsTheValueLimit) {
  DecodeLimits limits;
  limits.max_nodes = 50;
  std::string yaml = "a: &a {x: 1, y: 2, z: 3}\n";
  for (int i = 0; i < 30; ++i) yaml += "m" + std::to_string(i) + ": {<<: *a}\n";
  auto docs = parse_documents(yaml, "bomb.yaml", limits);
  ASSERT_FALSE(docs);
  EXPECT_THAT(docs.error(), HasSubstr("more than 50 values"));
}

struct StreamCase {
  const char* name;
  const char* text;
  std::vector<std::string> kinds;  // of each manifest, in order
  std::vector<std::size_t> lines;
  std::vector<std::size_t> items;
};

const StreamCase kStreamCases[] = {
    {"one document", "kind: Pod\n", {"Pod"}, {1}, {0}},
    {"multi-document with an empty one", "kind: A\n---\n---\n# c\nkind: B\n", {"A", "B"}, {1, 5}, {0, 0}},
    {"a leading separator", "---\nkind: A\n", {"A"}, {2}, {0}},
    {"a YAML List",
     "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  apiVersion: v1\n- kind: Deployment\n",
     {"Pod", "Deployment"}, {4, 6}, {1, 2}},
    {"a typed list fills kind and apiVersion", "apiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {}\n",
     {"Deployment"}, {4}, {1}},
    {"a JSON List", R"({"kind":"List","items":[{"kind":"Pod"},{"kind":"Job"}]})", {"Pod", "Job"}, {1, 1}, {1, 2}},
    {"a document then a list", "kind: A\n---\nkind: List\nitems: [{kind: B}]\n", {"A", "B"}, {1, 4}, {0, 1}},
    {"a List without items is a document", "kind: List\n", {"List"}, {1}, {0}},
};

TEST(ManifestReader, StreamsAndListsGiveEveryObjectWithItsLine) {
  for (const auto& c : kStreamCases) {
    SCOPED_TRACE(c.name);
    auto manifests = parse_manifests(c.text, "in");
    ASSERT_TRUE(manifests) << manifests.error();
    ASSERT_EQ(manifests->size(), c.kinds.size());
    for (std::size_t i = 0; i < c.kinds.size(); ++i) {
      EXPECT_EQ((*manifests)[i].object.value("kind", ""), c.kinds[i]) << i;
      EXPECT_EQ((*manifests)[i].line, c.lines[i]) << i;
      EXPECT_EQ((*manifests)[i].item, c.items[i]) << i;
    }
  }
  auto typed = parse_manifests("apiVersion: apps/v1\nkind: DeploymentList\nitems:\n- metadata: {}\n", "in");
  ASSERT_TRUE(typed);
  EXPECT_EQ(typed->front().object.value("apiVersion", ""), "apps/v1");
}

TEST(ManifestReader, BadStreamsAreErrorsNamingTheSourceAndLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"kind: A\n---\nkind: [\n", "in: line 4, column 1: invalid YAML"},
      {"{\"kind\": ", "in: invalid JSON"},
      {"kind: A\n---\nm: {<<: 1}\n", "in: line 3"},
  };
  for (const auto& [text, error] : cases) {
    SCOPED_TRACE(text);
    auto manifests = parse_manifests(text, "in");
    ASSERT_FALSE(manifests);
    EXPECT_THAT(manifests.error(), HasSubstr(error));
  }
}

TEST(ManifestReader, ReadTextReadsAStreamWithoutSeekingWithinTheLimit) {
  std::istringstream in(std::string(100, 'x'));
  auto text = read_text(in, "stdin");
  ASSERT_TRUE(text) << text.error();
  EXPECT_EQ(text->size(), 100u);

  DecodeLimits small;
  small.max_bytes = 10;
  std::istringstream big(std::string(100, 'x'));
  auto refused = read_text(big, "stdin", small);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error(), "stdin: input is larger than 10 bytes");
}

TEST(ManifestReader, ReadTextFileSaysADirectoryIsADirectory) {
  const auto dir = std::filesystem::path(::testing::TempDir());
  auto text = read_text_file(dir.string());
  ASSERT_FALSE(text);
  EXPECT_EQ(text.error(), dir.string() + ": is a directory");
}

TEST(ManifestReader, ParseSingleDocumentCountsDocuments) {
  EXPECT_TRUE(parse_single_document("kind: A\n", "x"));
  EXPECT_EQ(parse_single_document("kind: A\n---\nkind: B\n", "x").error(), "x: expected one document, found 2");
  EXPECT_EQ(parse_single_document("", "x").error(), "x: no document in file");
}

TEST(ManifestReader, DumpYamlReadsBackEqual) {
  const json values[] = {
      json::parse(R"({"a":"true","b":true,"c":null,"d":"null","e":"123","f":1.5,"g":[],"h":{},)"
                  R"("i":["x",{"y":"multi\nline"}],"j":"","k":"- x","l":"#c","m":-3})"),
      json::array({1, "two"}),
      json("plain"),
  };
  for (const auto& v : values) {
    SCOPED_TRACE(dump_json(v));
    auto back = parse_documents(dump_yaml(v), "dump");
    ASSERT_TRUE(back) << back.error() << "\n" << dump_yaml(v);
    ASSERT_EQ(back->size(), 1u);
    EXPECT_EQ(back->front(), v) << dump_yaml(v);
  }
}

}  // namespace
}  // namespace ig::model
