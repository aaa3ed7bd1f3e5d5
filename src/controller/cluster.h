// The product's view of a cluster, on every replica (it only reads): caches
// of Components, RuntimeClasses and Nodes adapted to admission's
// ComponentLookup and SandboxView.
//  - components().find(): the cache; on a miss ONE live GET bounded by
//    `lookup_timeout` (through `lookup_client` when given), collapsed across
//    concurrent misses of one Component, a Found/NotFound answer remembered
//    for a second. An API or decode error is Status::Error (the pod
//    rules deny it: fail closed), counted and logged at most once per 10 s.
//  - sandbox() is assess_sandbox() of the caches, recomputed on every
//    RuntimeClass or Node event; unavailable until they have synced, and
//    after a change of the RuntimeClass's scheduling until every Node is
//    fitted under the new one.
//  - admission_sandbox(): sandbox(), but unavailable once the RuntimeClass or
//    Node cache has made no progress for `sandbox_stale_after`. sandbox()
//    (status, drift) keeps the last assessment.
//  - A ClusterListener set before start() hears each Component change and
//    each availability change on the reflector threads; it must not block.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "admission/context.h"
#include "base/clock.h"
#include "base/prometheus.h"
#include "controller/component_status.h"
#include "controller/sandbox_rule.h"
#include "kube/api.h"
#include "kube/reflector.h"
#include "kube/store.h"
#include "model/component.h"
#include "policy/gate.h"
#include "runtime/single_flight.h"

