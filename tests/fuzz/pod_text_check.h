// The differential check of model::read_pod_text (model/pod_text.h) against
// the DOM path it stands in for (admission/handlers.cpp): the object parsed
// with the review's object projection, its type meta completed from the
// request's, locate_pod() and read_pod_facts(). Shared by the unit test
// (tests/unit/model_pod_text_test.cpp) and the fuzzer (pod_text_fuzz.cpp).
#pragma once

#include <string>
#include <string_view>

#include "admission/review.h"
#include "model/json_projection.h"
#include "model/pod.h"
#include "model/pod_text.h"

namespace ig::pod_text_check {

inline bool same_facts(const model::PodFacts& a, const model::PodFacts& b) {
  return a.kind == b.kind && a.object_name == b.object_name && a.namespace_ == b.namespace_ &&
         a.component == b.component && a.runtime_class == b.runtime_class && a.host_network == b.host_network &&
         a.host_pid == b.host_pid && a.host_ipc == b.host_ipc && a.privileged_containers == b.privileged_containers &&
         a.containers == b.containers && a.volumes == b.volumes && a.kata_annotations == b.kata_annotations &&
         a.has_metadata == b.has_metadata && a.has_annotations == b.has_annotations &&
         a.isolation_annotation == b.isolation_annotation;
}

enum class Outcome { NotInput, DomFails, TextDeclines, Same };

// What happened; `disagreement` is set (and the outcome meaningless) when
// the two paths disagree: facts from text the projected parser refuses,
// facts from the text where the DOM path fails, or other facts or another
// location than it gives.
inline Outcome compare(std::string_view text, std::string_view kind, std::string_view api_version,
                       std::string& disagreement) {
  using nlohmann::json;
  auto dom = model::parse_projected(text, admission::admission_object_projection(), "request.object");
  const auto read = model::read_pod_text(text, kind, api_version);
  if (!dom) {  // not JSON by the parser's rules: read_pod_text validates what it reads
    if (read) disagreement = "read_pod_text gave facts on text the projected parser refuses: " + dom.error();
    return Outcome::NotInput;
  }
  json& object = *dom;
  bool ok = object.is_object();
  // ensure_type_meta (admission/handlers.cpp), spelled out again.
  for (auto [key, expected] : {std::pair<const char*, std::string_view>{"kind", kind}, {"apiVersion", api_version}}) {
    if (!ok) break;
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      object[key] = std::string(expected);
    } else if (!it->is_string() || it->get<std::string>() != expected) {
      ok = false;
    }
  }
  Result<model::PodLocation> where = fail("not an object");
  Result<model::PodFacts> facts = fail("not located");
  if (ok) where = model::locate_pod(object, "request.object");
  if (ok && where) facts = model::read_pod_facts(object, *where, "request.object");
  if (!ok || !where || !facts) {
    if (read) disagreement = "read_pod_text gave facts where the DOM path fails";
    return Outcome::DomFails;
  }
  if (!read) return Outcome::TextDeclines;
  if (read->where.kind != where->kind || read->where.pointer != where->pointer ||
      read->where.field_path != where->field_path || read->where.pod != nullptr) {
    disagreement = "read_pod_text located the pod elsewhere";
  } else if (!same_facts(read->facts, *facts)) {
    disagreement = "read_pod_text read other facts";
  }
  return Outcome::Same;
}

}  // namespace ig::pod_text_check
