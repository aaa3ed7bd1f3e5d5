// runtime::Service: a piece with its own start() and stop() as a runnable.
#include "runtime/service.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/manager.h"

namespace ig::runtime {
namespace {

TEST(RuntimeService, TheManagerStartsItAndStopsItInReverseOrder) {
  std::mutex mu;
  std::vector<std::string> seen;
  auto note = [&](std::string s) {
    std::lock_guard lock(mu);
    seen.push_back(std::move(s));
  };
  std::atomic<bool> synced{false};
  Manager m;
  m.add(std::make_shared<Service>("caches", [&] { note("start caches"); synced = true; }, [&] { note("stop caches"); },
                                  [&] { return synced.load(); }),
        false);
  m.add(std::make_shared<Service>("term", [&] { note("start term"); }, [&] { note("stop term"); }), true);
  ASSERT_TRUE(m.start());  // waits until the caches' synced()
  EXPECT_TRUE(synced);
  m.start_leading();
  m.stop_leading();
  m.start_leading();  // a second term: started again
  m.stop();
  // Each run's start comes before its stop; the caches stop last.
  std::lock_guard lock(mu);
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen.front(), "start caches");
  EXPECT_EQ(seen.back(), "stop caches");
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "start term"), 2);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "stop term"), 2);
}

}  // namespace
}  // namespace ig::runtime
