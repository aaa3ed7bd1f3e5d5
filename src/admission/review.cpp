#include "admission/review.h"

#include <algorithm>

#include "admission/namespace_guard.h"
#include "base/json_text.h"
#include "base/quote.h"
#include "model/component.h"
#include "model/document.h"
#include "model/pod.h"

namespace ig::admission {
namespace {

using nlohmann::json;
using model::Projection;

constexpr std::string_view kOperations[] = {"CREATE", "UPDATE", "DELETE", "CONNECT"};

// An optional string member: absent or null -> "" and true; a string -> it,
// moved out of `obj` (the review is decoded once and dropped); any other type
// -> false with `error` naming the field.
bool optional_string(json& obj, std::string_view key, std::string_view path,
                     std::string& out, std::string& error) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return true;
  if (!it->is_string()) {
    error = std::string(path) + ": expected a string, got " +
            std::string(model::json_type_phrase(*it));
    return false;
  }
  out = std::move(it->get_ref<std::string&>());
  return true;
}

}  // namespace

std::optional<Operation> parse_operation(std::string_view text) noexcept {
  for (std::size_t i = 0; i < std::size(kOperations); ++i) {
    if (text == kOperations[i]) return static_cast<Operation>(i);
  }
  return std::nullopt;
}

std::string_view to_string(Operation op) noexcept {
  const auto i = static_cast<std::size_t>(op);
  return i < std::size(kOperations) ? kOperations[i] : "UNKNOWN";
}

const Projection& admission_review_projection() {
  static const Projection projection = Projection::object({
      {"apiVersion", Projection::whole()},
      {"kind", Projection::whole()},
      {"request", Projection::object({
                      {"uid", Projection::whole()},
                      {"kind", Projection::whole()},
                      {"subResource", Projection::whole()},
                      {"namespace", Projection::whole()},
                      {"name", Projection::whole()},
                      {"operation", Projection::whole()},
                      {"dryRun", Projection::whole()},
                      {"userInfo", Projection::object({{"username", Projection::whole()},
                                                       {"groups", Projection::whole()}})},
                      {"object", Projection::merge(Projection::merge(model::pod_object_projection(),
                                                                     model::component_projection()),
                                                   namespace_object_projection())},
                      {"oldObject", Projection::merge(model::pod_object_projection(),
                                                      namespace_object_projection())},
                  })},
  });
  return projection;
}

