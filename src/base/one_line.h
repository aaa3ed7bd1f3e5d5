// Messages stay one printable line: one_line() writes each control byte
// (below 0x20, and 0x7f) as \n, \r, \t or \xNN and keeps every other byte.
#pragma once

#include <string>
#include <string_view>

namespace ig {

std::string one_line(std::string_view text);

}  // namespace ig
