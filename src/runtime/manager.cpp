#include "runtime/manager.h"

#include <condition_variable>

namespace ig::runtime {

constexpr std::chrono::milliseconds kSyncTimeout{120'000}, kSyncPoll{100};

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = Clock::steady();
  probes_.metrics().add([this](prometheus::TextWriter& out) { write_metrics(out); });
}

Manager::~Manager() { stop(); }

void Manager::add(std::shared_ptr<Runnable> runnable, bool needs_leader) {
  std::lock_guard lock(mu_);
  (needs_leader ? leader_ : always_).push_back(std::move(runnable));
}

void Manager::launch(const std::vector<std::shared_ptr<Runnable>>& runnables, std::vector<std::jthread>& running) {
  for (const auto& r : runnables) {
    running.emplace_back([runnable = r.get(), log = options_.log](CancelToken stop) {
      try {
        runnable->run(stop);
      } catch (const std::exception& e) {
        if (log) log("error", std::string(runnable->name()) + " ended: " + e.what());
      } catch (...) {
        if (log) log("error", std::string(runnable->name()) + " ended");
      }
    });
  }
}

Result<void> Manager::start() {
  std::lock_guard life(lifecycle_);
  std::vector<std::shared_ptr<Runnable>> watch;
  {
    std::lock_guard lock(mu_);
    if (started_ || stopped_) return fail("the manager was started already");
    launch(always_, running_always_);
    watch = always_;
  }
  // Bounded wait for every cache to have listed.
  std::mutex m;
  std::condition_variable never;  // only the clock wakes it
  std::unique_lock lock(m);
  const Clock::time_point deadline = options_.clock->now() + kSyncTimeout;
  for (;;) {
    std::string waiting;
    for (const auto& r : watch)
      if (!r->synced()) waiting += (waiting.empty() ? "" : ", ") + std::string(r->name());
    if (waiting.empty()) break;
    const Clock::time_point now = options_.clock->now();
    if (now >= deadline)
      return fail("not synced within " + std::to_string(kSyncTimeout.count()) + " ms: " + waiting);
    options_.clock->wait_until(lock, never, std::min(deadline, now + kSyncPoll));
  }
  std::lock_guard guard(mu_);
  started_ = true;
  return {};
}

void Manager::start_leading() {
  std::lock_guard life(lifecycle_);
  std::lock_guard lock(mu_);
  if (!started_ || stopped_ || leading_) return;
  leading_ = true;
  launch(leader_, running_leader_);
}

// The running_* lists change only under lifecycle_; a std::jthread destroyed
// asks its runnable to stop and joins it.
void Manager::stop_leading() noexcept {
  std::lock_guard life(lifecycle_);
  {
    std::lock_guard lock(mu_);
    if (!leading_) return;
    leading_ = false;
  }
  for (auto& t : running_leader_) t.request_stop();  // all at once, then joined in reverse order
  while (!running_leader_.empty()) running_leader_.pop_back();
}

void Manager::stop() noexcept {
  stop_leading();
  std::lock_guard life(lifecycle_);
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  // One by one, the last added first: a controller stops before the caches it reads.
  while (!running_always_.empty()) running_always_.pop_back();
}

bool Manager::leading() const {
  std::lock_guard lock(mu_);
  return leading_;
}

kube::LeaderCallbacks Manager::leader_callbacks() {
  kube::LeaderCallbacks c;
  c.on_started_leading = [this] { start_leading(); };
  c.on_stopped_leading = [this] { stop_leading(); };
  return c;
}

void Manager::write_metrics(prometheus::TextWriter& out) const {
  std::vector<const ControllerMetrics*> metrics;
  {
    std::lock_guard lock(mu_);
    for (const auto* group : {&always_, &leader_})
      for (const auto& r : *group)
        if (const ControllerMetrics* m = r->metrics()) metrics.push_back(m);
  }
  if (!metrics.empty()) write_controller_metrics(out, metrics);
}

}  // namespace ig::runtime
