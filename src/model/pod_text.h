// Pod facts read straight from the JSON text of a Pod or workload, without a
// DOM: the webhook's fast path for /mutate/pods, /validate/pods and
// /validate/workloads (the text is request.object as the projected parser
// validated it, model/json_projection.h: Projection::raw).
//
// Contract:
//  - `text` is one JSON value the projected parser accepted (valid JSON, no
//    repeated member name). It is not validated again; on any other text the
//    answer is unspecified, but nothing outside `text` is read.
//  - read_pod_text() reads only the usual shape: every field the facts need
//    has its type, no string it keeps and no member name of an object it
//    reads has an escape, the object's kind and apiVersion (each absent,
//    null or a string) agree with the request's, and the kind's pod
//    (template) is there. Then it returns what ensure-type-meta,
//    locate_pod() and read_pod_facts() give on the parsed object: the same
//    PodLocation (pod left null) and equal PodFacts. Anything else is
//    nullopt: the caller reads the DOM, which gives the answer or words
//    the error. It never returns facts where that path fails.
//  - tests/unit/model_pod_text_test.cpp and tests/fuzz/pod_text_fuzz.cpp
//    check this differentially.
#pragma once

#include <optional>
#include <string_view>

#include "model/pod.h"

namespace ig::model {

struct PodText {
  PodLocation where;  // where.pod is null: there is no DOM
  PodFacts facts;
};

// `kind` and `api_version`: the request's (request.kind, "group/version" or
// "version"), what an object without its own type meta is taken to be.
std::optional<PodText> read_pod_text(std::string_view text, std::string_view kind,
                                     std::string_view api_version);

// Where the pod (template) of an object of this kind and apiVersion sits
// (`pod` left null), from locate_pod()'s table (pod.cpp); nullopt for a
// pair locate_pod() refuses.
std::optional<PodLocation> location_for(std::string_view kind, std::string_view api_version);

}  // namespace ig::model
