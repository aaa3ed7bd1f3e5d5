// Process-level settings read from the environment, once, at start.
//
// Contract: read_shape_from_env() is the only reader of GIBSON_UNTRUSTED_EXEC;
// it parses through policy::parse_shape (exactly "customer-isolation" selects
// it, anything else is setec-only and, when set, "fell back"). Nothing here
// fails: an unrecognised value is a fact to report, not an error.
#pragma once

#include <string>

#include "policy/gate.h"

namespace ig::config {

struct ShapeFromEnv {
  policy::ShapeSetting setting;
  bool set = false;   // GIBSON_UNTRUSTED_EXEC was present
  std::string raw;    // its value ("" when unset)
};

// Reads GIBSON_UNTRUSTED_EXEC through policy::parse_shape.
ShapeFromEnv read_shape_from_env();

// One line for the start-up log: which shape, and whether it fell back. The
// environment value is quoted by the one quoting rule (base/quote.h).
std::string describe_shape(const ShapeFromEnv& shape);

}  // namespace ig::config
