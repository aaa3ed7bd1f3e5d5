#include "base/quote.h"

#include "base/one_line.h"

namespace ig {

std::string cut_utf8(std::string_view value, std::size_t max) {
  if (value.size() <= max) return std::string(value);
  std::size_t cut = max >= 3 ? max - 3 : 0;
  while (cut > 0 && (static_cast<unsigned char>(value[cut]) & 0xC0) == 0x80) --cut;
  std::string out(value.substr(0, cut));
  out.append("...");
  return out;
}

namespace {

// one_line()'s rule, appended to `out`.
void append_one_line(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) {
      out.push_back(ch);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else {
      out.append("\\x").push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
}

}  // namespace

void append_quoted(std::string& out, std::string_view value) {
  const bool cut = value.size() > kMaxQuoted;
  std::size_t keep = value.size();
  if (cut) {
    keep = kMaxQuoted;
    while (keep > 0 && (static_cast<unsigned char>(value[keep]) & 0xC0) == 0x80) --keep;
  }
  out.reserve(out.size() + keep + 5);
  out.push_back('"');
  append_one_line(out, value.substr(0, keep));
  if (cut) out.append("...");
  out.push_back('"');
}

std::string quote(std::string_view value) {
  std::string out;
  append_quoted(out, value);
  return out;
}

std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_one_line(out, text);
  return out;
}

}  // namespace ig
