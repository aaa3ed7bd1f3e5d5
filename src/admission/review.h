// The AdmissionReview wire contract (admission.k8s.io/v1, and v1beta1 which
// has the same shape), kept apart from HTTP and from the rules.
//
// Contract:
//  - decode_review() never throws. A body that is not an AdmissionReview with
//    a request uid cannot be answered with a review: Kind::NotAReview (the
//    HTTP layer answers 400 with a JSON error). A review with a uid whose
//    request cannot be decided (no object, wrong kind...) is Kind::Undecidable:
//    answered with allowed: false.
//  - encode_response() echoes the uid and the review's apiVersion/kind; the
//    patch, when present, is sent as patchType JSONPatch, base64-encoded.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ig::admission {

struct AdmissionRequest {
  std::string api_version;  // of the review: echoed in the response
  std::string uid;
  std::string kind_group, kind_version, kind;  // request.kind
  std::string sub_resource;
  std::string namespace_;
  std::string name;
  std::string operation;  // CREATE, UPDATE, DELETE, CONNECT
  bool dry_run = false;
  // request.object as the rules read it: projected to the fields they use
  // (model/json_projection.h); null when absent.
  nlohmann::json object;
};

struct DecodedReview {
  enum class Kind { Ok, NotAReview, Undecidable };
  Kind kind = Kind::NotAReview;
  AdmissionRequest request;
  std::string error;  // for NotAReview and Undecidable
};

DecodedReview decode_review(std::string_view body);

struct AdmissionResponse {
  bool allowed = false;
  int code = 403;                 // status.code when denied
  std::string reason = "Forbidden";
  std::string message;            // status.message when denied
  std::string patch;              // RFC 6902 JSON text; "" for none
  std::vector<std::string> warnings;
  std::vector<std::pair<std::string, std::string>> audit;
};

std::string encode_response(const AdmissionRequest& request, const AdmissionResponse& response);

std::string base64_encode(std::string_view data);

}  // namespace ig::admission
