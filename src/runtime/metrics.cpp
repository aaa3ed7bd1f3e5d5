#include "runtime/metrics.h"

#include <algorithm>

namespace ig::runtime {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}

void Histogram::observe(double seconds) {
  std::lock_guard lock(mu_);
  const auto it = std::lower_bound(bounds_.begin(), bounds_.end(), seconds);
  if (it != bounds_.end()) ++counts_[static_cast<std::size_t>(it - bounds_.begin())];
  ++count_;
  sum_ += seconds;
}

void Histogram::write(prometheus::TextWriter& out, std::string_view name,
                      std::initializer_list<prometheus::Label> labels) const {
  std::lock_guard lock(mu_);
  out.histogram(name, labels, bounds_.data(), counts_.data(), bounds_.size(), count_, sum_);
}

// client-go's workqueue: ExponentialBuckets(10e-9, 10, 10).
QueueMetrics::QueueMetrics() : queue_duration({1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1, 10}) {}

// controller-runtime's reconcile_time_seconds buckets.
ControllerMetrics::ControllerMetrics(std::string controller_name)
    : name(std::move(controller_name)),
      reconcile_time({0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
                      1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50,
                      60}) {}

void write_controller_metrics(prometheus::TextWriter& out, const std::vector<const ControllerMetrics*>& cs) {
  using prometheus::Type;
  if (cs.empty()) return;
  out.family("controller_runtime_reconcile_total", Type::Counter,
             "Total number of reconciliations per controller and result.");
  for (const auto* c : cs)
    for (std::size_t i = 0; i < kOutcomeNames.size(); ++i)
      out.sample("controller_runtime_reconcile_total", {{"controller", c->name}, {"result", kOutcomeNames[i]}},
                 c->reconciles[i].load());
  out.family("controller_runtime_reconcile_errors_total", Type::Counter,
             "Total number of reconciliation errors per controller.");
  for (const auto* c : cs)
    out.sample("controller_runtime_reconcile_errors_total", {{"controller", c->name}},
               c->reconciled(ReconcileOutcome::Error));
  out.family("controller_runtime_reconcile_time_seconds", Type::Histogram,
             "Length of time per reconciliation per controller.");
  for (const auto* c : cs) c->reconcile_time.write(out, "controller_runtime_reconcile_time_seconds", {{"controller", c->name}});
  out.family("workqueue_depth", Type::Gauge, "Current depth of the work queue.");
  for (const auto* c : cs)
    out.sample("workqueue_depth", {{"name", c->name}}, std::uint64_t{c->depth ? c->depth() : 0});
  out.family("workqueue_adds_total", Type::Counter, "Total number of adds handled by the work queue.");
  for (const auto* c : cs) out.sample("workqueue_adds_total", {{"name", c->name}}, c->queue.adds.load());
  out.family("workqueue_retries_total", Type::Counter, "Total number of retries handled by the work queue.");
  for (const auto* c : cs) out.sample("workqueue_retries_total", {{"name", c->name}}, c->queue.retries.load());
  out.family("workqueue_queue_duration_seconds", Type::Histogram,
             "How long in seconds an item stays in the work queue before being requested.");
  for (const auto* c : cs)
    c->queue.queue_duration.write(out, "workqueue_queue_duration_seconds", {{"name", c->name}});
}

}  // namespace ig::runtime
