// The LIST answer decoder (kube/list_decoder.h): the items, one at a time and
// as soon as each is parsed, equal to what a whole-document parse finds; the
// list's resourceVersion and continue token; every error.
#include "kube/list_decoder.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace ig::kube {
namespace {

using json = nlohmann::json;

struct ListSeen {
  Result<ListPage> page;
  std::vector<json> items;
};

// The body read as a stream, as an HTTP answer arrives.
ListSeen list_of(const std::string& body, std::size_t max_depth = 128) {
  std::istringstream in(body);
  ListSeen seen{fail("not run"), {}};
  seen.page = decode_list(in, max_depth, [&seen](json&& item) { seen.items.push_back(std::move(item)); });
  return seen;
}

TEST(ListDecoder, ItemsEqualAWholeParseOfTheDocument) {
  const std::vector<std::string> bodies = {
      R"({"kind":"ComponentList","apiVersion":"v1","metadata":{"resourceVersion":"42"},"items":[]})",
      R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"},"spec":{"items":[1,[2,{"x":null}]]}}],)"
      R"("metadata":{"resourceVersion":"7","continue":"tok"}})",
      // Scalars and arrays as items are handed over as they are (the caller judges them).
      R"({"items":[1,"two",null,true,false,-3.5,[],{},[{"a":[]}],18446744073709551615]})",
      // Escapes, unicode, nested "items" keys, duplicate member names inside an item.
      R"({"metadata":{},"items":[{"n":"\u00e9\ud83d\ude00\"\\\/","items":{"items":[]},"d":1,"d":2}]})",
      " \n\t{ \"items\" : [ { } , { \"k\" : [ ] } ] } \n",
  };
  for (const std::string& body : bodies) {
    SCOPED_TRACE(body);
    auto seen = list_of(body);
    ASSERT_TRUE(seen.page) << seen.page.error();
    const json whole = json::parse(body);
    EXPECT_EQ(json(seen.items), whole["items"]);
    EXPECT_TRUE(seen.page->items.empty());
  }
}

TEST(ListDecoder, ReadsTheListsResourceVersionAndContinueTokenWhereverTheyAre) {
  auto seen = list_of(R"({"items":[{"a":1}],"metadata":{"continue":"next","resourceVersion":"99"}})");
  ASSERT_TRUE(seen.page) << seen.page.error();
  EXPECT_EQ(seen.page->resource_version, "99");
  EXPECT_EQ(seen.page->continue_token, "next");
  seen = list_of(R"({"metadata":{"resourceVersion":"5","continue":null},"items":null})");
  ASSERT_TRUE(seen.page) << seen.page.error();
  EXPECT_EQ(seen.page->resource_version, "5");
  EXPECT_EQ(seen.page->continue_token, "");
  EXPECT_TRUE(seen.items.empty());
  seen = list_of(R"({"kind":"List"})");  // no items, no metadata: an empty last page
  ASSERT_TRUE(seen.page) << seen.page.error();
  EXPECT_TRUE(seen.items.empty());
  EXPECT_EQ(seen.page->continue_token, "");
}

TEST(ListDecoder, HandsEachItemOverBeforeTheNextIsParsed) {
  // The third item is cut off: the first two were already handed over when
  // the error was found (which is why a reflector starts its list over).
  auto seen = list_of(R"({"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}},{"metadata":{"name":)");
  ASSERT_FALSE(seen.page);
  ASSERT_EQ(seen.items.size(), 2u);
  EXPECT_EQ(seen.items[0]["metadata"]["name"], "a");
  EXPECT_EQ(seen.items[1]["metadata"]["name"], "b");
}

TEST(ListDecoder, RefusesWhatIsNotAListAnswer) {
  struct Case {
    std::string body;
    std::string error_starts;
  };
  const std::vector<Case> cases = {
      {"", "the answer is not JSON"},
      {"{\"items\":[1,2}", "the answer is not JSON"},
      {"{\"items\":[]} trailing", "the answer is not JSON"},
      {R"({"items":[1e400]})", "the answer is not JSON"},  // out of range (found by list_decoder_fuzz)
      {"[{\"items\":[]}]", "the answer is not a JSON object"},
      {"\"items\"", "the answer is not a JSON object"},
      {R"({"items":{"a":1}})", "field items is not a list"},
      {R"({"items":"x"})", "field items is not a list"},
      {R"({"items":[1],"items":[2]})", "field items appears twice"},
      {R"({"items":"x","items":[2]})", "field items appears twice"},
      {R"({"items":[],"metadata":[]})", "field metadata is not an object"},
      {R"({"items":[],"metadata":{"resourceVersion":5}})", "field metadata.resourceVersion is not a string"},
      {R"({"items":[],"metadata":{"continue":{}}})", "field metadata.continue is not a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    auto seen = list_of(c.body);
    ASSERT_FALSE(seen.page);
    EXPECT_EQ(seen.page.error().rfind(c.error_starts, 0), 0u) << seen.page.error();
  }
}

TEST(ListDecoder, RefusesNestingDeeperThanTheLimit) {
  std::string deep = R"({"items":[)";
  for (int i = 0; i < 20; ++i) deep += "[";
  for (int i = 0; i < 20; ++i) deep += "]";
  deep += "]}";
  auto seen = list_of(deep, 10);
  ASSERT_FALSE(seen.page);
  EXPECT_EQ(seen.page.error(), "the answer nests deeper than 10 levels");
  EXPECT_TRUE(seen.items.empty());
  seen = list_of(deep, 30);
  ASSERT_TRUE(seen.page) << seen.page.error();
  EXPECT_EQ(seen.items.size(), 1u);
}

// Nesting is checked as the answer is parsed: the items before the deep one
// stay handed over.
TEST(ListDecoder, NestingTooDeepMidListKeepsTheItemsBefore) {
  std::string deep = R"({"items":[{"ok":[]},)";
  for (int i = 0; i < 20; ++i) deep += "[";
  for (int i = 0; i < 20; ++i) deep += "]";
  deep += "]}";
  auto seen = list_of(deep, 10);
  ASSERT_FALSE(seen.page);
  EXPECT_EQ(seen.page.error(), "the answer nests deeper than 10 levels");
  ASSERT_EQ(seen.items.size(), 1u);  // the item before the deep one
  seen = list_of(deep, 30);
  ASSERT_TRUE(seen.page) << seen.page.error();
  EXPECT_EQ(seen.items.size(), 2u);
}

TEST(ListDecoder, AThousandItemsComeOutInOrder) {
  json list = {{"kind", "NodeList"}, {"metadata", {{"resourceVersion", "1"}}}, {"items", json::array()}};
  for (int i = 0; i < 1000; ++i) list["items"].push_back({{"metadata", {{"name", "n" + std::to_string(i)}}}});
  auto seen = list_of(list.dump());
  ASSERT_TRUE(seen.page) << seen.page.error();
  ASSERT_EQ(seen.items.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen.items[i]["metadata"]["name"], "n" + std::to_string(i));
}

}  // namespace
}  // namespace ig::kube
