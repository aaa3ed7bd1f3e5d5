// The Component status loop (leader only; docs/operations.md, "Component
// status"): keeps every Component's status subresource equal to
// desired_status() (controller/component_status.h), writing only when the
// cached object's status differs from it.
//
// A reconciler on the engine (runtime/controller.h): reconcile(key) is the
// whole loop body; the queue, workers, retries and cancellation are the
// engine's. Triggers: a Component change enqueues its key, a drift (or
// unbound-outside-a-microVM) count change its Component's key, a sandbox flip or a relist every key
// (enqueue_all: one sweep key, debounced), a new term of leadership every key.
//
// Contract:
//  - reconcile(key): the desired status is compared with the status the
//    Components CACHE holds (its fingerprint), never with what this replica
//    last sent: a status another writer overwrote, or one lost in a relist,
//    is written again at the next event or sweep of that Component. One
//    exception, bounded: a key reconciled again before the watch shows our
//    write (the cache still holds what it held when we wrote, and we want
//    what we wrote) is not written twice for up to echo_wait; it is checked
//    again when echo_wait has passed (the interim state of a write followed
//    by its leftover merge patch counts as not moved), so a write the cache never shows (lost
//    in a relist, say) is repeated. A new term of leadership forgets what
//    the last one sent.
//  - Nothing is written while ready() is false (the operator's: caches
//    synced, Cluster::settled(), the drift audit has made a pass): the key is
//    requeued after not_ready_poll; nor once the reconcile's CancelToken is
//    stopped (leadership lost): the write is cancellable, so a write in
//    flight is abandoned too.
//  - The comparison covers only the gate's own fields and conditions
//    (status_fingerprint(), holds_status()): another manager's condition
//    causes no write.
//  - The write (write_status(), the one place): a server-side apply of the
//    status subresource (apply_configuration(), field manager kFieldManager,
//    force: the gate is the sole owner of its fields), bounded by
//    write_timeout; runtimeClassName is left out when not RequireSetec, so
//    the API server removes it (and, when the answer still holds it, a merge
//    patch removes it: an earlier version's merge patches co-own it;
//    leftover_fields_patch()).
//  - Errors: 404 (the Component is gone) drops the key; Retry-After is
//    honoured; others are errors the engine retries with per-key backoff
//    (retry_initial doubling to retry_max), logged once per distinct message.
//  - Sweeps are debounced: a sweep runs at once when none ran for
//    sweep_interval, else when sweep_interval has passed since the last one
//    (requests meanwhile merge into that one). Over T seconds of sandbox
//    flips a Component is therefore written at most 1 + ceil(T /
//    sweep_interval) times by sweeps.
//  - A sweep feeds the queue kSweepBatch keys at a time (the next batch
//    when the sweep's continuation, queued behind a batch, comes round); the
//    rest wait packed, about 30 bytes a key instead of a queue entry each
//    (~270 bytes: the queue's deque, dirty set and added-at map each hold a
//    copy), so a sweep of 100,000 Components holds about 3 MiB, not 27.
//  - enqueue*() are thread-safe, never block on the network, and are dropped
//    while not leading (a term starts with a sweep).
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
  // The one write of a status (to become a server-side apply).
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
