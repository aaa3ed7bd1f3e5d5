// Durations as Kubernetes flags spell them (Go's time.ParseDuration): a
// sequence of decimal numbers, each with a unit, "15s", "1h30m", "500ms",
// "1.5h", "8760h"; units ns, us (or µs), ms, s, m, h. No sign, no bare
// number (except "0"), no spaces.
//
// Contract: parse_duration() returns milliseconds (sub-millisecond parts are
// rounded down) or a one-line error quoting the text; values past about 290
// years are an error, never an overflow. format_duration() writes the
// shortest of h/m/s/ms that is exact ("15s", "8760h", "1500ms").
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/result.h"

namespace ig::config {

Result<std::chrono::milliseconds> parse_duration(std::string_view text);
std::string format_duration(std::chrono::milliseconds d);

}  // namespace ig::config
