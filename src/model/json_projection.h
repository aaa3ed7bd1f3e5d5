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
#pragma once

#include <memory>
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
  // An object keeping only these members (each with its own projection).
  static Projection object(std::vector<Field> fields);
  // An array whose every element is projected with `element`.
  static Projection array(Projection element);
  // What either keeps (the union); a member the two read with different
  // shapes is kept whole.
  static Projection merge(const Projection& a, const Projection& b);

  Shape shape() const noexcept { return shape_; }
  const std::vector<Field>& fields() const noexcept { return fields_; }
  const Projection* element() const noexcept { return element_.get(); }
  // The member's projection, or nullptr when the member is not kept.
  const Projection* field(std::string_view name) const noexcept;

 private:
  Shape shape_ = Shape::Whole;
  std::vector<Field> fields_;
  std::shared_ptr<const Projection> element_;
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

}  // namespace ig::model
