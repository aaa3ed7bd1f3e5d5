// Structured logs: one JSON object a line on stderr
// ({"ts":"...","level":"info","msg":"...", ...fields}).
//
// Contract: thread-safe (a line is written whole, never interleaved); every
// string is JSON-escaped, so a field can carry any bytes someone else wrote;
// levels are "debug", "info", "warn", "error". Lines below the minimum level
// (set_min_log_level; "info" until set) are dropped; an unknown level is
// written as if it were "error".
#pragma once

#include <initializer_list>
#include <string_view>
#include <utility>

namespace ig::config {

using LogField = std::pair<std::string_view, std::string_view>;

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

// Lines below `level` are dropped from now on. Thread-safe.
void set_min_log_level(LogLevel level);

void log(std::string_view level, std::string_view msg, std::initializer_list<LogField> fields = {});
inline void log_debug(std::string_view msg, std::initializer_list<LogField> f = {}) { log("debug", msg, f); }
inline void log_info(std::string_view msg, std::initializer_list<LogField> f = {}) { log("info", msg, f); }
inline void log_warn(std::string_view msg, std::initializer_list<LogField> f = {}) { log("warn", msg, f); }
inline void log_error(std::string_view msg, std::initializer_list<LogField> f = {}) { log("error", msg, f); }

}  // namespace ig::config
