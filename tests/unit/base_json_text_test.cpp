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
using ig::json_text::append_base64;
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

TEST(JsonText, Base64IsRfc4648AndAJsonString) {
  // RFC 4648 section 10's vectors, then every byte value.
  const std::pair<std::string_view, std::string_view> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"}, {"foob", "Zm9vYg=="},
      {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"}};
  for (const auto& [in, want] : vectors) {
    std::string out = "x";
    append_base64(out, in);
    EXPECT_EQ(out, "x" + std::string(want));
  }
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  std::string out;
  Writer w(out);
  w.begin_array().base64(all).base64("").string("after").end_array();
  const json parsed = json::parse(out);
  ASSERT_EQ(parsed.size(), 3u);
  EXPECT_EQ(parsed[1], "");
  EXPECT_EQ(parsed[2], "after");
  // Decoded again by nlohmann's binary-free route: the alphabet back to bytes.
  const std::string text = parsed[0].get<std::string>();
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string decoded;
  unsigned buffer = 0;
  int bits = 0;
  for (char ch : text) {
    if (ch == '=') break;
    buffer = (buffer << 6) | static_cast<unsigned>(kAlphabet.find(ch));
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      decoded.push_back(static_cast<char>((buffer >> bits) & 0xFF));
    }
  }
  EXPECT_EQ(decoded, all);
  EXPECT_EQ(text.size(), (all.size() + 2) / 3 * 4);
}

}  // namespace
