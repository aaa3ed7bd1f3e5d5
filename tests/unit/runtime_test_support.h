// Helpers of the engine's tests: a bounded wait for another thread to reach a
// state (no timing is asserted: the bound only keeps a broken build from
// hanging).
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace ig::runtime::test {

// Polls `done` every millisecond for at most 10 s of real time.
inline bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 10'000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

}  // namespace ig::runtime::test
