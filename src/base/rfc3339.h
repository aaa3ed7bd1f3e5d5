// RFC 3339 times as the Kubernetes API writes them (metav1.Time,
// ExecCredential's expirationTimestamp): "2026-12-05T10:42:00Z", with an
// optional fraction and a "Z" or "+hh:mm" / "-hh:mm" offset.
//
// Contract: parse_rfc3339 accepts exactly YYYY-MM-DDTHH:MM:SS[.digits](Z|+hh:mm|-hh:mm)
// ('t' and 'z' in lower case too) with each field in range (second 60 for a
// leap second); the offset is applied and the fraction kept to the
// nanosecond. Anything else is nullopt. Pure; never throws.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace ig {

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) noexcept;

}  // namespace ig
