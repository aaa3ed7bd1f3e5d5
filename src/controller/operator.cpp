#include "controller/operator.h"

#include "runtime/service.h"

#include "base/quote.h"

namespace ig::controller {

StatusWriterOptions Operator::status_options(OperatorOptions& o) {
  StatusWriterOptions s = std::move(o.status);
  s.clock = clock_;
  s.runtime_class = cluster_.options().runtime_class;
  s.shape = cluster_.options().shape;
  s.drifted_pods = [this](std::string_view key) { return drift_.drifted(key); };
  s.unbound_pods = [this](std::string_view key) { return drift_.unbound(key); };
  // Never from caches not synced or a sandbox not settled (its interim "unavailable").
  s.ready = [this] { return cluster_.settled() && drift_.synced(); };
  if (!s.log) s.log = o.log;
  return s;
}

DriftOptions Operator::drift_options(OperatorOptions& o) {
  DriftOptions d = std::move(o.drift);
  d.clock = clock_;
  d.gate.runtime_class = cluster_.options().runtime_class;
  d.gate.shape.shape = cluster_.options().shape;
  d.inputs_ready = [this] { return cluster_.settled(); };
  d.on_count_change = [this](std::string_view key) { status_.enqueue(key); };
  if (!d.log) d.log = o.log;
  return d;
}

Operator::Operator(kube::Client& client, Cluster& cluster, kube::EventRecorder* events,
                   OperatorOptions options)
    : cluster_(cluster),
      events_(events),
      log_(options.log),
      status_(client, cluster.component_records(), cluster.sandbox(), status_options(options)),
      drift_(client, cluster.component_records(), cluster.sandbox(), events, drift_options(options)) {
  cluster_.set_listener(this);
}

Operator::~Operator() { cluster_.set_listener(nullptr); }

void Operator::add_to(runtime::Manager& manager) {
  // A term: the drift caches first (joined last), then the two controllers.
  manager.add(std::make_shared<runtime::Service>(
                  "leader-caches",
                  [this] {
                    leading_.store(true, std::memory_order_release);
                    if (log_) log_("info", "leading: starting the status, drift and eviction loops");
                    drift_.start();
                  },
                  [this] {
                    drift_.stop();
                    leading_.store(false, std::memory_order_release);
                    if (log_) log_("info", "not leading: the status, drift and eviction loops stopped");
                  }),
              /*needs_leader=*/true);
  manager.add(status_.runnable(), /*needs_leader=*/true);
  manager.add(drift_.runnable(), /*needs_leader=*/true);
}

void Operator::component_changed(std::string_view key) {
  if (!leading()) return;
  status_.enqueue(key);  // "" (a relist): every key
  drift_.mark_dirty();
}

void Operator::sandbox_changed() {
  if (!leading()) return;
  status_.enqueue_all();
  drift_.mark_dirty();
}

void Operator::record_denial(const admission::DenialNotice& d) noexcept {
  if (!events_) return;
  try {
    std::shared_ptr<const ComponentRecord> record;
    if (!d.component.empty()) record = cluster_.component_records().find(kube::object_key(d.namespace_, d.component));
    events_->record({record ? component_reference(d.namespace_, d.component, record->uid.str())
                            : kube::ObjectReference{"Namespace", "v1", "", std::string(d.namespace_), ""},
                     {}, "Warning", std::string(admission::to_string(d.reason)), "Admit",
                     std::string(d.kind) + (d.name.empty() ? "" : " " + quote(d.name)) + " denied by " +
                         std::string(d.endpoint) + ": " + std::string(d.message)});
  } catch (...) {  // never let an Event disturb an answer
  }
}

void Operator::record_guarded_change(const admission::GuardedChangeNotice& n) noexcept {
  if (!events_) return;
  try {
    using admission::Reason;
    const admission::GuardedChange& c = n.change;
    const bool component = c.kind == model::kComponentKind;
    auto record = component ? cluster_.component_records().find(kube::object_key(c.namespace_, c.name)) : nullptr;
    const bool tightened = n.reason == Reason::EnforcementAdded || n.reason == Reason::ContentTrustTightened;
    events_->record({component ? component_reference(c.namespace_, c.name, record ? record->uid.str() : std::string())
                               : kube::ObjectReference{"Namespace", "v1", "", std::string(c.name), ""},
                     {}, tightened ? "Normal" : "Warning", std::string(admission::to_string(n.reason)),
                     component ? "Review" : "Enforce",
                     std::string(n.message) + (c.username.empty() ? "" : " (requested by " + quote(c.username) + ")")});
  } catch (...) {  // never let an Event disturb an answer
  }
}

void Operator::write_metrics(prometheus::TextWriter& out) const {
  using prometheus::Type;
  runtime::write_single(out, "isolation_gate_leader", Type::Gauge, "1 while this replica leads (runs the writing loops).",
                        std::uint64_t{leading() ? 1u : 0u});
  const StatusWriterStats s = status_.stats();
  out.family("isolation_gate_status_writes_total", Type::Counter,
             "Component status checks by result: written, unchanged (no write), error.");
  out.sample("isolation_gate_status_writes_total", {{"result", "written"}}, s.writes);
  out.sample("isolation_gate_status_writes_total", {{"result", "unchanged"}}, s.unchanged);
  out.sample("isolation_gate_status_writes_total", {{"result", "error"}}, s.errors);
  runtime::write_single(out, "isolation_gate_status_queue", Type::Gauge, "Components waiting for a status check.",
                        std::uint64_t{s.queued});
  drift_.write_metrics(out);
}

}  // namespace ig::controller
