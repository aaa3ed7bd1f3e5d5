// Projected JSON decoding: the admission hot path's parser.
//
// An admission request carries the whole object (a typical pod is ~8 KB, a
// large one 200 KB) but the gate reads a few dozen fields of it. Building a
// full nlohmann DOM costs ~10x more than validating the bytes, so this parser
// validates the WHOLE text exactly as nlohmann::json::parse does (same grammar,
// same UTF-8 and surrogate rules, same number overflow rule, BOM skipped) and
// materialises only the paths a Projection names; everything else is checked
// and skipped without allocating.
//
// Contract:
//  - parse_projected(text, p) succeeds iff nlohmann::json::parse(text)
//    succeeds, no object repeats a member name, the nesting is within
//    limits.max_depth, and the text has no NUL byte (nlohmann ends its input
//    at one, RFC 8259 does not); and then
//    parse_projected(text, p) == project(nlohmann::json::parse(text), p).
//    tests/unit/model_json_projection_test.cpp checks this differentially.
//  - A value whose type differs from what the projection expects keeps its
//    type: a scalar is kept, a container becomes an empty container of its
//    own type. So callers' type checks ("expected a map, got a list") behave
//    exactly as on the full object.
//  - Duplicate member names (compared after unescaping) in any object are an
//    error, where nlohmann keeps the last: the API server never sends one,
//    and a request that says two things is undecidable. So the differential
//    reference is nlohmann's verdict AND no duplicate names.
//  - Never throws; never recurses deeper than limits.max_depth.
//
// Capture slots (parse_captured): a projection may name a slot. Where a
// caller reads a few fields once (the AdmissionReview's envelope: uid, kind,
// operation, userInfo), parse_captured() hands them over without building
// DOM nodes around them: a string as a std::string, the objects on the way
// not materialised at all. parse_projected() and project() ignore slots, so
// a projection with slots keeps its DOM contract above unchanged.
//  - parse_captured(text, p, slots) succeeds iff parse_projected(text, p)
//    does (the same grammar, limits and duplicate-name rule; the same error
//    text), and then slots == capture(parse_projected(text, p), p), which
//    tests/unit/model_json_projection_test.cpp and the admission fuzzer
//    check differentially.
//  - Slots are filled from the root down through "transparent" objects:
//    the root (which must have a slot) and every object-shaped projection
//    with a slotted field. A member of a transparent object that has no
//    slot is validated and dropped. What a slot receives is in Captured.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/document.h"
#include "base/result.h"

namespace ig::model {

class Projection {
 public:
  enum class Shape { Whole, Object, Array };
  struct Field;

  // The entire value.
  static Projection whole();
  // An object keeping only these members (each with its own projection). A
  // field whose name ends in "*" keeps every member whose name starts with
  // what precedes it (a prefix field: annotation keys under a domain); a
  // member named exactly by a field takes that field.
  static Projection object(std::vector<Field> fields);
  // An array whose every element is projected with `element`.
  static Projection array(Projection element);
  // object(fields), but materialised only when one of its members is kept:
  // otherwise it is dropped (absent as a member, left out as an array
  // element), so a list of a hundred objects of which none matters costs no
  // DOM. Only an object is dropped; a value of another type is kept as
  // object() keeps it.
  static Projection sparse(std::vector<Field> fields);
  // A string that is one of `values`; any other value (another string, or
  // not a string) is not kept (an environment variable's name: only the few
  // that matter). The API server hands admission typed objects, so a name
  // of another type never reaches a webhook.
  static Projection one_of(std::vector<std::string> values);
  // What either keeps (the union); a member the two read with different
  // shapes is kept whole. The result itself has no slot.
  static Projection merge(const Projection& a, const Projection& b);
  // `p` delivered to capture slot `slot` by parse_captured().
  static Projection capture(std::size_t slot, Projection p);
  // The entire value as its text: in a capture slot, parse_captured()
  // validates and skips it (no DOM) and hands over Captured::raw, a view
  // into the parsed text. Everywhere else it is whole().
  static Projection raw();

  Shape shape() const noexcept { return shape_; }
  const std::vector<Field>& fields() const noexcept { return fields_; }
  const Projection* element() const noexcept { return element_.get(); }
  // The member's projection, or nullptr when the member is not kept.
  const Projection* field(std::string_view name) const noexcept;
  bool is_sparse() const noexcept { return sparse_; }
  // one_of()'s values; nullptr for every other projection.
  const std::vector<std::string>* values() const noexcept { return values_.get(); }
  // Whether a string value is kept (always, but for one_of()).
  bool keeps_string(std::string_view s) const noexcept;
  // sparse() only: whether an object's raw JSON text [begin, end) may keep a
  // member. False only when it has no escape and no string token equal to a
  // needle (a field's name, a one_of() value, a nested sparse field's
  // needles): then it keeps nothing, and is dropped without being parsed.
  // `readable` (>= end) bounds what may be loaded: bytes in [end, readable)
  // are read 16 at a time but never counted.
  bool may_keep(const char* begin, const char* end, const char* readable) const noexcept;
  // sparse() with needles: may_keep() can drop an object by its text.
  bool filters_text() const noexcept { return needles_ != nullptr; }
  // sparse() with needles: whether `token` (a string's raw bytes) is one of
  // them. False means no member can be kept for it: a superset test.
  bool is_needle(std::string_view token) const noexcept;
  // sparse() whose every field is a one_of() (a container's env element):
  // what an element keeps depends only on its members' string values, so a
  // list of them can be filtered while it is validated, in one pass.
  bool filters_values() const noexcept { return filters_values_; }
  bool is_raw() const noexcept { return raw_; }
  // The capture slot, or -1 for none.
  std::ptrdiff_t slot() const noexcept { return slot_; }
  // An object-shaped projection with a slotted field: parse_captured()
  // walks it without building it.
  bool transparent() const noexcept { return transparent_; }

