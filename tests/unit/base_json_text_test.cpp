// base/json_text: the text writer must write what nlohmann's dump (as
// model::dump_json calls it) writes, byte for byte, for any bytes.
#include "base/json_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "model/document.h"

namespace {

using nlohmann::json;
using ig::json_text::append_string;
using ig::json_text::Writer;

std::string written(std::string_view s) {
  std::string out;
  append_string(out, s);
  return out;
}

std::string dumped(std::string_view s) { return ig::model::dump_json(json(std::string(s))); }

TEST(JsonText, EscapesLikeTheDomDump) {
  for (std::string_view s : {"", "plain", "quote \" and backslash \\", "slash / stays",
                             "\b\f\n\r\t", "\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x98\x83 \xf0\x9f\x98\x80"}) {
    EXPECT_EQ(written(s), dumped(s)) << s;
  }
  std::string nul("a\0b", 3);
  EXPECT_EQ(written(nul), dumped(nul));
}

TEST(JsonText, ReplacesInvalidUtf8AsTheDomDumpDoes) {
  for (std::string_view s :
       {"\xff", "a\x80z", "\xc0\xaf", "\xc3", "\xc3(", "\xe2\x28\xa1", "\xe2\x82", "\xe2\x82(",
        "\xed\xa0\x80", "\xf0\x8f\xbf\xbf", "\xf4\x90\x80\x80", "\xf0\x9f\x98", "\xf0\x9f\x98z",
        "\xf5\x80\x80\x80", "\xc3\xc3\xa9", "\xe0\x80\x80", "x\xef\xbf\xbd\xef\xbf"}) {
    EXPECT_EQ(written(s), dumped(s)) << json(written(s)).dump();
  }
}

TEST(JsonText, RandomBytesMatchTheDomDump) {
  std::mt19937 rng(12345);
  // Bytes biased towards the interesting ones: ASCII, controls, UTF-8 leads
  // and continuations.
  const std::string alphabet = std::string("a\"\\\x01\n\x7f", 6) +
                               "\x80\xbf\xc2\xc3\xdf\xe0\xe1\xed\xee\xef\xf0\xf1\xf4\xf5\xff\xa0\x9f\x90\x8f";
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    const int n = static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      s.push_back(rng() % 4 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()]);
    }
    ASSERT_EQ(written(s), dumped(s)) << json::binary(std::vector<std::uint8_t>(s.begin(), s.end())).dump();
  }
}

TEST(JsonText, WriterSeparatesMembersAndElements) {
  std::string out;
  Writer w(out);
  w.begin_object();
  w.key("a").integer(-42);
  w.key("b").boolean(true);
  w.key("c").begin_array().string("x").begin_object().end_object().begin_array().end_array().integer(7).end_array();
  w.key("d").begin_object().key("e").boolean(false).end_object();
  w.end_object();
  EXPECT_EQ(out, R"({"a":-42,"b":true,"c":["x",{},[],7],"d":{"e":false}})");
  EXPECT_EQ(json::parse(out).dump(), out);
}

}  // namespace
