#include "admission/webhook.h"

#include <algorithm>
#include <cctype>
#include <exception>
#include <optional>

#include "admission/audit.h"
#include "model/document.h"

namespace ig::admission {
namespace {

using nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

bool is_json_content_type(std::string_view ct) {
  auto semi = ct.find(';');
  std::string_view media = ct.substr(0, semi);
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.back()))) media.remove_suffix(1);
  while (!media.empty() && std::isspace(static_cast<unsigned char>(media.front()))) media.remove_prefix(1);
  static constexpr std::string_view kJson = "application/json";
  return media.size() == kJson.size() &&
         std::equal(media.begin(), media.end(), kJson.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

constexpr std::string_view kInternalErrorBody =
    R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"InternalError","code":500,"message":"internal error"})";

}  // namespace

Webhook::Webhook(AdmissionContext context, WebhookOptions options)
    : context_(std::move(context)), options_(std::move(options)) {}

Answer Webhook::review(const Route& route, AdmissionRequest& r) const noexcept {
  try {
    if (auto why = route.handler.refuses(r); !why.empty()) return undecidable(std::move(why));
    if (!route.enforced.contains(r.operation)) {
      return not_enforced(Reason::OperationNotEnforced, "operation " +
                                                            std::string(to_string(r.operation)) +
                                                            " is not " + std::string(route.verb));
    }
    return route.handler.handle(r, context_);
  } catch (const std::exception& e) {
    return errored(e.what());
  } catch (...) {
    return errored("unknown exception");
  }
}

http::Response Webhook::error(HttpError e, std::string_view message) {
  metrics_.record(e);
  return http::status_failure(status_code(e), status_reason(e), message);
}

http::Response Webhook::serve_review(const Route& route, http::Request& request) {
  const auto start = SteadyClock::now();
  // The request's object text (ObjectRead::Text) is a view into the body:
  // the body lives until the answer is made.
  DecodedReview decoded = decode_review(request.body, route.handler.object_read());
  if (decoded.kind == DecodedReview::Kind::NotAReview) {
    return error(HttpError::BadRequest, decoded.error);
  }
  Answer answer = decoded.kind == DecodedReview::Kind::Ok ? review(route, decoded.request)
                                                          : undecidable(decoded.error);
  decoded.request.object_text = decoded.request.old_object_text = {};
  std::string().swap(request.body);  // the answer owns what it needs now
  if (route.audit) {  // what enforcement would say, as warnings (admission/audit.h)
    metrics_.record_audit(route.endpoint, answer);
    answer = audit_answer(std::move(answer));
  }
  std::string body = encode_response(decoded.request, answer);
  metrics_.record(route.endpoint, answer.reason, decoded.request.dry_run, SteadyClock::now() - start);
  const AdmissionRequest& r = decoded.request;
  // A guarded change, allowed or refused, goes to on_guarded_change alone
  // (one Event each).
  std::optional<GuardedChange> change;
  if (decoded.kind == DecodedReview::Kind::Ok && !r.dry_run) {
    try {
      if (route.endpoint == Endpoint::ValidateNamespaces) {
        change = enforcement_change(r, answer);
      } else if (route.endpoint == Endpoint::ValidateComponents) {
        change = trust_change(r, answer);
      }
    } catch (...) {
      // Observing never changes the answer.
    }
  }
  if (options_.on_denial && !answer.allowed() && !change && decoded.kind == DecodedReview::Kind::Ok &&
      !r.dry_run && !r.namespace_.empty() && route.endpoint != Endpoint::ValidateNamespaces) {
    try {
      options_.on_denial(DenialNotice{route.path, answer.reason, r.namespace_, answer.component, r.kind,
                                      r.name, answer.message});
    } catch (...) {
      // The observer's failure never changes the answer.
    }
  }
  if (options_.on_guarded_change && change) {
    try {
      options_.on_guarded_change(GuardedChangeNotice{*change, answer.reason, answer.message});
    } catch (...) {
      // As above: never changes the answer.
    }
  }
  return {200, "application/json", std::move(body)};
}

http::Response Webhook::serve(http::Request&& request) noexcept {
  try {
    std::string_view target = request.target;
    const std::string_view path = target.substr(0, target.find('?'));
    const Route* found = find_route(path);
    if (found == nullptr) return error(HttpError::NotFound, "no such endpoint");
    if (request.method != "POST") {
      return error(HttpError::MethodNotAllowed, "admission endpoints accept POST only");
    }
    if (!is_json_content_type(request.content_type)) {
      return error(HttpError::UnsupportedMediaType, "Content-Type must be application/json");
    }
    return serve_review(*found, request);
  } catch (...) {
    metrics_.record(HttpError::InternalError);
    return {500, "application/json", std::string(kInternalErrorBody)};
  }
}

}  // namespace ig::admission
