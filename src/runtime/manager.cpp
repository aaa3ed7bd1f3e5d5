#include "runtime/manager.h"

#include <condition_variable>

namespace ig::runtime {

Manager::Manager(ManagerOptions options) : options_(std::move(options)) {
  if (!options_.clock) options_.clock = Clock::steady();
  probes_.metrics().add([this](prometheus::TextWriter& out) { write_metrics(out); });
}

Manager::~Manager() { stop(); }

void Manager::add(std::shared_ptr<Runnable> runnable, bool needs_leader) {
  std::lock_guard lock(mu_);
  (needs_leader ? leader_ : always_).push_back(std::move(runnable));
}

void Manager::launch(Running& r, const std::function<void(std::string_view, std::string_view)>& log) {
  Runnable* runnable = r.runnable;
  r.thread = std::thread([runnable, token = r.stop.get_token(), log] {
    try {
      runnable->run(token);
    } catch (const std::exception& e) {
      if (log) log("error", std::string(runnable->name()) + " ended: " + e.what());
    } catch (...) {
      if (log) log("error", std::string(runnable->name()) + " ended");
    }
  });
}

Result<void> Manager::start() {
  std::lock_guard life(lifecycle_);
  std::vector<Runnable*> watch;
  {
    std::lock_guard lock(mu_);
    if (started_ || stopped_) return fail("the manager was started already");
    for (const auto& r : always_) {
      running_always_.push_back(Running{r.get(), {}, {}});
      launch(running_always_.back(), options_.log);
      watch.push_back(r.get());
    }
  }
  // Bounded wait for every cache to have listed.
  std::mutex m;
  std::condition_variable never;  // only the clock wakes it
  std::unique_lock lock(m);
  const Clock::time_point deadline = options_.clock->now() + options_.sync_timeout;
  for (;;) {
    std::string waiting;
    for (Runnable* r : watch)
      if (!r->synced()) waiting += (waiting.empty() ? "" : ", ") + std::string(r->name());
    if (waiting.empty()) break;
    const Clock::time_point now = options_.clock->now();
    if (now >= deadline)
      return fail("not synced within " + std::to_string(options_.sync_timeout.count()) + " ms: " + waiting);
    options_.clock->wait_until(lock, never, std::min(deadline, now + options_.sync_poll));
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
  running_leader_.reserve(leader_.size());
  for (const auto& r : leader_) {
    running_leader_.push_back(Running{r.get(), {}, {}});
    launch(running_leader_.back(), options_.log);
  }
}

void Manager::stop_leading() noexcept {
  std::lock_guard life(lifecycle_);
  std::vector<Running> running;
  {
    std::lock_guard lock(mu_);
    if (!leading_) return;
    leading_ = false;
    running.swap(running_leader_);
  }
  for (auto& r : running) r.stop.request_stop();  // all at once, then joined in reverse order
  for (auto it = running.rbegin(); it != running.rend(); ++it)
    if (it->thread.joinable()) it->thread.join();
}

void Manager::stop() noexcept {
  stop_leading();
  std::lock_guard life(lifecycle_);
  std::vector<Running> running;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    running.swap(running_always_);
  }
  // One by one, the last added first: a controller stops before the caches it reads.
  for (auto it = running.rbegin(); it != running.rend(); ++it) {
    it->stop.request_stop();
    if (it->thread.joinable()) it->thread.join();
  }
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
