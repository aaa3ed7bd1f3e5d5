#include "cli/flags.h"

namespace ig::cli {

std::optional<std::string> ParsedFlags::get(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

std::string ParsedFlags::get_or(const std::string& name, std::string fallback) const {
  auto v = get(name);
  return v ? *v : std::move(fallback);
}

ParsedFlags parse_flags(const std::vector<std::string>& args, const FlagSpec& spec) {
  ParsedFlags out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      out.error = "unexpected argument \"" + arg + "\"";
      return out;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (spec.booleans.count(name)) {
      if (inline_value && *inline_value != "true") {
        if (*inline_value != "false") {
          out.error = "--" + name + " takes no value";
          return out;
        }
        out.booleans.erase(name);
        continue;
      }
      out.booleans.insert(name);
    } else if (spec.with_value.count(name)) {
      if (inline_value) {
        out.values[name] = *inline_value;
      } else if (i + 1 < args.size()) {
        out.values[name] = args[++i];
      } else {
        out.error = "--" + name + " needs a value";
        return out;
      }
    } else {
      out.error = "unknown flag --" + name;
      return out;
    }
  }
  return out;
}

}  // namespace ig::cli
