// Messages stay one printable line: a library's message may quote the byte
// it choked on (yaml-cpp: "unknown escape character: " and a newline or a
// NUL), and a value someone else wrote may hold control bytes.
//
// Contract: one_line() writes every control byte (below 0x20, and 0x7f) as
// \n, \r, \t or \xNN and keeps every other byte (UTF-8 untouched). quote()
// (base/quote.h) applies it to the value it quotes.
#pragma once

#include <string>
#include <string_view>

namespace ig {

std::string one_line(std::string_view text);

}  // namespace ig
