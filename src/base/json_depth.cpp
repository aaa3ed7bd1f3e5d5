#include "base/json_depth.h"

namespace ig {

std::size_t json_nesting_depth(std::string_view text, std::size_t limit) noexcept {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '{':
      case '[':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return deepest;
        }
        break;
      case '}':
      case ']':
        if (depth > 0) --depth;
        break;
      default: break;
    }
  }
  return deepest;
}

}  // namespace ig
