// The one rule for putting a value someone else wrote into a message: in
// double quotes, one line (base/one_line.h), cut at 253 bytes with "..."
// after the cut, never inside a UTF-8 sequence. kMaxWarning is the API
// server's bound on an admission warning (under 120 characters).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ig {

inline constexpr std::size_t kMaxQuoted = 253;
inline constexpr std::size_t kMaxWarning = 119;

// `"value"`, cut as above.
std::string quote(std::string_view value);
// quote(value) appended to `out` (for messages built on every review).
void append_quoted(std::string& out, std::string_view value);

// `value` cut to at most `max` bytes (the last three being "..." when cut),
// never inside a UTF-8 sequence.
std::string cut_utf8(std::string_view value, std::size_t max);

}  // namespace ig
