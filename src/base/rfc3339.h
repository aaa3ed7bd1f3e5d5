// RFC 3339 times as the Kubernetes API writes them: exactly
// YYYY-MM-DDTHH:MM:SS[.digits](Z|+hh:mm|-hh:mm), 't' and 'z' too, each field in
// range (second 60 allowed), the offset applied, to the nanosecond; anything
// else is nullopt. Pure; never throws.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace ig {

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) noexcept;

}  // namespace ig
