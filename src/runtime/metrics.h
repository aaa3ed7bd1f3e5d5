// The engine's metrics, named as controller-runtime and client-go name them
// (controller_runtime_reconcile_*, workqueue_*; the queue's name is its
// controller's). Thread-safe; they live as long as their controller.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "base/prometheus.h"

namespace ig::runtime {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double seconds);
  void write(prometheus::TextWriter& out, std::string_view name, std::initializer_list<prometheus::Label> labels) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;
  std::uint64_t count_ = 0;
  double sum_ = 0;
};

enum class ReconcileOutcome : std::uint8_t { Success, Error, Requeue, RequeueAfter };
inline constexpr std::array<const char*, 4> kOutcomeNames = {"success", "error", "requeue", "requeue_after"};

struct QueueMetrics {
  std::atomic<std::uint64_t> adds{0}, retries{0};
  Histogram queue_duration;
  QueueMetrics();
};

struct ControllerMetrics {
  explicit ControllerMetrics(std::string controller_name);
  const std::string name;
  std::array<std::atomic<std::uint64_t>, 4> reconciles{};  // by ReconcileOutcome
  Histogram reconcile_time;
  QueueMetrics queue;
  std::function<std::size_t()> depth;  // set by the controller

  std::uint64_t reconciled(ReconcileOutcome o) const { return reconciles[static_cast<std::size_t>(o)].load(); }
};

// A family of one sample without labels.
template <typename Value>
void write_single(prometheus::TextWriter& out, std::string_view name, prometheus::Type type, prometheus::Help help,
                  Value value) {
  out.family(name, type, help);
  out.sample(name, {}, value);
}

void write_controller_metrics(prometheus::TextWriter& out, const std::vector<const ControllerMetrics*>& controllers);

}  // namespace ig::runtime