DecodedReview decode_review(std::string_view body) {
  DecodedReview out;
  // Validates the whole body; keeps only what the rules read (see json_projection.h).
  auto parsed = model::parse_projected(body, admission_review_projection(), "request body");
  if (!parsed) {
    out.error = parsed.error();
    return out;
  }
  json& review = parsed.value();
  if (!review.is_object()) {
    out.error = "request body: expected an AdmissionReview object";
    return out;
  }
  // Compared as strings: a json == "literal" builds a json (an allocation) first.
  auto api = review.find("apiVersion");
  if (api == review.end() || !api->is_string() ||
      (api->get_ref<const std::string&>() != "admission.k8s.io/v1" &&
       api->get_ref<const std::string&>() != "admission.k8s.io/v1beta1")) {
    out.error = "request body: apiVersion must be admission.k8s.io/v1";
    return out;
  }
  auto kind = review.find("kind");
  if (kind == review.end() || !kind->is_string() ||
      kind->get_ref<const std::string&>() != "AdmissionReview") {
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
  r.api_version = std::move(api->get_ref<std::string&>());
  std::string error;
  if (!optional_string(req, "uid", "request.uid", r.uid, error)) {
    out.error = "request body: " + error;
    return out;
  }
  if (r.uid.empty()) {
    out.error = "request body: request.uid is missing";
    return out;
  }
  // From here on the review can be answered: whatever is wrong is undecidable.
  out.kind = DecodedReview::Kind::Undecidable;
  auto k = req.find("kind");
  if (k == req.end() || k->is_null()) {
    out.error = "request.kind is missing";
    return out;
  }
  if (!k->is_object()) {
    out.error = "request.kind: expected a map, got " + std::string(model::json_type_phrase(*k));
    return out;
  }
  std::string operation;
  if (!optional_string(*k, "group", "request.kind.group", r.kind_group, out.error) ||
      !optional_string(*k, "version", "request.kind.version", r.kind_version, out.error) ||
      !optional_string(*k, "kind", "request.kind.kind", r.kind, out.error) ||
      !optional_string(req, "subResource", "request.subResource", r.sub_resource, out.error) ||
      !optional_string(req, "namespace", "request.namespace", r.namespace_, out.error) ||
      !optional_string(req, "name", "request.name", r.name, out.error) ||
      !optional_string(req, "operation", "request.operation", operation, out.error)) {
    return out;
  }
  if (auto d = req.find("dryRun"); d != req.end() && !d->is_null()) {
    if (!d->is_boolean()) {
      out.error = "request.dryRun: expected a boolean, got " +
                  std::string(model::json_type_phrase(*d));
      return out;
    }
    r.dry_run = d->get<bool>();
  }
  if (r.kind.empty()) {
    out.error = "request.kind is missing";
    return out;
  }
  if (operation.empty()) {
    out.error = "request.operation is missing";
    return out;
  }
  const auto op = parse_operation(operation);
  if (!op) {
    out.error = "request.operation " + quote(operation) +
                " is not one of CREATE, UPDATE, DELETE, CONNECT";
    return out;
  }
  r.operation = *op;
  if (auto u = req.find("userInfo"); u != req.end() && !u->is_null()) {
    if (!u->is_object()) {
      out.error = "request.userInfo: expected a map, got " + std::string(model::json_type_phrase(*u));
      return out;
    }
    if (!optional_string(*u, "username", "request.userInfo.username", r.username, out.error)) return out;
    if (auto g = u->find("groups"); g != u->end() && !g->is_null()) {
      bool strings = g->is_array();
      for (const json& name : *g) strings = strings && name.is_string();
      if (!strings) {
        out.error = "request.userInfo.groups: expected a list of strings";
        return out;
      }
      r.groups.reserve(g->size());
      for (json& name : *g) r.groups.push_back(std::move(name.get_ref<std::string&>()));
    }
  }
  if (auto o = req.find("object"); o != req.end()) r.object = std::move(*o);
  if (auto o = req.find("oldObject"); o != req.end()) r.old_object = std::move(*o);
  out.kind = DecodedReview::Kind::Ok;
  return out;
}

std::string base64_encode(std::string_view data) {
  std::string out;
  json_text::append_base64(out, data);
  return out;
}

std::string encode_response(const AdmissionRequest& request, const Answer& answer) {
  // Written as text, members in sorted order (the bytes a std::map DOM dumps:
  // tests/unit/admission_webhook_test.cpp compares the two).
  const bool allowed = answer.allowed();
  std::string out;
  std::size_t size = 256 + request.uid.size() + answer.message.size() + answer.patch.size() * 4 / 3;
  for (const auto& [key, value] : answer.audit) size += key.size() + value.size() + 6;
  for (const auto& text : answer.warnings) size += text.size() + 3;
  out.reserve(size);
  json_text::Writer w(out);
  w.begin_object();
  w.key("apiVersion").string(request.api_version.empty() ? std::string_view("admission.k8s.io/v1")
                                                         : std::string_view(request.api_version));
  w.key("kind").string("AdmissionReview");
  w.key("response").begin_object();
  w.key("allowed").boolean(allowed);
  if (!answer.audit.empty()) {
    // Sorted by key; a key given twice keeps its last value (as a map would).
    // The order is sorted on the stack (a review has a handful).
    using Entry = const std::pair<std::string, std::string>*;
    Entry small[16];
    std::vector<Entry> large;
    Entry* audit = small;
    const std::size_t n = answer.audit.size();
    if (n > std::size(small)) {
      large.resize(n);
      audit = large.data();
    }
    for (std::size_t i = 0; i < n; ++i) audit[i] = &answer.audit[i];
    const auto by_key = [](Entry a, Entry b) { return a->first < b->first; };
    if (n > std::size(small)) {
      std::stable_sort(audit, audit + n, by_key);
    } else {
      // Stable, in place: insertion sort (std::stable_sort takes a heap buffer).
      for (std::size_t i = 1; i < n; ++i) {
        const Entry e = audit[i];
        std::size_t j = i;
        for (; j > 0 && by_key(e, audit[j - 1]); --j) audit[j] = audit[j - 1];
        audit[j] = e;
      }
    }
    w.key("auditAnnotations").begin_object();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + 1 < n && audit[i + 1]->first == audit[i]->first) continue;
      w.key(audit[i]->first).string(audit[i]->second);
    }
    w.end_object();
  }
  if (!answer.patch.empty()) {
    w.key("patch").base64(answer.patch);
    w.key("patchType").string("JSONPatch");
  }
  if (!allowed) {
    w.key("status").begin_object();
    w.key("code").integer(answer.code());
    w.key("message").string(answer.message);
    w.key("metadata").begin_object().end_object();
    w.key("reason").string(answer.status_reason());
    w.key("status").string("Failure");
    w.end_object();
  }
  w.key("uid").string(request.uid);
  if (!answer.warnings.empty()) {
    w.key("warnings").begin_array();
    for (const auto& text : answer.warnings) w.string(text);
    w.end_array();
  }
  w.end_object();
  w.end_object();
  return out;
}

}  // namespace ig::admission
