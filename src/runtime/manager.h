// runtime::Manager: controller-runtime's manager (pkg/manager/internal.go,
// runnable_group.go): owns the threads of the operator's loops.
//
//   start():          every runnable added with needs_leader = false (caches
//                     first: add them first), each on a thread of its own, in
//                     the order added; then waits until every one is synced()
//                     (bounded by sync_timeout on the clock: an error after it).
//   start_leading():  (the leader elector's on_started_leading) runs the
//                     needs_leader runnables, each with a stop source of this
//                     term; returns at once.
//   stop_leading():   (on_stopped_leading) requests stop on every leader
//                     runnable at once (their reconciles' CancelTokens, and so
//                     the API requests they have in flight) and joins them in
//                     reverse order; returns when none of them runs.
//   stop():           stop_leading(), then each other runnable in reverse
//                     order (stop requested, joined), the caches last.
//   probes():         /healthz, /readyz and /metrics (runtime/probes.h); the
//                     manager's registry holds the engine's families for
//                     every controller added, and collectors add theirs.
//
// One manager per process: everything that runs adds itself to it.
//
// Contract: start_leading() before start(), after a start() that failed, or
// after stop(), does nothing; one called while start() waits for the caches
// waits for it (then leads if they synced). Terms may follow one another (a runnable's run() is called once per
// term). All methods are thread-safe; stop() and stop_leading() are noexcept
// and may be called more than once. leader_callbacks() are the elector's
// (kube/leader_election.h).
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
