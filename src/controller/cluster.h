// The product's view of a cluster: informer caches of Components,
// RuntimeClasses and Nodes (kube::Reflector + kube::Store), adapted to
// admission's ComponentLookup and SandboxView interfaces. Runs on every
// replica; it only reads from the API.
//
// Contract:
//  - start() starts one reflector thread per resource; stop() stops and
//    joins them. synced() is true once all three caches have listed and
//    the sandbox has been assessed from them.
//  - components().find() is a map find on immutable, already-decoded
//    Components; on a miss it makes ONE live GET bounded by
//    `lookup_timeout` (well inside the webhook's timeoutSeconds) before
//    answering NotFound, so a Component applied together with its Deployment
//    is found; an API error (or an undecodable Component) is Status::Error,
//    which the pod rules deny as a lookup error (fail closed). Each such
//    error counts in isolation_gate_component_lookup_errors_total and is
//    logged ("warn") at most once per `lookup_error_log_interval`, the line
//    saying how many failed since the last one (never one line per request).
//  - Live GETs are collapsed (singleflight): concurrent misses of one
//    (namespace, name) wait for the one GET in flight, at most
//    `lookup_timeout`, and share its answer, an error included. A Found or
//    NotFound answer is remembered for `lookup_remember` (default 1 s; the
//    cache, read first, serves a Component once its watch delivers it), an
//    error never. So 100 reviews of a just-created Component cost one GET,
//    not 100 of the shared rate limit. The GETs go through `lookup_client`
//    when given (serve: a client with its own rate limit, --kube-lookup-qps),
//    so status writes, Events and watches never queue ahead of them.
//  - sandbox() is recomputed by controller::assess_sandbox on every
//    RuntimeClass or Node event, so a change reaches decisions as soon as its
//    watch event arrives; until the caches have synced it reads unavailable.
//    Each change of availability (or of the reason while unavailable) is
//    logged once.
//  - The Node cache holds NodeFits (controller/sandbox_rule.h): each Node
//    evaluated against the RuntimeClass's scheduling (nodeSelector,
//    tolerations) when it arrived, not its labels and taints. So the Node
//    reflector starts once the RuntimeClass cache has listed, and when the
//    RuntimeClass's scheduling changes the Node cache is listed again under
//    the new projection; until every cached Node was fitted under it the
//    sandbox reads unavailable (fail closed: no Node is known to run the new
//    scheduling), never an answer made from fits of another scheduling. A
//    deleted RuntimeClass reads unavailable at once and lists nothing; when
//    it comes back with the same scheduling, the fits still hold.
//  - A ClusterListener set before start() hears, on the reflector threads,
//    each Component change (its key; "" after a relist) and each change of
//    sandbox availability: the operator's loops (controller/operator.h)
//    recompute from that. The listener must not block.
//  - admission_sandbox() is what admission decides with: sandbox(), unless
//    the RuntimeClass or the Node cache has had no list, event or bookmark
//    for longer than `sandbox_stale_after` (a watch that cannot be reopened,
//    an API server that is gone): then the sandbox is unknown, read as
//    unavailable, so untrusted pods are denied in the hosted shape rather
//    than decided from old facts (docs/operations.md, "Stale caches").
//    sandbox() itself (the operator's status and drift loops) keeps the last
//    assessment: a stale cache must not turn into status writes or evictions.
//  - write_metrics() exports the sandbox gauges and per-cache counters
//    (write_cache_metrics, shared with the operator's pod cache), the
//    staleness of each cache and its relists by cause.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>

