#include "base/quote.h"

#include "base/one_line.h"

namespace ig {
namespace {

// The first `n` bytes of `value` (n < its size), fewer so as not to end inside a UTF-8 sequence.
std::string_view utf8_prefix(std::string_view value, std::size_t n) {
  while (n > 0 && (static_cast<unsigned char>(value[n]) & 0xC0) == 0x80) --n;
  return value.substr(0, n);
}

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

std::string cut_utf8(std::string_view value, std::size_t max) {
  if (value.size() <= max) return std::string(value);
  return std::string(utf8_prefix(value, max >= 3 ? max - 3 : 0)) + "...";
}

void append_quoted(std::string& out, std::string_view value) {
  const bool cut = value.size() > kMaxQuoted;
  const std::string_view keep = cut ? utf8_prefix(value, kMaxQuoted) : value;
  out.reserve(out.size() + keep.size() + 5);
  out.push_back('"');
  append_one_line(out, keep);
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
