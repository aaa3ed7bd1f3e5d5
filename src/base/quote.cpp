#include "base/quote.h"

namespace ig {

std::string cut_utf8(std::string_view value, std::size_t max) {
  if (value.size() <= max) return std::string(value);
  std::size_t cut = max >= 3 ? max - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  std::string out(value.substr(0, cut));
  out.append("...");
  return out;
}

std::string quote(std::string_view value) {
  std::string out = "\"";
  if (value.size() > kMaxQuoted) {
    std::size_t cut = kMaxQuoted;
    while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
    out.append(value.substr(0, cut)).append("...");
  } else {
    out.append(value);
  }
  out.push_back('"');
  return out;
}

}  // namespace ig
