#include "admission/metrics.h"

#include <cstdio>

namespace ig::admission {
namespace {

constexpr std::string_view kOutcomeNames[kOutcomeCount] = {
    "RequireSetec", "AllowInProcess", "Deny", "DeniedBeforeGate", "Allowed", "Invalid"};
constexpr unsigned kHttpCodes[] = {400, 404, 405, 413, 415, 0};

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string_view endpoint_path(Endpoint e) noexcept {
  switch (e) {
    case Endpoint::MutatePods: return "/mutate/pods";
    case Endpoint::ValidatePods: return "/validate/pods";
    case Endpoint::ValidateWorkloads: return "/validate/workloads";
    case Endpoint::ValidateComponents: return "/validate/components";
  }
  return "unknown";
}

void AdmissionMetrics::record(Endpoint e, Outcome o, bool allowed, bool dry_run,
                              std::chrono::nanoseconds took) noexcept {
  auto& ep = endpoints_[static_cast<std::size_t>(e) % kEndpointCount];
  ep.reviews[static_cast<std::size_t>(o) % kOutcomeCount][allowed ? 1 : 0].fetch_add(
      1, std::memory_order_relaxed);
  if (dry_run) ep.dry_run.fetch_add(1, std::memory_order_relaxed);
  const double seconds = std::chrono::duration<double>(took).count();
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      ep.buckets[i].fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
  ep.count.fetch_add(1, std::memory_order_relaxed);
  ep.sum_ns.fetch_add(static_cast<std::uint64_t>(took.count()), std::memory_order_relaxed);
}

void AdmissionMetrics::record_http_error(unsigned status) noexcept {
  std::size_t i = 0;
  while (i + 1 < std::size(kHttpCodes) && kHttpCodes[i] != status) ++i;
  http_errors_[i].fetch_add(1, std::memory_order_relaxed);
}

std::string AdmissionMetrics::render() const {
  std::string out;
  out.reserve(8192);
  out +=
      "# HELP isolation_gate_admission_reviews_total Admission reviews answered, by endpoint, "
      "outcome and whether the object was allowed.\n"
      "# TYPE isolation_gate_admission_reviews_total counter\n";
  for (std::size_t e = 0; e < kEndpointCount; ++e) {
    const auto path = endpoint_path(static_cast<Endpoint>(e));
    for (std::size_t o = 0; o < kOutcomeCount; ++o) {
      for (int a = 0; a < 2; ++a) {
        const auto n = endpoints_[e].reviews[o][a].load(std::memory_order_relaxed);
        if (n == 0) continue;
        out += "isolation_gate_admission_reviews_total{endpoint=\"" + std::string(path) +
               "\",outcome=\"" + std::string(kOutcomeNames[o]) + "\",allowed=\"" +
               (a ? "true" : "false") + "\"} " + std::to_string(n) + "\n";
      }
    }
  }
  out +=
      "# HELP isolation_gate_admission_dry_run_total Dry-run admission reviews answered.\n"
      "# TYPE isolation_gate_admission_dry_run_total counter\n";
  for (std::size_t e = 0; e < kEndpointCount; ++e) {
    out += "isolation_gate_admission_dry_run_total{endpoint=\"" +
           std::string(endpoint_path(static_cast<Endpoint>(e))) + "\"} " +
           std::to_string(endpoints_[e].dry_run.load(std::memory_order_relaxed)) + "\n";
  }
  out +=
      "# HELP isolation_gate_admission_duration_seconds Time to answer an admission review "
      "(decode, decide, encode).\n"
      "# TYPE isolation_gate_admission_duration_seconds histogram\n";
  for (std::size_t e = 0; e < kEndpointCount; ++e) {
    const std::string label =
        "endpoint=\"" + std::string(endpoint_path(static_cast<Endpoint>(e))) + "\"";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < kBuckets.size(); ++i) {
      cumulative += endpoints_[e].buckets[i].load(std::memory_order_relaxed);
      out += "isolation_gate_admission_duration_seconds_bucket{" + label + ",le=\"" +
             format_double(kBuckets[i]) + "\"} " + std::to_string(cumulative) + "\n";
    }
    const auto count = endpoints_[e].count.load(std::memory_order_relaxed);
    out += "isolation_gate_admission_duration_seconds_bucket{" + label + ",le=\"+Inf\"} " +
           std::to_string(count) + "\n";
    out += "isolation_gate_admission_duration_seconds_sum{" + label + "} " +
           format_double(static_cast<double>(endpoints_[e].sum_ns.load(std::memory_order_relaxed)) /
                         1e9) +
           "\n";
    out += "isolation_gate_admission_duration_seconds_count{" + label + "} " +
           std::to_string(count) + "\n";
  }
  out +=
      "# HELP isolation_gate_http_errors_total Requests refused before an admission review "
      "could be read, by HTTP status.\n"
      "# TYPE isolation_gate_http_errors_total counter\n";
  for (std::size_t i = 0; i < std::size(kHttpCodes); ++i) {
    out += "isolation_gate_http_errors_total{code=\"" +
           (kHttpCodes[i] ? std::to_string(kHttpCodes[i]) : std::string("other")) + "\"} " +
           std::to_string(http_errors_[i].load(std::memory_order_relaxed)) + "\n";
  }
  return out;
}

}  // namespace ig::admission
