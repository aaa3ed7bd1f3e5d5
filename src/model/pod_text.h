// Pod facts read straight from the JSON text of a Pod or workload, without a
// DOM, validating the text as they are read: the webhook's fast path for
// /mutate/pods, /validate/pods and /validate/workloads (the text is
// request.object, model/json_projection.h: Projection::unchecked_raw).
//
// Contract:
//  - read_pod_text() returns facts only for text that is valid JSON by the
//    projected parser's rules (model/json_projection.h: grammar, UTF-8,
//    numbers, no repeated member name, no NUL, nesting within
//    DecodeLimits::max_depth with `depth` containers counted around the
//    value, size within max_bytes): what it reads it checks itself, every
//    other value goes through ValueValidator. So a caller may hand it text
//    that nothing validated yet (decode_review's single pass, admission/
//    review.h) and parse the text again, checked, only when it declines.
//  - It reads only the usual shape: every field the facts need has its
//    type, every member name of an object it reads and every string it
//    keeps is printable ASCII without an escape, the object's kind and
//    apiVersion (each absent, null or a string) agree with the request's,
//    and the kind's pod (template) is there. Then it returns what
//    ensure-type-meta, locate_pod() and read_pod_facts() give on the parsed
//    object: the same PodLocation (pod left null) and equal PodFacts.
//    Anything else is nullopt: the caller reads the DOM, which gives the
//    answer or words the error. It never returns facts where that path fails.
//  - Nothing outside `text` is read.
//  - tests/unit/model_pod_text_test.cpp and tests/fuzz/pod_text_fuzz.cpp
//    check this differentially. Why one pass: docs/decisions/0013.
#pragma once

#include <cstddef>
#include <memory>
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
// `depth`: the containers open around the text's value where it came from
// (request.object in an AdmissionReview: 2).
std::optional<PodText> read_pod_text(std::string_view text, std::string_view kind,
                                     std::string_view api_version, std::size_t depth = 0);

// read_pod_text() in two steps, for a caller that meets the text before it
// knows the request's kind (decode_review's one pass, a model::ObjectReader):
// scan_pod_text() reads and validates the object whose '{' is at `p`,
// returning the byte after it (nullptr where read_pod_text would decline
// the text whatever the kind), and finish_pod_text() applies the kind.
struct PodScanParts;
struct PodScanDeleter {
  void operator()(PodScanParts* parts) const noexcept;
};
using PodScan = std::unique_ptr<PodScanParts, PodScanDeleter>;
const char* scan_pod_text(const char* p, const char* end, std::size_t depth, PodScan& out);
std::optional<PodText> finish_pod_text(PodScan scan, std::string_view kind, std::string_view api_version);

// Where the pod (template) of an object of this kind and apiVersion sits
// (`pod` left null), from locate_pod()'s table (pod.cpp); nullopt for a
// pair locate_pod() refuses.
std::optional<PodLocation> location_for(std::string_view kind, std::string_view api_version);

}  // namespace ig::model
