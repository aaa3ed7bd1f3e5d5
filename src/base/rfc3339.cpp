#include "base/rfc3339.h"

namespace ig {

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) noexcept {
  auto digits = [&](std::size_t at, std::size_t n, int& out) {
    if (at + n > text.size()) return false;
    out = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return false;
      out = out * 10 + (text[i] - '0');
    }
    return true;
  };
  int year, month, day, hour, minute, second;
  if (text.size() < 20 || !digits(0, 4, year) || text[4] != '-' || !digits(5, 2, month) || text[7] != '-' ||
      !digits(8, 2, day) || (text[10] != 'T' && text[10] != 't') || !digits(11, 2, hour) || text[13] != ':' ||
      !digits(14, 2, minute) || text[16] != ':' || !digits(17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  std::size_t at = 19;
  long long nanos = 0;
  if (at < text.size() && text[at] == '.') {
    ++at;
    const std::size_t start = at;
    long long scale = 100000000;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') {
      nanos += (text[at] - '0') * scale;
      scale /= 10;
      ++at;
    }
    if (at == start) return std::nullopt;
  }
  long offset = 0;
  if (at + 1 == text.size() && (text[at] == 'Z' || text[at] == 'z')) {
    // UTC
  } else if (at + 6 == text.size() && (text[at] == '+' || text[at] == '-') && text[at + 3] == ':') {
    int oh, om;
    if (!digits(at + 1, 2, oh) || !digits(at + 4, 2, om) || oh > 23 || om > 59) return std::nullopt;
    offset = (text[at] == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
  } else {
    return std::nullopt;
  }
  using namespace std::chrono;
  const sys_days date = std::chrono::year(year) / month / day;  // a day past the month's end rolls over
  return date + hours(hour) + minutes(minute) + seconds(second - offset) +
         duration_cast<system_clock::duration>(nanoseconds(nanos));
}

}  // namespace ig
