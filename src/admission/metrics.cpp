#include "admission/metrics.h"

#include "admission/routes.h"

#include <tuple>

namespace ig::admission {
namespace {

using prometheus::Type;

struct HttpErrorInfo {
  unsigned code;
  std::string_view reason;
};

constexpr HttpErrorInfo kHttpErrors[] = {
#define IG_HTTP_ERROR_INFO(name, code, reason) {code, reason},
    IG_HTTP_ERRORS(IG_HTTP_ERROR_INFO)
#undef IG_HTTP_ERROR_INFO
};
static_assert(std::size(kHttpErrors) == kHttpErrorCount);

const HttpErrorInfo& info(HttpError e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  return kHttpErrors[i < kHttpErrorCount ? i : static_cast<std::size_t>(HttpError::InternalError)];
}

std::uint64_t get(const std::atomic<std::uint64_t>& a) { return a.load(std::memory_order_relaxed); }
void bump(std::atomic<std::uint64_t>& a, std::uint64_t n = 1) {
  a.fetch_add(n, std::memory_order_relaxed);
}

}  // namespace

unsigned status_code(HttpError e) noexcept { return info(e).code; }
std::string_view status_reason(HttpError e) noexcept { return info(e).reason; }

void AdmissionMetrics::record(Endpoint e, Reason r, bool dry_run,
                              std::chrono::nanoseconds took) noexcept {
  auto& ep = endpoints_[static_cast<std::size_t>(e) % kEndpoints];
  const auto reason = static_cast<std::size_t>(r);
  bump(ep.reviews[reason < kReasonCount ? reason : static_cast<std::size_t>(Reason::InternalError)]);
  if (dry_run) bump(ep.dry_run);
  const double seconds = std::chrono::duration<double>(took).count();
  for (std::size_t i = 0; i < kBuckets.size(); ++i) {
    if (seconds <= kBuckets[i]) {
      bump(ep.buckets[i]);
      break;
    }
  }
  bump(ep.count);
  bump(ep.sum_ns, static_cast<std::uint64_t>(took.count()));
}

void AdmissionMetrics::record_audit(Endpoint e, const Answer& enforced) noexcept {
  auto& ep = audits_[static_cast<std::size_t>(e) % kEndpoints];
  const auto r = static_cast<std::size_t>(enforced.reason);
  const std::size_t reason = r < kReasonCount ? r : static_cast<std::size_t>(Reason::InternalError);
  const Outcome outcome = enforced.outcome();
  if (outcome == Outcome::Undecidable || outcome == Outcome::Errored) return;  // denied as they are
  if (!enforced.allowed()) {
    bump(ep.would_deny[reason]);
  } else if (!enforced.patch.empty()) {
    bump(ep.would_patch[reason]);
  }
}

void AdmissionMetrics::record(HttpError e) noexcept {
  const auto i = static_cast<std::size_t>(e);
  bump(http_errors_[i < kHttpErrorCount ? i : static_cast<std::size_t>(HttpError::InternalError)]);
}

void AdmissionMetrics::write(prometheus::TextWriter& out) const {
  static_assert(kEndpoints == kEndpointCount);
  constexpr std::string_view kReviews = "isolation_gate_admission_reviews_total";
  out.family(kReviews, Type::Counter,
             "Admission reviews answered, by endpoint, outcome, reason and whether the object "
             "was allowed.");
  for (const Route& route : admission_routes()) {
    const auto& ep = endpoints_[static_cast<std::size_t>(route.endpoint)];
    for (std::size_t r = 0; r < kReasonCount; ++r) {
      const auto n = get(ep.reviews[r]);
      if (n == 0) continue;
      const auto reason = static_cast<Reason>(r);
      out.sample(kReviews,
                 {{"endpoint", route.path},
                  {"outcome", to_string(outcome_of(reason))},
                  {"reason", to_string(reason)},
                  {"allowed", allows(reason) ? "true" : "false"}},
                 n);
    }
  }
  constexpr std::string_view kDryRun = "isolation_gate_admission_dry_run_total";
  out.family(kDryRun, Type::Counter, "Dry-run admission reviews answered.");
  for (const Route& route : admission_routes()) {
    out.sample(kDryRun, {{"endpoint", route.path}},
               get(endpoints_[static_cast<std::size_t>(route.endpoint)].dry_run));
  }
  constexpr std::string_view kDuration = "isolation_gate_admission_duration_seconds";
  out.family(kDuration, Type::Histogram,
             "Time to answer an admission review (decode, decide, encode).");
  for (const Route& route : admission_routes()) {
    const auto& ep = endpoints_[static_cast<std::size_t>(route.endpoint)];
    std::array<std::uint64_t, kBuckets.size()> counts{};
    for (std::size_t i = 0; i < kBuckets.size(); ++i) counts[i] = get(ep.buckets[i]);
    out.histogram(kDuration, {{"endpoint", route.path}}, kBuckets.data(), counts.data(),
                  kBuckets.size(), get(ep.count), static_cast<double>(get(ep.sum_ns)) / 1e9);
  }
  // Audit mode: what enforcement would have denied or patched, by its reason.
  constexpr std::string_view kWouldDeny = "isolation_gate_audit_would_deny_total";
  constexpr std::string_view kWouldPatch = "isolation_gate_audit_would_patch_total";
  for (const auto& [family, help, deny] :
       {std::tuple{kWouldDeny,
                   prometheus::Help("Reviews in audit namespaces that enforcement would have denied, by reason."),
                   true},
        std::tuple{kWouldPatch,
                   prometheus::Help("Reviews in audit namespaces that enforcement would have patched, by reason."),
                   false}}) {
    out.family(family, Type::Counter, help);
    for (const Route& route : admission_routes()) {
      if (!route.audit) continue;
      const auto& ep = audits_[static_cast<std::size_t>(route.endpoint)];
      for (std::size_t r = 0; r < kReasonCount; ++r) {
        const auto n = get(deny ? ep.would_deny[r] : ep.would_patch[r]);
        if (n == 0) continue;
        out.sample(family, {{"endpoint", route.path}, {"reason", to_string(static_cast<Reason>(r))}}, n);
      }
    }
  }
  constexpr std::string_view kHttp = "isolation_gate_http_errors_total";
  out.family(kHttp, Type::Counter,
             "Requests the webhook refused before an admission review could be read, by HTTP "
             "status.");
  for (std::size_t i = 0; i < kHttpErrorCount; ++i) {
    const std::string code = std::to_string(kHttpErrors[i].code);
    out.sample(kHttp, {{"code", code}}, get(http_errors_[i]));
  }
}

std::string AdmissionMetrics::render() const {
  std::string text;
  text.reserve(8192);
  prometheus::TextWriter out(text);
  write(out);
  return text;
}

}  // namespace ig::admission
