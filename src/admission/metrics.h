// Admission counters and latency histograms, lock-free, rendered in the
// Prometheus text exposition format (version 0.0.4).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "policy/gate.h"

namespace ig::admission {

enum class Endpoint : std::uint8_t { MutatePods, ValidatePods, ValidateWorkloads, ValidateComponents };
inline constexpr std::size_t kEndpointCount = 4;
std::string_view endpoint_path(Endpoint e) noexcept;

// How a review ended.
enum class Outcome : std::uint8_t {
  RequireSetec, AllowInProcess, Deny,  // the gate decided
  DeniedBeforeGate,                    // no label, unknown component, microVM conflict...
  Allowed,                             // allowed without a gate decision (not enforced, component valid)
  Invalid,                             // an AdmissionReview that could not be decided
};
inline constexpr std::size_t kOutcomeCount = 6;

class AdmissionMetrics {
 public:
  void record(Endpoint e, Outcome o, bool allowed, bool dry_run, std::chrono::nanoseconds took) noexcept;
  void record_http_error(unsigned status) noexcept;  // 4xx/5xx answered without a review
  std::string render() const;

 private:
  static constexpr std::array<double, 12> kBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,   0.01,   0.025,   0.1,    0.5,   1.0};
  struct PerEndpoint {
    std::array<std::array<std::atomic<std::uint64_t>, 2>, kOutcomeCount> reviews{};  // [outcome][allowed]
    std::atomic<std::uint64_t> dry_run{0};
    std::array<std::atomic<std::uint64_t>, kBuckets.size()> buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_ns{0};
  };
  std::array<PerEndpoint, kEndpointCount> endpoints_{};
  std::array<std::atomic<std::uint64_t>, 6> http_errors_{};  // 400,404,405,413,415,other
};

}  // namespace ig::admission
