#include "admission/review.h"

#include "model/document.h"
#include "model/json_projection.h"

namespace ig::admission {
namespace {

using nlohmann::json;

// A string member, or "" when absent or not a string.
std::string string_member(const json& obj, std::string_view key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

DecodedReview decode_review(std::string_view body) {
  DecodedReview out;
  // Validates the whole body; keeps only what the rules read (see json_projection.h).
  auto parsed = model::parse_projected(body, model::admission_review_projection(), "request body");
  if (!parsed) {
    out.error = parsed.error();
    return out;
  }
  json& review = parsed.value();
  if (!review.is_object()) {
    out.error = "request body: expected an AdmissionReview object";
    return out;
  }
  const std::string api_version = string_member(review, "apiVersion");
  if (api_version != "admission.k8s.io/v1" && api_version != "admission.k8s.io/v1beta1") {
    out.error = "request body: apiVersion must be admission.k8s.io/v1";
    return out;
  }
  if (string_member(review, "kind") != "AdmissionReview") {
    out.error = "request body: kind must be AdmissionReview";
    return out;
  }
  auto req_it = review.find("request");
  if (req_it == review.end() || !req_it->is_object()) {
    out.error = "request body: AdmissionReview has no request";
    return out;
  }
  json& req = *req_it;
  AdmissionRequest& r = out.request;
  r.api_version = api_version;
  r.uid = string_member(req, "uid");
  if (r.uid.empty()) {
    out.error = "request body: request.uid is missing";
    return out;
  }
  out.kind = DecodedReview::Kind::Undecidable;
  if (auto k = req.find("kind"); k != req.end() && k->is_object()) {
    r.kind_group = string_member(*k, "group");
    r.kind_version = string_member(*k, "version");
    r.kind = string_member(*k, "kind");
  }
  r.sub_resource = string_member(req, "subResource");
  r.namespace_ = string_member(req, "namespace");
  r.name = string_member(req, "name");
  r.operation = string_member(req, "operation");
  if (auto d = req.find("dryRun"); d != req.end() && d->is_boolean()) r.dry_run = d->get<bool>();
  if (r.kind.empty()) {
    out.error = "request.kind is missing";
    return out;
  }
  if (r.operation.empty()) {
    out.error = "request.operation is missing";
    return out;
  }
  if (auto o = req.find("object"); o != req.end()) r.object = std::move(*o);
  out.kind = DecodedReview::Kind::Ok;
  return out;
}

std::string base64_encode(std::string_view data) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((data.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < data.size(); i += 3) {
    const unsigned n = (static_cast<unsigned char>(data[i]) << 16) |
                       (static_cast<unsigned char>(data[i + 1]) << 8) |
                       static_cast<unsigned char>(data[i + 2]);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(kAlphabet[(n >> 6) & 63]);
    out.push_back(kAlphabet[n & 63]);
  }
  if (i < data.size()) {
    unsigned n = static_cast<unsigned char>(data[i]) << 16;
    const bool two = i + 1 < data.size();
    if (two) n |= static_cast<unsigned char>(data[i + 1]) << 8;
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(two ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string encode_response(const AdmissionRequest& request, const AdmissionResponse& response) {
  json resp = {{"uid", request.uid}, {"allowed", response.allowed}};
  if (!response.allowed) {
    resp["status"] = {{"metadata", json::object()},
                      {"status", "Failure"},
                      {"code", response.code},
                      {"reason", response.reason},
                      {"message", response.message}};
  }
  if (!response.patch.empty()) {
    resp["patchType"] = "JSONPatch";
    resp["patch"] = base64_encode(response.patch);
  }
  if (!response.warnings.empty()) resp["warnings"] = response.warnings;
  if (!response.audit.empty()) {
    json audit = json::object();
    for (const auto& [k, v] : response.audit) audit[k] = v;
    resp["auditAnnotations"] = std::move(audit);
  }
  json review = {{"apiVersion", request.api_version.empty() ? std::string("admission.k8s.io/v1")
                                                            : request.api_version},
                 {"kind", "AdmissionReview"},
                 {"response", std::move(resp)}};
  return model::dump_json(review);
}

}  // namespace ig::admission
