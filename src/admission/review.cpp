#include "admission/review.h"

#include <algorithm>
#include <array>

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

// The envelope's capture slots (model/json_projection.h): what
// decode_review() reads once, handed over without DOM nodes around it.
enum Slot : std::size_t {
  kReview, kApiVersion, kKind, kRequest, kUid, kRequestKind, kGroup, kVersion, kKindKind,
  kSubResource, kNamespace, kName, kOperation, kDryRun, kUserInfo, kUsername, kGroups,
  kObject, kOldObject, kSlotCount
};

// An optional string slot: absent or null -> "" and true; a string -> it,
// moved out; any other type -> false with `error` naming the field.
bool optional_string(model::Captured& c, std::string_view path, std::string& out,
                     std::string& error) {
  if (!c.present() || c.type == json::value_t::null) return true;
  if (c.type != json::value_t::string) {
    error = std::string(path) + ": expected a string, got " + std::string(model::json_type_phrase(c.type));
    return false;
  }
  out = std::move(c.text);
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

const Projection& admission_object_projection() {
  using P = Projection;
  static const Projection projection =
      P::merge(P::merge(model::pod_object_projection(), model::component_projection()),
               namespace_object_projection());
  return projection;
}

namespace {

// The review's projection; `object`: request.object's and oldObject's.
Projection review_projection(const Projection& object) {
  using P = Projection;
  return P::capture(kReview, P::object({
      {"apiVersion", P::capture(kApiVersion, P::whole())},
      {"kind", P::capture(kKind, P::whole())},
      {"request", P::capture(kRequest, P::object({
          {"uid", P::capture(kUid, P::whole())},
          {"kind", P::capture(kRequestKind, P::object({{"group", P::capture(kGroup, P::whole())},
                                                       {"version", P::capture(kVersion, P::whole())},
                                                       {"kind", P::capture(kKindKind, P::whole())}}))},
          {"subResource", P::capture(kSubResource, P::whole())},
          {"namespace", P::capture(kNamespace, P::whole())},
          {"name", P::capture(kName, P::whole())},
          {"operation", P::capture(kOperation, P::whole())},
          {"dryRun", P::capture(kDryRun, P::whole())},
          {"userInfo", P::capture(kUserInfo, P::object({{"username", P::capture(kUsername, P::whole())},
                                                        {"groups", P::capture(kGroups, P::whole())}}))},
          {"object", P::capture(kObject, object)},
          {"oldObject", P::capture(kOldObject, object)},
      }))},
  }));
}

// request.object and oldObject as text (ObjectRead::Text).
const Projection& admission_review_text_projection() {
  static const Projection projection = review_projection(Projection::raw());
  return projection;
}

}  // namespace

const Projection& admission_review_projection() {
  static const Projection projection = review_projection(admission_object_projection());
  return projection;
}

std::size_t admission_review_slot_count() noexcept { return kSlotCount; }

namespace {

// request.object's and oldObject's text read as a pod's, in the decode's
// pass (model/pod_text.h); what it declines the decode validates itself.
class PodTextReader final : public model::ObjectReader {
 public:
  const char* read(std::size_t slot, const char* p, const char* end, std::size_t depth) override {
    if (slot != kObject && slot != kOldObject) return nullptr;
    return model::scan_pod_text(p, end, depth, slot == kObject ? object : old_object);
  }
  model::PodScan object, old_object;
};

}  // namespace

DecodedReview decode_review(std::string_view body, ObjectRead read) {
  DecodedReview out;
  // Validates the whole body; hands over only what the rules read, the
  // envelope's fields without a DOM (see json_projection.h, capture slots).
  std::array<model::Captured, kSlotCount> slots;
  const bool text = read == ObjectRead::Text;
  PodTextReader pods;
  auto parsed = model::parse_captured(body, text ? admission_review_text_projection() : admission_review_projection(),
                                      slots, "request body", {}, text ? &pods : nullptr);
  if (!parsed) {
    out.error = parsed.error();
    return out;
  }
  if (slots[kReview].type != json::value_t::object) {
    out.error = "request body: expected an AdmissionReview object";
    return out;
  }
  model::Captured& api = slots[kApiVersion];
  if (api.type != json::value_t::string ||
      (api.text != "admission.k8s.io/v1" && api.text != "admission.k8s.io/v1beta1")) {
    out.error = "request body: apiVersion must be admission.k8s.io/v1";
    return out;
  }
  if (slots[kKind].type != json::value_t::string || slots[kKind].text != "AdmissionReview") {
    out.error = "request body: kind must be AdmissionReview";
    return out;
  }
  if (slots[kRequest].type != json::value_t::object) {
    out.error = "request body: AdmissionReview has no request";
    return out;
  }
  AdmissionRequest& r = out.request;
  r.api_version = std::move(api.text);
  std::string error;
  if (!optional_string(slots[kUid], "request.uid", r.uid, error)) {
    out.error = "request body: " + error;
    return out;
  }
  if (r.uid.empty()) {
    out.error = "request body: request.uid is missing";
    return out;
  }
  // From here on the review can be answered: whatever is wrong is undecidable.
  out.kind = DecodedReview::Kind::Undecidable;
  const model::Captured& k = slots[kRequestKind];
  if (!k.present() || k.type == json::value_t::null) {
    out.error = "request.kind is missing";
    return out;
  }
  if (k.type != json::value_t::object) {
    out.error = "request.kind: expected a map, got " + std::string(model::json_type_phrase(k.type));
    return out;
  }
  std::string operation;
  if (!optional_string(slots[kGroup], "request.kind.group", r.kind_group, out.error) ||
      !optional_string(slots[kVersion], "request.kind.version", r.kind_version, out.error) ||
      !optional_string(slots[kKindKind], "request.kind.kind", r.kind, out.error) ||
      !optional_string(slots[kSubResource], "request.subResource", r.sub_resource, out.error) ||
      !optional_string(slots[kNamespace], "request.namespace", r.namespace_, out.error) ||
      !optional_string(slots[kName], "request.name", r.name, out.error) ||
      !optional_string(slots[kOperation], "request.operation", operation, out.error)) {
    return out;
  }
  if (const model::Captured& d = slots[kDryRun]; d.present() && d.type != json::value_t::null) {
    if (d.type != json::value_t::boolean) {
      out.error = "request.dryRun: expected a boolean, got " + std::string(model::json_type_phrase(d.type));
      return out;
    }
    r.dry_run = d.value.get<bool>();
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
  if (const model::Captured& u = slots[kUserInfo]; u.present() && u.type != json::value_t::null) {
    if (u.type != json::value_t::object) {
      out.error = "request.userInfo: expected a map, got " + std::string(model::json_type_phrase(u.type));
      return out;
    }
    if (!optional_string(slots[kUsername], "request.userInfo.username", r.username, out.error)) return out;
    if (model::Captured& g = slots[kGroups]; g.present() && g.type != json::value_t::null) {
      if (g.type != json::value_t::array || !g.all_strings) {
        out.error = "request.userInfo.groups: expected a list of strings";
        return out;
      }
      r.groups = std::move(g.list);
    }
  }
  // As text: an object stays text; any other value (validated already) is
  // what the projected parse gives, so the handlers' type checks word it.
  const auto take = [&](model::Captured& c, nlohmann::json& dom, std::string_view& text_out) {
    if (!c.present()) return true;
    if (!text) {
      dom = std::move(c.value);
    } else if (c.type == json::value_t::object) {
      text_out = c.raw;
    } else if (!c.raw.empty()) {
      auto v = model::parse_projected(c.raw, admission_object_projection(), "request body");
      if (!v) {
        out.error = v.error();
        return false;
      }
      dom = std::move(*v);
    } else {
      dom = std::move(c.value);
    }
    return true;
  };
  if (!take(slots[kObject], r.object, r.object_text) ||
      !take(slots[kOldObject], r.old_object, r.old_object_text)) {
    return out;
  }
  if (text) {
    const std::string api = request_api_version(r);
    r.object_pod = model::finish_pod_text(std::move(pods.object), r.kind, api);
    r.old_object_pod = model::finish_pod_text(std::move(pods.old_object), r.kind, api);
  }
  out.kind = DecodedReview::Kind::Ok;
  return out;
}

std::string request_api_version(const AdmissionRequest& r) {
  return r.kind_group.empty() ? r.kind_version : r.kind_group + "/" + r.kind_version;
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