 private:
  Shape shape_ = Shape::Whole;
  std::vector<Field> fields_;
  std::shared_ptr<const Projection> element_;
  std::ptrdiff_t slot_ = -1;
  bool transparent_ = false;
  bool raw_ = false;
  bool has_prefix_fields_ = false;
  bool sparse_ = false;
  bool filters_values_ = false;
  // Bit (name_hash(f.name) & 63) for each exact field: field() answers
  // "not kept" for most other names without comparing any.
  std::uint64_t name_filter_ = 0;
  std::shared_ptr<const std::vector<std::string>> values_;
  // sparse(): the tokens may_keep() looks for; null when it cannot tell (a
  // prefix field): every object is then parsed.
  struct Needles;
  std::shared_ptr<const Needles> needles_;
};

namespace detail {
class Scanner;
}

// Validates JSON values of one text one at a time, exactly as
// parse_projected() validates them (grammar, UTF-8, numbers, duplicate
// names, no NUL, nesting within max_depth), keeping nothing: for a reader
// that walks the parts it reads itself (model/pod_text.h) and hands every
// other value here. Not thread-safe; one per text.
class ValueValidator {
 public:
  ValueValidator(std::string_view text, std::size_t max_depth);
  ~ValueValidator();
  ValueValidator(const ValueValidator&) = delete;
  ValueValidator& operator=(const ValueValidator&) = delete;
  // The byte after the valid value whose first byte is `p` (inside the
  // text; whitespace already skipped), `depth` containers open around it;
  // nullptr when the value is not valid JSON.
  const char* skip(const char* p, std::size_t depth);

 private:
  std::unique_ptr<detail::Scanner> scanner_;
};

struct Projection::Field {
  std::string name;
  Projection projection;
};

Result<nlohmann::json> parse_projected(std::string_view text, const Projection& projection,
                                       std::string_view source, const DecodeLimits& limits = {});

// The same projection applied to an already-parsed value (the reference the
// differential tests compare against).
nlohmann::json project(const nlohmann::json& value, const Projection& projection);

// What one capture slot received.
struct Captured {
  // The value's JSON type; discarded when the member was absent.
  nlohmann::json::value_t type = nlohmann::json::value_t::discarded;
  // The slot's projection is whole: a string value is here, and an array
  // value's string elements are in `list` (`all_strings`: every element
  // was one; the others are validated and dropped).
  std::string text;
  std::vector<std::string> list;
  bool all_strings = true;
  // Every other value, as parse_projected() would keep it (an object at a
  // transparent projection: not built, only `type` is set).
  nlohmann::json value;
  // A raw() slot holding an object, array or string: the value's text, a
  // view into parse_captured()'s `text` (`value` and `text` stay empty; a
  // number or literal is in `value`). capture() leaves it empty and ==
  // ignores it.
  std::string_view raw;

  bool present() const noexcept { return type != nlohmann::json::value_t::discarded; }
  bool operator==(const Captured& other) const {
    return type == other.type && text == other.text && list == other.list &&
           all_strings == other.all_strings && value == other.value;
  }
};

// A reader of the objects in raw() slots that walks each itself, in the
// parse's one pass (model/pod_text.h: a pod's facts): read() returns the
// byte after the object whose '{' is at `p` when it read and validated all
// of it as ValueValidator would (with `depth` containers open around it),
// or nullptr when it declines; then parse_captured() validates the object
// itself, so its verdict and errors never depend on the reader.
class ObjectReader {
 public:
  virtual ~ObjectReader() = default;
  virtual const char* read(std::size_t slot, const char* p, const char* end, std::size_t depth) = 0;
};

// `slots` must hold every slot the projection names (index < slots.size());
// they are reset first. Errors are parse_projected()'s, word for word.
// `reader`, when given, is offered every object a raw() slot receives.
Result<void> parse_captured(std::string_view text, const Projection& projection,
                            std::span<Captured> slots, std::string_view source,
                            const DecodeLimits& limits = {}, ObjectReader* reader = nullptr);

// The reference: the slots filled from a value already parsed and projected
// (parse_projected's result, or project(parse_json(text), p)).
std::vector<Captured> capture(const nlohmann::json& projected, const Projection& projection,
                              std::size_t slot_count);

}  // namespace ig::model
