// The WATCH stream decoder (kube/watch_decoder.h): the same events whatever
// the split of the bytes, large objects, CRLF and blank lines, and every error.
#include "kube/watch_decoder.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ig::kube {
namespace {

using Type = WatchEvent::Type;

struct Seen {
  Type type;
  std::string object;  // dumped
  bool operator==(const Seen&) const = default;
};

// Feeds `pieces` in order, draining next() after each; fails the test on an error.
std::vector<Seen> decode(const std::vector<std::string_view>& pieces, WatchDecoder& d) {
  std::vector<Seen> out;
  for (std::string_view piece : pieces) {
    d.feed(piece);
    for (;;) {
      auto e = d.next();
      if (!e) {
        ADD_FAILURE() << e.error();
        return out;
      }
      if (!e->has_value()) break;
      out.push_back({(*e)->type, (*e)->object.dump()});
    }
  }
  return out;
}

const std::string kStream =
    R"({"type":"ADDED","object":{"kind":"Node","metadata":{"name":"a","resourceVersion":"1"}}})"
    "\n"
    R"({"type":"MODIFIED","object":{"kind":"Node","metadata":{"name":"a","resourceVersion":"2"},"s":"x\ny {}"}})"
    "\r\n"
    "\n"
    "   \r\n"
    R"({"type":"DELETED","object":{"kind":"Node","metadata":{"name":"a","resourceVersion":"3"}}})"
    "\n"
    R"({"type":"BOOKMARK","object":{"kind":"Node","metadata":{"resourceVersion":"7"}}})"
    "\n"
    R"({"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}})"
    "\n";

std::vector<Seen> expected_events() {
  WatchDecoder d;
  auto all = decode({kStream}, d);
  return all;
}

TEST(KubeWatchDecoder, DecodesEveryTypeWithCrlfAndBlankLines) {
  const auto events = expected_events();
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].type, Type::Added);
  EXPECT_EQ(events[1].type, Type::Modified);
  EXPECT_NE(events[1].object.find(R"("s":"x\ny {}")"), std::string::npos);
  EXPECT_EQ(events[2].type, Type::Deleted);
  EXPECT_EQ(events[3].type, Type::Bookmark);
  EXPECT_EQ(events[4].type, Type::Error);
  EXPECT_NE(events[4].object.find("410"), std::string::npos);
}

TEST(KubeWatchDecoder, EverySplitPointGivesTheSameEvents) {
  const auto want = expected_events();
  for (std::size_t i = 0; i <= kStream.size(); ++i) {
    WatchDecoder d;
    std::string_view s = kStream;
    EXPECT_EQ(decode({s.substr(0, i), s.substr(i)}, d), want) << "split at " << i;
    EXPECT_FALSE(d.has_partial_event());
  }
}

TEST(KubeWatchDecoder, EveryPairOfSplitPointsGivesTheSameEvents) {
  const auto want = expected_events();
  std::string_view s = kStream;
  for (std::size_t i = 0; i <= s.size(); i += 7) {
    for (std::size_t j = i; j <= s.size(); j += 3) {
      WatchDecoder d;
      ASSERT_EQ(decode({s.substr(0, i), s.substr(i, j - i), s.substr(j)}, d), want)
          << "splits at " << i << " and " << j;
    }
  }
}

TEST(KubeWatchDecoder, ByteAtATime) {
  WatchDecoder d;
  std::vector<std::string_view> bytes;
  for (std::size_t i = 0; i < kStream.size(); ++i) bytes.push_back(std::string_view(kStream).substr(i, 1));
  EXPECT_EQ(decode(bytes, d), expected_events());
  EXPECT_EQ(d.events(), 5u);
}

TEST(KubeWatchDecoder, OneMebibyteObjectInChunks) {
  const std::string big(1u << 20, 'x');
  const std::string line =
      R"({"type":"ADDED","object":{"kind":"ConfigMap","data":{"k":")" + big + "\"}}}\n";
  const std::string stream = line + line;
  WatchDecoder d;
  std::vector<std::string_view> chunks;
  for (std::size_t i = 0; i < stream.size(); i += 16384)
    chunks.push_back(std::string_view(stream).substr(i, 16384));
  const auto events = decode(chunks, d);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].object.size(), big.size() + std::string(R"({"data":{"k":""},"kind":"ConfigMap"})").size());
}

