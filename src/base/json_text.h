// JSON text written directly, without a DOM: for the documents the admission
// hot path sends on every review (the AdmissionReview response and the JSON
// Patch). Building them as nlohmann objects cost an allocation per member and
// a second pass to dump (docs/decisions/0005-json-text-responses.md).
//
// Contract:
//  - append_string() writes a JSON string (with its quotes) escaped exactly
//    as model::dump_json() escapes it (nlohmann's dump, ensure_ascii off,
//    invalid UTF-8 replaced): '"' and '\\' escaped, \b \f \n \r \t by name,
//    the other control characters as \u00xx (lowercase hex), every other
//    valid UTF-8 sequence as it is, and each invalid sequence replaced by
//    U+FFFD with nlohmann's rule for where the next one starts. So the
//    output is always valid UTF-8 JSON, whatever the bytes.
//  - Writer emits the separators (',' and ':') itself; the caller names
//    members and values in order. Written in the order a std::map-backed
//    DOM would dump them (sorted keys), the bytes equal model::dump_json()'s;
//    tests/unit/base_json_text_test.cpp checks both differentially.
//  - Writer does not check nesting or that keys precede values: callers
//    are a few fixed shapes, each covered by tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ig::json_text {

// `"s"`, escaped as above, appended to `out`.
void append_string(std::string& out, std::string_view s);

// The standard base64 of `bytes` (RFC 4648 section 4, '=' padded), appended
// to `out`, no quotes. Its alphabet needs no JSON escape.
void append_base64(std::string& out, std::string_view bytes);

// Whether an 8-byte word (as loaded from memory) may hold a byte a JSON string
// cannot carry as it is: '"', '\\', a control character or a byte above 0x7F
// (SWAR). A plain word can read true near such a byte (a borrow), never the
// reverse: callers use it to skip plain runs and look closer on true.
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
  // A string value holding the base64 of `bytes` (append_base64), written
  // straight into the output (the AdmissionReview's patch).
  Writer& base64(std::string_view bytes);

 private:
  Writer& open(char c);
  Writer& close(char c);
  void separate() {
    if (need_comma_) out_.push_back(',');
  }

  std::string& out_;
  bool need_comma_ = false;
};

}  // namespace ig::json_text