namespace ig::controller {

inline constexpr kube::Resource kComponents{"gibson.zeroroot.ai", "v1alpha1", "components",
                                            "Component", true};

struct ClusterOptions {
  std::string runtime_class;       // --runtime-class
  policy::DeploymentShape shape{};  // GIBSON_UNTRUSTED_EXEC
  std::chrono::milliseconds lookup_timeout{2000};
  std::size_t page_size = 500;
  std::chrono::milliseconds watch_silence{150'000};        // kube::ReflectorOptions::watch_silence
  std::chrono::milliseconds sandbox_stale_after{300'000};  // see admission_sandbox(); 0: never
  std::function<void(std::string_view level, std::string_view message)> log;
};

class ClusterListener {
 public:
  virtual ~ClusterListener() = default;
  virtual void component_changed(std::string_view key) = 0;  // "": any may have
  virtual void sandbox_changed() = 0;
};

// One cache's figures for the shared cache metric families.
struct CacheView {
  std::string_view name;
  const kube::Reflector* reflector;
  std::size_t size;
  bool synced;
  std::uint64_t decode_errors;
};
template <typename T>
CacheView cache_view(std::string_view name, const kube::Reflector& reflector, const kube::Store<T>& store) {
  return {name, &reflector, store.size(), store.synced(), store.decode_errors()};
}
void write_cache_metrics(prometheus::TextWriter& out, std::span<const CacheView> caches);

class ClusterSandbox final : public admission::SandboxView {
 public:
  policy::SandboxAvailability availability() const noexcept override;
  std::string describe() const override;
  std::size_t capable_nodes() const noexcept { return capable_.load(std::memory_order_relaxed); }
  // Returns true when availability or (while unavailable) the reason changed.
  bool update(const SandboxAssessment& a);

 private:
  std::atomic<policy::SandboxAvailability> availability_{policy::SandboxAvailability::Unavailable};
  std::atomic<std::size_t> capable_{0};
  mutable std::mutex mu_;
  std::string reason_ = "unavailable: the RuntimeClass and Node caches have not synced yet";
};

// `sandbox`, but unavailable once either cache is stale (admission_sandbox()).
class FreshSandbox final : public admission::SandboxView {
 public:
  FreshSandbox(const ClusterSandbox& sandbox, std::chrono::milliseconds stale_after,
               const kube::Reflector* runtime_classes, const kube::Reflector* nodes)
      : sandbox_(sandbox), stale_after_(stale_after), runtime_classes_(runtime_classes), nodes_(nodes) {}
  policy::SandboxAvailability availability() const noexcept override;
  std::string describe() const override;
  // The stale cache's reflector, or nullptr when both are fresh.
  const kube::Reflector* stale() const noexcept;

 private:
  const ClusterSandbox& sandbox_;
  std::chrono::milliseconds stale_after_;
  const kube::Reflector* runtime_classes_;
  const kube::Reflector* nodes_;
};

// The Components cache as admission reads it: a Component not cached is not there.
class CachedComponents : public admission::ComponentLookup {
 public:
  explicit CachedComponents(const kube::Store<ComponentRecord>& store) : store_(store) {}
  admission::LookupResult find(std::string_view ns, std::string_view name) const override;

 protected:
  const kube::Store<ComponentRecord>& store_;
};

class ClusterComponents final : public CachedComponents {
 public:
  using LogFn = std::function<void(std::string_view level, std::string_view message)>;
  ClusterComponents(const kube::Store<ComponentRecord>& store, kube::Client& client,
                    std::chrono::milliseconds timeout, LogFn log, std::shared_ptr<Clock> clock = Clock::steady())
      : CachedComponents(store),
        client_(client),
        timeout_(timeout),
        log_(std::move(log)),
        clock_(std::move(clock)),
        flights_(std::chrono::seconds(1), kMaxRemembered, clock_) {}
  admission::LookupResult find(std::string_view ns, std::string_view name) const override;
  // GETs made (one per collapsed group of misses).
  std::uint64_t live_gets() const noexcept { return live_gets_.load(std::memory_order_relaxed); }
  std::uint64_t lookup_errors() const noexcept { return lookup_errors_.load(std::memory_order_relaxed); }
  // Misses answered by another's GET: one in flight, or a remembered answer.
  std::uint64_t shared() const noexcept { return flights_.shared(); }

 private:
  static constexpr std::size_t kMaxRemembered = 4096;
  admission::LookupResult fetch(std::string_view ns, std::string_view name) const;
  // Counted and logged (at most once per 10 s): Status::Error.
  admission::LookupResult failed(std::string_view ns, std::string_view name, std::string error) const;

  kube::Client& client_;
  std::chrono::milliseconds timeout_;
  LogFn log_;
  const std::shared_ptr<Clock> clock_;
  mutable std::atomic<std::uint64_t> live_gets_{0};
  mutable std::atomic<std::uint64_t> lookup_errors_{0};
  mutable runtime::SingleFlight<admission::LookupResult> flights_;  // by object key
  mutable std::mutex log_mu_;  // guards the two below
  mutable Clock::time_point last_log_{};
  mutable std::uint64_t errors_at_last_log_ = 0;
};

class Cluster {
 public:
  // `lookup_client`: components()' live GETs (not owned; nullptr: `client`).
  Cluster(kube::Client& client, ClusterOptions options, kube::Client* lookup_client = nullptr);
  ~Cluster();

  // Before start(); not owned; nullptr: none.
  void set_listener(ClusterListener* listener) noexcept { listener_ = listener; }
  void start();
  void stop() noexcept;
  // Every cache has listed and the sandbox was assessed from them (until
  // then nothing may act on its "unavailable"); stays true.
  bool synced() const noexcept;
  // synced(), and not while the Nodes are listed again under a new
  // scheduling: what writes from the sandbox (status, drift) waits for it.
  bool settled() const noexcept;

  const admission::ComponentLookup& components() const noexcept { return lookup_; }
  const admission::SandboxView& sandbox() const noexcept { return sandbox_; }
  const admission::SandboxView& admission_sandbox() const noexcept { return *fresh_sandbox_; }
  std::size_t component_count() const { return components_.size(); }
  const kube::Store<ComponentRecord>& component_records() const noexcept { return components_; }
  const ClusterOptions& options() const noexcept { return options_; }
  // `more`: further caches (the operator's pods) in the same families.
  void write_metrics(prometheus::TextWriter& out, std::span<const CacheView> more = {}) const;

 private:
  void recompute_sandbox();
  void start_nodes();
  std::shared_ptr<const NodeProjection> projection() const;

  kube::Client& client_;
  ClusterOptions options_;
  std::mutex recompute_mu_;  // also guards nodes_started_, stopped_
  mutable std::mutex projection_mu_;
  std::shared_ptr<const NodeProjection> projection_ = std::make_shared<const NodeProjection>();  // what Nodes are fitted under now
  bool nodes_started_ = false, stopped_ = false;
  std::atomic<bool> sandbox_assessed_{false};  // see synced()
  std::atomic<bool> sandbox_settled_{false};   // see settled()
  ClusterListener* listener_ = nullptr;
  kube::Store<ComponentRecord> components_;
  kube::Store<RuntimeClassFacts> runtime_classes_;
  kube::Store<NodeFit> nodes_;
  ClusterSandbox sandbox_;
  ClusterComponents lookup_;
  std::unique_ptr<kube::Reflector> component_reflector_, runtime_class_reflector_, node_reflector_;
  std::unique_ptr<FreshSandbox> fresh_sandbox_;
};

}  // namespace ig::controller
