// Kubernetes-style duration flags (src/config/duration.h).
#include "config/duration.h"

#include <gtest/gtest.h>

namespace ig::config {
namespace {

using namespace std::chrono_literals;

TEST(Duration, ParsesWhatKubernetesFlagsSpell) {
  const std::pair<const char*, std::chrono::milliseconds> good[] = {
      {"15s", 15s},   {"10s", 10s},         {"2s", 2s},         {"500ms", 500ms}, {"1h30m", 90min},
      {"1.5h", 90min}, {"8760h", 8760h},    {"0", 0ms},         {"2m", 2min},     {"1500us", 1ms},
      {"3s250ms", 3250ms}, {"\xC2\xB5s", 0ms}};
  for (const auto& [text, want] : good) {
    if (std::string_view(text) == "\xC2\xB5s") continue;  // a unit without a number: below
    auto d = parse_duration(text);
    ASSERT_TRUE(d.ok()) << text << ": " << d.error();
    EXPECT_EQ(*d, want) << text;
  }
}

TEST(Duration, RefusesAnythingElseNamingTheText) {
  for (const char* bad : {"", "15", "s", "-1s", "1d", "1 s", "1.2.3s", "+5s", "\xC2\xB5s", "99999999999h"}) {
    auto d = parse_duration(bad);
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_NE(d.error().find("duration \""), std::string::npos) << d.error();
  }
}

TEST(Duration, FormatsExactlyAndShortest) {
  EXPECT_EQ(format_duration(15s), "15s");
  EXPECT_EQ(format_duration(8760h), "8760h");
  EXPECT_EQ(format_duration(90min), "90m");
  EXPECT_EQ(format_duration(1500ms), "1500ms");
  EXPECT_EQ(format_duration(0ms), "0s");
  for (auto d : {15s, 10s, 2s}) EXPECT_EQ(*parse_duration(format_duration(d)), d);
}

}  // namespace
}  // namespace ig::config
