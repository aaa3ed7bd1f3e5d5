// The decoder of a LIST answer ({"kind":"...List","metadata":{...},
// "items":[...]}) that hands over the items one at a time, as they are
// parsed, so only one item's DOM exists at a time (a whole page's DOM
// scattered the caches' objects: docs/benchmarks-cluster.md).
//
// Contract:
//  - `each` is called once per element of the top-level "items" array, in
//    order, as soon as that element is complete; it is the caller's to keep.
//  - The nesting depth is checked first (base/json_depth.h) against
//    `max_depth`; a stream (below), not held whole, is checked as it is
//    parsed, so the items before one nested too deep are handed over.
//  - Errors (one line): too deep, not JSON, not an object, "items" neither a
//    list nor null or given twice, metadata not an object, its
//    resourceVersion or continue neither a string nor null. Items handed over
//    before an error stay handed over: an all-or-nothing caller (a
//    reflector's list) starts over.
//  - The result carries the list's resourceVersion and continue token; its
//    `items` is empty.
#pragma once

#include <cstddef>
#include <functional>
#include <istream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

Result<ListPage> decode_list(std::string_view body, std::size_t max_depth,
                             const std::function<void(nlohmann::json&&)>& each);

// The same, read from `body` as the parser goes (an HTTP answer taken chunk
// by chunk as it arrives): the answer is never held whole, so a LIST of
// 100,000 objects costs one item's DOM and one chunk, not the tens of MiB of
// its text. The stream's end is the document's end.
Result<ListPage> decode_list(std::istream& body, std::size_t max_depth,
                             const std::function<void(nlohmann::json&&)>& each);

}  // namespace ig::kube
