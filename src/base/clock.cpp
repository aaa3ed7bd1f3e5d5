#include "base/clock.h"

#include <algorithm>
#include <thread>
#include <unordered_map>

namespace ig {
namespace {

class SteadyClock final : public Clock {
 public:
  time_point now() override { return std::chrono::steady_clock::now(); }
  wall_time wall() override { return std::chrono::system_clock::now(); }
  void sleep_until(time_point t) override { std::this_thread::sleep_until(t); }
  void wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) override {
    cv.wait_until(lock, deadline);
  }
};

// FakeClock's wake() calls in progress, per clock: a waiter does not leave
// wait_until() (after which its mutex and condition may be destroyed) while
// a wake() holds a copy of it. Lock order: wakes().mu, then the clock's own.
struct Wakes {
  std::mutex mu;
  std::condition_variable done;
  std::unordered_map<const void*, int> active;  // per clock
};
Wakes& wakes() {
  static Wakes w;
  return w;
}

}  // namespace

std::shared_ptr<Clock> Clock::steady() {
  static const std::shared_ptr<Clock> kClock = std::make_shared<SteadyClock>();
  return kClock;
}

Clock::time_point FakeClock::now() {
  std::lock_guard lock(mu_);
  return now_;
}

Clock::wall_time FakeClock::wall() {
  std::lock_guard lock(mu_);
  return wall_start_ + std::chrono::duration_cast<wall_time::duration>(now_ - start_);
}

std::vector<Clock::duration> FakeClock::waits() {
  std::lock_guard lock(mu_);
  return waits_;
}

void FakeClock::wake(std::vector<Waiter> waiters) {
  // Taking each waiter's own mutex orders this after its check of now(): it
  // is either before the check (and sees the new time) or inside wait().
  for (const Waiter& w : waiters) {
    std::lock_guard lock(*w.mu);
    w.cv->notify_all();
  }
  {
    std::lock_guard lock(wakes().mu);
    if (--wakes().active[this] == 0) wakes().active.erase(this);
  }
  wakes().done.notify_all();
}

void FakeClock::sleep_until(time_point t) {
  {
    std::lock_guard lock(mu_);
    waits_.push_back(t - now_);
  }
  set(t);
}
void FakeClock::set(time_point t) { move(duration::zero(), t); }
void FakeClock::advance(duration d) { move(d, time_point::min()); }

void FakeClock::move(duration by, time_point at_least) {
  std::vector<Waiter> waiters;
  {
    std::lock_guard outer(wakes().mu);
    std::lock_guard lock(mu_);
    now_ = std::max(now_ + by, at_least);
    waiters = waiters_;
    ++wakes().active[this];
  }
  wake(std::move(waiters));
}

std::size_t FakeClock::waiters() {
  std::lock_guard lock(mu_);
  return waiters_.size();
}

void FakeClock::wait_until(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, time_point deadline) {
  const Waiter self{lock.mutex(), &cv};
  {
    std::lock_guard guard(mu_);
    if (jumping_) {
      waits_.push_back(deadline - now_);
      now_ = std::max(now_, deadline);
      return;
    }
    if (now_ >= deadline) return;
    waiters_.push_back(self);
  }
  cv.wait_for(lock, kFakeRealWait);
  // Unregistered without holding the caller's mutex (a wake() in progress
  // takes it), once no wake() holds a copy of this waiter.
  lock.unlock();
  {
    std::unique_lock outer(wakes().mu);
    wakes().done.wait(outer, [this] { return wakes().active.count(this) == 0; });
    std::lock_guard guard(mu_);
    auto it = std::find_if(waiters_.begin(), waiters_.end(),
                           [&](const Waiter& w) { return w.mu == self.mu && w.cv == self.cv; });
    if (it != waiters_.end()) waiters_.erase(it);
  }
  lock.lock();
}

}  // namespace ig
