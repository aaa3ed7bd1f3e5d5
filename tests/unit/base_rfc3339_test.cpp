#include "base/rfc3339.h"

#include <gtest/gtest.h>

namespace ig {
namespace {

using std::chrono::system_clock;

TEST(Rfc3339, ReadsUtcFractionsAndOffsets) {
  auto t = parse_rfc3339("2026-12-05T12:42:00.5+02:00");
  ASSERT_TRUE(t);
  EXPECT_EQ(system_clock::to_time_t(*t), 1796467320);
  EXPECT_EQ(std::chrono::duration_cast<std::chrono::milliseconds>(t->time_since_epoch()).count() % 1000, 500);
  EXPECT_EQ(system_clock::to_time_t(*parse_rfc3339("2026-12-02T21:00:00Z")), 1796245200);
  EXPECT_EQ(system_clock::to_time_t(*parse_rfc3339("2026-12-02t23:00:00+02:00")), 1796245200);
  EXPECT_EQ(system_clock::to_time_t(*parse_rfc3339("2026-12-02T20:30:00-00:30")), 1796245200);
}

TEST(Rfc3339, RefusesEverythingElse) {
  for (const char* bad : {"", "2026-12-05 10:42:00Z", "2026-13-05T10:42:00Z", "2026-12-05T10:42:00",
                          "2026-12-05T24:00:00Z", "2026-12-05T10:42:00.Z", "2026-12-05T10:42:00+0200",
                          "2026-12-05T10:42:00+24:00", "2026-12-05T10:42:00Zx", "tomorrow", "2026-12-00T10:42:00Z"}) {
    EXPECT_FALSE(parse_rfc3339(bad)) << bad;
  }
}

}  // namespace
}  // namespace ig
