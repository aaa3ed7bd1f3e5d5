// The webhook's HTTP-level handler, independent of any transport (the server
// hands it request bytes and writes back what it returns). It owns the HTTP
// contract (method, content type, status bodies), decodes the review, finds
// the endpoint's handler in the route table (admission/routes.h) and encodes
// the handler's Answer; the rules live in the handlers.
//
// Routes: POST /mutate/pods, /validate/pods, /validate/workloads,
// /validate/components, /validate/namespaces, /audit/pods, /audit/workloads
// (AdmissionReview JSON). A query string (the API server sends ?timeout=10s)
// is ignored. /healthz, /readyz and /metrics are the manager's
// (runtime/probes.h); the admission families are written by metrics().
//
// Contract (fail-closed): every AdmissionReview with a uid is answered 200
// with a review; anything that cannot be decided is allowed: false, and an
// exception inside a handler is an Errored answer, never an allow. Requests
// that are not AdmissionReviews get 4xx with a Kubernetes Status body: 404
// unknown path, 405 wrong method, 415 content type other than
// application/json, 400 invalid JSON or not a review. serve() never throws.
//
// Built whole: the context and the observers are given at construction and
// never change; serve() may be called from many threads.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "admission/context.h"
#include "admission/metrics.h"
#include "admission/namespace_guard.h"
#include "admission/review.h"
#include "admission/routes.h"
#include "admission/trust_guard.h"
#include "base/http_exchange.h"
#include "base/prometheus.h"

namespace ig::admission {

// A review the webhook denied, for the denial observer (Events). Only for
// decided requests with a namespace that were not dry runs, and not for
// guarded changes (their refusals are GuardedChangeNotices).
struct DenialNotice {
  std::string_view endpoint;   // "/mutate/pods"
  Reason reason;               // a denying reason
  std::string_view namespace_;
  std::string_view component;  // the Component the request names; "" when none
  std::string_view kind;       // request.kind.kind: "Pod", "Deployment", "Component"
  std::string_view name;       // request.name ("" for a pod created with generateName)
  std::string_view message;    // the denial's status.message
};

// A guarded change (admission/guarded_change.h): an enforcement change on
// /validate/namespaces or a content-trust change on /validate/components,
// allowed or refused, for the observer that logs it and records an Event.
// Not for dry runs.
struct GuardedChangeNotice {
  const GuardedChange& change;
  Reason reason;             // Enforcement*, ContentTrust*
  std::string_view message;  // the answer's message
};

struct WebhookOptions {
  // Called on the request thread after a denial is encoded, before the
  // answer is sent: it must not block (queue and return). Exceptions are
  // swallowed; the answer is never changed by it. Empty: none.
  std::function<void(const DenialNotice&)> on_denial;
  // Called like on_denial for every guarded change; empty: none.
  std::function<void(const GuardedChangeNotice&)> on_guarded_change;
};

class Webhook {
 public:
  explicit Webhook(AdmissionContext context, WebhookOptions options = {});

  // Every admission route (the HTTPS listener; 404 for any other path).
  http::Response serve(http::Request&& request) noexcept;

  // Decides one already-decoded review for a route, counting nothing;
  // exposed for benchmarks and tests that skip HTTP. For an audit route this
  // is enforcement's answer; serve() turns it into warnings (admission/audit.h).
  Answer review(const Route& route, AdmissionRequest& request) const noexcept;

  const AdmissionMetrics& metrics() const noexcept { return metrics_; }
  const AdmissionContext& context() const noexcept { return context_; }

 private:
  http::Response serve_review(const Route& route, http::Request& request);
  http::Response error(HttpError error, std::string_view message);

  const AdmissionContext context_;
  const WebhookOptions options_;
  AdmissionMetrics metrics_;
};

}  // namespace ig::admission
