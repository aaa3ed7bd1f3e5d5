// The drift audit (leader only; docs/operations.md, "Drift"): running
// component pods whose placement contradicts what the gate decides for
// their Component now, reported and (opt-in) evicted.
//
//   classify_drift(decision, on_sandbox) (pure):
//     RequireSetec,   not on the sandbox -> LessSafe   (it should be in a microVM)
//     Deny,           not on the sandbox -> LessSafe   (it would not be admitted now)
//     Deny,           on the sandbox     -> Elsewhere  (safe, but not what the gate decides)
//     AllowInProcess, on the sandbox     -> Elsewhere
//     otherwise                          -> None
//   "on the sandbox" = spec.runtimeClassName is the configured RuntimeClass.
//
// Contract:
//  - A pod cache of its own (a reflector on pods with the label
//    gibson.zeroroot.ai/component, across namespaces, keeping only name,
//    namespace, uid, the label, runtimeClassName, and whether it is still
//    running: not Succeeded/Failed and no deletionTimestamp), started by
//    start() and stopped by stop() (each term of leadership).
//  - No pass runs until the pod cache has listed, nor while `inputs_ready`
//    is false: from the sandbox's initial (or a relist's interim)
//    "unavailable" a pass would report drift that is not there (and miss
//    pods of Components not listed yet). Then a pass runs after any change
//    (pods, Components, sandbox: mark_dirty()), at most every
//    `min_interval`, and every `resync`. A pass reads whole snapshots and
//    replaces the per-Component drift counts at once; a Component whose
//    count changed is reported to `on_count_change` (the status loop). A
//    pod that newly drifted records one Warning Event (reason PodDrifted)
//    on its Component.
//  - Eviction only with `evict`: LessSafe pods, through the Eviction API
//    (so PodDisruptionBudgets hold), at most `evict_per_minute` (a token
//    bucket, burst 1); 429 (a PDB) retries that pod after Retry-After (else
//    `evict_retry`); 404 forgets it. Each eviction is an Event (reason
//    Evicted) and a counter. Elsewhere pods are never evicted.
//  - Thread-safe readers: drifted(component_key), synced(), write_metrics().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "admission/context.h"
#include "base/prometheus.h"
#include "controller/cluster.h"
#include "controller/component_status.h"
#include "kube/api.h"
#include "kube/event_recorder.h"
#include "kube/rate_limiter.h"
#include "kube/reflector.h"
#include "kube/store.h"
#include "policy/gate.h"

namespace ig::controller {

inline constexpr kube::Resource kPods{"", "v1", "pods", "Pod", true};

enum class Drift : std::uint8_t { None, LessSafe, Elsewhere };
Drift classify_drift(policy::Decision decision, bool on_sandbox) noexcept;

struct PodPlacement {
  std::string namespace_, name, uid;
  std::string component;      // the label's value
  std::string runtime_class;  // spec.runtimeClassName, "" when unset
  bool running = true;        // not Succeeded/Failed, not being deleted
};
Result<PodPlacement> decode_pod_placement(const nlohmann::json& pod);

struct DriftOptions {
  std::string runtime_class;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  bool evict = false;
  double evict_per_minute = 10;
  std::chrono::milliseconds min_interval{200};
  std::chrono::milliseconds resync{30'000};
  std::chrono::milliseconds evict_retry{10'000};
  std::size_t page_size = 500;
  std::chrono::seconds watch_timeout{300};
  kube::BackoffPolicy backoff;
  // The Component and sandbox caches have synced and the sandbox is settled
  // (Cluster::settled()); no pass runs otherwise. Empty: always.
  std::function<bool()> inputs_ready;
  std::function<void(std::string_view component_key)> on_count_change;
  std::function<void(std::string_view level, std::string_view message)> log;
};

struct DriftStats {
  std::uint64_t passes = 0;
  std::uint64_t evicted = 0;
  std::uint64_t eviction_blocked = 0;  // 429: a PodDisruptionBudget said no (retried)
  std::uint64_t eviction_failed = 0;
};

class DriftAudit {
 public:
  // `events` may be null (no Events). Not owned; outlive this.
  DriftAudit(kube::Client& client, const kube::Store<ComponentRecord>& components,
             const admission::SandboxView& sandbox, kube::EventRecorder* events, DriftOptions options);
  ~DriftAudit();
  DriftAudit(const DriftAudit&) = delete;
  DriftAudit& operator=(const DriftAudit&) = delete;

  void start();
  void stop() noexcept;
  void mark_dirty() noexcept;
  // The pod cache has listed and a pass has run since start().
  bool synced() const noexcept { return audited_.load(std::memory_order_acquire); }
  std::size_t drifted(std::string_view component_key) const;
  DriftStats stats() const;
  // isolation_gate_drifted_pods{namespace,component}, isolation_gate_evictions_total{result}.
  void write_metrics(prometheus::TextWriter& out) const;
  // The pod cache's figures (for the shared cache metric families); nullopt
  // while not leading.
  std::optional<CacheView> cache_view() const;

 private:
  struct DriftedPod {
    std::string component_key;
    std::string uid;
    Drift drift;
  };
  void run();
  void pass();
  void evict_due();
  void record_event(const ComponentRecord& record, std::string reason,
                    std::string action, std::string note);

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  kube::EventRecorder* events_;
  const DriftOptions options_;
  kube::RateLimiter evict_limiter_;

  kube::Store<PodPlacement> pods_;
  std::unique_ptr<kube::Reflector> reflector_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = true;
  bool dirty_ = false;
  std::thread thread_;
  std::atomic<bool> audited_{false};
  std::map<std::string, std::size_t, std::less<>> counts_;   // component key -> drifted pods
  std::map<std::string, DriftedPod> drifted_pods_;            // pod key -> why
  std::map<std::string, std::chrono::steady_clock::time_point> evict_after_;  // pod key -> not before
  std::chrono::steady_clock::time_point next_evict_try_{};  // when the rate limit has a token again
  DriftStats stats_;
};

}  // namespace ig::controller
