// The Component status loop (leader only; docs/operations.md, "Component
// status"): a reconciler on the engine keeping every Component's status
// subresource equal to desired_status(), writing only when it differs.
// Triggers: a Component change (its key), a drift or unbound count change
// (its Component's key), a sandbox flip, a relist or a new term (kSweep:
// every key, debounced to one sweep per sweep_interval).
//
// Contract:
//  - reconcile(key) compares with the status the Components CACHE holds
//    (status_fingerprint(), holds_status(): the gate's own fields and
//    conditions only), never with what this replica last sent, so a status
//    overwritten or lost in a relist is written again. Bounded exception: a
//    key reconciled again before the watch shows our write is not written
//    twice for up to echo_wait, then checked again. A new term forgets it.
//  - Nothing is written while ready() is false (requeued after
//    not_ready_poll), nor once the CancelToken is stopped (a write in flight
//    is abandoned).
//  - The write (write_status(), the one place): a forced server-side apply
//    (apply_configuration(), kFieldManager) bounded by write_timeout, then
//    leftover_fields_patch() when the answer still holds a field left out.
//  - 404 drops the key; Retry-After is honoured; other errors are retried
//    with the engine's backoff (retry_initial doubling to retry_max), logged
//    once per distinct message.
//  - Sweeps are debounced: at most one per sweep_interval, so over T seconds
//    of sandbox flips a Component is written at most 1 + ceil(T /
//    sweep_interval) times by sweeps.
//  - A sweep feeds the queue kSweepBatch keys at a time; the rest wait
//    packed (about 30 bytes a key, not a queue entry's ~270).
//  - enqueue*() are thread-safe, never block on the network, and are dropped
//    while not leading.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
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
  std::function<std::time_t()> now;                                         // empty: time()
  std::chrono::milliseconds retry_initial{500}, retry_max{30'000};
  std::size_t workers = 1;  // --status-workers; at least 1
  std::chrono::milliseconds sweep_interval{10'000};
  std::chrono::milliseconds not_ready_poll{200};
  std::chrono::milliseconds echo_wait{10'000};
  std::chrono::milliseconds write_timeout{30'000};  // one apply, rate-limiter wait included
  std::shared_ptr<Clock> clock;  // the engine's; empty: steady
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
  // The key of a sweep (no Component key is empty).
  static constexpr std::string_view kSweep = "";
  // The key of a sweep's next batch (no Component key is "/").
  static constexpr std::string_view kSweepMore = "/";
  static constexpr std::size_t kSweepBatch = 1000;

  StatusWriter(kube::Client& client, const kube::Store<ComponentRecord>& components,
               const admission::SandboxView& sandbox, StatusWriterOptions options);
  StatusWriter(const StatusWriter&) = delete;
  StatusWriter& operator=(const StatusWriter&) = delete;

  // The controller to run while leading (runtime::Manager::add(..., true)).
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }

  void enqueue(std::string_view key);  // "" : enqueue_all()
  void enqueue_all();
  StatusWriterStats stats() const;

  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);

 private:
  // A new sweep (`fresh`: every key of the cache packed) or its next batch.
  Result<runtime::Requeue> sweep(bool fresh);
  // `interim`: the fingerprint of the apply's answer when a merge patch
  // followed it (a state of our own the cache may show first), else 0.
  kube::ApiResult<nlohmann::json> write_status(const ComponentRecord& record, const nlohmann::json& status,
                                               const runtime::CancelToken& cancel, std::uint64_t& interim);

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  StatusWriterOptions options_;
  std::shared_ptr<runtime::Controller<std::string>> controller_;

  // A write the cache does not show yet: the fingerprint the cache held when
  // it was sent, the interim one our own two-step write passes through (0:
  // none), the one sent, and when.
  struct Sent {
    std::uint64_t before = 0, interim = 0, sent = 0;
    Clock::time_point at;
  };

  mutable std::mutex mu_;
  StatusWriterStats stats_;
  std::optional<Clock::time_point> last_sweep_;
  std::unordered_map<std::string, Sent> sent_;
  // The sweep's keys not yet queued: one string, where each key ends.
  std::string sweep_keys_;
  std::vector<std::uint32_t> sweep_ends_;
  std::size_t sweep_next_ = 0;
};

}  // namespace ig::controller
