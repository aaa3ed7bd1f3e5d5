// The drift audit (leader only; docs/operations.md, "Drift" and "Audit
// before enforcing"): running component pods whose placement contradicts what
// the gate decides for their Component now, reported and (opt-in) evicted.
//
// Contract:
//  - A reconciler on the engine (runnable(), run while leading between
//    start() and stop(), which own its caches); it owns no thread.
//  - Key kPass, the pass: over the pods labelled gibson.zeroroot.ai/component
//    (a cache of PodPlacement). None until that cache has listed and
//    `inputs_ready` holds (else after `not_ready_poll`): an interim
//    "unavailable" sandbox would report drift that is not there. Then after
//    any change (mark_dirty(), at most every `min_interval`) and every
//    `resync`. A pass replaces the per-Component drift counts and the pods
//    unbound outside a microVM (RequireSetec on the sandbox, with
//    admission::unbound_outside_microvm; one example: first pod by name)
//    at once, reports Components whose figures changed to `on_count_change`,
//    and records one Warning Event (PodDrifted) per newly drifted pod.
//  - Audit namespaces (gibson.zeroroot.ai/isolation=audit): each pass judges
//    their running pods as /mutate/pods would now (audit_would_deny),
//    replaces the gauge isolation_gate_audit_pods_would_deny{namespace,
//    reason}, and records one Warning Event (WouldDenyWhenEnforced) regarding
//    the Namespace per pod newly found (or with another reason or uid). Their
//    pod cache runs only while some namespace is in audit mode.
//  - A pod key (namespace/name): its eviction, only with `evict`, only of a
//    LessSafe pod that stayed so for `evict_settle` (DriftSettle), through
//    the Eviction API (PodDisruptionBudgets hold), at most `evict_per_minute`.
//    429 retries after Retry-After (else `evict_retry`), 404 forgets, other
//    failures are retried with the engine's backoff (`evict_retry` doubling
//    to `evict_retry_max`). Nothing is sent once the CancelToken is stopped;
//    one in flight is abandoned. Elsewhere pods are never evicted.
//  - Thread-safe readers: drifted(), unbound(), synced(), write_metrics().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "admission/answer.h"
#include "admission/context.h"
#include "base/clock.h"
#include "base/prometheus.h"
#include "controller/cluster.h"
#include "controller/component_status.h"
#include "kube/api.h"
#include "kube/event_recorder.h"
#include "kube/rate_limiter.h"
#include "kube/reflector.h"
#include "kube/store.h"
#include "model/pod.h"
#include "policy/gate.h"
#include "runtime/controller.h"

namespace ig::controller {

enum class Drift : std::uint8_t { None, LessSafe, Elsewhere };
// Pure; "on the sandbox": spec.runtimeClassName is the configured RuntimeClass.
//   RequireSetec or Deny, not on the sandbox -> LessSafe
//   Deny or AllowInProcess, on the sandbox   -> Elsewhere
//   otherwise                                -> None
Drift classify_drift(policy::Decision decision, bool on_sandbox) noexcept;

// When each drifted pod may be evicted: `settle` after the pass that first
// saw it drifted, per pod uid. Plain data, no clock: the caller passes the
// time of each pass.
class DriftSettle {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  explicit DriftSettle(std::chrono::milliseconds settle) : settle_(settle) {}
  // One pass: `uids` are the pods drifted (LessSafe) now; every other uid is
  // forgotten (no longer drifted, or gone).
  void observe(const std::set<std::string, std::less<>>& uids, time_point now);
  // First seen drifted + settle; nullopt when not drifted at the last pass.
  std::optional<time_point> evictable_at(std::string_view uid) const;
  std::size_t size() const noexcept { return first_seen_.size(); }

