// runtime::Manager: controller-runtime's manager (pkg/manager/internal.go):
// owns the threads of the operator's loops; one per process.
//
// Contract:
//  - start(): runs every runnable added with needs_leader = false, each on a
//    thread of its own, in the order added (caches first), then waits until
//    every one is synced() (an error after sync_timeout on the clock).
//  - start_leading() (the elector's on_started_leading) runs the needs_leader
//    runnables with a stop source of this term and returns at once; before
//    start(), after a failed start() or after stop() it does nothing; while
//    start() waits for the caches it waits too (then leads if they synced).
//  - stop_leading() requests stop on every leader runnable at once (their
//    CancelTokens, and so their API requests in flight), joins them in
//    reverse order and returns when none runs. Terms may follow one another.
//  - stop(): stop_leading(), then the other runnables in reverse order.
//  - probes(): /healthz, /readyz and /metrics (runtime/probes.h).
//  - Thread-safe; stop() and stop_leading() are noexcept and idempotent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/clock.h"
#include "base/prometheus.h"
#include "base/result.h"
#include "kube/leader_election.h"
#include "runtime/probes.h"
#include "runtime/runnable.h"

namespace ig::runtime {

struct ManagerOptions {
  std::shared_ptr<Clock> clock;  // empty: steady
  std::chrono::milliseconds sync_timeout{120'000};
  std::chrono::milliseconds sync_poll{100};
  std::function<void(std::string_view level, std::string_view message)> log;
};

class Manager {
 public:
  explicit Manager(ManagerOptions options = {});
  ~Manager();
  Manager(const Manager&) = delete;
  Manager& operator=(const Manager&) = delete;

  // Before start(); not owned beyond the shared pointer.
  void add(std::shared_ptr<Runnable> runnable, bool needs_leader);

  Result<void> start();
  void start_leading();
  void stop_leading() noexcept;
  void stop() noexcept;

  bool leading() const;
  bool started() const;
  kube::LeaderCallbacks leader_callbacks();

  // controller-runtime's and client-go's families for every controller added
  // (in probes().metrics() from construction).
  void write_metrics(prometheus::TextWriter& out) const;
  Probes& probes() noexcept { return probes_; }
  const Probes& probes() const noexcept { return probes_; }

 private:
  struct Running {
    Runnable* runnable;
    std::stop_source stop;
    std::thread thread;
  };
  static void launch(Running& r, const std::function<void(std::string_view, std::string_view)>& log);
  static void halt(std::vector<Running>& running) noexcept;  // stop all, join in reverse order

  ManagerOptions options_;
  mutable std::mutex mu_;
  std::mutex lifecycle_;  // start, start_leading, stop_leading, stop: one at a time
  std::vector<std::shared_ptr<Runnable>> always_, leader_;
  std::vector<Running> running_always_, running_leader_;
  bool started_ = false, stopped_ = false, leading_ = false;
  Probes probes_;
};

}  // namespace ig::runtime
