#include "base/json_text.h"

#include <charconv>
#include <cstring>

namespace ig::json_text {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes 0x20..0x7F other than '"' and '\\' are written as they are.
constexpr bool plain_ascii(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

// The continuation bytes a UTF-8 sequence led by `lead` needs, and the range
// of the first one (RFC 3629: no overlongs, no surrogates, nothing above
// U+10FFFF); 0 continuations for a byte that cannot lead.
struct Lead {
  int continuations;
  unsigned char first_lo, first_hi;
};

constexpr Lead lead_of(unsigned char b) {
  if (b >= 0xC2 && b <= 0xDF) return {1, 0x80, 0xBF};
  if (b == 0xE0) return {2, 0xA0, 0xBF};
  if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return {2, 0x80, 0xBF};
  if (b == 0xED) return {2, 0x80, 0x9F};
  if (b == 0xF0) return {3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {3, 0x80, 0xBF};
  if (b == 0xF4) return {3, 0x80, 0x8F};
  return {0, 0, 0};
}

// Whole 8-byte words of plain bytes, skipped at once.
const unsigned char* skip_plain_words(const unsigned char* p, const unsigned char* end) {
  while (end - p >= 8) {
    std::uint64_t x;
    std::memcpy(&x, p, sizeof x);
    if (may_hold_json_special(x)) break;
    p += 8;
  }
  return p;
}

// '"', '\\' or a control byte, escaped.
void append_escaped(std::string& out, unsigned char c) {
  switch (c) {
    case '"': out += "\\\""; return;
    case '\\': out += "\\\\"; return;
    case '\b': out += "\\b"; return;
    case '\f': out += "\\f"; return;
    case '\n': out += "\\n"; return;
    case '\r': out += "\\r"; return;
    case '\t': out += "\\t"; return;
    default: {
      static constexpr char kHex[] = "0123456789abcdef";
      const char esc[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
      out.append(esc, sizeof esc);
    }
  }
}

}  // namespace

void append_string(std::string& out, std::string_view s) {
  out.push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p != end) {
    const unsigned char* run = p;
    p = skip_plain_words(p, end);
    while (p != end && plain_ascii(*p)) ++p;
    out.append(reinterpret_cast<const char*>(run), static_cast<std::size_t>(p - run));
    if (p == end) break;
    const unsigned char c = *p;
    if (c < 0x20 || c == '"' || c == '\\') {
      append_escaped(out, c);
      ++p;
      continue;
    }
    // A multi-byte sequence, or invalid bytes. As nlohmann's decoder: a byte
    // that cannot lead is replaced alone; a sequence cut short by a byte that
    // cannot continue it is replaced, and that byte is read again as a lead.
    const Lead lead = lead_of(c);
    if (lead.continuations == 0) {
      out += kReplacement;
      ++p;
      continue;
    }
    int have = 0;
    while (have < lead.continuations && p + 1 + have != end) {
      const unsigned char b = p[1 + have];
      const unsigned char lo = have == 0 ? lead.first_lo : 0x80;
      const unsigned char hi = have == 0 ? lead.first_hi : 0xBF;
      if (b < lo || b > hi) break;
      ++have;
    }
    if (have == lead.continuations) {
      out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(1 + have));
    } else {
      out += kReplacement;  // cut short here, or by the end of the string
    }
    p += 1 + have;
  }
  out.push_back('"');
}

void append_base64(std::string& out, std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const std::size_t at = out.size();
  out.resize(at + (bytes.size() + 2) / 3 * 4, '=');
  char* o = out.data() + at;
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  for (std::size_t i = 0; i < bytes.size(); i += 3, o += 4) {
    const std::size_t left = bytes.size() - i;  // the last group may be one or two bytes: "xx==" or "xxx="
    unsigned n = unsigned{in[i]} << 16;
    if (left > 1) n |= unsigned{in[i + 1]} << 8;
    if (left > 2) n |= in[i + 2];
    o[0] = kAlphabet[(n >> 18) & 63];
    o[1] = kAlphabet[(n >> 12) & 63];
    if (left > 1) o[2] = kAlphabet[(n >> 6) & 63];
    if (left > 2) o[3] = kAlphabet[n & 63];
  }
}

Writer& Writer::base64(std::string_view bytes) {
  separate();
  out_.push_back('"');
  append_base64(out_, bytes);
  out_.push_back('"');
  return *this;
}

Writer& Writer::open(char c) {
  separate();
  out_.push_back(c);
  need_comma_ = false;
  return *this;
}

Writer& Writer::close(char c) {
  out_.push_back(c);
  need_comma_ = true;
  return *this;
}

Writer& Writer::key(std::string_view name) {
  separate();
  append_string(out_, name);
  out_.push_back(':');
  need_comma_ = false;
  return *this;
}

Writer& Writer::string(std::string_view value) {
  separate();
  append_string(out_, value);
  return *this;
}

Writer& Writer::boolean(bool value) {
  separate();
  out_ += value ? "true" : "false";
  return *this;
}

Writer& Writer::integer(std::int64_t value) {
  separate();
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, value);
  out_.append(buf, r.ptr);
  return *this;
}

}  // namespace ig::json_text
