// The operator: the loops that write while leading (status, drift), plus the
// Events every replica records for its own denials and guarded changes.
//  - add_to(manager): the drift caches, the StatusWriter and the DriftAudit,
//    needs_leader; once stop_leading() returns no write starts.
//  - The ClusterListener methods only enqueue work.
//  - record_*() never block or do I/O (the webhook's thread): one Event
//    regarding the Component when cached, else the Namespace.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "admission/webhook.h"
#include "base/prometheus.h"
#include "controller/cluster.h"
#include "controller/drift.h"
#include "controller/status_writer.h"
#include "kube/event_recorder.h"
#include "runtime/manager.h"

namespace ig::controller {

// Runtime class and shape (also the gate's) come from the cluster.
struct OperatorOptions {
  DriftOptions drift;  // eviction; gate: admission's settings (for the audit)
  StatusWriterOptions status;
  std::function<void(std::string_view level, std::string_view message)> log;
};

class Operator final : public ClusterListener {
 public:
  // `events` may be null. Not owned; both outlive this. Listens to the
  // cluster (construct before it starts).
  Operator(kube::Client& client, Cluster& cluster, kube::EventRecorder* events, OperatorOptions options);
  ~Operator() override;

  void add_to(runtime::Manager& manager);
  bool leading() const noexcept { return leading_.load(std::memory_order_acquire); }

  void component_changed(std::string_view key) override;
  void sandbox_changed() override;

  void record_denial(const admission::DenialNotice& denial) noexcept;
  // Normal when enforcement or trust tightens, else Warning.
  void record_guarded_change(const admission::GuardedChangeNotice& notice) noexcept;

  // The leader's caches (pods, audit namespaces, their pods); none otherwise.
  std::vector<CacheView> caches() const { return drift_.cache_views(); }
  void write_metrics(prometheus::TextWriter& out) const;

 private:
  StatusWriterOptions status_options(OperatorOptions& o);
  DriftOptions drift_options(OperatorOptions& o);

  Cluster& cluster_;
  kube::EventRecorder* events_;
  std::function<void(std::string_view, std::string_view)> log_;
  std::atomic<bool> leading_{false};
  std::shared_ptr<Clock> clock_ = Clock::steady();  // the engine's
  StatusWriter status_;  // its drift counts come from drift_, built next (read only once started)
  DriftAudit drift_;
};

}  // namespace ig::controller
