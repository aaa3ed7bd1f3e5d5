// The decoder of a LIST answer ({"kind":"...List","metadata":{...},
// "items":[...]}) that hands over the items one at a time, as they are
// parsed, instead of building the page as one DOM.
//
// Why: a page of 5,000 objects parsed whole is several MiB of small DOM
// nodes, alive while every item is decoded into the caches; the caches' long-
// lived objects then sit scattered between the freed nodes, on pages the
// allocator cannot give back (docs/benchmarks-cluster.md). Parsed item by
// item, only one item's DOM exists at a time, and its freed nodes are reused
// by the next item's.
//
// Contract:
//  - `each` is called once per element of the top-level "items" array, in
//    order, with the element (any JSON value; the caller judges it), as soon
//    as that element is complete; the element is the caller's to keep.
//  - Before any parsing the nesting depth is checked (base/json_depth.h)
//    against `max_depth`; a stream (below), which is not held, is checked as
//    it is parsed, so the items before the one nested too deep are handed
//    over (the error is the same).
//  - Errors (one line): nesting deeper than max_depth, not JSON, not a JSON
//    object, "items" neither a list nor null, "items" twice, metadata not an
//    object, metadata.resourceVersion or metadata.continue neither a string
//    nor null. Items handed over before an error was found stay handed over:
//    a caller that must be all-or-nothing (a reflector's list) starts over
//    on an error.
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