 private:
  std::chrono::milliseconds settle_;
  std::map<std::string, time_point, std::less<>> first_seen_;
};

struct PodPlacement {
  std::string namespace_, name, uid;
  std::string component;      // the label's value
  std::string runtime_class;  // spec.runtimeClassName, "" when unset
  bool running = true;        // not Succeeded/Failed, not being deleted
  // What admission reads of it (decode_audit_pod), while running; nullopt
  // when not running or not readable.
  std::optional<model::PodFacts> facts;
};
Result<PodPlacement> decode_pod_placement(const nlohmann::json& pod);

// The label value that puts a namespace in audit mode (the key is
// admission::kEnforcementLabel).
inline constexpr std::string_view kAuditValue = "audit";

// A namespace in audit mode: what the audit keeps of it.
struct AuditNamespace {
  std::string name, uid;
};
Result<AuditNamespace> decode_audit_namespace(const nlohmann::json& ns);

// A running pod, reduced to what admission reads of it on CREATE. Its
// ephemeral containers are left out: a pod is created without any (they are
// added later through pods/ephemeralcontainers, which /validate/pods judges
// on its own), so they are no part of what enforcement would say to it.
struct AuditPod {
  std::string uid;
  model::PodFacts facts;  // facts.namespace_ and facts.object_name: the pod's
};
Result<AuditPod> decode_audit_pod(const nlohmann::json& pod);
// Not Succeeded or Failed, and not being deleted.
bool pod_is_running(const nlohmann::json& pod);

// A running pod of an audit namespace that enforcement would deny.
struct WouldDeny {
  std::string namespace_, name, uid;
  admission::Reason reason{};
  std::string message;  // the denial's message, as /mutate/pods would give it
};
// Pure: the pods of `pods` in one of `audit_namespaces` that admission, with
// `context`, would deny on CREATE (Stage::Mutate: the sandbox's
// runtimeClassName would be patched in, so its absence is no denial),
// sorted by namespace and name.
std::vector<WouldDeny> audit_would_deny(std::span<const std::shared_ptr<const AuditPod>> pods,
                                        const std::set<std::string, std::less<>>& audit_namespaces,
                                        const admission::AdmissionContext& context);
// The gauge's contents: (namespace, reason) -> pods; no zero entries.
using WouldDenyCounts = std::map<std::pair<std::string, std::string>, std::size_t>;
WouldDenyCounts count_would_deny(std::span<const WouldDeny> found);

struct DriftOptions {
  std::string runtime_class;
  policy::DeploymentShape shape = policy::DeploymentShape::SetecOnly;
  bool evict = false;
  double evict_per_minute = 10;
  std::chrono::milliseconds min_interval{200};
  std::chrono::milliseconds resync{30'000};
  std::chrono::milliseconds evict_retry{10'000};
  std::chrono::milliseconds evict_retry_max{300'000};  // a failed eviction's backoff: evict_retry doubling to this
  std::chrono::milliseconds not_ready_poll{100};
  std::chrono::milliseconds evict_settle{60'000};  // --drift-eviction-settle
  std::size_t page_size = 500;
  std::chrono::seconds watch_timeout{300};
  kube::BackoffPolicy backoff;
  std::shared_ptr<Clock> clock;  // the engine's: passes, settle time, rate limit; empty: steady
  // The Component and sandbox caches have synced and the sandbox is settled
  // (Cluster::settled()); no pass runs otherwise. Empty: always.
  std::function<bool()> inputs_ready;
  std::function<void(std::string_view component_key)> on_count_change;
  // What admission decides audit namespaces' pods with (runtime class and
  // shape: the two above win). Components: the cache only (no live GET).
  admission::GateSettings gate;
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
  // The key of the audit pass (no pod key is empty).
  static constexpr std::string_view kPass = "";

  // `events` may be null (no Events). Not owned; outlive this.
  DriftAudit(kube::Client& client, const kube::Store<ComponentRecord>& components,
             const admission::SandboxView& sandbox, kube::EventRecorder* events, DriftOptions options);
  ~DriftAudit();
  DriftAudit(const DriftAudit&) = delete;
  DriftAudit& operator=(const DriftAudit&) = delete;

  // The controller to run while leading (runtime::Manager::add(..., true)),
  // between start() and stop().
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }
  // The caches of a term of leadership: start() before the controller runs,
  // stop() once it has stopped.
  void start();
  void stop() noexcept;
  // A pass soon (at most every min_interval); dropped while not leading.
  void mark_dirty() noexcept;
  // The whole loop body: kPass, or a pod key (its eviction).
  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);
  // The pod cache has listed and a pass has run since start().
  bool synced() const noexcept { return audited_.load(std::memory_order_acquire); }
  std::size_t drifted(std::string_view component_key) const;
  // Its running pods on the sandbox that would be unbound outside a microVM (RequireSetec only).
  UnboundPods unbound(std::string_view component_key) const;
  DriftStats stats() const;
  // isolation_gate_drifted_pods{namespace,component}, isolation_gate_evictions_total{result}.
  void write_metrics(prometheus::TextWriter& out) const;
  // The caches' figures (for the shared cache metric families): the pods,
  // the audit namespaces and (while it runs) the audit namespaces' pods;
  // none while not leading.
  std::vector<CacheView> cache_views() const;
  // The audit gauge now (tests).
  WouldDenyCounts would_deny() const;

 private:
  struct DriftedPod {
    std::string component_key;
    std::string uid;
    Drift drift;
  };
  Result<runtime::Requeue> audit(const runtime::CancelToken& cancel);
  void pass();
  Result<runtime::Requeue> evict(const std::string& pod_key, const runtime::CancelToken& cancel);
  void record_event(const ComponentRecord& record, std::string reason,
                    std::string action, std::string note);
  void audit_pass();
  void stop_audit_pods() noexcept;
  bool keep_audit_pod(const nlohmann::json& pod) const;

  class CachedComponents final : public admission::ComponentLookup {
   public:
    explicit CachedComponents(const kube::Store<ComponentRecord>& store) : store_(store) {}
    admission::LookupResult find(std::string_view ns, std::string_view name) const override;

   private:
    const kube::Store<ComponentRecord>& store_;
  };

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  kube::EventRecorder* events_;
  const DriftOptions options_;
  kube::RateLimiter evict_limiter_;

  kube::Store<PodPlacement> pods_;
  std::unique_ptr<kube::Reflector> reflector_;

  // Audit mode. The reflectors are made by start() (the pod one started by
  // audit_pass() only while a namespace is in audit mode); the rest is the
  // drift thread's, but for the published namespace set (the audit pod
  // cache's `keep`, on its reflector thread).
  CachedComponents cached_components_;
  const admission::AdmissionContext audit_context_;
  kube::Store<AuditNamespace> audit_namespaces_;
  kube::Store<AuditPod> audit_pods_;
  std::unique_ptr<kube::Reflector> namespace_reflector_, audit_pod_reflector_;
  std::atomic<bool> audit_pods_running_{false};
  std::set<std::string, std::less<>> audit_listed_for_;  // the set the pod cache was (re)listed for
  mutable std::mutex audit_set_mu_;
  std::shared_ptr<const std::set<std::string, std::less<>>> audit_set_;  // published for keep

  std::shared_ptr<runtime::Controller<std::string>> controller_;

  mutable std::mutex mu_;
  bool stopping_ = true;
  std::optional<Clock::time_point> last_pass_;  // when the last pass began
  std::set<std::string, std::less<>> evict_queued_;  // pod keys queued for eviction this term
  std::atomic<bool> audited_{false};
  std::map<std::string, std::size_t, std::less<>> counts_;   // component key -> drifted pods
  std::map<std::string, UnboundPods, std::less<>> unbound_;  // component key -> unbound outside a microVM (count > 0)
  std::map<std::string, DriftedPod> drifted_pods_;            // pod key -> why
  std::map<std::string, Clock::time_point> evict_after_;  // pod key -> not before
  DriftSettle settle_{options_.evict_settle};             // under mu_
  struct AuditDenied {
    std::string uid;
    admission::Reason reason;
  };
  std::map<std::string, AuditDenied> audit_denied_;  // pod key -> why (Events: only new ones)
  WouldDenyCounts audit_counts_;                     // the gauge
  DriftStats stats_;
};

}  // namespace ig::controller
