// How deep a JSON text nests, by a linear scan before any parser runs
// (nlohmann recurses, so outside JSON is refused beyond a sane depth first).
#pragma once

#include <cstddef>
#include <string_view>

namespace ig {

// Length of the deepest nesting of [ and { outside strings, stopping early
// once `limit` is exceeded (returns limit + 1 then). Linear, no recursion.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit) noexcept;

}  // namespace ig
