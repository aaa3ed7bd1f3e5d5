// runtime::Manager: owns the threads of the operator's loops; one per process.
//  - start() runs the needs_leader = false runnables, each on its own thread
//    in the order added, and waits until all are synced() (an error after
//    two minutes).
//  - start_leading() runs the needs_leader runnables with this term's stop
//    source and returns (nothing before a successful start() or after
//    stop(); during start() it waits for it); stop_leading() stops them all
//    at once (cancelling their requests), joins them in reverse order.
//  - stop(): stop_leading(), then the others in reverse order. Terms may
//    follow one another. Thread-safe; stop(), stop_leading(): noexcept, idempotent.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
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
  std::function<void(std::string_view level, std::string_view message)> log;
};

class Manager {
 public:
  explicit Manager(ManagerOptions options = {});
  ~Manager();

  // Before start(); not owned beyond the shared pointer.
  void add(std::shared_ptr<Runnable> runnable, bool needs_leader);

  Result<void> start();
  void start_leading();
  void stop_leading() noexcept;
  void stop() noexcept;

  bool leading() const;
  kube::LeaderCallbacks leader_callbacks();

  // /healthz, /readyz and /metrics; the engine's families are in its metrics from construction.
  Probes& probes() noexcept { return probes_; }

 private:
  void write_metrics(prometheus::TextWriter& out) const;
  // Each on a thread of its own, appended to `running`.
  void launch(const std::vector<std::shared_ptr<Runnable>>& runnables, std::vector<std::jthread>& running);

  ManagerOptions options_;
  mutable std::mutex mu_;
  std::mutex lifecycle_;  // start, start_leading, stop_leading, stop: one at a time
  std::vector<std::shared_ptr<Runnable>> always_, leader_;
  std::vector<std::jthread> running_always_, running_leader_;
  bool started_ = false, stopped_ = false, leading_ = false;
  Probes probes_;
};

}  // namespace ig::runtime
