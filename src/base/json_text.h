// JSON text written directly, without a DOM, for the documents the admission
// hot path sends (docs/decisions/0005-json-text-responses.md).
// append_string() escapes exactly as model::dump_json() does (each invalid
// UTF-8 sequence replaced by U+FFFD): valid UTF-8 JSON whatever the bytes.
// Writer emits ',' and ':' itself; it checks neither nesting nor that keys
// precede values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ig::json_text {

// `"s"`, escaped as above, appended to `out`.
void append_string(std::string& out, std::string_view s);

// The standard base64 of `bytes` ('=' padded), appended to `out`, no quotes.
void append_base64(std::string& out, std::string_view bytes);

// Whether an 8-byte word may hold '"', '\\', a control byte or a byte above
// 0x7F (SWAR); it may say true for a plain word, never false for another.
constexpr bool may_hold_json_special(std::uint64_t word) noexcept {
  constexpr std::uint64_t kOnes = 0x0101010101010101ULL;
  constexpr std::uint64_t kHighs = 0x8080808080808080ULL;
  const std::uint64_t quote = word ^ (kOnes * '"');
  const std::uint64_t backslash = word ^ (kOnes * '\\');
  const std::uint64_t special = ((quote - kOnes) & ~quote) | ((backslash - kOnes) & ~backslash) |
                                (word - kOnes * 0x20) | word;
  return (special & kHighs) != 0;
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  Writer& begin_object() { return open('{'); }
  Writer& end_object() { return close('}'); }
  Writer& begin_array() { return open('['); }
  Writer& end_array() { return close(']'); }
  // A member name; the next call writes its value.
  Writer& key(std::string_view name);
  Writer& string(std::string_view value);
  Writer& boolean(bool value);
  Writer& integer(std::int64_t value);
  // A string value holding the base64 of `bytes`.
  Writer& base64(std::string_view bytes);

 private:
  Writer& open(char c);
  Writer& close(char c);
  // The ',' before a value or key when one is due; after a value it is due again.
  void separate() {
    if (need_comma_) out_.push_back(',');
    need_comma_ = true;
  }

  std::string& out_;
  bool need_comma_ = false;
};

}  // namespace ig::json_text