TEST(KubeWatchDecoder, PartialEventIsReported) {
  WatchDecoder d;
  d.feed(R"({"type":"ADDED","obj)");
  auto e = d.next();
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->has_value());
  EXPECT_TRUE(d.has_partial_event());
  d.feed("\n\r\n ");  // the bad line is consumed as an error below
  EXPECT_FALSE(d.next());
}

TEST(KubeWatchDecoder, OnlyWhiteSpaceIsNotPartial) {
  WatchDecoder d;
  d.feed("\n \r\n  ");
  auto e = d.next();
  ASSERT_TRUE(e);
  EXPECT_FALSE(e->has_value());
  EXPECT_FALSE(d.has_partial_event());
}

std::string first_error(std::string_view stream, WatchDecoderLimits limits = {}) {
  WatchDecoder d(limits);
  d.feed(stream);
  for (int i = 0; i < 100; ++i) {
    auto e = d.next();
    if (!e) return e.error();
    if (!e->has_value()) return "";
  }
  return "";
}

TEST(KubeWatchDecoder, Errors) {
  EXPECT_EQ(first_error("not json\n"), "watch event 1 is not JSON");
  EXPECT_EQ(first_error("[1,2]\n"), "watch event 1 is not a JSON object");
  EXPECT_EQ(first_error(R"({"object":{}})" "\n"), "watch event 1 has no string field type");
  EXPECT_EQ(first_error(R"({"type":7,"object":{}})" "\n"), "watch event 1 has no string field type");
  EXPECT_EQ(first_error(R"({"type":"added","object":{}})" "\n"),
            R"(watch event 1 has an unknown type "added")");
  EXPECT_EQ(first_error(R"({"type":"ADDED"})" "\n"), "watch event 1 (ADDED) has no object");
  EXPECT_EQ(first_error(R"({"type":"DELETED","object":"x"})" "\n"),
            "watch event 1 (DELETED) has no object");
  // The event number counts decoded events.
  EXPECT_EQ(first_error(R"({"type":"ADDED","object":{}})" "\n" "{\n"), "watch event 2 is not JSON");
}

TEST(KubeWatchDecoder, DepthIsCheckedBeforeParsing) {
  std::string deep = R"({"type":"ADDED","object":)";
  for (int i = 0; i < 200; ++i) deep += "[";
  for (int i = 0; i < 200; ++i) deep += "]";
  deep += "}\n";
  EXPECT_EQ(first_error(deep), "watch event 1 nests deeper than 128 levels");
}

TEST(KubeWatchDecoder, LongLineIsAnErrorBeforeItsNewline) {
  WatchDecoderLimits limits;
  limits.max_line_bytes = 1000;
  WatchDecoder d(limits);
  d.feed(std::string(600, ' '));
  auto e = d.next();
  ASSERT_TRUE(e);
  d.feed(std::string(600, ' '));
  e = d.next();
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error(), "watch event 1 is longer than 1000 bytes");
  // Final: feeding more does not recover.
  d.feed("\n" R"({"type":"ADDED","object":{}})" "\n");
  EXPECT_FALSE(d.next());
}

TEST(KubeWatchDecoder, LongCompleteLineIsAnError) {
  WatchDecoderLimits limits;
  limits.max_line_bytes = 100;
  const std::string line = R"({"type":"ADDED","object":{"a":")" + std::string(200, 'x') + "\"}}\n";
  EXPECT_EQ(first_error(line, limits), "watch event 1 is longer than 100 bytes");
}

TEST(KubeWatchDecoder, ErrorIsFinal) {
  WatchDecoder d;
  d.feed("nope\n" R"({"type":"ADDED","object":{}})" "\n");
  EXPECT_FALSE(d.next());
  EXPECT_FALSE(d.next());
}

TEST(KubeWatchDecoder, TypeNames) {
  const std::pair<Type, std::string> names[] = {{Type::Added, "ADDED"},       {Type::Modified, "MODIFIED"},
                                                {Type::Deleted, "DELETED"},   {Type::Bookmark, "BOOKMARK"},
                                                {Type::Error, "ERROR"}};
  for (const auto& [t, name] : names) {
    WatchDecoder d;
    d.feed(R"({"type":")" + name + R"(","object":{}})" "\n");
    auto e = d.next();
    ASSERT_TRUE(e && *e) << name;
    EXPECT_EQ((*e)->type, t);
  }
  WatchDecoder d;
  d.feed(R"({"type":"Added","object":{}})" "\n");
  EXPECT_FALSE(d.next());
}

}  // namespace
}  // namespace ig::kube
