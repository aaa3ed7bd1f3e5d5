// The webhook's HTTP-level handler, independent of any transport (the server
// hands it request bytes and writes back what it returns).
//
// Routes: POST /mutate/pods, /validate/pods, /validate/workloads,
// /validate/components (AdmissionReview JSON); GET /healthz, /readyz,
// /metrics. A query string (the API server sends ?timeout=10s) is ignored.
//
// Contract (fail-closed): every AdmissionReview with a uid is answered 200
// with a review; anything the gate cannot decide is allowed: false. Requests
// that are not AdmissionReviews get 4xx with a JSON error body: 404 unknown
// path, 405 wrong method, 415 content type other than application/json, 400
// invalid JSON or not a review. serve() never throws.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "admission/context.h"
#include "admission/metrics.h"
#include "admission/review.h"

namespace ig::admission {

struct WebhookRequest {
  std::string method;
  std::string target;
  std::string content_type;
  std::string body;
};

struct WebhookResponse {
  unsigned status = 500;
  std::string content_type = "application/json";
  std::string body;
};

class Webhook {
 public:
  Webhook(GateSettings settings, const ComponentLookup& components, const SandboxView& sandbox);

  // Every route: the HTTPS webhook listener.
  WebhookResponse serve(WebhookRequest&& request) noexcept;
  // Only /healthz, /readyz and /metrics (404 otherwise): the plain-HTTP
  // probe listener, so admission is never served without TLS.
  WebhookResponse serve_probes(WebhookRequest&& request) noexcept;

  struct ReviewOutcome {
    AdmissionResponse response;
    Outcome outcome = Outcome::Invalid;
  };
  // Decides one review (already decoded) for an endpoint; exposed for
  // benchmarks and tests that skip HTTP.
  ReviewOutcome review(Endpoint endpoint, AdmissionRequest& request) const;

  // Readiness beyond "the handler exists" (caches synced, certificate loaded).
  void set_readiness(std::function<bool()> ready) { ready_ = std::move(ready); }
  // Extra Prometheus text appended to /metrics (transport counters, info).
  void set_extra_metrics(std::function<std::string()> extra) { extra_metrics_ = std::move(extra); }

  const AdmissionMetrics& metrics() const noexcept { return metrics_; }
  const GateSettings& settings() const noexcept { return settings_; }

 private:
  WebhookResponse serve_review(Endpoint endpoint, WebhookRequest& request);
  WebhookResponse route(WebhookRequest& request, bool admission_routes) noexcept;
  WebhookResponse error(unsigned status, std::string_view message);

  GateSettings settings_;
  const ComponentLookup& components_;
  const SandboxView& sandbox_;
  AdmissionMetrics metrics_;
  std::function<bool()> ready_;
  std::function<std::string()> extra_metrics_;
};

}  // namespace ig::admission
