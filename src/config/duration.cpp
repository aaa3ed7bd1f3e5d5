#include "config/duration.h"

#include <cctype>
#include <cmath>

#include "base/quote.h"

namespace ig::config {

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
  const std::string what = "duration " + quote(text);
  if (text == "0") return std::chrono::milliseconds(0);
  if (text.empty()) return fail(what + ": empty (expected e.g. 15s, 2m, 1h30m)");
  struct Unit {
    std::string_view name;
    double ms;
  };
  static constexpr Unit kUnits[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xC2\xB5s", 1e-3}, {"ms", 1},
                                    {"s", 1e3},   {"m", 6e4},   {"h", 3.6e6}};
  double total = 0;
  std::size_t at = 0;
  while (at < text.size()) {
    const std::size_t start = at;
    while (at < text.size() && (std::isdigit(static_cast<unsigned char>(text[at])) || text[at] == '.')) ++at;
    const std::string_view number = text.substr(start, at - start);
    if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
      return fail(what + ": expected a number at offset " + std::to_string(start) + " (e.g. 15s, 2m, 1h30m)");
    }
    const std::size_t unit_start = at;
    while (at < text.size() && !std::isdigit(static_cast<unsigned char>(text[at])) && text[at] != '.') ++at;
    const std::string_view unit = text.substr(unit_start, at - unit_start);
    const Unit* found = nullptr;
    for (const Unit& u : kUnits) {
      if (u.name == unit) found = &u;
    }
    if (!found) {
      return fail(what + (unit.empty() ? ": a number without a unit" : ": unknown unit " + quote(unit)) +
                  " (units: ns, us, ms, s, m, h)");
    }
    total += std::stod(std::string(number)) * found->ms;
    if (total > 9.0e15) return fail(what + ": too long");
  }
  return std::chrono::milliseconds(static_cast<long long>(std::floor(total)));
}

std::string format_duration(std::chrono::milliseconds d) {
  const long long ms = d.count();
  if (ms == 0) return "0s";
  if (ms % 3'600'000 == 0) return std::to_string(ms / 3'600'000) + "h";
  if (ms % 60'000 == 0) return std::to_string(ms / 60'000) + "m";
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + "s";
  return std::to_string(ms) + "ms";
}

}  // namespace ig::config
