#include "model/json_projection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <forward_list>
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

class Scanner {
 public:
  Scanner(std::string_view text, std::size_t max_depth)
      : begin_(text.data()), p_(text.data()), end_(text.data() + text.size()),
        max_depth_(max_depth) {
    keys_.reserve(64);  // the open objects' names: a pod's deepest path holds a few dozen
  }

  bool parse_document(const Projection& projection, json& out) {
    if (end_ - p_ >= 3 && std::memcmp(p_, "\xEF\xBB\xBF", 3) == 0) p_ += 3;  // BOM, as nlohmann
    skip_ws();
    if (!value(&projection, &out)) return false;
    skip_ws();
    if (p_ != end_) return fail("unexpected content after the JSON value");
    return true;
  }

  const std::string& error() const { return error_; }

 private:
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
    if (keep) *out = json::object();
    skip_ws();
    if (p_ != end_ && *p_ == '}') {
      ++p_;
      --depth_;
      return true;
    }
    const std::size_t keys_base = keys_.size();  // this object's names: keys_[keys_base..]
    std::string key;
    while (true) {
      if (p_ == end_ || *p_ != '"') return fail("expected a member name");
      const Projection* member = nullptr;
      const bool want_key = whole || fields != nullptr;
      const char* raw = p_ + 1;
      saw_escape_ = false;
      if (want_key) {
        key.clear();
        if (!string(&key)) return false;
        if (fields) member = fields->field(key);
      } else if (!string(nullptr)) {
        return false;
      }
      if (!note_key(raw, p_ - 1, want_key ? &key : nullptr)) return false;
      skip_ws();
      if (p_ == end_ || *p_ != ':') return fail("expected ':'");
      ++p_;
      skip_ws();
      if (whole) {
        json child;
        if (!value(nullptr, &child)) return false;
        out->get_ref<json::object_t&>().emplace(std::move(key), std::move(child));
      } else if (member) {
        json child;
        if (!value(member, &child)) return false;
        out->get_ref<json::object_t&>().emplace(std::move(key), std::move(child));
      } else if (!value(nullptr, nullptr)) {
        return false;
      }
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an object");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == '}') {
        if (!no_duplicate_since(keys_base)) return false;
        keys_.resize(keys_base);
        ++p_;
        --depth_;
        return true;
      }
      return fail("expected ',' or '}'");
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
    while (true) {
      if (whole || element) {
        json child;
        if (!value(element, &child)) return false;  // element null + whole: full value
        out->push_back(std::move(child));
      } else if (!value(nullptr, nullptr)) {
        return false;
      }
      skip_ws();
      if (p_ == end_) return fail("unexpected end of input in an array");
      if (*p_ == ',') {
        ++p_;
        skip_ws();
        continue;
      }
      if (*p_ == ']') {
        ++p_;
        --depth_;
        return true;
      }
      return fail("expected ',' or ']'");
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

  // Member names, for the duplicate check: a name without escapes is its
  // bytes in the input; one with escapes is decoded into `escaped_` (a
  // list: its strings never move, and an empty one allocates nothing). `decoded` is the name already decoded,
  // or null.
  bool note_key(const char* raw, const char* raw_end, const std::string* decoded) {
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
    keys_.push_back(name);
    return true;
  }

  static unsigned filter_hash(std::string_view k) noexcept {
    if (k.empty()) return 0;
    const auto at = [&](std::size_t i) { return static_cast<unsigned char>(k[i]); };
    return static_cast<unsigned>(k.size()) * 5u + at(0) * 7u + at(k.size() / 2) * 11u + at(k.size() - 1) * 13u;
  }

  // The API server never sends an object with a repeated member name, and
  // with the last one winning a request could say two things: refused.
  // Linear for the small objects Kubernetes has, sorted for large ones (an
  // object of 100,000 names must not cost 10^10 comparisons).
  bool no_duplicate_since(std::size_t base) {
    const std::size_t n = keys_.size() - base;
    if (n < 2) return true;
    const std::string_view* dup = nullptr;
    if (n <= 16) {
      // A 64-bit filter on (length, first, middle and last byte): a name is
      // compared with the earlier ones only when its bit was already set, so
      // distinct names (the API server's case) cost one step each.
      std::uint64_t seen = 0;
      for (std::size_t i = base; i < keys_.size() && !dup; ++i) {
        const std::string_view k = keys_[i];
        const std::uint64_t bit = std::uint64_t{1} << (filter_hash(k) & 63);
        if (seen & bit) {
          for (std::size_t j = base; j < i; ++j)
            if (keys_[j] == k) {
              dup = &keys_[i];
              break;
            }
        }
        seen |= bit;
      }
    } else {
      sorted_.assign(keys_.begin() + static_cast<std::ptrdiff_t>(base), keys_.end());
      std::sort(sorted_.begin(), sorted_.end());
      const auto it = std::adjacent_find(sorted_.begin(), sorted_.end());
      if (it != sorted_.end()) dup = &*it;
    }
    if (!dup) return true;
    error_ = "invalid JSON at byte " + std::to_string(p_ - begin_) + ": duplicate member name " + quote(*dup);
    return false;
  }

  const char* begin_;
  const char* p_;
  const char* end_;
  std::size_t depth_ = 0;
  std::size_t max_depth_;
  std::string error_;
  std::vector<std::string_view> keys_;    // the names of every open object, innermost last
  std::vector<std::string_view> sorted_;  // scratch of no_duplicate_since()
  std::forward_list<std::string> escaped_;
  bool saw_escape_ = false;  // set by escape(): the last string had one
};

}  // namespace

Projection Projection::whole() { return Projection(); }

Projection Projection::object(std::vector<Field> fields) {
  Projection p;
  p.shape_ = Shape::Object;
  p.fields_ = std::move(fields);
  return p;
}

Projection Projection::array(Projection element) {
  Projection p;
  p.shape_ = Shape::Array;
  p.element_ = std::make_shared<const Projection>(std::move(element));
  return p;
}

const Projection* Projection::field(std::string_view name) const noexcept {
  for (const auto& f : fields_)
    if (f.name == name) return &f.projection;
  return nullptr;
}

Projection Projection::merge(const Projection& a, const Projection& b) {
  if (a.shape_ != b.shape_ || a.shape_ == Shape::Whole) {
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
  return object(std::move(fields));
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

json project(const json& value, const Projection& projection) {
  switch (projection.shape()) {
    case Projection::Shape::Whole: return value;
    case Projection::Shape::Object: {
      if (!value.is_object()) return value.is_array() ? json::array() : value;
      json out = json::object();
      for (const auto& f : projection.fields()) {
        auto it = value.find(f.name);
        if (it != value.end()) out[f.name] = project(*it, f.projection);
      }
      return out;
    }
    case Projection::Shape::Array: {
      if (!value.is_array()) return value.is_object() ? json::object() : value;
      json out = json::array();
      for (const auto& e : value) out.push_back(project(e, *projection.element()));
      return out;
    }
  }
  return value;
}

}  // namespace ig::model
