// The decoder of a LIST answer that hands over the items one at a time as
// they are parsed, so only one item's DOM exists at a time.
//
// Contract:
//  - `each` gets each element of the top-level "items", in order, as soon as
//    it is complete. Items handed over before an error stay handed over.
//  - `body` is read as the parser goes (never held whole); the nesting depth
//    is bounded by `max_depth` as it is parsed.
//  - Errors (one line): too deep, not a JSON object, "items" not a list or
//    given twice, metadata, its resourceVersion or continue of a wrong type.
//  - The result carries resourceVersion and continue; its `items` is empty.
#pragma once

#include <cstddef>
#include <functional>
#include <istream>

#include <nlohmann/json.hpp>

#include "base/result.h"
#include "kube/api.h"

namespace ig::kube {

Result<ListPage> decode_list(std::istream& body, std::size_t max_depth,
                             const std::function<void(nlohmann::json&&)>& each);

}  // namespace ig::kube
