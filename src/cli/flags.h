// A small command-line flag parser: `--name value`, `--name=value` and
// boolean `--name`. Unknown flags and missing values are errors (exit 2).
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace ig::cli {

struct FlagSpec {
  std::set<std::string> with_value;  // names without "--"
  std::set<std::string> booleans;
};

struct ParsedFlags {
  std::map<std::string, std::string> values;
  std::set<std::string> booleans;
  std::string error;  // non-empty on failure

  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, std::string fallback) const;
  bool has(const std::string& name) const { return booleans.count(name) != 0; }
};

ParsedFlags parse_flags(const std::vector<std::string>& args, const FlagSpec& spec);

}  // namespace ig::cli
