// The AdmissionReview wire contract (admission.k8s.io/v1, and v1beta1 which
// has the same shape), kept apart from HTTP and from the rules. The schema of
// what is read from a review (the projection handed to the projected parser)
// lives here too.
//
// Contract:
//  - decode_review() never throws. A body that is not an AdmissionReview with
//    a request uid cannot be answered with a review: Kind::NotAReview (the
//    HTTP layer answers 400 with a Status body). A review with a uid whose
//    request cannot be decided is Kind::Undecidable, answered allowed: false:
//    no request.kind, or a request.operation that is not exactly one of the
//    API's four values (CREATE, UPDATE, DELETE, CONNECT: case-sensitive, no
//    padding), or a field the rules read that has the wrong JSON type
//    (request.userInfo.groups included: a list of strings).
//  - encode_response() is the one place that fills the response: it echoes
//    the uid and the review's apiVersion/kind; a denial carries status
//    {code, reason, message}; the patch, when present, is sent as patchType
//    JSONPatch, base64-encoded; warnings and audit annotations as given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "admission/answer.h"
#include "model/json_projection.h"
#include "model/pod_text.h"

namespace ig::admission {

enum class Operation : std::uint8_t { Create, Update, Delete, Connect };

// Exactly the API's spelling; anything else is nullopt.
std::optional<Operation> parse_operation(std::string_view text) noexcept;
std::string_view to_string(Operation op) noexcept;

// A set of operations, for the route table.
class OperationSet {
 public:
  constexpr OperationSet() = default;
  constexpr OperationSet(std::initializer_list<Operation> ops) {
    for (Operation op : ops) bits_ |= bit(op);
  }
  constexpr bool contains(Operation op) const noexcept { return (bits_ & bit(op)) != 0; }

 private:
  static constexpr std::uint8_t bit(Operation op) { return std::uint8_t(1u << unsigned(op)); }
  std::uint8_t bits_ = 0;
};

struct AdmissionRequest {
  std::string api_version;  // of the review: echoed in the response
  std::string uid;
  std::string kind_group, kind_version, kind;  // request.kind
  std::string sub_resource;
  std::string namespace_;
  std::string name;
  Operation operation = Operation::Create;  // valid when decoded Ok
  bool dry_run = false;
  // request.object as the rules read it: projected to the fields they use
  // (model/json_projection.h); null when absent. The pod handlers move the
  // strings they read out of it and out of old_object
  // (model::take_pod_facts): after Webhook::review those strings are empty.
  nlohmann::json object;
  // request.oldObject (UPDATE): what /validate/pods and /validate/namespaces
  // compare with, projected like request.object; null when absent (CREATE,
  // CONNECT).
  nlohmann::json old_object;
  // decode_review(body, ObjectRead::Text): request.object and oldObject,
  // when each is a JSON object, as their text (views into the body: valid
  // while it lives), `object` / `old_object` then left null; and, when the
  // text is a pod (template) of the usual shape, its facts, read in the
  // decode's one pass (model::scan_pod_text). A text without them is read by
  // the handlers (read_pod_text, or parsed with admission_object_projection()).
  std::string_view object_text, old_object_text;
  std::optional<model::PodText> object_pod, old_object_pod;
  // request.userInfo: who asked. The API server always sends it; absent
  // fields read as empty.
  std::string username;
  std::vector<std::string> groups;
};

struct DecodedReview {
  enum class Kind { Ok, NotAReview, Undecidable };
  Kind kind = Kind::NotAReview;
  AdmissionRequest request;
  std::string error;  // for NotAReview and Undecidable
};

// What isolation-gate reads of an AdmissionReview: the request's identity
// and, of request.object, what Pods, workload templates and Components need.
// The envelope's fields carry capture slots (model/json_projection.h):
// decode_review() reads them with model::parse_captured(), without a DOM;
// parse_projected() with it gives the same DOM as without slots.
const model::Projection& admission_review_projection();
// The number of capture slots in admission_review_projection().
std::size_t admission_review_slot_count() noexcept;

// What request.object and request.oldObject are read as: projected DOMs,
// or (for the pod endpoints' handlers) their text, a pod's facts read in
// the same pass. Either way the decode validates the whole body (a pod's
// text as it reads it) and answers and words errors alike.
enum class ObjectRead { Projected, Text };

// The projection of request.object and oldObject (what every handler reads).
const model::Projection& admission_object_projection();

DecodedReview decode_review(std::string_view body, ObjectRead read = ObjectRead::Projected);

std::string encode_response(const AdmissionRequest& request, const Answer& answer);

// request.kind's apiVersion: "group/version", or "version" for the core group.
std::string request_api_version(const AdmissionRequest& r);

std::string base64_encode(std::string_view data);

}  // namespace ig::admission
