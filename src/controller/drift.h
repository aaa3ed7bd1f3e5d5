// The drift audit (leader only; docs/operations.md, "Drift"): running
// component pods placed against what the gate decides now, reported and
// (opt-in) evicted. A reconciler on the engine; start()/stop() own its caches.
//  - kPass: once the pod cache has listed and `inputs_ready` holds, after
//    changes (at most every 200 ms) and every 30 s: the per-Component drift
//    and unbound counts (`on_count_change` hears which changed), PodDrifted
//    per newly drifted pod, and audit namespaces' running pods judged as
//    /mutate/pods would (WouldDenyWhenEnforced per new one).
//  - A pod key: with `evict`, the eviction of a pod LessSafe for
//    evict_settle, at most evict_per_minute; 429 waits Retry-After, 404
//    forgets, other failures back off. None once the CancelToken is stopped.
//  - drifted(), unbound(), synced(), write_metrics() are thread-safe.
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
#include "base/token_bucket.h"
#include "controller/cluster.h"
#include "controller/component_status.h"
#include "kube/api.h"
#include "kube/event_recorder.h"
#include "kube/reflector.h"
#include "kube/store.h"
#include "model/pod.h"
#include "policy/gate.h"
#include "runtime/controller.h"

namespace ig::controller {

enum class Drift : std::uint8_t { None, LessSafe, Elsewhere };
// Pure: RequireSetec or Deny off the sandbox -> LessSafe; Deny or
// AllowInProcess on it -> Elsewhere; otherwise None.
Drift classify_drift(policy::Decision decision, bool on_sandbox) noexcept;

// The Component as an Event's regarding object (`uid` empty: unknown).
kube::ObjectReference component_reference(std::string_view ns, std::string_view name, std::string uid);

struct PodPlacement {
  std::string namespace_, name, uid;
  std::string component;      // the label's value
  std::string runtime_class;  // spec.runtimeClassName, "" when unset
  bool running = true;        // not Succeeded/Failed, not being deleted
  std::optional<model::PodFacts> facts;  // decode_audit_pod's, while running and readable
};
Result<PodPlacement> decode_pod_placement(const nlohmann::json& pod);

struct AuditNamespace {
  std::string name, uid;
};
Result<AuditNamespace> decode_audit_namespace(const nlohmann::json& ns);

// A running pod as admission reads it on CREATE: without ephemeral
// containers (added later, judged on their own by /validate/pods).
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
// Pure: the pods in `audit_namespaces` that admission would deny on CREATE
// (Stage::Mutate), sorted by namespace and name.
std::vector<WouldDeny> audit_would_deny(std::span<const std::shared_ptr<const AuditPod>> pods,
                                        const std::set<std::string, std::less<>>& audit_namespaces,
                                        const admission::AdmissionContext& context);
// The gauge's contents: (namespace, reason) -> pods; no zero entries.
using WouldDenyCounts = std::map<std::pair<std::string, std::string>, std::size_t>;
WouldDenyCounts count_would_deny(std::span<const WouldDeny> found);

struct DriftOptions {
  bool evict = false;                              // --evict-drifted
  double evict_per_minute = 10;                    // --evict-rate
  std::chrono::milliseconds evict_settle{60'000};  // --drift-eviction-settle
  std::shared_ptr<Clock> clock;  // required: the engine's (passes, settle time, rate limit)
  std::function<bool()> inputs_ready;  // Cluster::settled(); no pass runs otherwise; empty: always
  std::function<void(std::string_view component_key)> on_count_change;
  admission::GateSettings gate;  // admission's: the runtime class, the shape; the audit's (Components: the cache only)
  std::function<void(std::string_view level, std::string_view message)> log;
};

class DriftAudit {
 public:
  static constexpr std::string_view kPass = "";

  // `events` may be null. Not owned; they outlive this.
  DriftAudit(kube::Client& client, const kube::Store<ComponentRecord>& components,
             const admission::SandboxView& sandbox, kube::EventRecorder* events, DriftOptions options);
  ~DriftAudit();

  // Run while leading, between start() and stop() of the term's caches.
  std::shared_ptr<runtime::Runnable> runnable() const { return controller_; }
  void start();
  void stop() noexcept;
  // A pass soon (at most every 200 ms); dropped while not leading.
  void mark_dirty() noexcept;
  Result<runtime::Requeue> reconcile(const std::string& key, const runtime::CancelToken& cancel);
  // The pod cache has listed and a pass has run since start().
  bool synced() const noexcept { return audited_.load(std::memory_order_acquire); }
  std::size_t drifted(std::string_view component_key) const;
  // Its running pods on the sandbox that would be unbound outside a microVM (RequireSetec only).
  UnboundPods unbound(std::string_view component_key) const;
  void write_metrics(prometheus::TextWriter& out) const;
  // The running caches' figures; none while not leading.
  std::vector<CacheView> cache_views() const;

 private:
  struct DriftedPod {
    std::string component_key;
    std::string uid;
    Drift drift;
    bool done = false;  // evicted, or found gone, since the pass
    std::string note;   // the PodDrifted Event's
    Clock::time_point first_seen{};  // the first pass that saw it drift so (its settle time runs from it)
  };
  void pass();
  Result<runtime::Requeue> evict(const std::string& pod_key, const runtime::CancelToken& cancel);
  void forget(const std::string& pod_key);  // under mu_: not evicted again before the next pass
  // A Warning Event regarding the Component (when there is a recorder and the Component is cached).
  void record_event(const std::string& component_key, std::string reason, std::string action, std::string note);
  void audit_pass();
  void stop_audit_pods() noexcept;
  bool keep_audit_pod(const nlohmann::json& pod) const;

  kube::Client& client_;
  const kube::Store<ComponentRecord>& components_;
  const admission::SandboxView& sandbox_;
  kube::EventRecorder* events_;
  const DriftOptions options_;
  TokenBucket evict_bucket_;  // under mu_

  kube::Store<PodPlacement> pods_;
  std::unique_ptr<kube::Reflector> reflector_;

  // The audit pod reflector runs only while a namespace is in audit mode (audit_set_: its `keep`).
  CachedComponents cached_components_;  // the audit's: the cache only (synced before any pass)
  const admission::AdmissionContext audit_context_;
  kube::Store<AuditNamespace> audit_namespaces_;
  kube::Store<AuditPod> audit_pods_;
  std::unique_ptr<kube::Reflector> namespace_reflector_, audit_pod_reflector_;
  std::atomic<bool> audit_pods_running_{false};

  std::shared_ptr<runtime::Controller<std::string>> controller_;

  mutable std::mutex mu_;
  bool stopping_ = true;
  std::optional<Clock::time_point> last_pass_;  // when the last pass began
  std::set<std::string, std::less<>> evict_queued_;  // pod keys queued for eviction this term
  std::set<std::string, std::less<>> audit_set_;     // the audit namespaces, for keep_audit_pod
  std::atomic<bool> audited_{false};
  std::map<std::string, std::size_t, std::less<>> counts_;   // component key -> drifted pods
  std::map<std::string, UnboundPods, std::less<>> unbound_;  // component key -> unbound outside a microVM (count > 0)
  std::map<std::string, DriftedPod> drifted_pods_;            // pod key -> why
  std::map<std::string, std::pair<std::string, admission::Reason>> audit_denied_;  // pod key -> uid, why (Events: new ones)
  WouldDenyCounts audit_counts_;  // the gauge
  std::uint64_t evicted_ = 0, eviction_blocked_ = 0, eviction_failed_ = 0;  // blocked: 429, a PDB said no
};

}  // namespace ig::controller
