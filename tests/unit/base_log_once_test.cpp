// LogOnce (src/base/log_once.h): an error is logged once until it changes,
// and its recovery once.
#include "base/log_once.h"

#include <gtest/gtest.h>

namespace ig {

TEST(LogOnce, AMessageIsFirstOnlyWhenItDiffersFromTheOutstandingOne) {
  LogOnce once;
  EXPECT_FALSE(once.cleared());  // nothing to recover from
  EXPECT_TRUE(once.first("refused"));
  EXPECT_FALSE(once.first("refused"));
  EXPECT_TRUE(once.first("timed out"));
  EXPECT_TRUE(once.first("refused"));  // changed back: logged again
  EXPECT_EQ(once.cleared(), std::optional<std::string>("refused"));
  EXPECT_FALSE(once.cleared());
  EXPECT_TRUE(once.first("refused"));  // after a recovery, the same error is news
}

}  // namespace ig