#include "admission/context.h"
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
  std::chrono::milliseconds lookup_remember{1000};  // a live GET's Found/NotFound; 0: not remembered
  std::chrono::milliseconds lookup_error_log_interval{10'000};
  std::size_t page_size = 500;
  std::chrono::seconds watch_timeout{300};
  std::chrono::milliseconds watch_silence{150'000};        // kube::ReflectorOptions::watch_silence
  std::chrono::milliseconds sandbox_stale_after{300'000};  // see admission_sandbox(); 0: never
  kube::BackoffPolicy backoff;
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

// Admission's sandbox view: `sandbox`'s assessment while the caches it is
// made from are fresh; unavailable ("unknown") once either has made no
// progress for longer than `stale_after`. Reads two atomics and the clock.
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

class ClusterComponents final : public admission::ComponentLookup {
 public:
  using LogFn = std::function<void(std::string_view level, std::string_view message)>;
  using NowFn = std::function<std::chrono::steady_clock::time_point()>;
  ClusterComponents(const kube::Store<ComponentRecord>& store, kube::Client& client,
                    std::chrono::milliseconds timeout, std::chrono::milliseconds log_interval = {},
                    LogFn log = {}, std::chrono::milliseconds remember = std::chrono::milliseconds(1000),
                    NowFn now = {})
      : store_(store),
        client_(client),
        timeout_(timeout),
        log_interval_(log_interval),
        log_(std::move(log)),
        flights_(remember, kMaxRemembered,
                 now ? std::move(now) : NowFn([] { return std::chrono::steady_clock::now(); })) {}
  admission::LookupResult find(std::string_view ns, std::string_view name) const override;
  // GETs made (one per collapsed group of misses).
  std::uint64_t live_gets() const noexcept { return live_gets_.load(std::memory_order_relaxed); }
  std::uint64_t lookup_errors() const noexcept { return lookup_errors_.load(std::memory_order_relaxed); }
  // Misses answered by another's GET: one in flight, or a remembered answer.
  std::uint64_t shared() const noexcept { return flights_.shared(); }

 private:
  // Remembered answers at most; past it a new answer is not remembered
  // while none has expired (misses then each make their GET, collapsed
  // while in flight).
  static constexpr std::size_t kMaxRemembered = 4096;
  admission::LookupResult fetch(std::string_view ns, std::string_view name) const;
  void note_error(std::string_view ns, std::string_view name, std::string_view error) const;

  const kube::Store<ComponentRecord>& store_;
  kube::Client& client_;
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds log_interval_;
  LogFn log_;
  mutable std::atomic<std::uint64_t> live_gets_{0};
  mutable std::atomic<std::uint64_t> lookup_errors_{0};
  mutable runtime::SingleFlight<admission::LookupResult> flights_;  // by object key
  mutable std::mutex log_mu_;  // guards the two below
  mutable std::chrono::steady_clock::time_point last_log_{};
  mutable std::uint64_t errors_at_last_log_ = 0;
};

class Cluster {
 public:
  // `lookup_client`: the client of components()' live GETs (not owned;
  // nullptr: `client`).
  Cluster(kube::Client& client, ClusterOptions options, kube::Client* lookup_client = nullptr);
  ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // Before start(); not owned; nullptr: none.
  void set_listener(ClusterListener* listener) noexcept { listener_ = listener; }
  void start();
  void stop() noexcept;
  // Every cache has listed once and the sandbox has been assessed from them
  // (the RuntimeClass and every Node's fit): until then availability() is
  // the initial "unavailable", which nothing may act on (the webhook is not
  // ready, the operator's loops wait). Turns true once and stays true.
  bool synced() const noexcept;
  // synced(), and the sandbox's current assessment is a whole one: false
  // while the Nodes are listed again under a RuntimeClass's new scheduling
  // (admission denies what needs the sandbox meanwhile: fail closed). What
  // writes to the cluster from the sandbox (status, drift) waits for it, so
  // a nodeSelector edit does not rewrite every Component's status twice.
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
  std::mutex recompute_mu_;
  mutable std::mutex projection_mu_;
  std::shared_ptr<const NodeProjection> projection_ = std::make_shared<const NodeProjection>();  // what Nodes are fitted under now
  std::mutex start_mu_;  // starting the Node reflector, stopped_
  std::atomic<bool> nodes_started_{false};
  std::atomic<bool> sandbox_assessed_{false};  // see synced()
  std::atomic<bool> sandbox_settled_{false};   // see settled()
  bool stopped_ = false;
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
