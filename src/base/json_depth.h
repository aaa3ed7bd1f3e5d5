// How deep a JSON text nests, found by a linear scan before any parser runs:
// nlohmann's dump/copy/compare recurse, so every JSON input from outside
// (admission requests, Kubernetes API answers) is refused beyond a sane
// depth first. Standard library only.
#pragma once

#include <cstddef>
#include <string_view>

namespace ig {

// Length of the deepest nesting of [ and { outside strings, stopping early
// once `limit` is exceeded (returns limit + 1 then). Linear, no recursion.
std::size_t json_nesting_depth(std::string_view text, std::size_t limit) noexcept;

}  // namespace ig
