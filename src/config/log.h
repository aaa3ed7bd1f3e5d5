// Structured logs: one JSON object a line on stderr
// ({"ts":"...","level":"info","msg":"...", ...fields}).
//
// Contract: thread-safe (a line is written whole, never interleaved); every
// string is JSON-escaped, so a field can carry any bytes someone else wrote;
// levels are "debug", "info", "warn", "error".
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

namespace ig::config {

using LogField = std::pair<std::string_view, std::string_view>;

void log(std::string_view level, std::string_view msg, std::initializer_list<LogField> fields = {});
inline void log_info(std::string_view msg, std::initializer_list<LogField> f = {}) { log("info", msg, f); }
inline void log_warn(std::string_view msg, std::initializer_list<LogField> f = {}) { log("warn", msg, f); }
inline void log_error(std::string_view msg, std::initializer_list<LogField> f = {}) { log("error", msg, f); }

}  // namespace ig::config
