#include "model/json_projection.h"

#include <algorithm>
#include <bitset>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <forward_list>
#include <memory>
#include <string_view>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "base/json_text.h"
#include "base/quote.h"

namespace ig::model {
namespace {

using json = nlohmann::json;

// Byte classes inside a JSON string: 0 = plain ASCII, 1 = '"', 2 = '\\',
// 3 = control character (< 0x20, invalid), 4 = start of a multi-byte UTF-8
// sequence or an invalid byte (checked by validate_utf8).
constexpr auto kStringClass = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = 3;
  t['"'] = 1;
  t['\\'] = 2;
  for (int c = 0x80; c < 0x100; ++c) t[c] = 4;
  return t;
}();

}  // namespace

namespace detail {

class Scanner {
  class Names;

 public:
  Scanner(std::string_view text, std::size_t max_depth)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()),
        max_depth_(max_depth) {
    // The open objects' names: a pod's deepest path holds a few dozen. 62
    // views are 992 bytes, a size glibc's tcache serves (1 KiB is past it).
    keys_.reserve(62);
  }

  bool parse_document(const Projection& projection, json& out) {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // BOM, as nlohmann
    skip_ws();
    if (!value(&projection, &out)) return false;
    skip_ws();
    if (p_ != end_) return fail("unexpected content after the JSON value");
    return true;
  }

  // parse_captured(): the root delivered to its slot (json_projection.h).
  bool parse_captured_document(const Projection& projection, std::span<Captured> slots, ObjectReader* reader) {
    slots_ = slots;
    reader_ = reader;
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // BOM, as nlohmann
    skip_ws();
    if (projection.slot() >= 0 ? !capture_value(projection) : !value(nullptr, nullptr)) return false;
    skip_ws();
    if (p_ != end_) return fail("unexpected content after the JSON value");
    return true;
  }

  const std::string& error() const { return error_; }

  // ValueValidator::skip(): the fast path alone (exact: it fails only on
  // invalid JSON, and its error text is not needed).
  const char* validate(const char* p, std::size_t depth) { return fast_value(p, depth); }

 private:
  // ---- Capture mode: a value whose projection has a slot. ----
  // p_ on the value's first byte. The errors are value()'s, word for word:
  // each branch ends in the same scanner (string, value, skip_value) or
  // repeats its checks in the same order (transparent_object, string_list).
  bool capture_value(const Projection& projection) {
    if (p_ == end_) return fail("unexpected end of input");
    Captured& c = slots_[static_cast<std::size_t>(projection.slot())];
    if (projection.is_raw() && (*p_ == '{' || *p_ == '[' || *p_ == '"')) {
      // Validated and skipped, or read and validated by the ObjectReader:
      // the caller reads the text (Projection::raw).
      const char* start = p_;
      c.type = *p_ == '{' ? json::value_t::object : *p_ == '[' ? json::value_t::array : json::value_t::string;
      const char* read = nullptr;
      if (reader_ != nullptr && *p_ == '{') {
        read = reader_->read(static_cast<std::size_t>(projection.slot()), p_, end_, depth_);
      }
      if (read != nullptr) {
        p_ = read;
      } else if (!skip_value()) {
        return false;
      }
      c.raw = std::string_view(start, static_cast<std::size_t>(p_ - start));
      return true;
    }
    const bool whole = projection.shape() == Projection::Shape::Whole;
    switch (*p_) {
      case '"':
        c.type = json::value_t::string;
        return whole ? string(&c.text) : value(&projection, &c.value);
      case '{':
        c.type = json::value_t::object;
        return projection.transparent() ? transparent_object(projection) : value(&projection, &c.value);
      case '[':
        c.type = json::value_t::array;
        return whole ? string_list(c) : value(&projection, &c.value);
      default:
        if (!value(&projection, &c.value)) return false;
        c.type = c.value.type();
        return true;
    }
  }

  // Between a member's name and its value: the ':' and the white space
  // around it.
  bool expect_colon() {
    skip_ws();
    if (p_ == end_ || *p_ != ':') return fail("expected ':'");
    ++p_;
    skip_ws();
    return true;
  }

  // After an array element: ',' (another element follows; `done` stays
  // false) or ']' (the array ends: the depth back; `done` true). False on
  // an error.
  bool element_end(bool& done) {
    skip_ws();
    if (p_ == end_) return fail("unexpected end of input in an array");
    if (*p_ == ',') {
      ++p_;
      skip_ws();
      return true;
    }
    if (*p_ == ']') {
      ++p_;
      --depth_;
      done = true;
      return true;
    }
    return fail("expected ',' or ']'");
  }

  // After a member's value: ',' (another member follows; `done` stays
  // false) or '}' (the object ends: its names checked, the depth back;
  // `done` true). False on an error.
  bool member_end(Names& names, bool& done) {
    skip_ws();
    if (p_ == end_) return fail("unexpected end of input in an object");
    if (*p_ == ',') {
      ++p_;
      skip_ws();
      return true;
    }
    if (*p_ == '}') {
      if (!names.finish(*this)) return false;
      ++p_;
      --depth_;
      done = true;
      return true;
    }
    return fail("expected ',' or '}'");
  }

