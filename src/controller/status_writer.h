// The Component status loop (leader only): keeps every Component's status
// equal to desired_status(), writing only when the status in the CACHE
// differs (so a lost or overwritten status is written again; a write not
// yet echoed by the watch is not repeated for 10 s). Keys: a Component,
// or kSweep (every key, at most one sweep per sweep_interval, fed to the
// queue kSweepBatch keys at a time).
//  - Nothing is written while ready() is false (requeued after 200 ms) nor
//    once the CancelToken is stopped.
//  - The write: a forced server-side apply (then leftover_fields_patch()).
//    404 drops the key; Retry-After is honoured; other errors back off.
//  - enqueue*() are thread-safe, never block, and are dropped while not leading.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "admission/context.h"
#include "base/clock.h"
#include "controller/component_status.h"
#include "kube/api.h"
#include "kube/store.h"
#include "runtime/controller.h"

namespace ig::controller {

struct StatusWriterOptions {
  std::string runtime_class;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  std::function<std::size_t(std::string_view component_key)> drifted_pods;  // empty: 0
  std::function<UnboundPods(std::string_view component_key)> unbound_pods;  // empty: none
  std::function<bool()> ready;                                              // empty: always
  std::chrono::milliseconds retry_initial{500}, retry_max{30'000};
  std::size_t workers = 1;  // --status-workers; at least 1
  std::chrono::milliseconds sweep_interval{10'000};
  std::shared_ptr<Clock> clock = Clock::steady();  // the engine's, and conditions' times (wall())
  std::function<void(std::string_view level, std::string_view message)> log;
};

struct StatusWriterStats {
  std::uint64_t writes = 0;      // status patches that succeeded
  std::uint64_t unchanged = 0;   // keys reconciled with nothing to write
  std::uint64_t errors = 0;      // failed patches
  std::uint64_t sweeps = 0;      // sweeps run (every key enqueued)
  std::size_t queued = 0;        // keys queued for a check now (not those delayed: retries, rechecks)
};

class StatusWriter {
 public:
  static constexpr std::string_view kSweep = "";       // no Component key is empty
  static constexpr std::string_view kSweepMore = "/";  // a sweep's next batch
  static constexpr std::size_t kSweepBatch = 1000;

  StatusWriter(kube::Client& client, const kube::Store<ComponentRecord>& components,
               const admission::SandboxView& sandbox, StatusWriterOptions options);

  // Run while leading.
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }

  void enqueue(std::string_view key);  // "" : enqueue_all()
  void enqueue_all();
  StatusWriterStats stats() const;

  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);

 private:
  Result<runtime::Requeue> sweep(bool fresh);  // fresh: a new one, else its next batch

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  StatusWriterOptions options_;
  std::shared_ptr<runtime::Controller<std::string>> controller_;

  struct Sent {  // a write the cache does not show yet: fingerprints before, interim (0: none), sent
    std::uint64_t before = 0, interim = 0, sent = 0;
    Clock::time_point at;
  };

  mutable std::mutex mu_;
  StatusWriterStats stats_;
  std::optional<Clock::time_point> last_sweep_;
  std::unordered_map<std::string, Sent> sent_;
  std::string sweep_keys_;  // the sweep's keys not yet queued, packed; sweep_ends_: where each ends
  std::vector<std::uint32_t> sweep_ends_;
  std::size_t sweep_next_ = 0;
};

}  // namespace ig::controller
