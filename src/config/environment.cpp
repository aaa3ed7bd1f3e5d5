#include "config/environment.h"

#include <cstdlib>

#include "base/quote.h"

namespace ig::config {

ShapeFromEnv read_shape_from_env() {
  ShapeFromEnv out;
  const std::string name(policy::kShapeEnvVar);
  if (const char* v = std::getenv(name.c_str())) {
    out.set = true;
    out.raw = v;
    out.setting = policy::parse_shape(std::string_view(out.raw));
  } else {
    out.setting = policy::parse_shape(std::nullopt);
  }
  return out;
}

std::string describe_shape(const ShapeFromEnv& shape) {
  std::string out = "deployment shape " + std::string(policy::to_string(shape.setting.shape));
  if (!shape.set) return out + " (GIBSON_UNTRUSTED_EXEC unset: the default)";
  if (shape.setting.fell_back) {
    const std::string hosted(policy::to_string(policy::DeploymentShape::SetecOnly));
    return out + " (GIBSON_UNTRUSTED_EXEC=" + quote(shape.raw) + " is not recognised: fell back to " +
           hosted + "; valid values are " + hosted + " and " +
           std::string(policy::to_string(policy::DeploymentShape::CustomerIsolation)) + ")";
  }
  return out + " (GIBSON_UNTRUSTED_EXEC=" + quote(shape.raw) + ")";
}

}  // namespace ig::config