  // object()'s walk without its DOM: a member with a slot is captured, any
  // other validated and skipped.
  bool transparent_object(const Projection& projection) {
    if (++depth_ > max_depth_) return too_deep();
    ++p_;  // '{'
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      --depth_;
      return true;
    }
    Names names(keys_.size());
    std::string key;
    while (true) {
      if (p_ == end_ || *p_ != '"') return fail("expected a member name");
      const char* raw = p_ + 1;
      saw_escape_ = false;
      const std::string* decoded = nullptr;
      if (const char* after = fast_string(raw, true)) {
        p_ = after;
      } else if (p_ = raw - 1; !string(nullptr)) {
        return false;
      } else if (saw_escape_) {
        const char* resume = p_;
        p_ = raw - 1;
        key.clear();
        if (!string(&key)) return false;
        p_ = resume;
        decoded = &key;
      }
      const std::string_view name =
          decoded ? std::string_view(*decoded) : std::string_view(raw, static_cast<std::size_t>(p_ - 1 - raw));
      const Projection* member = projection.field(name);
      if (!note_key(raw, p_ - 1, decoded, names)) return false;
      if (!expect_colon()) return false;
      if (member && member->slot() >= 0) {
        if (!capture_value(*member)) return false;
      } else if (!skip_value()) {
        return false;
      }
      bool done = false;
      if (!member_end(names, done)) return false;
      if (done) return true;
    }
  }

  // array()'s walk for a whole array in a slot: string elements into
  // c.list, the others validated and skipped.
  bool string_list(Captured& c) {
    if (++depth_ > max_depth_) return too_deep();
    ++p_;  // '['
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      --depth_;
      return true;
    }
    while (true) {
      if (p_ != end_ && *p_ == '"') {
        std::string s;
        if (!string(&s)) return false;
        if (c.list.empty()) c.list.reserve(4);  // userInfo.groups: a few
        c.list.push_back(std::move(s));
      } else {
        c.all_strings = false;
        if (!skip_value()) return false;
      }
      bool done = false;
      if (!element_end(done)) return false;
      if (done) return true;
    }
  }

  bool fail(const char* what) {
    if (error_.empty()) {
      error_ = "invalid JSON at byte " + std::to_string(p_ - begin_) + ": " + what;
    }
    return false;
  }

  bool too_deep() {
    error_ = "JSON nested deeper than " + std::to_string(max_depth_) + " levels";
    return false;
  }

  [[gnu::always_inline]] void skip_ws() {
    // One compare for the usual case, a byte above the space.
    while (p_ != end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
      ++p_;
  }

  // `out` null: validate and skip. `out` set and `projection` null (or
  // Whole): materialise the entire value.
  bool value(const Projection* projection, json* out) {
    if (p_ == end_) return fail("unexpected end of input");
    const bool keep_whole = out && (!projection || projection->shape() == Projection::Shape::Whole);
    switch (*p_) {
      case '{': return object(keep_whole ? nullptr : projection, out, keep_whole);
      case '[': return array(keep_whole ? nullptr : projection, out, keep_whole);
      case '"': {
        if (!out) return string(nullptr);
        std::string s;
        if (!string(&s)) return false;
        *out = std::move(s);
        return true;
      }
      case 't': return literal("true", out, json(true));
      case 'f': return literal("false", out, json(false));
      case 'n': return literal("null", out, json(nullptr));
      default: return number(out);
    }
  }

  // value(), but an object of a sparse projection whose text cannot keep a
  // member (Projection::may_keep) is validated by the skipping scanner and
  // left discarded, without its DOM.
  bool sparse_value(const Projection* projection, json* out) {
    if (projection == nullptr || !projection->is_sparse() || p_ == end_ || *p_ != '{') {
      return value(projection, out);
    }
    const char* start = p_;
    if (!skip_value()) return false;
    if (!projection->may_keep(start, p_, end_)) return true;
    p_ = start;  // it may keep a member: parse it
    return value(projection, out);
  }

  bool literal(std::string_view word, json* out, json v) {
    if (static_cast<std::size_t>(end_ - p_) < word.size() ||
        std::memcmp(p_, word.data(), word.size()) != 0) {
      return fail("invalid literal");
    }
    p_ += word.size();
    if (out) *out = std::move(v);
    return true;
  }

  // Containers. `whole`: materialise every member. Otherwise `projection`
  // says which members to keep; a projection of another shape keeps an empty
  // container of this type.
  bool object(const Projection* projection, json* out, bool whole) {
    if (++depth_ > max_depth_) return too_deep();
    ++p_;  // '{'
    const bool keep = out != nullptr;
    const Projection* fields =
        keep && !whole && projection && projection->shape() == Projection::Shape::Object
            ? projection
            : nullptr;
    // A sparse projection's object is made at its first kept member (`out`
    // stays discarded when none is: the caller drops it).
    const bool lazy = fields && fields->is_sparse();
    if (keep && !lazy) *out = json::object();
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      --depth_;
      return true;
    }
    Names names(keys_.size());  // this object's names: keys_[base..]
    std::string key;
    while (true) {
      if (p_ == end_ || *p_ != '"') return fail("expected a member name");
      const Projection* member = nullptr;
      const char* raw = p_ + 1;
      saw_escape_ = false;
      // The name is copied out only when it is kept: a whole object's, or
      // one the projection names. Read raw (no escape) it is its bytes.
      const std::string* decoded = nullptr;
      if (whole) {
        key.clear();
        if (!string(&key)) return false;
        decoded = &key;
      } else if (const char* after = fast_string(raw, true)) {
        p_ = after;  // no escape: the name is its bytes
      } else if (p_ = raw - 1; !string(nullptr)) {  // an escape, or an error to word
        return false;
      } else if (saw_escape_) {
        const char* resume = p_;
        p_ = raw - 1;  // the opening quote: decode what was just validated
        key.clear();
        if (!string(&key)) return false;
        p_ = resume;
        decoded = &key;
      }
      if (fields) {
        const std::string_view name =
            decoded ? std::string_view(*decoded) : std::string_view(raw, static_cast<std::size_t>(p_ - 1 - raw));
        member = fields->field(name);
        if (member && !decoded) key.assign(name);
      }
      if (!note_key(raw, p_ - 1, decoded, names)) return false;
      if (!expect_colon()) return false;
      if (whole) {
        json child;
        if (!value(nullptr, &child)) return false;
        out->get_ref<json::object_t&>().emplace(std::move(key), std::move(child));
      } else if (member && member->values() && (p_ == end_ || *p_ != '"')) {
        if (!skip_value()) return false;  // one_of(): only a string is kept
      } else if (member && member->values()) {
        // one_of(): the string is kept only when it is one of the values (read
        // raw when it has no escape: no allocation for the ones dropped).
        const char* const quote = p_;
        std::string text;
        bool kept = false;
        if (const char* after = fast_string(quote + 1, true)) {
          const std::string_view raw(quote + 1, static_cast<std::size_t>(after - 1 - (quote + 1)));
          p_ = after;
          kept = member->keeps_string(raw);
          if (kept) text.assign(raw);
        } else {
          p_ = quote;  // an escape (or an error to word): the checked scanner decodes it
          if (!string(&text)) return false;
          kept = member->keeps_string(text);
        }
        if (kept) {
          if (lazy && !out->is_object()) *out = json::object();
          out->get_ref<json::object_t&>().emplace(std::move(key), json(std::move(text)));
        }
      } else if (member) {
        json child(json::value_t::discarded);
        if (!sparse_value(member, &child)) return false;
        if (!child.is_discarded()) {
          if (lazy && !out->is_object()) *out = json::object();
          out->get_ref<json::object_t&>().emplace(std::move(key), std::move(child));
        }
      } else if (!skip_value()) {
        return false;
      }
      bool done = false;
      if (!member_end(names, done)) return false;
      if (done) return true;
    }
  }

  bool array(const Projection* projection, json* out, bool whole) {
    if (++depth_ > max_depth_) return too_deep();
    ++p_;  // '['
    const bool keep = out != nullptr;
    const Projection* element =
        keep && !whole && projection && projection->shape() == Projection::Shape::Array
            ? projection->element()
            : nullptr;
    if (keep) *out = json::array();
    skip_ws();
    if (p_ != end_ && *p_ == ']') {
      ++p_;
      --depth_;
      return true;
    }
    // A list of sparse objects (a container's env): when every element is an
    // object and the list's text holds no needle, it keeps nothing. So it is
    // first only validated, element by element, and its text scanned once;
    // otherwise it is read again below, element by element.
    if (element && element->filters_values() && fast_) {
      // Every element's kept members are strings its projection names: the
      // list is validated by the fast path and filtered on the way, in one
      // pass (no second scan of its text). Anything else (an element that
      // is not an object, an error, a value it may keep) is read below as
      // before, from the list's first element.
      const char* first = p_;
      const std::size_t keys_before = keys_.size();
      switch (fast_filtered_list(first, *element)) {
        case ListFilter::KeepsNothing: return true;  // p_ after ']', the depth back
        case ListFilter::MayKeep:
          p_ = first;
          goto elements;
        case ListFilter::Unknown:
          p_ = first;
          error_.clear();
          keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(keys_before), keys_.end());
          break;
      }
    }
    if (element && element->is_sparse() && element->filters_text()) {
      const char* first = p_;
      bool objects = true;
      for (bool done = false; !done;) {
        objects = objects && p_ != end_ && *p_ == '{';
        if (!skip_value() || !element_end(done)) return false;
      }
      if (objects && !element->may_keep(first, p_, end_)) return true;
      p_ = first;
      ++depth_;  // element_end left the list: it is entered again
    }
  elements:
    while (true) {
      if (whole || element) {
        json child(json::value_t::discarded);
        if (!sparse_value(element, &child)) return false;  // element null + whole: full value
        if (!child.is_discarded()) {  // a sparse element that kept nothing is left out
          auto& items = out->get_ref<json::array_t&>();
          if (items.empty()) items.reserve(4);  // a pod's container lists: one to a few
          items.push_back(std::move(child));
        }
      } else if (!skip_value()) {
        return false;
      }
      bool done = false;
      if (!element_end(done)) return false;
      if (done) return true;
    }
  }

  // ---- Skipping: validate a value the projection does not keep. ----
  // Most of a review is skipped (a typical pod: ~850 tokens, a few dozen
  // kept), so skipping has a fast path of its own below, written for the API
  // server's compact JSON: the position in a register, not a member, no
  // projection or DOM branches, no error text. value(nullptr, nullptr) is
  // the checked path: the same grammar, with the error's words and byte.

  // p_ on the value's first byte (whitespace already skipped). The fast
  // path first. It stops only at an error; then the value is skipped again
  // by the checked path, which finds the same error and says what and
  // where. The fast path is off from then on, so a document costs at most
  // one fast and one checked pass whatever its depth.
  bool skip_value() {
    if (fast_) {
      const char* start = p_;
      const std::size_t keys_before = keys_.size();
      if (const char* q = fast_value(start, depth_)) {
        p_ = q;
        return true;
      }
      fast_ = false;
      p_ = start;      // the checked scanners the fast path called moved it
      error_.clear();  // the checked path words it
      keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(keys_before), keys_.end());
    }
    return value(nullptr, nullptr);
  }

  // ---- The fast path: state in locals (registers), no error text. ----
  // Returns the byte after the value at p (its first byte, not
  // whitespace), or nullptr at any error (a duplicate name and nesting
  // beyond the limit included); never at valid JSON. A string with an
  // escape or non-ASCII bytes, and a number with a fraction, an exponent or
  // 19+ digits, are handed to the checked scanners (string_rest, string,
  // number), which may record an error text that skip_value() discards.
  // `depth` is the number of containers open around the value.

  [[gnu::always_inline]] static const char* fast_ws(const char* p, const char* end) {
    while (p != end && static_cast<unsigned char>(*p) <= ' ' &&
           (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
      ++p;
    return p;
  }

  const char* fast_value(const char* p, std::size_t depth) {
    const char* const end = end_;
    if (p == end) return nullptr;
    switch (*p) {
      case '"': return fast_string(p + 1, false);
      case '{': return fast_object(p, depth);
      case '[': return fast_array(p, depth);
      case 't': return end - p >= 4 && std::memcmp(p, "true", 4) == 0 ? p + 4 : nullptr;
      case 'f': return end - p >= 5 && std::memcmp(p, "false", 5) == 0 ? p + 5 : nullptr;
      case 'n': return end - p >= 4 && std::memcmp(p, "null", 4) == 0 ? p + 4 : nullptr;
      default: return fast_number(p);
    }
  }

  // A member's or an element's value: a string, the commonest, scanned
  // here without the call.
  [[gnu::always_inline]] const char* fast_member_value(const char* p, std::size_t depth) {
    if (p != end_ && *p == '"') return fast_string(p + 1, false);
    return fast_value(p, depth);
  }

  // p after the opening quote. `name`: a member name, where an escape stops
  // the fast path.
  [[gnu::always_inline]] const char* fast_string(const char* p, bool name) {
    const char* const end = end_;
    while (true) {
#if defined(__SSE2__)
      if (end - p >= 16) {
        const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        const __m128i special = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')), _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))),
            _mm_cmplt_epi8(x, _mm_set1_epi8(0x20)));
        const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(special));
        if (mask == 0) {
          p += 16;
          continue;
        }
        p += __builtin_ctz(mask);
      } else
#endif
      {
        while (p != end && kStringClass[static_cast<unsigned char>(*p)] == 0) ++p;
        if (p == end) return nullptr;
      }
      const unsigned char c = static_cast<unsigned char>(*p);
      if (c == '"') return p + 1;
      if (c < 0x20 || (name && c == '\\')) return nullptr;
      // An escape or a multi-byte sequence: the checked scanner validates
      // the rest of the string.
      p_ = p;
      return string_rest(nullptr) ? p_ : nullptr;
    }
  }

  // -?(0|[1-9][0-9]*) followed by a delimiter; anything longer or with a
  // fraction or exponent goes to number() (its overflow rule).
  const char* fast_number(const char* p) {
    const char* const end = end_;
    const char* start = p;
    if (*p == '-') ++p;
    if (p == end) return nullptr;
    if (*p == '0') {
      ++p;
    } else if (*p >= '1' && *p <= '9') {
      ++p;
      while (p != end && *p >= '0' && *p <= '9') ++p;
    } else {
      return nullptr;
    }
    if (p - start < 19 && (p == end || (*p != '.' && *p != 'e' && *p != 'E'))) return p;
    p_ = start;
    return number(nullptr) ? p_ : nullptr;
  }

  const char* fast_array(const char* p, std::size_t depth) {
    if (++depth > max_depth_) return nullptr;
    const char* const end = end_;
    p = fast_ws(p + 1, end);
    if (p == end) return nullptr;
    if (*p == ']') return p + 1;
    while (true) {
      p = fast_member_value(p, depth);
      if (!p) return nullptr;
      p = fast_ws(p, end);
      if (p == end) return nullptr;
      if (*p == ',') {
        p = fast_ws(p + 1, end);
        continue;
      }
      return *p == ']' ? p + 1 : nullptr;
    }
  }

  enum class ListFilter { KeepsNothing, MayKeep, Unknown };

  // array()'s list of value-filtered sparse objects, p_ on its first
  // element (the list is open, not empty). KeepsNothing: the list is valid,
  // every element an object keeping nothing; p_ is after its ']' and the
  // depth back. MayKeep: valid so far, and an element may keep a member.
  // Unknown: an element that is not an object, or an error (the checked
  // path words it). Only the last leaves fast-path state to undo (keys_).
  ListFilter fast_filtered_list(const char* p, const Projection& element) {
    const char* const end = end_;
    bool hit = false;
    while (true) {
      if (p == end || *p != '{') return ListFilter::Unknown;
      p = fast_object_t<true>(p, depth_, &element, &hit);
      if (!p) return ListFilter::Unknown;
      if (hit) return ListFilter::MayKeep;
      p = fast_ws(p, end);
      if (p == end) return ListFilter::Unknown;
      if (*p == ',') {
        p = fast_ws(p + 1, end);
        continue;
      }
      if (*p != ']') return ListFilter::Unknown;
      p_ = p + 1;
      --depth_;
      return ListFilter::KeepsNothing;
    }
  }

  const char* fast_object(const char* p, std::size_t depth) { return fast_object_t<false>(p, depth, nullptr, nullptr); }

  // fast_object(), and with Filter an element of a list whose projection
  // filters_values(): `*hit` is set when a member the projection names has
  // a string value it may keep (Projection::is_needle, then keeps_string;
  // a value with an escape is a hit without decoding: it may spell one).
  template <bool Filter>
  const char* fast_object_t(const char* p, std::size_t depth, const Projection* filter, bool* hit) {
    if (++depth > max_depth_) return nullptr;
    const char* const end = end_;
    p = fast_ws(p + 1, end);
    if (p == end) return nullptr;
    if (*p == '}') return p + 1;
    // The names: the first 16 in a local filter (a name compared with the
    // earlier ones only when its bit was already set), the rest sorted at
    // the end in keys_ (see Names).
    struct Name {
      const char* data;
      std::size_t size;
    } names[16];  // not initialised: names[0..n) are set before use
    std::size_t n = 0;
    std::uint64_t seen = 0;
    std::size_t spill = 0;  // keys_ index of names[0] once more than 16
    while (true) {
      if (*p != '"') return nullptr;
      const char* name = p + 1;
      const char* after = fast_string(name, true);
      std::string_view key;
      if (after) {
        key = std::string_view(name, static_cast<std::size_t>(after - 1 - name));
      } else {
        // An escape (or an error): the duplicate check needs the decoded name.
        p_ = p;
        std::string decoded;
        if (!string(&decoded)) return nullptr;
        after = p_;
        escaped_.push_front(std::move(decoded));
        key = escaped_.front();
      }
      p = after;
      if (n < 16) {
        const std::uint64_t bit = std::uint64_t{1} << (Names::filter_hash(key) & 63);
        if (seen & bit) {
          for (std::size_t j = 0; j < n; ++j)
            if (std::string_view(names[j].data, names[j].size) == key) return nullptr;
        }
        seen |= bit;
        names[n] = {key.data(), key.size()};
      } else {
        if (n == 16) {
          spill = keys_.size();
          for (const Name& earlier : names) keys_.emplace_back(earlier.data, earlier.size);
        }
        keys_.push_back(key);
      }
      ++n;
      p = fast_ws(p, end);
      if (p == end || *p != ':') return nullptr;
      p = fast_ws(p + 1, end);
      if constexpr (Filter) {
        // filter->field(key), without its name filter (the few fields of
        // an env element: a length compare rejects most names).
        const Projection* member = nullptr;
        if (p != end && *p == '"') {
          for (const auto& f : filter->fields()) {
            if (f.name.size() == key.size() && std::memcmp(f.name.data(), key.data(), key.size()) == 0) {
              member = &f.projection;
              break;
            }
          }
        }
        if (member != nullptr) {
          const char* value = p + 1;
          saw_escape_ = false;  // set by escape(), through fast_string's checked scanner
          p = fast_string(value, false);
          if (!p) return nullptr;
          const std::string_view raw(value, static_cast<std::size_t>(p - 1 - value));
          if (saw_escape_ || (filter->is_needle(raw) && member->keeps_string(raw))) {
            *hit = true;
          }
        } else {
          p = fast_member_value(p, depth);
        }
      } else {
        p = fast_member_value(p, depth);
      }
      if (!p) return nullptr;
      p = fast_ws(p, end);
      if (p == end) return nullptr;
      if (*p == ',') {
        p = fast_ws(p + 1, end);
        if (p == end) return nullptr;
        continue;
      }
      if (*p != '}') return nullptr;
      if (n > 16) {
        sorted_.assign(keys_.begin() + static_cast<std::ptrdiff_t>(spill), keys_.end());
        std::sort(sorted_.begin(), sorted_.end());
        if (std::adjacent_find(sorted_.begin(), sorted_.end()) != sorted_.end()) return nullptr;
        keys_.erase(keys_.begin() + static_cast<std::ptrdiff_t>(spill), keys_.end());
      }
      return p + 1;
    }
  }

  static int hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  bool read_u16(unsigned& cp) {
    if (end_ - p_ < 4) return fail("truncated \\u escape");
    cp = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex(p_[i]);
      if (h < 0) return fail("invalid \\u escape");
      cp = cp * 16 + static_cast<unsigned>(h);
    }
    p_ += 4;
    return true;
  }

  static void append_utf8(std::string& s, unsigned cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // One multi-byte UTF-8 sequence at p_ (RFC 3629, as nlohmann's lexer checks it).
  bool utf8_sequence() {
    const auto b0 = static_cast<unsigned char>(*p_);
    auto in = [this](std::ptrdiff_t i, unsigned lo, unsigned hi) {
      if (end_ - p_ <= i) return false;
      const auto b = static_cast<unsigned char>(p_[i]);
      return b >= lo && b <= hi;
    };
    int length = 0;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
      length = in(1, 0x80, 0xBF) ? 2 : 0;
    } else if (b0 == 0xE0) {
      length = in(1, 0xA0, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if ((b0 >= 0xE1 && b0 <= 0xEC) || b0 == 0xEE || b0 == 0xEF) {
      length = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (b0 == 0xED) {
      length = in(1, 0x80, 0x9F) && in(2, 0x80, 0xBF) ? 3 : 0;
    } else if (b0 == 0xF0) {
      length = in(1, 0x90, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (b0 >= 0xF1 && b0 <= 0xF3) {
      length = in(1, 0x80, 0xBF) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    } else if (b0 == 0xF4) {
      length = in(1, 0x80, 0x8F) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
    }
    if (length == 0) return fail("invalid UTF-8 in a string");
    p_ += length;
    return true;
  }

  // Skips plain string bytes (no '"', '\\', control character or non-ASCII
  // byte) 16 at a time with SSE2 (8 at a time without), stopping ON the first
  // special byte it sees; the byte loop after it handles the rest.
  [[gnu::always_inline]] void skip_plain_ascii() {
#if defined(__SSE2__)
    const __m128i quote = _mm_set1_epi8('"');
    const __m128i backslash = _mm_set1_epi8('\\');
    const __m128i space = _mm_set1_epi8(0x20);
    while (end_ - p_ >= 16) {
      const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
      // Signed compare: bytes >= 0x80 are negative, so "< 0x20" catches them too.
      const __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                                           _mm_cmplt_epi8(x, space));
      const unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(special));
      if (mask != 0) {
        p_ += __builtin_ctz(mask);
        return;
      }
      p_ += 16;
    }
#endif
    while (end_ - p_ >= 8) {
      std::uint64_t x;
      std::memcpy(&x, p_, sizeof x);
      if (json_text::may_hold_json_special(x)) return;
      p_ += 8;
    }
  }

  // A string at p_ (on the opening quote). `out` null: validate only.
  bool string(std::string* out) {
    ++p_;
    return string_rest(out);
  }

  // The rest of a string, p_ inside it (after the opening quote).
  bool string_rest(std::string* out) {
    while (true) {
      const char* run = p_;
      skip_plain_ascii();
      while (p_ != end_ && kStringClass[static_cast<unsigned char>(*p_)] == 0) ++p_;
      if (out) out->append(run, p_);
      if (p_ == end_) return fail("unterminated string");
      switch (kStringClass[static_cast<unsigned char>(*p_)]) {
        case 1:
          ++p_;
          return true;
        case 2:
          if (!escape(out)) return false;
          break;
        case 3: return fail("control character in a string");
        default: {
          const char* start = p_;
          if (!utf8_sequence()) return false;
          if (out) out->append(start, p_);
        }
      }
    }
  }

  bool escape(std::string* out) {
    saw_escape_ = true;
    ++p_;  // backslash
    if (p_ == end_) return fail("unterminated string");
    const char c = *p_++;
    char plain = 0;
    switch (c) {
      case '"': plain = '"'; break;
      case '\\': plain = '\\'; break;
      case '/': plain = '/'; break;
      case 'b': plain = '\b'; break;
      case 'f': plain = '\f'; break;
      case 'n': plain = '\n'; break;
      case 'r': plain = '\r'; break;
      case 't': plain = '\t'; break;
      case 'u': {
        unsigned cp = 0;
        if (!read_u16(cp)) return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (end_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') {
            return fail("high surrogate not followed by a low surrogate");
          }
          p_ += 2;
          unsigned low = 0;
          if (!read_u16(low)) return false;
          if (low < 0xDC00 || low > 0xDFFF) return fail("high surrogate not followed by a low surrogate");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail("lone low surrogate");
        }
        if (out) append_utf8(*out, cp);
        return true;
      }
      default: return fail("invalid escape");
    }
    if (out) out->push_back(plain);
    return true;
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?  ; like nlohmann, a value
  // that converts to an infinite double is an error ("number overflow").
  bool number(json* out) {
    const char* start = p_;
    if (p_ != end_ && *p_ == '-') ++p_;
    if (p_ == end_) return fail("invalid number");
    if (*p_ == '0') {
      ++p_;
    } else if (*p_ >= '1' && *p_ <= '9') {
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
    } else {
      return fail("invalid value");
    }
    const std::size_t int_digits = static_cast<std::size_t>(p_ - start);
    bool is_float = false;
    if (p_ != end_ && *p_ == '.') {
      ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    if (p_ != end_ && (*p_ == 'e' || *p_ == 'E')) {
      ++p_;
      if (p_ != end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == end_ || *p_ < '0' || *p_ > '9') return fail("invalid number");
      while (p_ != end_ && *p_ >= '0' && *p_ <= '9') ++p_;
      is_float = true;
    }
    const std::string_view token(start, static_cast<std::size_t>(p_ - start));
    if (is_float || int_digits >= 19) {
      const std::string copy(token);
      const double d = std::strtod(copy.c_str(), nullptr);
      if (!std::isfinite(d)) return fail("number overflow");
    }
    if (out) {
      *out = json::parse(token, nullptr, false);
      if (out->is_discarded()) return fail("invalid number");
    }
    return true;
  }

  // The names of one object, for the duplicate check. The API server never
  // sends an object with a repeated member name, and with the last one
  // winning a request could say two things: refused. Each name sets a bit of
  // a 64-bit filter on (length, first and last byte) as it is read; only a
  // name whose bit was already set is compared with the earlier ones, so
  // distinct names (the API server's case) cost a few instructions each.
  // Past 16 names the comparisons wait for the object's end and are done by
  // sorting (an object of 100,000 names must not cost 10^10 comparisons).
  class Names {
   public:
    explicit Names(std::size_t base) : base_(base) {}

    [[gnu::always_inline]] bool add(Scanner& s, std::string_view name) {
      const std::size_t n = s.keys_.size() - base_;
      s.keys_.push_back(name);
      if (n >= 16) {
        sort_at_end_ = true;
        return true;
      }
      const std::uint64_t bit = std::uint64_t{1} << (filter_hash(name) & 63);
      if ((seen_ & bit) != 0) {
        for (std::size_t j = base_; j < base_ + n; ++j)
          if (s.keys_[j] == name) return s.duplicate(name);
      }
      seen_ |= bit;
      return true;
    }

    // At the object's closing brace (p_ on it): the deferred check, then the
    // names are dropped.
    bool finish(Scanner& s) {
      if (sort_at_end_) {
        s.sorted_.assign(s.keys_.begin() + static_cast<std::ptrdiff_t>(base_), s.keys_.end());
        std::sort(s.sorted_.begin(), s.sorted_.end());
        const auto it = std::adjacent_find(s.sorted_.begin(), s.sorted_.end());
        if (it != s.sorted_.end()) return s.duplicate(*it);
      }
      s.keys_.erase(s.keys_.begin() + static_cast<std::ptrdiff_t>(base_), s.keys_.end());
      return true;
    }

    static unsigned filter_hash(std::string_view k) noexcept {
      if (k.empty()) return 0;
      const auto at = [&](std::size_t i) { return static_cast<unsigned char>(k[i]); };
      return static_cast<unsigned>(k.size()) * 5u + at(0) * 7u + at(k.size() - 1) * 13u;
    }

   private:

    std::size_t base_;
    std::uint64_t seen_ = 0;
    bool sort_at_end_ = false;
  };

  // Member names, for the duplicate check: a name without escapes is its
  // bytes in the input; one with escapes is decoded into `escaped_` (a
  // list: its strings never move, and an empty one allocates nothing).
  // `decoded` is the name already decoded, or null. Returns the name, empty
  // with ok false on an error.
  bool note_key(const char* raw, const char* raw_end, const std::string* decoded, Names& names) {
    std::string_view name(raw, static_cast<std::size_t>(raw_end - raw));
    if (saw_escape_) {
      if (decoded != nullptr) {
        escaped_.push_front(*decoded);
      } else {
        const char* resume = p_;
        p_ = raw - 1;  // the opening quote: decode what was just validated
        std::string d;
        if (!string(&d)) return false;
        p_ = resume;
        escaped_.push_front(std::move(d));
      }
      name = escaped_.front();
    }
    return names.add(*this, name);
  }

  bool duplicate(std::string_view name) {
    error_ = "invalid JSON at byte " + std::to_string(p_ - begin_) + ": duplicate member name " + quote(name);
    return false;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::size_t depth_ = 0;
  std::size_t max_depth_;
  std::string error_;
  std::vector<std::string_view> keys_;    // the names of every open object, innermost last
  std::vector<std::string_view> sorted_;  // scratch of Names::finish()
  std::forward_list<std::string> escaped_;
  std::span<Captured> slots_;  // capture mode's slots
  ObjectReader* reader_ = nullptr;  // capture mode's reader of raw() objects
  bool saw_escape_ = false;  // set by escape(): the last string had one
  bool fast_ = true;         // skip_value() may try the fast path
};

}  // namespace detail

namespace {
using detail::Scanner;
}  // namespace

ValueValidator::ValueValidator(std::string_view text, std::size_t max_depth)
    : scanner_(std::make_unique<Scanner>(text, max_depth)) {}
ValueValidator::~ValueValidator() = default;
const char* ValueValidator::skip(const char* p, std::size_t depth) { return scanner_->validate(p, depth); }

Projection Projection::whole() { return Projection(); }

namespace {

// The field filter's hash: length and first and last byte (as Names).
unsigned name_hash(std::string_view k) noexcept {
  if (k.empty()) return 0;
  return static_cast<unsigned>(k.size()) * 5u + static_cast<unsigned char>(k[0]) * 7u +
         static_cast<unsigned char>(k.back()) * 13u;
}

}  // namespace

Projection Projection::object(std::vector<Field> fields) {
  Projection p;
  p.shape_ = Shape::Object;
  p.fields_ = std::move(fields);
  for (const auto& f : p.fields_) p.name_filter_ |= std::uint64_t{1} << (name_hash(f.name) & 63);
  p.transparent_ = std::any_of(p.fields_.begin(), p.fields_.end(),
                               [](const Field& f) { return f.projection.slot() >= 0; });
  p.has_prefix_fields_ = std::any_of(p.fields_.begin(), p.fields_.end(), [](const Field& f) {
    return !f.name.empty() && f.name.back() == '*';
  });
  return p;
}

// The words may_keep() looks for, with two filters that reject almost every
// other token before any comparison: the set of their lengths and of their
// first bytes.
struct Projection::Needles {
  std::vector<std::string> words;
  std::uint64_t lengths = 0;  // bit n: a word of n bytes (n < 64)
  bool long_words = false;    // a word of 64 bytes or more
  std::bitset<256> first;     // a word's first byte

  void add(const std::string& w) {
    words.push_back(w);
    if (w.size() < 64) lengths |= std::uint64_t{1} << w.size();
    else long_words = true;
    if (!w.empty()) first.set(static_cast<unsigned char>(w[0]));
  }
  bool contains(std::string_view token) const noexcept {
    const std::size_t n = token.size();
    if (n < 64 ? ((lengths >> n) & 1U) == 0 : !long_words) return false;
    if (n != 0 && !first.test(static_cast<unsigned char>(token[0]))) return false;
    for (const auto& w : words)
      if (w == token) return true;
    return false;
  }
};

Projection Projection::sparse(std::vector<Field> fields) {
  Projection p = object(std::move(fields));
  p.sparse_ = true;
  auto needles = std::make_shared<Needles>();
  for (const auto& f : p.fields_) {
    const Projection& m = f.projection;
    if (!f.name.empty() && f.name.back() == '*') return p;  // a prefix field: no needles
    if (m.values_) {
      for (const auto& v : *m.values_) needles->add(v);
    } else if (m.sparse_) {
      if (!m.needles_) return p;
      for (const auto& w : m.needles_->words) needles->add(w);
    } else {
      needles->add(f.name);
    }
  }
  p.needles_ = std::move(needles);
  p.filters_values_ = !p.fields_.empty() && std::all_of(p.fields_.begin(), p.fields_.end(),
                                                        [](const Field& f) { return f.projection.values_ != nullptr; });
  return p;
}

bool Projection::is_needle(std::string_view token) const noexcept {
  return needles_ == nullptr || needles_->contains(token);
}

bool Projection::may_keep(const char* begin, const char* end,
                          [[maybe_unused]] const char* readable) const noexcept {
  if (!needles_) return true;
  const Needles& needles = *needles_;
  // Without escapes every string token is its bytes between two quotes: one
  // pass finds the quotes (16 bytes at a time with SSE2) and checks each
  // token as it closes. An escape could spell a needle: then it may keep.
  const char* open = nullptr;  // just after an opening quote
  auto quote = [&](const char* q) {
    if (open == nullptr) {
      open = q + 1;
      return false;
    }
    const bool hit = needles.contains(std::string_view(open, static_cast<std::size_t>(q - open)));
    open = nullptr;
    return hit;
  };
  const char* p = begin;
#if defined(__SSE2__)
  // The last chunk may reach past `end` (up to `readable`): its extra bits are masked off.
  for (; p < end && readable - p >= 16; p += 16) {
    const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const auto n = static_cast<std::size_t>(end - p);
    const unsigned in_range = n >= 16 ? 0xFFFFU : (1U << n) - 1U;
    if ((static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\')))) & in_range) != 0) {
      return true;
    }
    auto quotes = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')))) & in_range;
    for (; quotes != 0; quotes &= quotes - 1)
      if (quote(p + __builtin_ctz(quotes))) return true;
  }
#endif
  for (; p < end; ++p) {
    if (*p == '\\') return true;
    if (*p == '"' && quote(p)) return true;
  }
  return open != nullptr;  // an unterminated token (not after skip_value): keep
}

Projection Projection::one_of(std::vector<std::string> values) {
  Projection p;
  p.values_ = std::make_shared<const std::vector<std::string>>(std::move(values));
  return p;
}

bool Projection::keeps_string(std::string_view s) const noexcept {
  if (!values_) return true;
  for (const auto& v : *values_)
    if (v == s) return true;
  return false;
}

Projection Projection::raw() {
  Projection p;
  p.raw_ = true;
  return p;
}

Projection Projection::capture(std::size_t slot, Projection p) {
  p.slot_ = static_cast<std::ptrdiff_t>(slot);
  return p;
}

Projection Projection::array(Projection element) {
  Projection p;
  p.shape_ = Shape::Array;
  p.element_ = std::make_shared<const Projection>(std::move(element));
  return p;
}

const Projection* Projection::field(std::string_view name) const noexcept {
  // Most names a projected object meets are not kept (a container's ports,
  // resources, volumeMounts...): one bit test says so.
  if (!has_prefix_fields_ && ((name_filter_ >> (name_hash(name) & 63)) & 1U) == 0) return nullptr;
  for (const auto& f : fields_)
    if (f.name == name) return &f.projection;
  if (!has_prefix_fields_) return nullptr;
  for (const auto& f : fields_) {
    if (f.name.empty() || f.name.back() != '*') continue;
    const std::string_view prefix = std::string_view(f.name).substr(0, f.name.size() - 1);
    if (name.size() >= prefix.size() && name.substr(0, prefix.size()) == prefix) return &f.projection;
  }
  return nullptr;
}

Projection Projection::merge(const Projection& a, const Projection& b) {
  if (a.shape_ != b.shape_ || a.shape_ == Shape::Whole) {
    // Both filter strings: either's values are kept.
    if (a.values_ && b.values_ && a.shape_ == b.shape_) {
      std::vector<std::string> values = *a.values_;
      values.insert(values.end(), b.values_->begin(), b.values_->end());
      return one_of(std::move(values));
    }
    // Different shapes read the same member as different things: keep it whole.
    return whole();
  }
  if (a.shape_ == Shape::Array) return array(merge(*a.element_, *b.element_));
  std::vector<Field> fields = a.fields_;
  for (const auto& f : b.fields_) {
    auto same = std::find_if(fields.begin(), fields.end(),
                             [&](const Field& g) { return g.name == f.name; });
    if (same == fields.end()) {
      fields.push_back(f);
    } else {
      same->projection = merge(same->projection, f.projection);
    }
  }
  // Dropped when empty only if both readers can do without it.
  return a.sparse_ && b.sparse_ ? sparse(std::move(fields)) : object(std::move(fields));
}

Result<json> parse_projected(std::string_view text, const Projection& projection,
                             std::string_view source, const DecodeLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return fail(std::string(source) + ": input is larger than " + std::to_string(limits.max_bytes) +
                " bytes");
  }
  Scanner scanner(text, limits.max_depth);
  json out;
  if (!scanner.parse_document(projection, out)) {
    return fail(std::string(source) + ": " + scanner.error());
  }
  return out;
}

Result<void> parse_captured(std::string_view text, const Projection& projection,
                            std::span<Captured> slots, std::string_view source,
                            const DecodeLimits& limits, ObjectReader* reader) {
  for (auto& slot : slots) slot = Captured{};
  if (text.size() > limits.max_bytes) {
    return fail(std::string(source) + ": input is larger than " + std::to_string(limits.max_bytes) +
                " bytes");
  }
  Scanner scanner(text, limits.max_depth);
  if (!scanner.parse_captured_document(projection, slots, reader)) {
    return fail(std::string(source) + ": " + scanner.error());
  }
  return {};
}

namespace {

void capture_into(const json& v, const Projection& p, std::vector<Captured>& slots) {
  if (p.slot() < 0) return;
  Captured& c = slots[static_cast<std::size_t>(p.slot())];
  c.type = v.type();
  const bool whole = p.shape() == Projection::Shape::Whole;
  if (p.is_raw() && (v.is_object() || v.is_array() || v.is_string())) {
    return;  // parse_captured() hands over its text (raw), not compared
  }
  if (whole && v.is_string()) {
    c.text = v.get<std::string>();
  } else if (whole && v.is_array()) {
    for (const auto& e : v) {
      if (e.is_string()) {
        c.list.push_back(e.get<std::string>());
      } else {
        c.all_strings = false;
      }
    }
  } else if (p.transparent() && v.is_object()) {
    for (const auto& f : p.fields()) {
      if (f.projection.slot() < 0) continue;
      if (auto it = v.find(f.name); it != v.end()) capture_into(*it, f.projection, slots);
    }
  } else {
    c.value = v;
  }
}

}  // namespace

std::vector<Captured> capture(const json& projected, const Projection& projection,
                              std::size_t slot_count) {
  std::vector<Captured> slots(slot_count);
  capture_into(projected, projection, slots);
  return slots;
}

json project(const json& value, const Projection& projection) {
  switch (projection.shape()) {
    case Projection::Shape::Whole: return value;
    case Projection::Shape::Object: {
      if (!value.is_object()) return value.is_array() ? json::array() : value;
      json out = json::object();
      for (auto it = value.begin(); it != value.end(); ++it) {
        const Projection* member = projection.field(it.key());
        if (!member) continue;
        if (member->values() && !(it->is_string() && member->keeps_string(it->get_ref<const std::string&>()))) {
          continue;
        }
        json child = project(*it, *member);
        if (!child.is_discarded()) out[it.key()] = std::move(child);
      }
      if (projection.is_sparse() && out.empty()) return json(json::value_t::discarded);
      return out;
    }
    case Projection::Shape::Array: {
      if (!value.is_array()) return value.is_object() ? json::object() : value;
      json out = json::array();
      for (const auto& e : value) {
        json child = project(e, *projection.element());
        if (!child.is_discarded()) out.push_back(std::move(child));
      }
      return out;
    }
  }
  return value;
}

}  // namespace ig::model
