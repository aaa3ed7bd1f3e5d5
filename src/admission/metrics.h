// Admission counters and latency histograms, lock-free, written through the
// one Prometheus text writer (base/prometheus.h).
//
// Every series comes from a table: reviews from IG_ADMISSION_REASONS
// (admission/answer.h: reason -> outcome, allowed), refused HTTP requests
// from IG_HTTP_ERRORS below (exactly the statuses the webhook itself answers;
// the transport's own 400/413/431 are transport counters). A series is
// written once it has moved; none is written that can never move.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "admission/answer.h"
#include "base/prometheus.h"

namespace ig::admission {

enum class Endpoint : std::uint8_t;

// The webhook's own HTTP refusals.   X(name, status code, Kubernetes Status reason)
#define IG_HTTP_ERRORS(X)                                   \
  X(BadRequest, 400, "BadRequest")                          \
  X(NotFound, 404, "NotFound")                              \
  X(MethodNotAllowed, 405, "MethodNotAllowed")              \
  X(UnsupportedMediaType, 415, "UnsupportedMediaType")      \
  X(InternalError, 500, "InternalError")                    \
  X(ServiceUnavailable, 503, "ServiceUnavailable")

enum class HttpError : std::uint8_t {
#define IG_HTTP_ERROR_ENUM(name, code, reason) name,
  IG_HTTP_ERRORS(IG_HTTP_ERROR_ENUM)
#undef IG_HTTP_ERROR_ENUM
};
inline constexpr std::size_t kHttpErrorCount = 0
#define IG_COUNT(...) +1
    IG_HTTP_ERRORS(IG_COUNT);
#undef IG_COUNT

unsigned status_code(HttpError e) noexcept;
std::string_view status_reason(HttpError e) noexcept;

class AdmissionMetrics {
 public:
  void record(Endpoint e, Reason r, bool dry_run, std::chrono::nanoseconds took) noexcept;
  void record(HttpError e) noexcept;
  // An audit endpoint's enforced answer (admission/audit.h): a denial counts
  // as would-deny, an allowed answer with a patch as would-patch, by reason.
  void record_audit(Endpoint e, const Answer& enforced) noexcept;
  void write(prometheus::TextWriter& out) const;
  std::string render() const;  // write() into a new string

 private:
  static constexpr std::size_t kEndpoints = 7;
  // Up to 30 s (the API server's largest timeoutSeconds), so a p99 near
  // the webhook's timeout is measurable (the WebhookSlow alert).
  static constexpr std::array<double, 16> kBuckets = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,   0.01,   0.025,   0.1,    0.5,   1.0,
                                                      2.5,     5.0,    10.0,    30.0};
  struct PerEndpoint {
    std::array<std::atomic<std::uint64_t>, kReasonCount> reviews{};
    std::atomic<std::uint64_t> dry_run{0};
    std::array<std::atomic<std::uint64_t>, kBuckets.size()> buckets{};
    std::atomic<std::uint64_t> count{0};
    std::atomic<std::uint64_t> sum_ns{0};
  };
  std::array<PerEndpoint, kEndpoints> endpoints_{};
  struct PerAuditEndpoint {
    std::array<std::atomic<std::uint64_t>, kReasonCount> would_deny{};
    std::array<std::atomic<std::uint64_t>, kReasonCount> would_patch{};
  };
  std::array<PerAuditEndpoint, kEndpoints> audits_{};
  std::array<std::atomic<std::uint64_t>, kHttpErrorCount> http_errors_{};
};

}  // namespace ig::admission
