// Process-level settings read from the environment, once, at start.
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

// One line for the start-up log: which shape, and whether it fell back.
std::string describe_shape(const ShapeFromEnv& shape);

}  // namespace ig::config
