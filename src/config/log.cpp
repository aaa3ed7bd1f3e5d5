#include "config/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>

namespace ig::config {
namespace {

void append_json_string(std::string& out, std::string_view s) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out.append(buf);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}

std::atomic<int> min_level{static_cast<int>(LogLevel::Info)};

int level_rank(std::string_view level) {
  if (level == "debug") return static_cast<int>(LogLevel::Debug);
  if (level == "info") return static_cast<int>(LogLevel::Info);
  if (level == "warn") return static_cast<int>(LogLevel::Warn);
  return static_cast<int>(LogLevel::Error);
}

}  // namespace

void set_min_log_level(LogLevel level) { min_level.store(static_cast<int>(level), std::memory_order_relaxed); }

void log(std::string_view level, std::string_view msg, std::initializer_list<LogField> fields) {
  if (level_rank(level) < min_level.load(std::memory_order_relaxed)) return;
  const auto now = std::chrono::system_clock::now();
  const auto secs = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char ts[96];
  std::snprintf(ts, sizeof ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  std::string line = "{\"ts\":\"";
  line.append(ts).append("\",\"level\":");
  append_json_string(line, level);
  line.append(",\"msg\":");
  append_json_string(line, msg);
  for (const auto& [k, v] : fields) {
    line.push_back(',');
    append_json_string(line, k);
    line.push_back(':');
    append_json_string(line, v);
  }
  line.append("}\n");
  std::lock_guard lock(log_mutex());
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace ig::config
